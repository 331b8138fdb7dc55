// ============================================================================
// tools/loka_opt.cc — `loka-opt`: import, run a pass pipeline, export.
//
//   loka-opt MODEL.onnx -o OUT.onnx [--calib DATA] [--budget SPEC] [--pipeline STR]
//            [--pin RULE]... [--device cpu|cuda] [--report FILE.json]
//            [--print-ir-after=PASS] [--print-ir-after-change] [--list-passes]
//
// MODEL may also be a textual IR file (.ir), as the pass manager's reproducers
// are. The resolved pipeline is recorded in the output model's metadata
// ("loka.pipeline"). A closing summary reports sites, verdicts, the share of
// GEMM FLOPs at FP8-safe sites and weight bytes. On a crash, the model path
// and pipeline are written to /tmp/loka-opt-crash-<pid>.txt for reproduction.
// ============================================================================
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>

#include "tools/cli/arguments.h"
#include "passes/ir/text_format.h"
#include "passes/onnx/onnx_export.h"
#include "passes/onnx/onnx_import.h"
#include "passes/onnx/qdq_lowering.h"
#include "passes/pass_cache.h"
#include "passes/pass_manager.h"
#include "passes/pipelines.h"
#include "passes/mods/pin_precision.h"
#include "passes/probe/annotations.h"
#include "passes/probe/budget.h"
#include "passes/probe/metrics.h"
#include "runtime/file_io.h"
#include "runtime/test_data.h"
#include "loka/engine.h"
#include "loka/session.h"

