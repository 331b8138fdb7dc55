// ============================================================================
// kernels/cuda/norm_autotune.h — time and check every registry candidate of
// one norm problem on this GPU (what the Dispatch pass measures for norms).
//
// For a key and rows: synthetic inputs (normal activations with a per-row
// offset, so the mean matters; Scale around 1, small B; a normal residual);
// the reference is the CPU row arithmetic (kernels/cpu/layer_norm.h) on the
// first rows. Each candidate (LoKA's kernel, cuDNN engine configurations
// 0..cudnn_engines-1 where the graph builds) is run once for its relative L2
// error against the reference (an FP8 output decoded and times Y_scale), then
// timed as kernels/cuda/autotune_timing.h does (graphs, X and Y rotated,
// medians, close winners re-timed; the residual is one buffer all sets share,
// as the GEMM autotuner's, so part of it may sit in L2 for every candidate
// alike). Candidates that do not build here are left out.
// ============================================================================
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cuda/autotune_timing.h"
#include "kernels/registry/norm_kernel_key.h"
#include "loka/status.h"

namespace loka::cuda {

struct NormAutotuneOptions {
  int cudnn_engines = kernels::kOfferedCudnnNormEngines;  ///< 0: LoKA's kernel only
  float epsilon = 1e-5f;
  int warmup = 3;
  int repeats = 15;                        ///< timed launches; the median is kept
  int refine_rounds = 2;                   ///< rounds for the close winners
  size_t rotate_bytes = size_t{96} << 20;  ///< input sets rotated through at least this much memory
  uint64_t seed = 1;
  TimingHold hold_gpu_for_timing;          ///< held around each timing (autotune_timing.h)
};

struct NormMeasurement {
  kernels::NormCandidate candidate;
  double median_us = 0;
  double rel_error = 0;  ///< relative L2 of the output against the CPU reference
  int samples = 0;
};

/// Measures every viable candidate of `key` at `shape`, in registry order.
Result<std::vector<NormMeasurement>> autotune_norm(const kernels::NormKey& key, const kernels::NormShape& shape,
                                                   const NormAutotuneOptions& options = {});

}  // namespace loka::cuda
