// ============================================================================
// passes/mods/measure_candidate.h — the actual model error of a selection of
// FP8 sites on the calibration data, against the FP32 model's outputs.
//
// pin-precision predicts a set of FP8 sites' combined error from per-site
// figures; the prediction misses how the sites' errors combine (coherent
// shifts add up faster than independent noise: full-size Wukong, predicted
// 0.016%, measured +0.035% on eval, 2026-11-25). This meter replaces the
// prediction by a measurement. It runs the Probe's switched model
// (passes/probe/probe_model.h: the same operands quantized the same way the
// Probe measured them one at a time), on the GPU when there is one: a
// selection is one Mode vector, so an evaluation is one run per calibration
// set, with nothing re-lowered or re-loaded.
// Metrics (pooled over all calibration samples):
//   rel_l2:  ||q - r||_2 / ||r||_2 over every float output;
//   max_abs: max |q - r| over every float output;
//   logloss: |pooled drift|, relative to the FP32 logloss, of the first
//            output against labels.pb (or labels drawn from a Sigmoid output,
//            as the Probe drew them), with the per-sample spread of the change
//            so the caller can bound what an eval set will see (an eval set's
//            drift strays from the pooled one by noise that the pooled figure
//            alone hides: on the zoo, 0.002% pooled and 0.03% on eval). Until
//            2026-11-26 the worst calibration set's drift stood in for that
//            noise; it is a random draw of it, and selections fitted it (tiny
//            DHEN: 0.0082% measured, 0.0208% on eval).
// ============================================================================
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "loka/engine.h"
#include "loka/session.h"
#include "loka/status.h"
#include "loka/tensor.h"
#include "passes/ir/graph.h"
#include "passes/probe/budget.h"
#include "passes/probe/probe_model.h"

namespace loka {

/// A selection's error on the calibration data.
struct SelectionError {
  double value = 0;  ///< the metric (see the header comment)
  /// logloss: sqrt(mean over samples of (logloss change)^2) / (mean FP32 logloss): the spread
  /// of one sample's relative drift. An eval set of n samples strays from the expected drift
  /// by about sample_noise / sqrt(n). 0 for the other metrics.
  double sample_noise = 0;
  size_t samples = 0;  ///< logloss: labelled samples pooled (0 for the other metrics)
};

/// Measures selections of FP8 sites against one FP32 reference on calibration data.
class CandidateMeter {
 public:
  /// Builds the switched model of `reference` with `sites` (Mode order), loads it on `device`,
  /// reads every data set under `calibration` and runs the FP32 reference (Mode all zeros).
  /// Errors name the data set or input at fault; a logloss metric needs labels.
  static Result<CandidateMeter> create(const ir::Graph& reference, const std::vector<probe::SiteSwitches>& sites,
                                       const std::filesystem::path& calibration, probe::BudgetMetric metric,
                                       Device device);
  /// The error with site s running recipe mode[s] - 1 (0: FP32), every data set.
  Result<SelectionError> measure(std::span<const int32_t> mode);
  /// Data sets measured on.
  size_t data_sets() const { return batches_.size(); }

 private:
  struct Batch {
    std::vector<Tensor> inputs;     ///< the model's inputs, then Mode
    std::vector<Tensor> reference;  ///< FP32 model outputs
    std::vector<float> labels;      ///< empty unless the metric is logloss
    std::optional<uint64_t> label_seed;  ///< no labels.pb: draw them from the reference (drawn_labels.h)
    std::vector<double> reference_logloss;  ///< per sample, of the FP32 outputs
  };

  probe::BudgetMetric metric_ = probe::BudgetMetric::kRelL2;
  size_t sites_ = 0;
  std::vector<size_t> model_outputs_;  ///< output positions of the original model
  std::shared_ptr<const Engine> engine_;
  std::unique_ptr<Session> session_;
  std::vector<Batch> batches_;
};

}  // namespace loka