namespace loka {
namespace {

constexpr const char* kProgram = "loka-opt";

// Written by the crash handler with async-signal-safe calls only.
std::string g_crash_note;

void on_crash(int signal_number) {
  const std::string path = "/tmp/loka-opt-crash-" + std::to_string(::getpid()) + ".txt";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    [[maybe_unused]] auto written = ::write(fd, g_crash_note.data(), g_crash_note.size());
    ::close(fd);
  }
  const char message[] = "loka-opt: crashed; the model path and pipeline were saved to /tmp/loka-opt-crash-<pid>.txt\n";
  [[maybe_unused]] auto written = ::write(STDERR_FILENO, message, sizeof message - 1);
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

cli::ArgumentParser make_parser() {
  cli::ArgumentParser parser(kProgram,
                             "optimize an ONNX recommendation model for FP8 (Probe, Mods, Dispatch). The Probe's and "
                             "pin-precision's results are stored in ~/.cache/loka/passes and reused while the model, "
                             "options, calibration data, GPU and LoKA build are unchanged (LOKA_PASS_CACHE=DIR moves "
                             "that store, LOKA_PASS_CACHE=off disables it); Dispatch's timings in its perf DB");
  parser.positional("MODEL", "input model (.onnx, or a textual .ir reproducer)", /*optional=*/true)
      .option("--output", "OUT.onnx", "where to write the optimized model").alias("-o")
      .option("--calib", "DATA", "calibration data: a folder of test_data_set_<k>/ (or .npz files)")
      .option("--budget", "SPEC", "accuracy budget: rel_l2=X | max_abs=X | logloss=X | auto").default_value("auto")
      .option("--pipeline", "STR", "passes to run, e.g. 'infer-shapes,probe{batches=16}'").default_value(default_pipeline())
      .option("--pin", "REGEX=PREC", "pin nodes matching REGEX to bf16|fp32|fp8").repeated()
      .option("--device", "DEV", "target device; 'cuda' also checks that the output plans and runs on the GPU and "
                                 "matches the CPU reference on a calibration batch (where the Probe measures is its own "
                                 "option: probe{device=auto} uses this machine's GPU when it has one, the CPU otherwise)")
      .choices({"cpu", "cuda"})
      .default_value("cpu")
      .option("--format", "FMT", "output: 'loka' (ai.loka ops, FP8 initializers, annotations) or 'qdq' (standard ONNX "
                                 "QuantizeLinear/DequantizeLinear, opset >= 19, for onnxruntime)")
      .choices({"loka", "qdq"}).default_value("loka")
      .option("--report", "FILE.json", "write a JSON report (passes, timings, statistics, summary)")
      .option("--print-ir-after", "PASS", "print the IR after the named pass (stderr)")
      .flag("--print-ir-after-change", "print the IR after every pass that changed it (stderr)")
      .flag("--no-verify", "skip the IR verifier between passes")
      .flag("--list-passes", "list the available passes with their options and exit")
      .flag("--quiet", "no progress output");
  return parser;
}

void list_passes() {
  for (const PassInfo* info : PassRegistry::builtin().all()) {
    std::printf("%-16s %s\n", info->name.c_str(), info->summary.c_str());
    for (const PassOption& option : info->options)
      std::printf("    %-14s (default %s) %s\n", option.name.c_str(), option.default_value.c_str(), option.help.c_str());
  }
}

Result<std::unique_ptr<ir::Graph>> load_input(const std::filesystem::path& path) {
  if (path.extension() == ".ir") {
    LOKA_ASSIGN_OR_RETURN(const std::vector<std::byte> bytes, read_file(path));
    auto graph = ir::parse_graph(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    if (!graph) return graph.status().with_context(path.string() + ": ");
    return graph;
  }
  return onnx_io::import_model_file(path);
}

struct Summary {
  size_t sites = 0, safe = 0, unsafe = 0, undecided = 0;
  double site_flops = 0, safe_flops = 0;
  size_t weight_bytes = 0;
  nlohmann::json precision;  ///< pin-precision's model-level decision (empty when it did not run)
  size_t bf16_table_lookups = 0;  ///< lookups whose table is stored in BF16 ("table_storage")
  std::string calibration_note;  ///< when too few calibration samples kept GEMM sites out of FP8
};

/// Under a logloss budget a site fits alone when its expected drift plus noise_sigmas x its noise
/// on the judged samples, sqrt(second moment / samples), is within the selection limit. When the
/// GEMM site left out of FP8 that needs the fewest samples to fit alone needs more than the
/// calibration data has, the data, not the model, keeps it out: say how many samples would do. (A
/// site the Probe judged unsafe counts too: its verdict weighs the same noise.)
/// (An MMoE, a two-tower model and a transformer block written by hand got no FP8 under
/// logloss=0.0002 on 2048 samples; their nearest sites needed 8-40x as many, 2026-11-27.)
std::string calibration_note(const nlohmann::json& document) {
  const nlohmann::json& precision = document["model"].value("precision", nlohmann::json());
  const nlohmann::json& probe = document["model"].value("probe", nlohmann::json());
  if (!precision.is_object() || precision.value("predicted_metric", std::string()) != "logloss") return "";
  const double limit = precision.value("selection_limit", 0.0);
  const double samples = probe.value("logloss_judged_samples", 0.0);
  const double sigmas = probe.value("noise_sigmas", probe::kDefaultNoiseSigmas);
  if (!(limit > 0) || !(samples > 0)) return "";
  double fewest = std::numeric_limits<double>::infinity();
  std::string quietest;
  for (const auto& [name, node] : document["nodes"].items()) {
    if (node.value("flops", 0.0) <= 0 || node.value("precision", std::string()) == "fp8_e4m3") continue;
    // Left out by the budget, or judged unsafe by the Probe (whose verdict weighs the same noise).
    const std::string reason = node.value("precision_reason", std::string());
    if ((reason.rfind("over budget", 0) != 0 && reason != "unsafe") || !node.contains("recipes")) continue;
    for (const auto& [recipe, entry] : node["recipes"].items()) {
      const nlohmann::json& error = entry.value("error", nlohmann::json());
      const double expected = error.value("logloss_expected_mean", -1.0);
      const double second_moment = error.value("logloss_second_moment_mean", -1.0);
      if (expected < 0 || second_moment < 0) continue;
      // Infinite where the expected drift alone reaches the limit: more data cannot fit it.
      const double needed = probe::logloss_samples_to_fit(expected, second_moment, limit, sigmas);
      if (needed < fewest) {
        fewest = needed;
        quietest = name;
      }
    }
  }
  if (!std::isfinite(fewest) || fewest <= samples) return "";
  char text[320];
  std::snprintf(text, sizeof text,
                "%.0f calibration samples are too few for this budget: the GEMM site nearest to fitting alone "
                "(%s) needs about %.0f (%.1fx as many) before its logloss noise leaves room for it",
                samples, quietest.c_str(), std::ceil(fewest), fewest / samples);
  return text;
}

Summary summarize(const ir::Graph& graph) {
  Summary summary;
  for (const ir::Value* value : graph.values())
    if (value->is_initializer()) summary.weight_bytes += value->initializer()->byte_size();
  auto document = read_annotations(graph);
  if (!document) return summary;
  summary.precision = (*document)["model"].value("precision", nlohmann::json());
  summary.calibration_note = calibration_note(*document);
  for (const auto& [name, node] : (*document)["nodes"].items()) {
    summary.bf16_table_lookups += node.is_object() && node.value("table_storage", "") == "bf16";
    if (!node.contains("verdict")) continue;
    ++summary.sites;
    const double flops = node.value("flops", 0.0);
    summary.site_flops += flops;
    const std::string verdict = node.value("verdict", "");
    if (verdict == "safe") {
      ++summary.safe;
      summary.safe_flops += flops;
    } else if (verdict == "unsafe") {
      ++summary.unsafe;
    } else {
      ++summary.undecided;
    }
  }
  return summary;
}

void print_summary(const Summary& summary, size_t weight_bytes_before) {
  if (summary.sites > 0)
    std::printf("  Probe      %zu candidate sites: %zu safe, %zu unsafe, %zu undecided alone\n", summary.sites,
                summary.safe, summary.unsafe, summary.undecided);
  if (summary.precision.is_object()) {
    const auto& p = summary.precision;
    std::printf("  FP8        %d of %d sites in FP8, %.1f%% of GEMM FLOPs; predicted %s %.3g against the budget %s (%s)\n",
                p.value("fp8_sites", 0), p.value("sites", 0), 100.0 * p.value("fp8_flop_share", 0.0),
                p.value("predicted_metric", std::string("error")).c_str(), p.value("predicted_error", 0.0),
                p.value("budget", std::string("?")).c_str(), p.value("within_budget", false) ? "within" : "OVER");
  }
  if (summary.precision.is_object() && summary.precision.contains("bf16_tables")) {
    // BF16 storage chosen by pin-precision's measured selection: what store-activations-bf16 and
    // store-tables-bf16 then held in BF16 (the lowered report, the lookups' table_storage).
    const auto& p = summary.precision;
    size_t chosen = p.value("bf16_activations", nlohmann::json::array()).size(), stored = 0;
    for (const nlohmann::json& set : p.value("bf16_activations_lowered", nlohmann::json::array()))
      stored += set.value("stored", false);
    std::printf("  BF16       %zu of %zu chosen activation sets held in BF16, %zu lookups read BF16 tables\n", stored,
                chosen, summary.bf16_table_lookups);
  }
  if (!summary.calibration_note.empty()) std::printf("  note       %s\n", summary.calibration_note.c_str());
  std::printf("  weights    %.2f MB before, %.2f MB after\n", weight_bytes_before / 1e6, summary.weight_bytes / 1e6);
}

/// Loads the written model on the CUDA runtime and runs the first calibration batch there and on
/// the CPU runtime: a model that would not plan on the GPU (an op without a CUDA kernel, say)
/// fails here, at compile time, rather than in serving. Returns a one-line account.
Result<std::string> check_on_cuda(const std::filesystem::path& model, const std::string& calibration) {
  EngineOptions options;
  options.device = Device::kCuda;
  auto gpu = Engine::load_file(model, options);
  if (!gpu) return gpu.status();
  if (calibration.empty()) return std::string("ok: loads on the GPU (no --calib data to run)");
  LOKA_ASSIGN_OR_RETURN(const DataSetReader reader, DataSetReader::open(calibration));
  if (reader.size() == 0) return std::string("ok: loads on the GPU (no calibration batch to run)");
  LOKA_ASSIGN_OR_RETURN(const DataSet data, reader.read(0));
  auto cpu = Engine::load_file(model);
  if (!cpu) return cpu.status();
  std::vector<std::string> names;
  for (const TensorInfo& info : (*gpu)->inputs()) names.push_back(info.name);
  LOKA_ASSIGN_OR_RETURN(const std::vector<Tensor> inputs, order_inputs(data, names));
  LOKA_ASSIGN_OR_RETURN(const std::vector<Tensor> expected, (*cpu)->new_session()->run(inputs));
  LOKA_ASSIGN_OR_RETURN(const std::vector<Tensor> actual, (*gpu)->new_session()->run(inputs));
  double worst = 0.0;
  for (size_t o = 0; o < expected.size() && o < actual.size(); ++o) {
    if (expected[o].dtype() != DType::kFloat32 || actual[o].shape() != expected[o].shape()) continue;
    for (int64_t i = 0; i < expected[o].element_count(); ++i)
      worst = std::max(worst, static_cast<double>(std::fabs(actual[o].data<float>()[i] - expected[o].data<float>()[i])));
  }
  std::ostringstream text;
  text << "ok: ran " << reader.location(0).filename().string() << " on the GPU, max |GPU - CPU| = " << worst;
  return text.str();
}

int main_checked(int argc, char** argv) {
  const cli::ArgumentParser parser = make_parser();
  cli::ParsedArguments args;
  if (auto exit_code = cli::parse_or_exit_code(parser, argc, argv, args)) return *exit_code;
  if (args.has("--list-passes")) {
    list_passes();
    return 0;
  }
  if (args.positionals().empty()) return cli::usage_error(kProgram, "missing MODEL (see --help)");
  if (!args.has("--output")) return cli::usage_error(kProgram, "missing -o OUT.onnx (see --help)");
  const std::filesystem::path model_path = args.positionals()[0];
  const std::filesystem::path output_path = args.value("--output");

  const PassRegistry& registry = PassRegistry::builtin();
  auto pipeline = parse_pipeline(args.value("--pipeline"), registry);
  if (!pipeline) return cli::usage_error(kProgram, pipeline.status().message());
  if (!args.value("--print-ir-after").empty() && !registry.find(args.value("--print-ir-after")))
    return cli::usage_error(kProgram, "--print-ir-after: unknown pass '" + args.value("--print-ir-after") + "'");
  const std::string resolved = print_pipeline(*pipeline, registry, /*with_defaults=*/true);
  for (const PipelineEntry& entry : *pipeline)
    if (entry.pass == "probe" && !args.has("--calib"))
      return cli::usage_error(kProgram, "the probe pass needs calibration data: --calib DATA (or --pipeline without probe)");
  // Read only by late passes, so checked here: a typo must not cost a Probe's minutes first.
  if (auto budget = probe::parse_budget(args.value("--budget")); !budget)
    return cli::usage_error(kProgram, budget.status().message());
  if (Status pins = check_pin_rules(args.values("--pin")); !pins.is_ok())
    return cli::usage_error(kProgram, pins.message());

  g_crash_note = "model: " + std::filesystem::absolute(model_path).string() + "\npipeline: " + resolved + "\n";
  std::signal(SIGSEGV, on_crash);
  std::signal(SIGABRT, on_crash);
  std::signal(SIGFPE, on_crash);

  CompileSettings settings;
  settings.calibration_data = args.value("--calib");
  settings.budget = args.value("--budget");
  settings.device = args.value("--device");
  settings.pin_rules = args.values("--pin");
  settings.show_progress = !args.has("--quiet") && ::isatty(STDERR_FILENO);

  // Loading and writing are timed beside the passes: with gigabytes of tables they were most of
  // a warm run, and invisible in the pass table.
  const auto start = std::chrono::steady_clock::now();
  const auto since = [](std::chrono::steady_clock::time_point from) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - from).count();
  };
  auto graph = load_input(model_path);
  if (!graph) return cli::runtime_error(kProgram, graph.status().message());
  const double load_seconds = since(start);
  const size_t weight_bytes_before = summarize(**graph).weight_bytes;

