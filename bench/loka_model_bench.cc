// ============================================================================
// bench/loka_model_bench.cc — LoKA's CUDA runtime on one model: latency,
// throughput and device memory per batch size.
//
//   loka_model_bench MODEL.onnx --data DIR [--batches 512,4096,16384] [--runs 50] [--json OUT]
//                    [--kernel-trace [--trace-runs 20]]
//
// Inputs are the data sets of DIR (an eval folder), their rows repeated to
// fill each batch, copied to the device once: the timed loop is
// Session::run_on_device (a CUDA graph launch per run) bracketed by CUDA
// events on the Session's stream, after warm-up; the median is reported.
// Peak device memory (peak_mem_mb) is the most LoKA itself had allocated on the
// device while serving that batch: weights, the Session's arenas, staging and
// workspaces (kernels/cuda/device_memory.h counts them) — the figure PyTorch's
// allocator reports for its side. Each batch gets a fresh Session, as a server
// for that batch size would. weights_mem_mb is the part the Engine held before
// any Session (weights, FP8 tables, scales), so the rest of the peak is what
// serving the batch adds; "arena" names what the activation arena holds at its
// peak (Session::arena_report). process_mem_mb is everything the process holds
// beyond its context after the runs, what the CUDA context and libraries keep
// for themselves included (module code loaded on first launch, cuDNN's kernels).
// With --kernel-trace, further runs (never the timed ones) are traced with
// CUPTI (bench/kernel_trace.h) and the per-kernel device time per run joins
// the row: where the graph's time goes, and how much of it no kernel uses;
// so does a node-by-node profile (Session::profile_nodes: the same number of
// runs, enqueued without the graph, device events between nodes), which names
// the nodes the kernels belong to.
// ============================================================================
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/kernel_trace.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/device_memory.h"
#include "loka/engine.h"
#include "loka/session.h"
#include "runtime/node_profile.h"
#include "runtime/test_data.h"
#include "tools/cli/arguments.h"

namespace loka {
namespace {

constexpr const char* kProgram = "loka_model_bench";
constexpr int kWarmupRuns = 10;

cli::ArgumentParser make_parser() {
  cli::ArgumentParser parser(kProgram, "Times LoKA's CUDA runtime on a model at several batch sizes.");
  parser.positional("MODEL.onnx", "the model (plain ONNX or loka-opt output)")
      .option("--data", "DIR", "data sets whose rows fill the batches (e.g. the model's eval folder)").required()
      .option("--batches", "LIST", "comma-separated batch sizes").default_value("512,4096,16384")
      .option("--runs", "N", "timed runs per batch").default_value("50")
      .option("--json", "FILE", "also write the results as a JSON list")
      .flag("--kernel-trace", "also record per-kernel device time (CUPTI) over extra untimed runs")
      .option("--trace-runs", "N", "runs traced per batch with --kernel-trace").default_value("20");
  return parser;
}

size_t device_used_bytes() {
  size_t free = 0, total = 0;
  cudaMemGetInfo(&free, &total);
  return total - free;
}

/// The data sets' rows, concatenated and repeated to `batch` rows, per input.
Result<std::vector<Tensor>> fill_batch(const std::vector<std::vector<Tensor>>& sets, int64_t batch) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < sets[0].size(); ++i) {
    Shape shape = sets[0][i].shape();
    if (shape.empty()) return Status::error("input " + std::to_string(i) + " has no batch dim");
    shape[0] = batch;
    Tensor filled = Tensor::zeros(sets[0][i].dtype(), shape);
    const size_t row_bytes = sets[0][i].byte_size() / static_cast<size_t>(sets[0][i].dim(0));
    int64_t row = 0;
    while (row < batch)
      for (const auto& set : sets) {
        const int64_t take = std::min(set[i].dim(0), batch - row);
        std::memcpy(static_cast<std::byte*>(filled.raw()) + row * row_bytes, set[i].raw(), take * row_bytes);
        row += take;
        if (row == batch) break;
      }
    out.push_back(std::move(filled));
  }
  return out;
}

