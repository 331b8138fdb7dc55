// ============================================================================
// tests/soak/loka_soak.cc — `loka_soak`: many runs, many threads, flat memory.
//
//   loka_soak MODEL.onnx --data DIR [--device cpu|cuda] [--runs N] [--threads T]
//             [--batches 1,7,32] [--warmup-runs W] [--rss-slack-mb M]
//
// The serving contract under load, on the CPU or the CUDA runtime: one Engine
// shared by T threads, one Session each, N runs in all. Every data set of DIR is cut to
// each batch size of --batches (the first rows of every input whose first dim
// is symbolic), so Sessions see shapes change run after run. One Session runs
// every batch once first: the reference. Each threaded run's outputs must equal
// the reference bit for bit. A sampler reads the process's resident set
// (/proc/self/statm) ten times a second; after W runs (warm-up: every Session
// has met every shape) the resident set must stay within M MiB of what it was
// then. On CUDA each Session's device bytes (arenas, staging, workspace) must
// not change after warm-up either: a steady-state run allocates nothing on the
// device (the CUDA engine plans every batch bucket up front, up to the largest
// --batches size). Prints a progress line (runs, seconds, RSS) per tenth of the runs and
// a summary line (runs, threads, seconds, runs/s, RSS at load, after warm-up,
// peak after warm-up, at the end), and exits 1 on a mismatch, a failed run or
// growth past the slack; errors are one line "loka_soak: <reason>".
// CI runs a short soak as a ctest; the reliability figures come from long ones.
// ============================================================================
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "loka/engine.h"
#include "loka/session.h"
#include "loka/test_data.h"
#include "tools/cli/arguments.h"

namespace loka {
namespace {

constexpr const char* kProgram = "loka_soak";
/// Data sets read at most (each is cut into one batch per --batches size).
constexpr size_t kMaxDataSets = 16;

cli::ArgumentParser make_parser() {
  cli::ArgumentParser parser(kProgram,
                             "Runs a model N times from T threads on the CPU or CUDA runtime (one Session per\n"
                             "thread), checks every output bit for bit against a single-thread run, and fails\n"
                             "when the resident set grows past a slack after warm-up (or, on CUDA, when a\n"
                             "Session's device memory changes after warm-up).");
  parser.positional("MODEL.onnx", "the model to run")
      .option("--data", "DIR", "data directory with the model's inputs (test_data_set_<k>/ or .npz)").required()
      .option("--device", "cpu|cuda", "runtime to soak").default_value("cpu")
      .option("--runs", "N", "runs in all, spread over the threads").default_value("100000")
      .option("--threads", "T", "threads, one Session each").default_value("8")
      .option("--batches", "LIST", "batch sizes the data sets are cut to, comma-separated").default_value("1,7,32")
      .option("--warmup-runs", "W", "runs before the resident set is taken as the baseline (default: 2% of N, "
                                    "at least 20 per thread and batch)")
      .option("--rss-slack-mb", "M", "largest growth of the resident set after warm-up, MiB").default_value("16");
  return parser;
}

/// Resident set of this process in bytes (0 when /proc is not there).
size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages_total = 0, pages_resident = 0;
  if (!(statm >> pages_total >> pages_resident)) return 0;
  return pages_resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

/// Peak resident set of this process so far in bytes (VmHWM; 0 when /proc is not there).
size_t peak_resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  size_t kib = 0;
  while (status >> key) {
    if (key == "VmHWM:") return status >> kib ? kib * 1024 : 0;
    status.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

double mib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

Result<std::vector<int64_t>> parse_batch_sizes(const std::string& list) {
  std::vector<int64_t> sizes;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string item = list.substr(start, comma - start);
    char* end = nullptr;
    const long long value = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || value < 1) return Status::error("--batches: '" + item + "' is not a batch size >= 1");
    sizes.push_back(value);
    start = comma + 1;
  }
  return sizes;
}

/// The first `rows` rows of `tensor` (all of it when it has no more), in storage of its own.
Tensor first_rows(const Tensor& tensor, int64_t rows) {
  if (tensor.rank() == 0 || tensor.dim(0) <= rows) return tensor.clone();
  Shape shape = tensor.shape();
  shape[0] = rows;
  Tensor cut = Tensor::zeros(tensor.dtype(), shape);
  std::memcpy(cut.raw(), tensor.raw(), cut.byte_size());
  return cut;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.byte_size()) == 0;
}

struct Batch {
  std::string label;
  std::vector<Tensor> inputs;
  std::vector<Tensor> reference;
};

