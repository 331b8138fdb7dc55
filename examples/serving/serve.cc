// ============================================================================
// examples/serving/serve.cc — loka-serve: serve a model from several threads.
//
// The shape of a serving process that embeds the LoKA runtime: one immutable
// Engine shared by every thread, one Session per thread (its buffers, and on
// CUDA its stream, arenas and graphs, are its own). The program
//   1. reads the batches (a data directory, or random ones of the input shapes);
//   2. loads the model once (`--device cuda` plans buckets up to the largest batch);
//   3. runs every batch on one Session: the reference outputs;
//   4. starts N threads; each opens a Session, runs every batch once to warm up
//      (CUDA plans and captures a bucket on its first run), waits for the others,
//      then runs --runs batches, timing each run and checking its outputs
//      against the reference;
//   5. prints latency percentiles over all timed runs and the throughput of the
//      timed phase (its wall time includes the output checks, which are cheap
//      next to a model run), and exits 1 on any mismatch or failure.
// Errors are one line "loka-serve: <reason>" naming the file, batch or output.
// ============================================================================
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "batches.h"
#include "compare.h"
#include "loka/engine.h"
#include "loka/session.h"
#include "options.h"

namespace serving {
namespace {

using Clock = std::chrono::steady_clock;

/// Data sets read from a directory at most (each is a batch held in memory).
constexpr size_t kMaxDataSets = 64;

int fail(const std::string& reason) {
  std::fprintf(stderr, "loka-serve: %s\n", reason.c_str());
  return 1;
}

/// What one serving thread saw.
struct ThreadReport {
  std::vector<double> latencies_ms;  ///< one per timed run
  int64_t rows = 0;                  ///< samples served in timed runs
  std::string failure;               ///< first error or mismatch; empty when none
};

/// Runs `batch` on `session` and checks the outputs against `reference`; returns the
/// failure (empty when none). `where` says which thread and run, for the message.
std::string run_and_check(loka::Session& session, const loka::Engine& engine, const Batch& batch,
                          const std::vector<loka::Tensor>& reference, double tolerance, const std::string& where,
                          double* latency_ms) {
  const Clock::time_point start = Clock::now();
  auto outputs = session.run(batch.inputs);
  const Clock::time_point end = Clock::now();
  if (!outputs) return where + " (batch " + batch.label + "): " + outputs.status().message();
  if (latency_ms) *latency_ms = std::chrono::duration<double, std::milli>(end - start).count();
  for (size_t i = 0; i < reference.size(); ++i) {
    const std::string difference = describe_difference((*outputs)[i], reference[i], tolerance);
    if (!difference.empty())
      return where + " (batch " + batch.label + "): output '" + engine.outputs()[i].name + "' " + difference +
             " of the single-thread run";
  }
  return "";
}

/// One serving thread: warm up on every batch, wait for `start`, then serve.
void serve_thread(const loka::Engine& engine, const std::vector<Batch>& batches,
                  const std::vector<std::vector<loka::Tensor>>& reference, const ServeOptions& options, int index,
                  std::latch& start, ThreadReport& report) {
  const std::unique_ptr<loka::Session> session = engine.new_session();
  const std::string thread = "thread " + std::to_string(index);
  for (size_t b = 0; b < batches.size() && report.failure.empty(); ++b)
    report.failure = run_and_check(*session, engine, batches[b], reference[b], options.tolerance,
                                   thread + " warm-up", nullptr);
  start.arrive_and_wait();
  if (!report.failure.empty()) return;
  report.latencies_ms.reserve(static_cast<size_t>(options.runs));
  for (int run = 0; run < options.runs; ++run) {
    // Threads start at different batches so that different inputs run at the same time.
    const size_t b = static_cast<size_t>(index + run) % batches.size();
    double latency_ms = 0;
    report.failure = run_and_check(*session, engine, batches[b], reference[b], options.tolerance,
                                   thread + " run " + std::to_string(run), &latency_ms);
    if (!report.failure.empty()) return;
    report.latencies_ms.push_back(latency_ms);
    report.rows += batches[b].rows;
  }
}

/// Nearest-rank percentile of sorted values.
double percentile(const std::vector<double>& sorted, double p) {
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

int serve(const ServeOptions& options) {
  // 1. Batches from a directory are read before the model: CUDA sizes its buckets by them.
  std::vector<loka::DataSet> data_sets;
  int64_t max_rows = options.batch;
  if (!options.data.empty()) {
    auto read = read_data_sets(options.data, kMaxDataSets);
    if (!read) return fail(read.status().message());
    data_sets = std::move(*read);
    max_rows = largest_rows(data_sets);
  }

  // 2. One Engine for the process.
  loka::EngineOptions engine_options;
  engine_options.device = options.device;
  engine_options.max_batch = max_rows;
  auto loaded = loka::Engine::load_file(options.model, engine_options);
  if (!loaded) return fail(loaded.status().message());
  const loka::Engine& engine = **loaded;

  auto made = options.data.empty()
                  ? random_batches(engine, {options.batch, options.int_range, options.seed, 4})
                  : batches_from_data(data_sets, engine);
  if (!made) return fail(made.status().message());
  const std::vector<Batch> batches = std::move(*made);
  data_sets.clear();

  // 3. The reference: every batch once, on one Session, before any thread starts.
  std::vector<std::vector<loka::Tensor>> reference;
  {
    const std::unique_ptr<loka::Session> session = engine.new_session();
    for (const Batch& batch : batches) {
      auto outputs = session->run(batch.inputs);
      if (!outputs) {
        std::string reason = options.model.string() + " (batch " + batch.label + "): " + outputs.status().message();
        if (options.data.empty())
          reason += " (random integer inputs are drawn from [0, " + std::to_string(options.int_range) +
                    "): see --int-range)";
        return fail(reason);
      }
      reference.push_back(std::move(*outputs));
    }
  }
  int64_t rows_per_pass = 0;
  for (const Batch& batch : batches) rows_per_pass += batch.rows;
  std::printf("model %s on %s: %zu inputs, %zu outputs, %zu nodes\n", options.model.string().c_str(),
              options.device == loka::Device::kCuda ? "cuda" : "cpu", engine.inputs().size(),
              engine.outputs().size(), engine.node_count());
  std::printf("batches: %zu %s (%lld samples in all)\n", batches.size(),
              options.data.empty() ? "random" : ("from " + options.data.string()).c_str(),
              static_cast<long long>(rows_per_pass));

  // 4. N threads, one Session each; the timed phase starts when all have warmed up.
  std::vector<ThreadReport> reports(static_cast<size_t>(options.threads));
  std::latch start(options.threads + 1);
  Clock::time_point began;
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < options.threads; ++t)
      threads.emplace_back(serve_thread, std::cref(engine), std::cref(batches), std::cref(reference),
                           std::cref(options), t, std::ref(start), std::ref(reports[static_cast<size_t>(t)]));
    start.arrive_and_wait();
    began = Clock::now();
  }  // joins
  const double wall_s = std::chrono::duration<double>(Clock::now() - began).count();