/// Inputs copied to the device once; freed with the object.
struct DeviceInputs {
  std::vector<void*> buffers;
  std::vector<DeviceView> views;
  DeviceInputs() = default;
  DeviceInputs(const DeviceInputs&) = delete;
  DeviceInputs& operator=(const DeviceInputs&) = delete;
  ~DeviceInputs() {
    for (void* b : buffers) cudaFree(b);
  }
};

Status upload(const std::vector<Tensor>& host, DeviceInputs& out) {
  for (const Tensor& t : host) {
    void* device = nullptr;
    if (cudaMalloc(&device, t.byte_size()) != cudaSuccess) return Status::error("cudaMalloc for the inputs failed");
    out.buffers.push_back(device);
    cudaMemcpy(device, t.raw(), t.byte_size(), cudaMemcpyHostToDevice);
    out.views.push_back(DeviceView{t.dtype(), t.shape(), device});
  }
  return Status::ok();
}

struct Row {
  int64_t batch = 0;
  double median_ms = 0, p90_ms = 0, samples_per_s = 0, peak_mb = 0, process_mb = 0;
  nlohmann::json kernels;  ///< the kernel trace per run, or {"error": why} (null without --kernel-trace)
  nlohmann::json arena;    ///< Session::arena_report of the batch's bucket, or {"error": why}
  nlohmann::json nodes;    ///< the slowest nodes (Session::profile_nodes), or {"error": why} (null without --kernel-trace)
};

/// The arena at its peak: its size, the node running then, and the largest buffers alive then
/// (the rest summed), so a report can say what the activation memory is spent on.
nlohmann::json arena_json(Session& session, int64_t batch) {
  constexpr size_t kListed = 8;
  auto report = session.arena_report(batch);
  if (!report) return {{"error", report.status().message()}};
  const auto mb = [](size_t bytes) { return static_cast<double>(bytes) / (1 << 20); };
  nlohmann::json out = {{"arena_mb", mb(report->arena_bytes)}, {"peak_mb", mb(report->peak_bytes)},
                        {"peak_node", report->peak_node}, {"live_at_peak", nlohmann::json::array()}};
  size_t rest = 0, rest_count = 0;
  for (size_t i = 0; i < report->live_at_peak.size(); ++i) {
    const ArenaBuffer& buffer = report->live_at_peak[i];
    if (i < kListed) {
      out["live_at_peak"].push_back({{"name", buffer.name}, {"mb", mb(buffer.bytes)}});
    } else {
      rest += buffer.bytes;
      ++rest_count;
    }
  }
  if (rest_count > 0) out["others"] = {{"count", rest_count}, {"mb", mb(rest)}};
  return out;
}

/// Per-run kernel times over `runs` graph launches of a fresh Session, planned (its CUDA graph
/// instantiated) while tracing is on so every graph node reports; or why there are none.
nlohmann::json trace_kernels(const Engine& engine, std::span<const Tensor> host, std::span<const DeviceView> views,
                             int runs) {
  if (Status started = bench::KernelTrace::start(); !started) {
    (void)bench::KernelTrace::stop();
    return {{"error", started.message()}};
  }
  Status status = Status::ok();
  {
    auto session = engine.new_session();
    status = session->run(host).status();  // plans the bucket: arenas and the graph
    for (int r = 0; r < kWarmupRuns && status; ++r) status = session->run_on_device(views).status();
    if (status) status = bench::KernelTrace::discard();  // keep the steady-state runs only
    for (int r = 0; r < runs && status; ++r) status = session->run_on_device(views).status();
  }
  auto trace = bench::KernelTrace::stop();
  if (!status) return {{"error", status.message()}};
  if (!trace) return {{"error", trace.status().message()}};
  if (trace->kernels.empty()) return {{"error", "CUPTI recorded no kernels"}};
  nlohmann::json out = {{"runs", runs}, {"busy_ms_per_run", trace->busy_ms / runs},
                        {"dropped_records", trace->dropped_records}, {"kernels", nlohmann::json::array()}};
  for (const bench::KernelTime& k : trace->kernels)
    out["kernels"].push_back({{"name", k.name}, {"launches_per_run", static_cast<double>(k.launches) / runs},
                              {"ms_per_run", k.total_ms / runs}});
  return out;
}

