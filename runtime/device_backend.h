// ============================================================================
// runtime/device_backend.h — what an Engine and a Session need from a device.
//
// The CPU path runs the ExecutionPlan directly (runtime/cpu_executor.h). A
// device backend adds state per Engine (uploaded weights, the shapes of every
// batch bucket) and per Session (stream, arena, planned ops, CUDA graphs).
// Both sit behind these interfaces so the public headers and a CPU-only build
// never see CUDA types; runtime/cuda/ implements them, and a build without
// CUDA gets device_backend_none.cc, which says why it cannot.
// ============================================================================
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "loka/engine.h"
#include "loka/session.h"
#include "loka/status.h"
#include "loka/tensor.h"

namespace loka {

class DeviceModel {
 public:
  virtual ~DeviceModel() = default;
};

class DeviceSession {
 public:
  virtual ~DeviceSession() = default;
  /// Host inputs in, host outputs out (synchronises with the stream).
  virtual Result<std::vector<Tensor>> run(std::span<const Tensor> inputs) = 0;
  /// As run, returning (and copying to the host) only the outputs at `wanted`, in that order.
  virtual Result<std::vector<Tensor>> run_selected(std::span<const Tensor> inputs, std::span<const size_t> wanted) = 0;
  /// Device inputs in, device views out, enqueued without synchronising.
  virtual Result<std::vector<DeviceView>> run_on_device(std::span<const DeviceView> inputs) = 0;
  virtual void* stream() const = 0;
  /// Device bytes this Session holds (arenas, staging): flat in steady state.
  virtual size_t device_bytes() const = 0;
  /// The arena of the bucket for `batch` (>= 1) at its peak, planning the bucket if needed.
  virtual Result<ArenaReport> arena_report(int64_t batch) = 0;
  /// The median device time of each step of the execution plan over `runs` runs of `inputs` after
  /// one untimed run, its nodes enqueued one by one with events between them (Session::profile_nodes).
  virtual Result<std::vector<double>> profile_steps(std::span<const Tensor> inputs, int runs) = 0;
};

/// The Engine-wide device state for `engine` (whose CPU plan is built).
Result<std::shared_ptr<const DeviceModel>> create_device_model(const Engine& engine);
/// A Session's device state.
Result<std::unique_ptr<DeviceSession>> create_device_session(const Engine& engine, const DeviceModel& model);

}  // namespace loka
