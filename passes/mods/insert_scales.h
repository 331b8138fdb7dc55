// ============================================================================
// passes/mods/insert_scales.h — `insert-scales`: FP8 sites become ai.loka ops
// with FP8 initializers and their scales.
//
// Does, for every node whose annotation says "precision": "fp8_e4m3":
//
//   X ──┐                              X ─────────────────────┐
//   W ──┼─ Gemm / MatMul ─▶ Y   ==>    Wq (E4M3FN [N,K]) ─────┤
//   C ──┘                              W_scale (float [N]) ───┼─ ai.loka::QuantizedGemm ─▶ Y
//                                      B (float [N]) ─────────┤   {act_recipe}
//                                      X_scale (float []) ────┘   (X_scale: "tensor" recipe only)
//
//   Table ──┬─ Gather ─▶ Y      ==>    Table_q (E4M3FN [V,D]) ┐
//   Ids ────┘                          Row_scale ([V] or [1]) ┼─ ai.loka::QuantizedGather ─▶ Y
//                                      Ids ───────────────────┘
//
// Weights are quantized per output channel (scale = channel amax / 448),
// Gemm alpha folds into the weight scales and beta into the float bias; the
// e4m3_tensor recipe's activation scale is the Probe's calibrated
// stats.activation.scale_e4m3. A MatMul with a rank-3 activation maps too
// (QuantizedGemm flattens the leading dims). Embedding tables get one scale
// per row (e4m3_row) or one for the table (e4m3_tensor). Float weights left
// without readers are removed, so the model file shrinks (statistics
// weight-bytes-before/after). The new node keeps the old node's name and
// output value name (annotation keys and graph outputs stay valid) and its
// annotation gains "from": [old name]. Sets opset ai.loka = 1.
// Requires: annotations from pin-precision. Guarantees: FP8 only where the
// annotation says fp8_e4m3 — fp32/bf16 sites are untouched, with no Q/DQ
// around them; an fp8 site that cannot be lowered is an error naming it.
// Does not: fuse activations or producers (later Mods), choose kernels.
// ============================================================================
#pragma once

#include <memory>
#include <string>

#include "passes/ir/graph.h"
#include "passes/pass.h"

namespace loka {

/// Pass description: name "insert-scales", its statistics.
PassInfo insert_scales_pass_info();
/// A fresh `insert-scales` pass.
std::unique_ptr<Pass> make_insert_scales_pass();

/// Why insert-scales cannot lower `node` to an ai.loka FP8 op, or "" when it
/// can. pin-precision asks this so that it never selects what cannot be built.
std::string fp8_lowering_obstacle(const ir::Node& node);

}  // namespace loka
