// ============================================================================
// passes/canonicalize/decompose_ops.h — `decompose-ops`: ops an exporter
// emits that LoKA's runtimes do not execute, rewritten into ops they do.
//
//   Clip(x, lo, hi)               → Min(Max(x, lo), hi)     (either bound optional;
//                                   opset < 11 bounds are attributes)
//   BatchNormalization(x, γ, β, μ, σ²) (inference: training_mode 0, one output)
//                                 → x · s + t,  s = γ / √(σ² + ε), t = β − μ · s
//                                   (constants folded here; s, t shaped [C, 1, ...]
//                                   so they broadcast along axis 1)
//   PRelu(x, slope)               → Max(x, 0) + Min(x, 0) · slope   (no Where: the
//                                   CUDA runtime has none)
//   HardSigmoid(x; α, β)          → Max(Min(x · α + β, 1), 0)
//   HardSwish(x)                  → x · Max(Min(x · 1/6 + 0.5, 1), 0)
//   Sum(a, b, ...) / Mean(...)    → ((a + b) + ...)  [/ N]
//   LeakyRelu(x; α)               → Max(x, 0) + Min(x, 0) · α   (the CUDA runtime has no
//                                   LeakyRelu kernel; equal to the CPU runtime's)
//   Split(x) → y₀, y₁, ...        → Slice(x) per output  (the CUDA runtime has no Split:
//                                   torch.split / chunk, e.g. a fused QKV projection)
//
// Rec models meet these through torch.clamp / F.normalize (Clip), BatchNorm1d
// in eval mode, PReLU (DIN-style rankers), Hardsigmoid/Hardswish gates and
// stacked sums; without this pass loka-opt stops at the first node the
// runtime cannot run. The rewrites apply the ops' ONNX formulas operation by
// operation, so they are exact (Max/Min keep a NaN x, as Clip does; a zero's
// sign may differ in PRelu), except BatchNormalization, which rounds once
// differently (x·s + t against (x − μ)/√(σ²+ε)·γ + β): within FP32 rounding.
// The last node of each rewrite keeps the original's name (the name
// annotations use) and its output the original value's name.
//
// Requires: the input's float32 type for PRelu, HardSigmoid, HardSwish, Mean
// and an opset < 11 Clip (infer-shapes). Does not: decompose a
// BatchNormalization in training mode, one with extra outputs, or one whose
// γ, β, μ, σ² are not constants; a Clip whose bounds are not scalars (ONNX
// requires scalars); a Split with a graph output or unknown piece sizes.
// Those are left, counted ("kept"), and the runtime names
// the node if it cannot run it.
// ============================================================================
#pragma once

#include <memory>

#include "passes/pass.h"

namespace loka {

PassInfo decompose_ops_pass_info();
std::unique_ptr<Pass> make_decompose_ops_pass();

}  // namespace loka