  PassManagerOptions manager_options;
  manager_options.verify_each = !args.has("--no-verify");
  manager_options.print_ir_after = args.value("--print-ir-after");
  manager_options.print_ir_after_change = args.has("--print-ir-after-change");
  // The Probe's and pin-precision's results are reused from the pass cache when nothing they
  // depend on changed (passes/pass_cache.h; LOKA_PASS_CACHE=off disables it).
  if (auto cache_dir = default_pass_cache_dir()) manager_options.cache_dir = *cache_dir;
  if (!args.has("--quiet")) manager_options.log = &std::cerr;
  PassManager manager(registry, manager_options);
  const auto passes_start = std::chrono::steady_clock::now();
  auto records = manager.run(**graph, *pipeline, settings);
  const double passes_seconds = since(passes_start);
  if (!records) return cli::runtime_error(kProgram, model_path.string() + ": " + records.status().message());

  if (args.value("--format") == "qdq") {
    if (Status status = lower_to_qdq(**graph); !status)
      return cli::runtime_error(kProgram, model_path.string() + ": --format qdq: " + status.message());
    // The dispatch plan chose kernels for the ai.loka ops the lowering replaced.
    (*graph)->metadata.erase("loka.kernels");
  }
  (*graph)->metadata["loka.pipeline"] = resolved;
  const auto write_start = std::chrono::steady_clock::now();
  if (Status status = onnx_io::write_model_file(**graph, output_path); !status)
    return cli::runtime_error(kProgram, status.message());
  const double write_seconds = since(write_start);
  const double seconds = since(start);