/// The slowest nodes of `runs` node-by-node runs of a fresh Session (the rest summed), and the
/// sum of every node's median.
nlohmann::json profile_json(const Engine& engine, std::span<const Tensor> host, int runs) {
  constexpr size_t kListed = 15;
  auto session = engine.new_session();
  auto profile = session->profile_nodes(host, runs);
  if (!profile) return {{"error", profile.status().message()}};
  const auto [nodes, summed] = slowest_first(std::move(profile).value());
  nlohmann::json out = {{"runs", runs}, {"summed_ms", summed}, {"nodes", nlohmann::json::array()}};
  double rest = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (i < kListed)
      out["nodes"].push_back({{"name", nodes[i].name}, {"op", nodes[i].qualified_op()}, {"ms", nodes[i].median_ms}});
    else
      rest += nodes[i].median_ms;
  }
  if (nodes.size() > kListed) out["others"] = {{"count", nodes.size() - kListed}, {"ms", rest}};
  return out;
}

Result<int> run(const std::string& model, const std::string& data, const std::vector<int64_t>& batches, int runs,
                const std::string& json, int trace_runs) {
  if (const std::string reason = cuda::device_unavailable_reason(); !reason.empty()) return Status::error(reason);
  cudaFree(nullptr);  // create the context before the baseline
  const size_t baseline = device_used_bytes();
  EngineOptions options;
  options.device = Device::kCuda;
  options.batch_buckets = batches;
  options.max_batch = *std::max_element(batches.begin(), batches.end());
  LOKA_ASSIGN_OR_RETURN(auto engine, Engine::load_file(model, options));
  // What the Engine holds on the device before any Session: weights, FP8 tables and their scales.
  // A row's peak less this is what serving that batch adds (activation arena, workspaces, scratch).
  const double weights_mb = static_cast<double>(cuda::device_memory_use().live_bytes) / (1 << 20);
  LOKA_ASSIGN_OR_RETURN(DataSetReader reader, DataSetReader::open(data));
  std::vector<std::string> names;
  for (const TensorInfo& info : engine->inputs()) names.push_back(info.name);
  std::vector<std::vector<Tensor>> sets;
  for (size_t d = 0; d < reader.size(); ++d) {
    LOKA_ASSIGN_OR_RETURN(DataSet set, reader.read(d));
    LOKA_ASSIGN_OR_RETURN(std::vector<Tensor> ordered, order_inputs(set, names));
    sets.push_back(std::move(ordered));
  }
  if (sets.empty()) return Status::error(data + ": no data sets");
  std::printf("device: %s\nmodel: %s\n%8s %12s %12s %14s %10s %11s\n", cuda::device_description().c_str(),
              model.c_str(), "batch", "median ms", "p90 ms", "samples/s", "peak MB", "process MB");
  std::vector<Row> rows;
  for (int64_t batch : batches) {
    auto session = engine->new_session();
    auto stream = static_cast<cudaStream_t>(session->cuda_stream());
    cuda::reset_device_memory_peak();  // from the weights the Engine holds
    LOKA_ASSIGN_OR_RETURN(std::vector<Tensor> host, fill_batch(sets, batch));
    auto inputs = std::make_unique<DeviceInputs>();
    LOKA_RETURN_IF_ERROR(upload(host, *inputs));
    const std::vector<DeviceView>& views = inputs->views;
    // Warm-up through run() first: it plans the bucket and reports device-side errors.
    LOKA_RETURN_IF_ERROR(session->run(host).status());
    for (int r = 0; r < kWarmupRuns; ++r) LOKA_RETURN_IF_ERROR(session->run_on_device(views).status());
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    std::vector<double> times;
    for (int r = 0; r < runs; ++r) {
      cudaEventRecord(start, stream);
      LOKA_RETURN_IF_ERROR(session->run_on_device(views).status());
      cudaEventRecord(stop, stream);
      cudaEventSynchronize(stop);
      float ms = 0;
      cudaEventElapsedTime(&ms, start, stop);
      times.push_back(ms);
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    std::sort(times.begin(), times.end());
    Row row;
    row.batch = batch;
    row.median_ms = times[times.size() / 2];
    row.p90_ms = times[std::min(times.size() - 1, times.size() * 9 / 10)];
    row.samples_per_s = static_cast<double>(batch) / (row.median_ms / 1e3);
    inputs.reset();
    row.peak_mb = static_cast<double>(cuda::device_memory_use().peak_bytes) / (1 << 20);
    row.process_mb = static_cast<double>(device_used_bytes() - baseline) / (1 << 20);
    row.arena = arena_json(*session, batch);
    session.reset();
    if (trace_runs > 0) {  // after the memory figure: the traced Session holds arenas of its own
      DeviceInputs traced;
      LOKA_RETURN_IF_ERROR(upload(host, traced));
      row.kernels = trace_kernels(*engine, host, traced.views, trace_runs);
      row.nodes = profile_json(*engine, host, trace_runs);
    }
    std::printf("%8lld %12.4f %12.4f %14.4g %10.1f %11.1f\n", static_cast<long long>(batch), row.median_ms, row.p90_ms,
                row.samples_per_s, row.peak_mb, row.process_mb);
    rows.push_back(row);
  }
  if (!json.empty()) {
    nlohmann::json list = nlohmann::json::array();
    for (const Row& row : rows) {
      nlohmann::json item = {{"model", model},           {"batch", row.batch},
                             {"latency_ms", row.median_ms}, {"p90_ms", row.p90_ms},
                             {"samples_per_s", row.samples_per_s}, {"peak_mem_mb", row.peak_mb},
                             {"process_mem_mb", row.process_mb}, {"weights_mem_mb", weights_mb},
                             {"device", cuda::device_description()}};
      if (!row.kernels.is_null()) item["kernel_trace"] = row.kernels;
      if (!row.nodes.is_null()) item["node_profile"] = row.nodes;
      item["arena"] = row.arena;
      list.push_back(std::move(item));
    }
    std::ofstream out(json);
    out << list.dump(1) << "\n";
    if (!out) return Status::error(json + ": cannot write");
  }
  return 0;
}

int main_checked(int argc, char** argv) {
  const cli::ArgumentParser parser = make_parser();
  cli::ParsedArguments args;
  if (auto exit_code = cli::parse_or_exit_code(parser, argc, argv, args)) return *exit_code;
  std::vector<int64_t> batches;
  std::stringstream list(args.value("--batches"));
  for (std::string item; std::getline(list, item, ',');) {
    char* end = nullptr;
    const long long value = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || value < 1) return cli::usage_error(kProgram, "--batches: bad entry '" + item + "'");
    batches.push_back(value);
  }
  auto runs = args.integer("--runs");
  if (!runs || *runs < 1) return cli::usage_error(kProgram, "--runs needs a positive integer");
  auto trace_runs = args.integer("--trace-runs");
  if (!trace_runs || *trace_runs < 1) return cli::usage_error(kProgram, "--trace-runs needs a positive integer");
  auto result = run(args.positionals()[0], args.value("--data"), batches, static_cast<int>(*runs), args.value("--json"),
                    args.has("--kernel-trace") ? static_cast<int>(*trace_runs) : 0);
  if (!result) return cli::runtime_error(kProgram, result.status().message());
  return *result;
}

}  // namespace
}  // namespace loka

int main(int argc, char** argv) { return loka::cli::guarded_main("loka_model_bench", loka::main_checked, argc, argv); }
