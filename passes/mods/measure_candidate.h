// ============================================================================
// passes/mods/measure_candidate.h — the actual model error of a lowered graph
// on the calibration data, against the FP32 graph's outputs.
//
// pin-precision predicts a set of FP8 sites' combined error from per-site
// figures; the prediction is conservative by 5-15x on the zoo. This meter
// replaces the prediction by a measurement: it reads the calibration data
// sets once, runs the FP32 graph once for the reference outputs, and then
// runs each candidate graph over every data set on the CPU runtime.
// Metrics (pooled over all calibration samples):
//   rel_l2:  ||q - r||_2 / ||r||_2 over every float output;
//   max_abs: max |q - r| over every float output;
//   logloss: sum_i |logloss_i(q) - logloss_i(r)| / sum_i logloss_i(r) of the
//            first output against labels.pb (probe/metrics.h). Per-sample
//            differences do not cancel, so this bounds the drift of the mean
//            |logloss(q) - logloss(r)| / logloss(r) on any sample set; the
//            signed pooled drift alone lets a greedy search pick sets whose
//            errors cancel on the calibration samples only (on the zoo that
//            measured 0.002% on calibration and 0.03% on eval).
// Does not: quantize anything (callers lower the graph first).
// ============================================================================
#pragma once

#include <filesystem>
#include <memory>
#include <vector>

#include "loka/status.h"
#include "loka/tensor.h"
#include "passes/ir/graph.h"
#include "passes/probe/budget.h"

namespace loka {

/// Measures lowered graphs against one FP32 reference on calibration data.
class CandidateMeter {
 public:
  /// Reads every data set under `calibration` and runs `reference` on them.
  /// Errors name the data set or input at fault; a logloss metric needs labels.
  static Result<CandidateMeter> create(const ir::Graph& reference, const std::filesystem::path& calibration,
                                       probe::BudgetMetric metric);
  /// The metric of `candidate` (same inputs and outputs as the reference).
  Result<double> measure(const ir::Graph& candidate) const;
  /// Data sets measured on.
  size_t data_sets() const { return batches_.size(); }

 private:
  struct Batch {
    std::vector<Tensor> inputs;
    std::vector<Tensor> reference;  ///< FP32 outputs
    std::vector<float> labels;      ///< empty unless the metric is logloss
    std::vector<double> reference_logloss;  ///< per sample, of the FP32 outputs
  };
  /// Runs `graph` over every batch; `visit(batch, outputs)` sees each result.
  template <typename Visit>
  Status run_all(const ir::Graph& graph, const char* what, Visit&& visit) const;

  probe::BudgetMetric metric_ = probe::BudgetMetric::kRelL2;
  std::vector<std::string> input_names_;
  std::vector<Batch> batches_;
  double reference_logloss_ = 0;  ///< summed over every labelled sample
};

}  // namespace loka
