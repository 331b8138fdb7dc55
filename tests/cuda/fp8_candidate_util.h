// ============================================================================
// tests/cuda/fp8_candidate_util.h — an FP8 registry candidate (cuBLASLt with
// an explicit tile, a cuDNN graph, LoKA's small-M kernel, ...) run through
// GemmKernel and checked element by element against the same arithmetic in
// double on the CPU.
// ============================================================================
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/registry/gemm_kernel_key.h"

namespace loka::testing {

/// The host operands of one QuantizedGemm problem (row-major; W stored [N,K]).
struct Fp8GemmOperands {
  std::vector<float> x;          ///< the FP32 activation (uploaded when the key's input is FP32)
  /// The activation's E4M3 codes: uploaded when the key's input is E4M3; for an FP32 activation,
  /// what quantizing it gives (for the reference; the candidate quantizes x itself).
  std::vector<uint8_t> x_codes;
  float x_scale = 1.0f;          ///< the static activation scale (tensor recipe, E4M3 input)
  std::vector<uint8_t> w_codes;  ///< [N,K]
  std::vector<float> w_scale;    ///< [N]
  std::vector<float> bias;       ///< [N] (read when the key has a bias)
  std::vector<float> residual;   ///< [M,N] (read when the key has a residual)
};

/// Plans `candidate` for `key` at `shape` with the operands' constants (weights, scales, bias,
/// X_scale), expecting planning to succeed, and runs it once on device copies: directly, or
/// (`in_graph`) captured in a CUDA graph and replayed as the runtime does. Returns Y, or nothing
/// after a failure (reported as one).
/// `y_row_pitch` > 0: Y planned with that row pitch (its slice of a Concat's output) into a
/// buffer of NaN; a value written between rows fails the test; the rows come back packed.
std::vector<float> run_fp8_candidate(const kernels::GemmCandidate& candidate, const kernels::GemmKey& key,
                                     const kernels::GemmShape& shape, const Fp8GemmOperands& operands,
                                     bool in_graph = false, int64_t y_row_pitch = 0);

/// Runs `candidate` for `key` (a QuantizedGemm: E4M3 weights with per-channel scales; an E4M3,
/// FP32 or BF16 activation; optional bias, ReLU or GELU, residual; Y, and the residual with it, in
/// FP32 or BF16 as key.output says) at `shape` on
/// random operands, expecting planning to succeed; returns how many outputs miss the reference
/// (the first few are reported as failures).
///
/// The operands are chosen so that every candidate computes the same exact products: FP32
/// and BF16 activations are E4M3 values times a power-of-two scale (the quantize kernel's division
/// is then exact), the bias is a BF16 value (cuBLASLt's FP8 kernels read BF16, cuDNN's FP32).
/// What remains is accumulation: Hopper's FP8 tensor cores keep about 14 significant bits in
/// their sums (tests/cuda/fp8_gemm_test.cc), so the bound is 2e-3 of Σ|x·w| times the scales.
size_t fp8_candidate_mismatches(const kernels::GemmCandidate& candidate, const kernels::GemmKey& key,
                                const kernels::GemmShape& shape, int64_t y_row_pitch = 0);

}  // namespace loka::testing
