// ============================================================================
// passes/probe/drawn_labels.h — 0/1 labels drawn from the FP32 model's own
// click probabilities, for calibration data that comes without labels.pb.
//
// A logloss budget judges FP8 by the change of the logloss, which needs
// labels. A ranking model whose first output is a Sigmoid probability per
// sample says what its labels look like: y ~ Bernoulli(p_FP32). Labels drawn
// that way make every logloss statistic the Probe and pin-precision compute
// an estimate of what eval data would show, were the model calibrated — the
// expected drift is then KL(p_FP32 || p_FP8) whatever the draw, and the
// draw's spread stands in for an eval set's label noise. So `--budget auto`
// can be the logloss budget the model is judged by (0.02%) instead of
// falling back to a relative L2 error that says nothing about logloss.
// Draws are deterministic per data set (drawn_label_seed), so the Probe and
// pin-precision's measured selection see the same labels. Not for a model
// whose first output is anything but a probability per sample (a regression,
// a softmax over classes): first_output_is_probability says no there.
// ============================================================================
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "loka/tensor.h"
#include "passes/ir/graph.h"

namespace loka::probe {

/// True when the graph's first output is written by a Sigmoid and holds one value per sample
/// (rank 1, or every dim after the first known to be 1).
bool first_output_is_probability(const ir::Graph& graph);

/// The seed of calibration data set `index` (the same for every pass that draws).
uint64_t drawn_label_seed(size_t index);

/// One 0/1 label per value of `probabilities` (logits go through a sigmoid, as the logloss
/// metrics do), label 1 with that probability; deterministic for a seed on every platform.
std::vector<float> draw_labels(const Tensor& probabilities, uint64_t seed);

}  // namespace loka::probe
