// ============================================================================
// passes/dispatch/gpu_timer.h — the perf-DB timer backed by the GPU autotuner
// (kernels/cuda/gemm_autotune.h) when this build has CUDA and a GPU answers.
// ============================================================================
#pragma once

#include <memory>
#include <string>

#include "passes/dispatch/gemm_timer.h"
#include "passes/dispatch/norm_timer.h"

namespace loka::dispatch {

struct GpuTimerOptions {
  int max_algorithms = 8;
  bool fast_accum = false;
  int repeats = 15;
  int cudnn_engines = 0;  ///< cuDNN FP8 graph engine configurations timed per FP8 problem (dispatch{cudnn=N})
  /// cuDNN LayerNorm graph engine configurations timed per norm problem (dispatch{cudnn_norm=N})
  int cudnn_norm_engines = kernels::kOfferedCudnnNormEngines;
};

/// Empty when a GPU can tune here; otherwise why not (no CUDA in this build, no device).
std::string gpu_unavailable_reason();

/// A pass's `device` option (auto|cpu|cuda) resolved on this machine: true to use the GPU.
/// auto is the GPU when there is one; cuda without one, or another value, is an error.
Result<bool> resolve_device_option(const std::string& device);

/// This device's fingerprint (an error without a GPU).
Result<DeviceFingerprint> gpu_fingerprint();

/// A timer answering from `db` for this GPU, autotuning what is missing.
Result<std::unique_ptr<GemmTimer>> make_gpu_timer(PerfDb& db, PerfDbUse& use, const GpuTimerOptions& options);

/// The same for norm nodes (kernels/cuda/norm_autotune.h).
Result<std::unique_ptr<NormTimer>> make_gpu_norm_timer(PerfDb& db, PerfDbUse& use, const GpuTimerOptions& options);

}  // namespace loka::dispatch
