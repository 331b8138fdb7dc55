// ============================================================================
// tools/loka_run.cc — `loka-run`: run a model over data sets, write or compare
// its outputs, and time it.
//
//   loka-run MODEL.onnx --inputs DATA [--device cpu|cuda] [--outputs DIR]
//            [--compare DIR --tol ATOL] [--bench N] [--profile N]
//
// A thin CLI over runtime::Engine and the data-directory reader: every failure
// is one line "loka-run: <reason>" naming the file or tensor, exit 1 (2 for
// usage errors); a --compare that finds an output off by more than ATOL prints
// FAIL and exits 1. The first pass over the data sets doubles as warm-up for
// --bench, which then times whole-model runs on inputs already in memory.
// --profile times every node (Session::profile_nodes) on the first data set
// and prints the nodes that took the most, with their share of the total.
// ============================================================================
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "loka/engine.h"
#include "loka/session.h"
#include "runtime/error_text.h"
#include "runtime/node_profile.h"
#include "runtime/test_data.h"
#include "tools/cli/arguments.h"

namespace loka {
namespace {

constexpr const char* kProgram = "loka-run";
constexpr double kDefaultTolerance = 1e-5;
/// Data sets kept in memory for --bench (the timed loop cycles through them).
constexpr size_t kMaxBenchSets = 64;
constexpr int kWarmupRuns = 3;
/// Nodes --profile lists (the rest are summed on one line).
constexpr size_t kProfileTop = 25;

cli::ArgumentParser make_parser() {
  cli::ArgumentParser parser(kProgram,
                             "Runs an ONNX model on every data set of DATA (input_<i>.pb files, test_data_set_<k>/\n"
                             "folders or .npz archives), optionally writing, comparing and timing its outputs.");
  parser.positional("MODEL.onnx", "the model to run")
      .option("--inputs", "DATA", "data directory or .npz file with the model's inputs").required()
      .option("--device", "cpu|cuda", "where to run").choices({"cpu", "cuda"}).default_value("cpu")
      .option("--outputs", "DIR", "write output_<i>.pb per data set, mirroring the layout of DATA")
      .option("--compare", "DIR", "compare with the reference output_<i>.pb (or .npz output_<i>) in DIR")
      .option("--tol", "ATOL", "largest absolute difference --compare accepts (default: 1e-05)")
      .option("--bench", "N", "after the run, time N more runs and print median/p90 latency and throughput")
      .option("--profile", "N", "time every node over N runs of the first data set and print where the time goes");
  return parser;
}

/// Error of one output against its reference.
struct Difference {
  double max_abs = 0;
  double rel_l2 = 0;
  std::string problem;  ///< non-empty when the two cannot be compared (shape)
};

Difference compare_tensors(const Tensor& actual, const Tensor& reference) {
  Difference result;
  if (actual.shape() != reference.shape()) {
    result.problem = "shape " + shape_to_string(actual.shape()) + " but the reference is " + shape_to_string(reference.shape());
    result.max_abs = INFINITY;
    result.rel_l2 = INFINITY;
    return result;
  }
  const std::vector<float> a = actual.to_floats();
  const std::vector<float> b = reference.to_floats();
  double error_sq = 0, reference_sq = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = a[i], y = b[i];
    double d = 0;
    if (std::isnan(x) || std::isnan(y)) d = std::isnan(x) && std::isnan(y) ? 0 : INFINITY;
    else if (x != y) d = std::fabs(x - y);  // x != y keeps equal infinities at 0
    result.max_abs = std::max(result.max_abs, d);
    error_sq += d * d;
    if (std::isfinite(y)) reference_sq += y * y;
  }
  result.rel_l2 = error_sq == 0 ? 0 : reference_sq == 0 ? INFINITY : std::sqrt(error_sq / reference_sq);
  return result;
}

double percentile(std::vector<double> sorted_values, double fraction) {
  std::sort(sorted_values.begin(), sorted_values.end());
  const size_t index = static_cast<size_t>(std::ceil(fraction * static_cast<double>(sorted_values.size()))) - 1;
  return sorted_values[std::min(index, sorted_values.size() - 1)];
}

struct Options {
  std::filesystem::path model;
  std::filesystem::path inputs;
  Device device = Device::kCpu;
  std::filesystem::path outputs;
  std::filesystem::path compare;
  double tolerance = kDefaultTolerance;
  int64_t bench_runs = 0;
  int64_t profile_runs = 0;
};

/// Times `runs` whole-model runs cycling through `sets`, after a short warm-up.
Status bench(Session& session, const std::vector<std::vector<Tensor>>& sets, int64_t runs) {
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < kWarmupRuns; ++i) LOKA_RETURN_IF_ERROR(session.run(sets[i % sets.size()]).status());
  std::vector<double> milliseconds;
  milliseconds.reserve(static_cast<size_t>(runs));
  int64_t samples = 0;
  for (int64_t i = 0; i < runs; ++i) {
    const auto& inputs = sets[static_cast<size_t>(i) % sets.size()];
    const auto start = Clock::now();
    auto outputs = session.run(inputs);
    const auto stop = Clock::now();
    if (!outputs) return outputs.status();
    milliseconds.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
    samples += inputs.empty() || inputs[0].rank() == 0 ? 1 : inputs[0].dim(0);
  }
  double total = 0;
  for (double ms : milliseconds) total += ms;
  std::printf("bench: %lld runs, median %.4g ms, p90 %.4g ms, throughput %.4g runs/s, %.4g samples/s\n",
              static_cast<long long>(runs), percentile(milliseconds, 0.5), percentile(milliseconds, 0.9),
              1000.0 * static_cast<double>(runs) / total, 1000.0 * static_cast<double>(samples) / total);
  return Status::ok();
}

