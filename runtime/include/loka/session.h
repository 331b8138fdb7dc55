// ============================================================================
// loka/session.h — one thread's handle for running an Engine.
//
// A Session keeps a pool of buffers: each intermediate is released after its
// last reader and its storage reused by later nodes, so a steady-state run
// with the same shapes allocates nothing new. Not thread-safe: one per thread.
// ============================================================================
#pragma once

#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "loka/observer.h"
#include "loka/status.h"
#include "loka/tensor.h"

namespace loka {

class Engine;
class BufferPool;
class DeviceSession;

/// A tensor in device memory, not owned: inputs the caller placed there, or
/// outputs a CUDA Session holds (valid until its next run).
struct DeviceView {
  DType dtype = DType::kUndefined;
  Shape shape;
  void* data = nullptr;
};

class Session {
 public:
  explicit Session(const Engine& engine);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Runs the model. `inputs` follow Engine::inputs() order. Returns the outputs in
  /// Engine::outputs() order; they stay valid after later runs.
  Result<std::vector<Tensor>> run(std::span<const Tensor> inputs);
  /// Runs the model and returns only the outputs at positions `wanted` of Engine::outputs(),
  /// in that order (each position once at most). A CUDA Session copies only those to the
  /// host: the Probe reads one tapped value per run out of a model with many.
  Result<std::vector<Tensor>> run_selected(std::span<const Tensor> inputs, std::span<const size_t> wanted);
  /// Runs with inputs given by name (any order; all required inputs present).
  Result<std::vector<Tensor>> run(const std::vector<std::pair<std::string, Tensor>>& named_inputs);

  /// Installs hooks called around every node (nullptr removes them). Not owned.
  void set_observer(Observer* observer) { observer_ = observer; }

  /// Bytes currently held by the buffer pool (for memory-flatness checks).
  size_t pooled_bytes() const;

  // ---- CUDA engines ----
  /// Runs on inputs already in device memory (same order and checks as run); the
  /// work is enqueued on cuda_stream() and the call returns without waiting. The
  /// outputs are views into this Session's arena, valid until its next run; wait
  /// on the stream before reading them. Errors the device flags (out-of-range
  /// embedding ids) are reported by run(), which waits.
  Result<std::vector<DeviceView>> run_on_device(std::span<const DeviceView> inputs);
  /// The Session's cudaStream_t (null for CPU engines).
  void* cuda_stream() const;
  /// Device bytes this Session holds: arenas, staging and workspace (0 on the CPU).
  size_t device_bytes() const;

 private:
  const Engine& engine_;
  Observer* observer_ = nullptr;
  std::unique_ptr<BufferPool> pool_;
  std::unique_ptr<DeviceSession> device_;
  Status device_status_ = Status::ok();  ///< why device_ is missing on a CUDA engine
};

}  // namespace loka
