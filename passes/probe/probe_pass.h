// ============================================================================
// passes/probe/probe_pass.h — `probe`: calibrate, measure FP8 error per site, annotate.
//
// Requires: shape-inferred IR and calibration data (--calib). Runs the model
// through the runtime (loka::Engine/Session) — no executor of its own — in two
// streaming phases over the calibration batches:
//   1. amax calibration (`amax_batches` FP32 runs): activation statistics and
//      the static per-tensor scales of the e4m3_tensor recipe. The site operands
//      are tapped as model outputs (tapped_run.h), so this runs on the `device`
//      the error runs use, the GPU when there is one; weights and tables are
//      read from the graph;
//   2. error measurement, batch by batch: one FP32 reference run, then for
//      every site and recipe one run with only that site's inputs FP8-quantized
//      (emulated bit-exactly), giving the site's local error and its end-to-end
//      effect on the model outputs. A site's run replays the nodes before the
//      site from the reference run (Observer::replay_node: same inputs, same
//      values), so it costs the model from the site on, not the whole model.
//      Each figure is a mean with a Student-t 95%
//      interval over batches; the phase stops once every site's verdict is
//      decided (interval wholly below or above the site's share of the budget)
//      after `min_batches`, or at `batches`.
// Guarantees: rewrites nothing; writes the annotation document (see
// annotations.h) into the model's metadata. Memory is bounded by histograms
// and one batch's activations (the reference run's, kept for the replays).
// Does not: choose precisions (pin-precision does) or time kernels (dispatch).
// ============================================================================
#pragma once

#include <memory>

#include "passes/pass.h"

namespace loka {

PassInfo probe_pass_info();
std::unique_ptr<Pass> make_probe_pass();

}  // namespace loka