/// Times every node over `runs` runs of `inputs` and prints the slowest first, with the share of
/// the nodes' total each takes and the running share.
Status profile(Session& session, const std::vector<Tensor>& inputs, int64_t runs, Device device) {
  LOKA_ASSIGN_OR_RETURN(std::vector<NodeTiming> profile, session.profile_nodes(inputs, static_cast<int>(runs)));
  const auto [nodes, total] = slowest_first(std::move(profile));
  std::printf("profile: %zu nodes, %lld runs, medians summed %.4g ms (%s)\n", nodes.size(), static_cast<long long>(runs),
              total, device == Device::kCuda ? "device events between nodes, no CUDA graph" : "host clock per node");
  std::printf("%10s %7s %7s  %-32s %s\n", "ms", "share", "cumul", "op", "node");
  double running = 0;
  const size_t listed = std::min(nodes.size(), kProfileTop);
  for (size_t i = 0; i < listed; ++i) {
    const NodeTiming& node = nodes[i];
    running += node.median_ms;
    // Names come from the model and may hold any byte: one line per node all the same.
    std::printf("%10.4f %6.1f%% %6.1f%%  %-32s %s\n", node.median_ms, total > 0 ? 100 * node.median_ms / total : 0.0,
                total > 0 ? 100 * running / total : 0.0, escape_control_characters(node.qualified_op()).c_str(),
                escape_control_characters(node.name).c_str());
  }
  if (listed < nodes.size())
    std::printf("%10.4f %6.1f%%          (%zu more nodes)\n", total - running, total > 0 ? 100 * (total - running) / total : 0.0,
                nodes.size() - listed);
  return Status::ok();
}

std::vector<std::string> names_of(const std::vector<TensorInfo>& infos) {
  std::vector<std::string> names;
  for (const TensorInfo& info : infos) names.push_back(info.name);
  return names;
}

