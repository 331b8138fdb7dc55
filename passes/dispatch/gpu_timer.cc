// ============================================================================
// passes/dispatch/gpu_timer.cc — wiring the autotuner into the perf-DB timer.
// ============================================================================
#include "passes/dispatch/gpu_timer.h"

#include <algorithm>
#include <filesystem>

#include "passes/dispatch/file_lock.h"

#if LOKA_HAVE_CUDA
#include "kernels/cuda/device.h"
#include "kernels/cuda/gemm_autotune.h"
#include "kernels/cuda/norm_autotune.h"
#endif

namespace loka::dispatch {

#if LOKA_HAVE_CUDA

std::string gpu_unavailable_reason() { return cuda::device_unavailable_reason(); }

Result<DeviceFingerprint> gpu_fingerprint() {
  LOKA_ASSIGN_OR_RETURN(const cuda::TuningDevice device, cuda::tuning_device());
  return DeviceFingerprint{device.gpu, device.driver, device.cublaslt};
}

/// The lock every LoKA process holds while it times kernels on this GPU (file_lock.h says why):
/// one file per physical GPU, in the temporary folder every user of the machine shares.
Result<std::filesystem::path> gpu_timing_lock_path() {
  LOKA_ASSIGN_OR_RETURN(const cuda::TuningDevice device, cuda::tuning_device());
  std::error_code error;
  std::filesystem::path folder = std::filesystem::temp_directory_path(error);
  if (error) folder = "/tmp";
  std::string name = "loka-gpu-" + device.pci_bus_id + ".timing.lock";
  std::replace(name.begin(), name.end(), ':', '-');
  return folder / name;
}

/// What the autotuners hold around each timing: the GPU's timing lock; a wait counts in `use`.
cuda::TimingHold gpu_timing_hold(const std::filesystem::path& lock_path, PerfDbUse& use) {
  return [lock_path, &use]() -> std::shared_ptr<void> {
    auto lock = std::make_shared<FileLock>(lock_path);
    use.timing_waits += lock->waited();
    return lock;
  };
}

Result<std::unique_ptr<GemmTimer>> make_gpu_timer(PerfDb& db, PerfDbUse& use, const GpuTimerOptions& options) {
  LOKA_ASSIGN_OR_RETURN(DeviceFingerprint device, gpu_fingerprint());
  LOKA_ASSIGN_OR_RETURN(const std::filesystem::path lock_path, gpu_timing_lock_path());
  cuda::AutotuneOptions tune;
  tune.max_algorithms = options.max_algorithms;
  tune.fast_accum = options.fast_accum;
  tune.repeats = options.repeats;
  tune.split_k = all_candidates().split_k;
  tune.tiles = all_candidates().tiles;
  tune.cudnn_engines = options.cudnn_engines;
  tune.tanh_gelu = all_candidates().tanh_gelu;
  tune.small_m = all_candidates().small_m;
  tune.hold_gpu_for_timing = gpu_timing_hold(lock_path, use);
  MeasureFn measure = [tune](const kernels::GemmKey& key,
                             const kernels::GemmShape& shape) -> Result<std::vector<CandidateTiming>> {
    LOKA_ASSIGN_OR_RETURN(const std::vector<cuda::GemmMeasurement> measured, cuda::autotune_gemm(key, shape, tune));
    std::vector<CandidateTiming> out;
    for (const cuda::GemmMeasurement& m : measured) out.push_back({m.candidate, m.median_us, m.rel_error});
    return out;
  };
  // What a warm database answers follows the same options as what a cold one measures.
  kernels::CandidateOptions offered = all_candidates();
  offered.algorithms = options.max_algorithms;
  offered.fast_accum = options.fast_accum;
  offered.cudnn_engines = options.cudnn_engines;
  return make_perf_db_timer(db, std::move(device), std::move(measure), use, offered);
}

Result<std::unique_ptr<NormTimer>> make_gpu_norm_timer(PerfDb& db, PerfDbUse& use, const GpuTimerOptions& options) {
  LOKA_ASSIGN_OR_RETURN(DeviceFingerprint device, gpu_fingerprint());
  LOKA_ASSIGN_OR_RETURN(const std::filesystem::path lock_path, gpu_timing_lock_path());
  cuda::NormAutotuneOptions tune;
  tune.cudnn_engines = options.cudnn_norm_engines;
  tune.repeats = options.repeats;
  tune.hold_gpu_for_timing = gpu_timing_hold(lock_path, use);
  NormMeasureFn measure = [tune](const kernels::NormKey& key,
                                 const kernels::NormShape& shape) -> Result<std::vector<NormTiming>> {
    LOKA_ASSIGN_OR_RETURN(const std::vector<cuda::NormMeasurement> measured, cuda::autotune_norm(key, shape, tune));
    std::vector<NormTiming> out;
    for (const cuda::NormMeasurement& m : measured) out.push_back({m.candidate, m.median_us, m.rel_error});
    return out;
  };
  return make_perf_db_norm_timer(db, std::move(device), std::move(measure), use, options.cudnn_norm_engines);
}

#else

std::string gpu_unavailable_reason() { return "this build has no CUDA kernels (configured without nvcc or with LOKA_ENABLE_CUDA=OFF)"; }

Result<DeviceFingerprint> gpu_fingerprint() { return Status::error(gpu_unavailable_reason()); }

Result<std::unique_ptr<GemmTimer>> make_gpu_timer(PerfDb&, PerfDbUse&, const GpuTimerOptions&) {
  return Status::error(gpu_unavailable_reason());
}

Result<std::unique_ptr<NormTimer>> make_gpu_norm_timer(PerfDb&, PerfDbUse&, const GpuTimerOptions&) {
  return Status::error(gpu_unavailable_reason());
}

#endif

Result<bool> resolve_device_option(const std::string& device) {
  if (device != "auto" && device != "cpu" && device != "cuda")
    return Status::error("option device='" + device + "': expected auto, cpu or cuda");
  if (device == "cpu") return false;
  const std::string unavailable = gpu_unavailable_reason();
  if (device == "cuda" && !unavailable.empty()) return Status::error("device=cuda: " + unavailable);
  return unavailable.empty();
}

}  // namespace loka::dispatch
