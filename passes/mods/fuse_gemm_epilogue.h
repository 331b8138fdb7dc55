// ============================================================================
// passes/mods/fuse_gemm_epilogue.h — `fuse-gemm-epilogue`: the elementwise
// multiply and residual add after an FP8 GEMM become part of the GEMM.
//
// What: a QuantizedGemm whose only reader multiplies it elementwise by a
// tensor of its own shape (the DCN cross layer's x₀ ⊙ (x W + b)), adds a
// tensor of its own shape (a residual: x + Linear(x)), or both in that order
// (the whole cross layer x₀ ⊙ (x W + b) + x), takes those tensors as its
// Multiplier (input 5) and Residual (input 6) and writes the chain's result.
//
//        x ──▶ QuantizedGemm(x, W, Ws, B, xs) ──y──▶ Mul(y, x0) ──z──▶ Add(z, x) ──▶ out
//      becomes
//        x ──▶ QuantizedGemm(x, W, Ws, B, xs, x0, x) ──▶ out
//
// Why: on the GPU, QuantizedGemm already makes one pass over its output (the
// scale epilogue sm_90's cuBLASLt cannot fuse); the multiply and the add ride
// on that pass instead of two more kernels that read and write the output
// again. On the CPU the op performs the same float operations in the same
// order as the Mul and Add nodes, so the rewrite is bit-exact.
//
// Requires: the QuantizedGemm without inputs 5 and 6; each intermediate value
// read once and not a graph output; the other operand of Mul/Add float32 with
// exactly the output's shape, every dim known or named the same (no
// broadcasting: the op has none); Mul/Add in the ONNX domain. The chain's last
// value may be a graph output (the GEMM then writes it, under its name).
// Guarantees: the GEMM keeps its name; its annotation entry lists the Mul and
// Add names in "from"; the chain's last value keeps its name and readers.
// Does not: fuse a Mul after an Add (the op's order is multiply, then add),
// fuse into FP32 Gemm nodes (sites the Probe kept in FP32 have no ai.loka op),
// or fuse other elementwise ops (a Sub, a broadcast bias).
// ============================================================================
#pragma once

#include <memory>

#include "passes/pass.h"

namespace loka {

/// Name, summary, options and statistics of `fuse-gemm-epilogue`.
PassInfo fuse_gemm_epilogue_pass_info();
/// A fresh `fuse-gemm-epilogue` pass.
std::unique_ptr<Pass> make_fuse_gemm_epilogue_pass();

}  // namespace loka