Result<std::vector<Batch>> make_batches(const Engine& engine, const std::string& data_dir,
                                        const std::vector<int64_t>& batch_sizes) {
  LOKA_ASSIGN_OR_RETURN(const DataSetReader reader, DataSetReader::open(data_dir));
  if (reader.size() == 0) return Status::error("no data sets in " + data_dir);
  std::vector<std::string> names;
  for (const TensorInfo& info : engine.inputs()) names.push_back(info.name);
  std::vector<Batch> batches;
  auto session = engine.new_session();
  for (size_t k = 0; k < std::min(reader.size(), kMaxDataSets); ++k) {
    LOKA_ASSIGN_OR_RETURN(const DataSet data, reader.read(k));
    LOKA_ASSIGN_OR_RETURN(const std::vector<Tensor> inputs, order_inputs(data, names));
    for (int64_t rows : batch_sizes) {
      Batch batch;
      batch.label = data.label + " rows " + std::to_string(rows);
      for (size_t i = 0; i < inputs.size(); ++i) {
        const TensorInfo& info = engine.inputs()[i];
        const bool batched = info.has_shape && !info.shape.empty() && info.shape[0] < 0;
        batch.inputs.push_back(batched ? first_rows(inputs[i], rows) : inputs[i]);
      }
      auto reference = session->run(batch.inputs);
      if (!reference) return reference.status().with_context(batch.label + ": ");
      batch.reference = std::move(reference).value();
      batches.push_back(std::move(batch));
    }
  }
  return batches;
}

struct Options {
  std::string model, data;
  Device device = Device::kCpu;
  int64_t runs = 0, threads = 0, warmup_runs = -1;
  std::vector<int64_t> batch_sizes;
  double rss_slack_mb = 0;
};

int soak(const Options& options) {
  const size_t rss_before_load = resident_bytes();
  EngineOptions engine_options;
  engine_options.device = options.device;
  if (options.device == Device::kCuda)
    engine_options.max_batch = *std::max_element(options.batch_sizes.begin(), options.batch_sizes.end());
  auto engine = Engine::load_file(options.model, engine_options);
  if (!engine) return cli::runtime_error(kProgram, engine.status().message());
  auto batches = make_batches(**engine, options.data, options.batch_sizes);
  if (!batches) return cli::runtime_error(kProgram, batches.status().message());
  const size_t rss_loaded = resident_bytes();

  const int64_t warmup_runs =
      options.warmup_runs >= 0
          ? options.warmup_runs
          : std::max<int64_t>(options.runs / 50, 20 * options.threads * static_cast<int64_t>(batches->size()));
  std::atomic<int64_t> next_run{0}, done_runs{0}, mismatches{0}, failures{0}, device_growth{0};
  std::atomic<size_t> device_bytes_warm{0};
  std::mutex mutex;
  std::condition_variable finished_cv;
  bool finished = false;
  std::string first_problem;
  const auto report_problem = [&](const std::string& problem) {
    std::lock_guard lock(mutex);
    if (first_problem.empty()) first_problem = problem;
  };

  const auto serve = [&](int thread) {
    const std::unique_ptr<Session> session = (*engine)->new_session();
    size_t warm_device_bytes = 0;  // this Session's device bytes at its first run after warm-up
    for (int64_t run = next_run.fetch_add(1); run < options.runs; run = next_run.fetch_add(1)) {
      // Threads walk the batches from different offsets, so shapes interleave across Sessions.
      const Batch& batch = (*batches)[static_cast<size_t>(run + thread) % batches->size()];
      auto outputs = session->run(batch.inputs);
      if (!outputs) {
        ++failures;
        report_problem("thread " + std::to_string(thread) + ", " + batch.label + ": " + outputs.status().message());
      } else {
        for (size_t o = 0; o < batch.reference.size(); ++o) {
          if (bitwise_equal((*outputs)[o], batch.reference[o])) continue;
          ++mismatches;
          report_problem("thread " + std::to_string(thread) + ", " + batch.label + ": output '" +
                         (*engine)->outputs()[o].name + "' differs from the single-thread run");
          break;
        }
      }
      if (done_runs.load() >= warmup_runs) {
        const size_t bytes = session->device_bytes();
        if (warm_device_bytes == 0) {
          warm_device_bytes = bytes;
          device_bytes_warm += bytes;
        } else if (bytes != warm_device_bytes) {
          ++device_growth;
          report_problem("thread " + std::to_string(thread) + ", " + batch.label + ": the Session's device bytes went from " +
                         std::to_string(warm_device_bytes) + " to " + std::to_string(bytes) + " after warm-up");
          warm_device_bytes = bytes;
        }
      }
      ++done_runs;
    }
  };

  // The sampler: baseline once warm-up is done, then the peak; a progress line per tenth of the runs.
  size_t rss_warm = 0, rss_peak = 0;
  int64_t warm_at_run = -1;
  const auto start = std::chrono::steady_clock::now();
  std::thread sampler([&] {
    std::unique_lock lock(mutex);
    const int64_t report_every = std::max<int64_t>(1, options.runs / 10);
    int64_t next_report = report_every;
    while (!finished) {
      const size_t rss = resident_bytes();
      const int64_t done = done_runs.load();
      if (warm_at_run < 0 && done >= warmup_runs) {
        warm_at_run = done;
        rss_warm = rss;
      }
      if (warm_at_run >= 0) rss_peak = std::max(rss_peak, rss);
      if (done >= next_report && done < options.runs) {
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::printf("loka_soak: %lld runs, %.1f s, RSS %.1f MiB\n", static_cast<long long>(done), elapsed, mib(rss));
        std::fflush(stdout);
        while (next_report <= done) next_report += report_every;
      }
      finished_cv.wait_for(lock, std::chrono::milliseconds(100));
    }
  });

  std::vector<std::thread> threads;
  for (int t = 0; t < options.threads; ++t) threads.emplace_back(serve, t);
  for (std::thread& thread : threads) thread.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  {
    std::lock_guard lock(mutex);
    finished = true;
  }
  finished_cv.notify_all();
  sampler.join();
  const size_t rss_end = resident_bytes();
  if (warm_at_run >= 0) rss_peak = std::max(rss_peak, rss_end);

  std::printf("loka_soak: %lld runs, %lld threads, %zu batches, %.1f s, %.0f runs/s; RSS MiB: %.1f before load, "
              "%.1f loaded, %.1f after warm-up (run %lld), %.1f peak after warm-up, %.1f at the end, %.1f peak "
              "of the process (VmHWM); %lld mismatches, %lld failed runs; device MiB held by the Sessions after "
              "warm-up %.1f, %lld changes after it\n",
              static_cast<long long>(done_runs.load()), static_cast<long long>(options.threads), batches->size(),
              seconds, static_cast<double>(done_runs.load()) / seconds, mib(rss_before_load), mib(rss_loaded),
              mib(rss_warm), static_cast<long long>(warm_at_run), mib(rss_peak), mib(rss_end),
              mib(peak_resident_bytes()), static_cast<long long>(mismatches.load()),
              static_cast<long long>(failures.load()), mib(device_bytes_warm.load()),
              static_cast<long long>(device_growth.load()));
  if (!first_problem.empty()) return cli::runtime_error(kProgram, first_problem);
  if (warm_at_run < 0)
    return cli::runtime_error(kProgram, "the run ended before warm-up (" + std::to_string(warmup_runs) +
                                            " runs): nothing to judge; raise --runs");
  const double growth_mb = mib(rss_peak) - mib(rss_warm);
  if (growth_mb > options.rss_slack_mb) {
    char message[160];
    std::snprintf(message, sizeof(message), "the resident set grew %.1f MiB after warm-up, past the %.1f MiB slack",
                  growth_mb, options.rss_slack_mb);
    return cli::runtime_error(kProgram, message);
  }
  return 0;
}