  // 5. Report.
  std::vector<double> latencies;
  int64_t rows = 0;
  for (const ThreadReport& report : reports) {
    if (!report.failure.empty()) return fail(report.failure);
    latencies.insert(latencies.end(), report.latencies_ms.begin(), report.latencies_ms.end());
    rows += report.rows;
  }
  std::sort(latencies.begin(), latencies.end());
  std::printf("served: %d threads x %d runs = %zu runs, %lld samples in %.3f s\n", options.threads, options.runs,
              latencies.size(), static_cast<long long>(rows), wall_s);
  std::printf("latency ms: p50 %.3f  p90 %.3f  p99 %.3f  max %.3f\n", percentile(latencies, 50),
              percentile(latencies, 90), percentile(latencies, 99), latencies.back());
  std::printf("throughput: %.0f samples/s, %.1f runs/s\n", static_cast<double>(rows) / wall_s,
              static_cast<double>(latencies.size()) / wall_s);
  if (options.tolerance == 0)
    std::printf("outputs: every run equals the single-thread run bitwise\n");
  else
    std::printf("outputs: every run is within %g of the single-thread run\n", options.tolerance);
  return 0;
}

}  // namespace
}  // namespace serving

int main(int argc, char** argv) {
  auto options = serving::parse_arguments(argc, argv);
  if (!options) {
    std::fprintf(stderr, "loka-serve: %s (see --help)\n", options.status().message().c_str());
    return serving::kUsageExit;
  }
  if (options->help) {
    std::fputs(serving::usage().c_str(), stdout);
    return 0;
  }
  return serving::serve(*options);
}
