// ============================================================================
// passes/canonicalize/fuse_decomposed_gelu.h — `fuse-decomposed-gelu`: the
// exact (erf) GELU exporters spell out in five elementwise ops becomes one
// Gelu (opset 20), one pass over the tensor instead of five.
//
//   x ─┬─▶ Div(x, √2) ─▶ Erf ─▶ Add(·, 1) ─▶ p           (or Mul(x, 1/√2))
//      │                                     │
//      └──────────▶ 0.5 · x · p, as any of:  ▼
//                   Mul(Mul(x, p), 0.5)        (TorchScript; or Div(·, 2))
//                   Mul(x, Mul(p, 0.5))        (dynamo)
//                   Mul(Mul(x, 0.5), p)
//   ==>  y = Gelu(x) {approximate = "none"}
//
// Matches when x is FP32, every constant is a one-element float constant
// that cannot grow x's rank (rank <= 1 or <= x's rank): √2 or 1/√2 within
// FP32 rounding (relative 1e-6), 1 and 0.5 (and 2 for the Div form) exactly;
// operands of Add and Mul in either order; every intermediate has exactly one
// reader (inside the pattern) and is not a graph output. x itself may have
// other readers.
//
// Requires: types (infer-shapes) for x's dtype and rank. Gelu needs ai.onnx
// opset >= 20: when matches exist in an older graph the pass raises it with
// upgrade_opset (all or nothing, as fuse-decomposed-layernorm does); when the
// graph cannot be upgraded it changes nothing and counts
// "skipped-opset-not-upgradable". Guarantees: y keeps its name, type and
// readers; the Gelu takes the Erf's node name; outputs equal the chain's up to
// FP32 rounding (the runtime's Gelu evaluates 0.5·x·(1 + erf(x·(1/√2)))).
// Does not: fuse the tanh approximation (approximate="tanh"), or chains whose
// scale constants differ (those are not GELU).
// ============================================================================
#pragma once

#include <memory>

#include "passes/pass.h"

namespace loka {

PassInfo fuse_decomposed_gelu_pass_info();
std::unique_ptr<Pass> make_fuse_decomposed_gelu_pass();

}  // namespace loka