int main_checked(int argc, char** argv) {
  const cli::ArgumentParser parser = make_parser();
  cli::ParsedArguments args;
  if (auto exit_code = cli::parse_or_exit_code(parser, argc, argv, args)) return *exit_code;
  Options options;
  options.model = args.positionals()[0];
  options.data = args.value("--data");
  const std::string device = args.value("--device");
  if (device != "cpu" && device != "cuda") return cli::usage_error(kProgram, "--device must be cpu or cuda, not '" + device + "'");
  options.device = device == "cuda" ? Device::kCuda : Device::kCpu;
  for (const std::string option : {"--runs", "--threads"}) {
    auto value = args.integer(option);
    if (!value) return cli::usage_error(kProgram, value.status().message());
    if (*value < 1) return cli::usage_error(kProgram, option + " must be at least 1");
    (option == "--runs" ? options.runs : options.threads) = *value;
  }
  if (args.has("--warmup-runs")) {
    auto value = args.integer("--warmup-runs");
    if (!value || *value < 0) return cli::usage_error(kProgram, "--warmup-runs needs a count >= 0");
    options.warmup_runs = *value;
  }
  auto slack = args.number("--rss-slack-mb");
  if (!slack || *slack < 0) return cli::usage_error(kProgram, "--rss-slack-mb needs a number of MiB >= 0");
  options.rss_slack_mb = *slack;
  auto sizes = parse_batch_sizes(args.value("--batches"));
  if (!sizes) return cli::usage_error(kProgram, sizes.status().message());
  options.batch_sizes = std::move(sizes).value();
  return soak(options);
}

}  // namespace
}  // namespace loka

int main(int argc, char** argv) { return loka::cli::guarded_main(loka::kProgram, loka::main_checked, argc, argv); }