/// Runs everything; returns the exit code (errors come back as a Status).
Result<int> run(const Options& options) {
  EngineOptions engine_options;
  engine_options.device = options.device;
  LOKA_ASSIGN_OR_RETURN(const auto engine, Engine::load_file(options.model, engine_options));
  LOKA_ASSIGN_OR_RETURN(const DataSetReader inputs, DataSetReader::open(options.inputs));
  std::optional<DataSetReader> references;
  if (!options.compare.empty()) {
    LOKA_ASSIGN_OR_RETURN(references, DataSetReader::open(options.compare));
    if (references->size() != inputs.size())
      return Status::error(options.compare.string() + " holds " + std::to_string(references->size()) +
                           " data sets but " + options.inputs.string() + " holds " + std::to_string(inputs.size()));
  }
  const std::vector<std::string> input_names = names_of(engine->inputs());
  const std::vector<std::string> output_names = names_of(engine->outputs());
  auto session = engine->new_session();

  std::vector<std::vector<Tensor>> bench_sets;
  std::vector<Tensor> profile_inputs;
  size_t compared = 0, failed = 0;
  double worst_abs = 0;
  std::string worst_where;
  for (size_t index = 0; index < inputs.size(); ++index) {
    LOKA_ASSIGN_OR_RETURN(const DataSet data, inputs.read(index));
    LOKA_ASSIGN_OR_RETURN(std::vector<Tensor> ordered, order_inputs(data, input_names));
    auto outputs = session->run(ordered);
    if (!outputs) return outputs.status().with_context(data.location.string() + ": ");
    if (options.profile_runs > 0 && index == 0) profile_inputs = ordered;
    if (options.bench_runs > 0 && bench_sets.size() < kMaxBenchSets) bench_sets.push_back(std::move(ordered));

    if (!options.outputs.empty())
      LOKA_RETURN_IF_ERROR(write_outputs(options.outputs / inputs.subfolder(index), output_names, *outputs));

    if (!references) {
      for (size_t i = 0; i < outputs->size(); ++i)
        std::printf("%s: output '%s' %s %s\n", data.label.c_str(), output_names[i].c_str(),
                    std::string(dtype_name((*outputs)[i].dtype())).c_str(), shape_to_string((*outputs)[i].shape()).c_str());
      continue;
    }
    // When comparing against the inputs folder itself, its output_<i>.pb are the references.
    DataSet reference_data;
    if (references->location(index) == data.location) {
      reference_data = data;
    } else {
      LOKA_ASSIGN_OR_RETURN(reference_data, references->read(index));
    }
    if (reference_data.outputs.empty())
      return Status::error(reference_data.location.string() + ": no reference outputs (output_<i>.pb) to compare with");
    LOKA_ASSIGN_OR_RETURN(const std::vector<Tensor> expected, order_outputs(reference_data, output_names));
    for (size_t i = 0; i < outputs->size(); ++i) {
      const Difference difference = compare_tensors((*outputs)[i], expected[i]);
      const bool ok = difference.problem.empty() && difference.max_abs <= options.tolerance;
      ++compared;
      failed += ok ? 0 : 1;
      const std::string where = "output '" + output_names[i] + "' of " + data.label;
      if (!ok && (worst_where.empty() || difference.max_abs > worst_abs)) {
        worst_abs = difference.max_abs;
        worst_where = where;
      }
      if (!difference.problem.empty())
        std::printf("%s: %s: %s  FAIL\n", data.label.c_str(), output_names[i].c_str(), difference.problem.c_str());
      else
        std::printf("%s: %s: max_abs %.3g  rel_l2 %.3g  %s\n", data.label.c_str(), output_names[i].c_str(),
                    difference.max_abs, difference.rel_l2, ok ? "ok" : "FAIL");
    }
  }
  if (!bench_sets.empty()) LOKA_RETURN_IF_ERROR(bench(*session, bench_sets, options.bench_runs));
  if (options.profile_runs > 0 && inputs.size() > 0)
    LOKA_RETURN_IF_ERROR(profile(*session, profile_inputs, options.profile_runs, options.device));

  if (!references) return 0;
  if (failed == 0) {
    std::printf("PASS: %zu outputs of %zu data sets within tolerance %g\n", compared, inputs.size(), options.tolerance);
    return 0;
  }
  std::printf("FAIL: %zu of %zu outputs differ by more than %g (worst: %s, max_abs %.3g)\n", failed, compared,
              options.tolerance, worst_where.c_str(), worst_abs);
  return cli::kErrorExitCode;
}

int main_checked(int argc, char** argv) {
  const cli::ArgumentParser parser = make_parser();
  cli::ParsedArguments args;
  if (auto exit_code = cli::parse_or_exit_code(parser, argc, argv, args)) return *exit_code;
  Options options;
  options.model = args.positionals()[0];
  options.inputs = args.value("--inputs");
  options.device = args.value("--device") == "cuda" ? Device::kCuda : Device::kCpu;
  options.outputs = args.value("--outputs");
  options.compare = args.value("--compare");
  if (args.has("--tol")) {
    if (!args.has("--compare")) return cli::usage_error(kProgram, "--tol needs --compare");
    auto tolerance = args.number("--tol");
    if (!tolerance) return cli::usage_error(kProgram, tolerance.status().message());
    if (*tolerance < 0) return cli::usage_error(kProgram, "--tol must not be negative");
    options.tolerance = *tolerance;
  }
  if (args.has("--bench")) {
    auto runs = args.integer("--bench");
    if (!runs) return cli::usage_error(kProgram, runs.status().message());
    if (*runs < 1) return cli::usage_error(kProgram, "--bench needs at least 1 run");
    options.bench_runs = *runs;
  }
  if (args.has("--profile")) {
    auto runs = args.integer("--profile");
    if (!runs) return cli::usage_error(kProgram, runs.status().message());
    if (*runs < 1 || *runs > Session::kMaxProfileRuns)
      return cli::usage_error(kProgram, "--profile needs 1 to " + std::to_string(Session::kMaxProfileRuns) + " runs");
    options.profile_runs = *runs;
  }
  auto exit_code = run(options);
  if (!exit_code) return cli::runtime_error(kProgram, exit_code.status().message());
  return *exit_code;
}

}  // namespace
}  // namespace loka

int main(int argc, char** argv) { return loka::cli::guarded_main(loka::kProgram, loka::main_checked, argc, argv); }
