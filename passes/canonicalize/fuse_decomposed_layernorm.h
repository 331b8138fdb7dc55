// ============================================================================
// passes/canonicalize/fuse_decomposed_layernorm.h —
// `fuse-decomposed-layernorm`: the LayerNorm older exporters spell out in
// primitives becomes one LayerNormalization (opset 17), the node Mods fuses
// FP8 quantization into.
//
//       ┌───────────────────────────┐
//   x ──┴▶ ReduceMean ─▶ Sub(x, ·) ─┬─▶ Pow(·, 2) ─▶ ReduceMean ─▶ Add(·, eps) ─▶ Sqrt ─┐
//                                   │   (or Mul(d, d))                                 │
//                                   └─▶ Div(d, ·) ◀────────────────────────────────────┘
//                                       (or Mul(d, Reciprocal(·)))
//                                        └─▶ [Mul(·, gamma)] ─▶ [Add(·, beta)] ─▶ y
//   ==>  y = LayerNormalization(x, gamma, beta) {axis = -k, epsilon = eps}
//
// Matches when both ReduceMeans reduce the same trailing k dims of x with
// keepdims=1 (axes as attribute or constant input), x is FP32, the
// normalised dims are static, eps and the exponent 2 are one-element
// constants, every intermediate has no reader outside the pattern, and gamma
// / beta (optional; either operand order) are FP32 constants that broadcast to
// the normalised dims without growing x's shape (they are stored with exactly
// the normalised shape; a missing gamma becomes ones). A gamma or beta that
// does not fit stays a separate Mul/Add after the LayerNormalization.
//
// Requires: types (infer-shapes) for ranks and the normalised dims.
// LayerNormalization needs ai.onnx opset >= 17: when matches exist in an
// older graph the pass raises it with upgrade_opset (all or nothing); when
// the graph cannot be upgraded the pass changes nothing and counts
// "skipped-opset-not-upgradable". Guarantees: y keeps its name and type; the
// LayerNormalization takes the first ReduceMean's node name. Does not: fuse
// RMSNorm-like or variance-via-ReduceSumSquare variants.
// ============================================================================
#pragma once

#include <memory>

#include "passes/pass.h"

namespace loka {

PassInfo fuse_decomposed_layernorm_pass_info();
std::unique_ptr<Pass> make_fuse_decomposed_layernorm_pass();

}  // namespace loka