  std::string device_check;
  if (settings.device == "cuda" && args.value("--format") != "qdq") {
    auto checked = check_on_cuda(output_path, settings.calibration_data);
    if (!checked) return cli::runtime_error(kProgram, checked.status().message());  // names the model and device
    device_check = *checked;
  }

  const Summary summary = summarize(**graph);
  // A --pin that matches no site pins nothing: say so even under --quiet (a mistyped node name
  // would otherwise pass unnoticed). Site names: loka-inspect on the output.
  if (summary.precision.is_object())
    for (const nlohmann::json& rule : summary.precision.value("pins_matching_no_site", nlohmann::json::array()))
      std::fprintf(stderr, "%s: warning: --pin '%s' matched no candidate site (loka-inspect %s lists them)\n", kProgram,
                   rule.get<std::string>().c_str(), output_path.string().c_str());
  if (!args.has("--quiet")) {
    std::printf("loka-opt: %s -> %s in %.2f s\n", model_path.string().c_str(), output_path.string().c_str(), seconds);
    std::printf("  pipeline   %s\n", resolved.c_str());
    std::printf("  stages     load %.3f s, passes %.3f s, write %.3f s\n", load_seconds, passes_seconds, write_seconds);
    for (const PassRunRecord& record : *records) {
      std::printf("  %-22s %8.3f s  %s%s", record.pass.c_str(), record.seconds, record.changed ? "changed" : "unchanged",
                  record.cached ? " (stored result)" : "");
      for (const auto& [name, value] : record.statistics) std::printf("  %s=%g", name.c_str(), value);
      std::printf("\n");
    }
    print_summary(summary, weight_bytes_before);
    if (!device_check.empty()) std::printf("  cuda check %s\n", device_check.c_str());
  }
  if (args.has("--report")) {
    nlohmann::json report = {{"model", model_path.string()},   {"output", output_path.string()},
                             {"pipeline", resolved},           {"seconds", seconds},
                             {"load_seconds", load_seconds},   {"passes_seconds", passes_seconds},
                             {"write_seconds", write_seconds},
                             {"weight_bytes_before", weight_bytes_before},
                             {"weight_bytes_after", summary.weight_bytes},
                             {"sites", summary.sites},         {"safe_sites", summary.safe},
                             {"unsafe_sites", summary.unsafe}, {"undecided_sites", summary.undecided},
                             {"safe_flop_share", summary.site_flops > 0 ? summary.safe_flops / summary.site_flops : 0.0},
                             {"precision", summary.precision}};
    for (const PassRunRecord& record : *records)
      report["passes"].push_back({{"pass", record.pass}, {"changed", record.changed}, {"seconds", record.seconds},
                                  {"cached", record.cached}, {"statistics", record.statistics}});
    std::ofstream out(args.value("--report"));
    out << report.dump(2) << "\n";
    if (!out) return cli::runtime_error(kProgram, "cannot write report '" + args.value("--report") + "'");
  }
  return 0;
}

}  // namespace
}  // namespace loka

int main(int argc, char** argv) { return loka::cli::guarded_main(loka::kProgram, loka::main_checked, argc, argv); }
