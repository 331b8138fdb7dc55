// ============================================================================
// kernels/cuda/small_m_tiling.h — how LoKA's small-M FP8 GEMM
// (small_m_gemm.h) splits a problem into CTAs, and how many rows it takes.
//
// Plain C++ (no CUDA headers): the registry's can_implement and the CPU cost
// model (kernels/registry) read the same numbers as the kernel, so a modelled
// plan counts the CTAs that will run and refuses what the kernel refuses.
//
// A CTA is kSmallMWarps warps; each warp owns kSmallMColumnsPerWarp output
// columns (weight rows) and all of the CTA's output rows, so one weight row
// is read once per CTA and feeds small_m_rows_per_cta(M) rows of sums.
// ============================================================================
#pragma once

#include <cstdint>

namespace loka::cuda {

/// The most output rows (M over the whole batch) the kernel takes. Its sums are SIMT FP32 (about
/// 1/30 of the FP8 tensor-core rate) and each 16-row tile reads W again (from L2): at 256 rows a
/// 1024x1024 GEMM is already modelled slower than quantize + cuBLASLt's FP8 GEMM (14.1 against
/// 9.3 µs, kernels/registry/cost_model.h), and larger GEMMs only widen the gap. 256 still covers
/// the serving batches (1-256 rows) whose cuBLASLt path is two launch-bound kernels.
inline constexpr int64_t kSmallMMaxRows = 256;

/// Warps per CTA (256 threads): enough to stage the activation quickly and to hide load latency.
inline constexpr int kSmallMWarps = 8;
/// Output columns a warp accumulates at once: each activation value read from shared memory
/// feeds this many FMAs, and each weight code kRows of them.
inline constexpr int kSmallMColumnsPerWarp = 4;
inline constexpr int kSmallMColumnsPerCta = kSmallMWarps * kSmallMColumnsPerWarp;

/// Output rows one CTA computes for an M-row problem (1, 2, 4, 8 or 16). Up to 8 rows, the
/// smallest power of two that holds them (no idle accumulators); up to 64 rows, 8-row tiles, so
/// narrow layers still spread over many CTAs; beyond, 16-row tiles halve the L2 re-reads of W.
constexpr int small_m_rows_per_cta(int64_t m) {
  if (m <= 1) return 1;
  if (m <= 2) return 2;
  if (m <= 4) return 4;
  if (m <= 64) return 8;
  return 16;
}

}  // namespace loka::cuda
