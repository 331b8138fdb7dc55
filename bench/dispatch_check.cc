// ============================================================================
// bench/dispatch_check.cc — on the GPU: is every dispatched GEMM kernel at
// least as fast as the best BF16 candidate, and does the model budget hold?
//
//   dispatch_check [--tolerance 0.05] [--repeats 31] MODEL.loka.onnx...
//
// MODEL is loka-opt output with a measured dispatch plan. For every GEMM node
// and bucket of the plan it re-derives the problem from the model, times all
// of the problem's candidates afresh (kernels/cuda/gemm_autotune.h: CUDA
// graphs, event pairs, inputs rotated past the L2, median), and prints one
// row: the dispatched kernel's time, the best BF16 candidate's time, their
// ratio and PASS (dispatched <= best BF16 x (1 + tolerance); the tolerance
// absorbs timing noise between two measurements), FAIL, or n/a (no BF16
// candidate: FP8 activations from LayerNormQuant, batched MatMuls). Then the
// model's budget line from model.dispatch. Exits 1 on any FAIL or budget
// overrun, 2 on bad input or no GPU.
// ============================================================================
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cuda/device.h"
#include "kernels/cuda/gemm_autotune.h"
#include "kernels/registry/kernel_plan.h"
#include "passes/dispatch/gemm_problems.h"
#include "passes/onnx/onnx_import.h"
#include "passes/probe/annotations.h"

namespace {

using nlohmann::json;

/// Checks one model; counts FAIL rows in `failures`. Returns 0, or 2 on bad input.
int check_model(const std::string& path, double tolerance, int repeats, size_t& failures) {
  auto graph = loka::onnx_io::import_model_file(path);
  if (!graph) {
    std::fprintf(stderr, "dispatch_check: %s: %s\n", path.c_str(), graph.status().message().c_str());
    return 2;
  }
  auto document = loka::read_annotations(**graph);
  if (!document || !(*document)["model"].contains("dispatch")) {
    std::fprintf(stderr, "dispatch_check: %s: no dispatch plan (run loka-opt with the dispatch pass)\n", path.c_str());
    return 2;
  }
  const json& summary = (*document)["model"]["dispatch"];
  const std::vector<int64_t> buckets = summary["buckets"].get<std::vector<int64_t>>();
  loka::cuda::AutotuneOptions options;
  options.repeats = repeats;
  std::printf("\n%s (plan: %s, %s)\n", path.c_str(), summary.value("source", "?").c_str(),
              summary.value("device", "?").c_str());
  std::printf("%-28s %6s %-22s %-44s %9s %-22s %9s %6s %s\n", "node", "batch", "shape", "dispatched", "us",
              "best bf16", "us", "ratio", "verdict");
  for (const loka::ir::Node* node : (*graph)->nodes()) {
    auto problem = loka::dispatch::describe_gemm(*node, buckets);
    if (!problem || !problem->reason.empty()) continue;
    const json& annotation = (*document)["nodes"][node->name()];
    for (const auto& [bucket, shape] : problem->shapes) {
      const std::string bucket_key = std::to_string(bucket);
      if (!annotation.contains("kernels") || !annotation["kernels"].contains(bucket_key)) {
        std::printf("%-28.28s %6lld no kernel in the plan\n", node->name().c_str(), static_cast<long long>(bucket));
        ++failures;
        continue;
      }
      const std::string dispatched = annotation["kernels"][bucket_key]["kernel"].get<std::string>();
      auto measured = loka::cuda::autotune_gemm(problem->key, shape, options);
      if (!measured) {
        std::printf("%-28.28s %6lld %s\n", node->name().c_str(), static_cast<long long>(bucket),
                    measured.status().message().c_str());
        ++failures;
        continue;
      }
      double t_dispatched = -1, t_bf16 = -1;
      std::string best_bf16 = "-";
      for (const loka::cuda::GemmMeasurement& m : *measured) {
        if (m.candidate.name() == dispatched) t_dispatched = m.median_us;
        if (m.candidate.precision == loka::kernels::GemmPrecision::kBf16 && (t_bf16 < 0 || m.median_us < t_bf16)) {
          t_bf16 = m.median_us;
          best_bf16 = m.candidate.name();
        }
      }
      std::string verdict = "n/a";
      double ratio = 0;
      if (t_dispatched < 0) {
        verdict = "FAIL (dispatched kernel did not run)";
        ++failures;
      } else if (t_bf16 > 0) {
        ratio = t_dispatched / t_bf16;
        verdict = ratio <= 1.0 + tolerance ? "PASS" : "FAIL";
        if (verdict == "FAIL") ++failures;
      }
      std::printf("%-28.28s %6lld %-22s %-44s %9.2f %-22s %9.2f %6.3f %s\n", node->name().c_str(),
                  static_cast<long long>(bucket), shape.to_string().c_str(), dispatched.c_str(), t_dispatched,
                  best_bf16.c_str(), t_bf16, ratio, verdict.c_str());
    }
  }
  if (summary.value("budget_known", false)) {
    const bool within = summary.value("within_budget", false);
    std::printf("budget %s: pin-precision + dispatch predicted %.4g (dispatch added %.3g): %s\n",
                summary.value("budget", "?").c_str(), summary.value("predicted_error", 0.0),
                summary.value("extra_error", 0.0), within ? "within" : "OVER");
    if (!within) ++failures;
  } else {
    std::printf("budget: the plan records none (no pin-precision annotations); dispatch added no error\n");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  double tolerance = 0.05;
  int repeats = 31;
  std::vector<std::string> models;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("usage: dispatch_check [--tolerance 0.05] [--repeats 31] MODEL.loka.onnx...\n");
      return 0;
    }
    if (arg == "--tolerance" || arg == "--repeats") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "dispatch_check: %s needs a value\n", arg.c_str());
        return 2;
      }
      const std::string value = argv[++i];
      char* end = nullptr;
      const double number = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end != '\0' || !(number >= 0)) {
        std::fprintf(stderr, "dispatch_check: %s '%s' is not a non-negative number\n", arg.c_str(), value.c_str());
        return 2;
      }
      if (arg == "--tolerance")
        tolerance = number;
      else
        repeats = std::max(1, static_cast<int>(number));
      continue;
    }
    models.push_back(arg);
  }
  if (models.empty()) {
    std::fprintf(stderr, "dispatch_check: no model given (--help)\n");
    return 2;
  }
  if (const std::string reason = loka::cuda::device_unavailable_reason(); !reason.empty()) {
    std::fprintf(stderr, "dispatch_check: %s\n", reason.c_str());
    return 2;
  }
  std::printf("device: %s; PASS = dispatched <= best BF16 x %.2f\n", loka::cuda::device_description().c_str(),
              1.0 + tolerance);
  size_t failures = 0;
  for (const std::string& model : models)
    if (const int rc = check_model(model, tolerance, repeats, failures); rc != 0) return rc;
  std::printf("\n%zu failure(s)\n", failures);
  return failures == 0 ? 0 : 1;
}
