// ============================================================================
// runtime/cuda/device_session.h — one thread's GPU execution of an Engine.
//
// Per batch bucket, planned on the first run that needs it: a DeviceOp per
// node that does device work, one arena holding every activation (offsets
// from runtime/arena_plan.h; view ops alias their input), the host-computed
// values the ops read uploaded once, pinned staging for inputs and outputs,
// and a CUDA graph of the whole step sequence. A steady-state run copies the
// inputs in, launches the graph and copies the outputs out: no allocation.
// Batches smaller than the bucket are padded (zero rows) and sliced back.
// ============================================================================
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <span>
#include <vector>

#include "runtime/cuda/device_buffer.h"
#include "runtime/cuda/device_model.h"
#include "runtime/cuda/device_op.h"
#include "runtime/device_backend.h"

namespace loka::cuda {

/// cuBLASLt workspace per Session (ARCHITECTURE.md: 32 MiB, 256-byte aligned).
inline constexpr size_t kWorkspaceBytes = size_t{32} << 20;

class CudaDeviceSession final : public DeviceSession {
 public:
  static Result<std::unique_ptr<CudaDeviceSession>> create(const Engine& engine, const CudaDeviceModel& model);
  ~CudaDeviceSession() override;

  Result<std::vector<Tensor>> run(std::span<const Tensor> inputs) override;
  Result<std::vector<Tensor>> run_selected(std::span<const Tensor> inputs, std::span<const size_t> wanted) override;
  Result<std::vector<DeviceView>> run_on_device(std::span<const DeviceView> inputs) override;
  void* stream() const override { return stream_; }
  size_t device_bytes() const override;
  Result<ArenaReport> arena_report(int64_t batch) override;
  Result<std::vector<double>> profile_steps(std::span<const Tensor> inputs, int runs) override;

 private:
  struct Bucket;
  CudaDeviceSession(const Engine& engine, const CudaDeviceModel& model) : engine_(engine), model_(model) {}
  Result<Bucket*> bucket_for(int64_t batch);
  Result<std::unique_ptr<Bucket>> plan_bucket(size_t index);
  /// Enqueues every step; with `step_ends` (one event per step), records step s's event after its work.
  Status enqueue_steps(const Bucket& bucket, std::span<const cudaEvent_t> step_ends = {}) const;
  Status launch(Bucket& bucket);
  Status check_error_flags(const Bucket& bucket) const;
  /// Copies the error flags back, waits for the stream, and reports the first flagged node.
  Status wait_and_check_error_flags(Bucket& bucket);
  /// A run's bucket with host `inputs` (checked) copied into its input slots, padding rows zeroed.
  struct StagedRun {
    Bucket* bucket = nullptr;
    int64_t batch = 0;  ///< the rows asked for (the bucket may hold more)
  };
  Result<StagedRun> stage_host_inputs(std::span<const Tensor> inputs);

  const Engine& engine_;
  const CudaDeviceModel& model_;
  cudaStream_t stream_ = nullptr;
  DeviceBuffer workspace_;
  std::vector<std::unique_ptr<Bucket>> buckets_;  ///< by bucket index, planned lazily
};

}  // namespace loka::cuda
