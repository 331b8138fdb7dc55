// ============================================================================
// tests/cuda/fp8_candidate_util.h — an FP8 registry candidate (cuBLASLt with
// an explicit tile, a cuDNN graph, ...) run through GemmKernel and checked
// element by element against the same arithmetic in double on the CPU.
// ============================================================================
#pragma once

#include <cstddef>

#include "kernels/registry/gemm_kernel_key.h"

namespace loka::testing {

/// Runs `candidate` for `key` (a QuantizedGemm: E4M3 weights with per-channel scales; an E4M3
/// or FP32 activation with a per-tensor scale; optional bias, ReLU or GELU, residual) at `shape` on
/// random operands, expecting planning to succeed; returns how many outputs miss the reference
/// (the first few are reported as failures).
///
/// The operands are chosen so that every candidate computes the same exact products: FP32
/// activations are E4M3 values times a power-of-two scale (the quantize kernel's division is
/// then exact), the bias is a BF16 value (cuBLASLt's FP8 kernels read BF16, cuDNN's FP32).
/// What remains is accumulation: Hopper's FP8 tensor cores keep about 14 significant bits in
/// their sums (tests/cuda/fp8_gemm_test.cc), so the bound is 2e-3 of Σ|x·w| times the scales.
size_t fp8_candidate_mismatches(const kernels::GemmCandidate& candidate, const kernels::GemmKey& key,
                                const kernels::GemmShape& shape);

}  // namespace loka::testing
