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

/// What a CUDA Session's activation arena for one batch bucket must hold at once: the step at
/// which the most of its buffers are alive together, and those buffers. For finding where a
/// bucket's memory goes (the arena is planned so that buffers alive at different steps share
/// bytes, so this peak, not the sum of all activations, is what it costs).
struct ArenaBuffer {
  std::string name;  ///< the value (a view's or a Concat input's bytes count under the buffer they live in), or "scratch of NODE"
  size_t bytes = 0;
};
struct ArenaReport {
  int64_t batch = 0;          ///< the bucket's batch size (the planned size a run of the asked batch uses)
  size_t arena_bytes = 0;     ///< the allocation (aligned, packed greedily: at or above the peak)
  size_t peak_bytes = 0;      ///< the most bytes alive at one step: no arena can be smaller
  std::string peak_node;      ///< the node running then ("" when that is before the first node)
  std::vector<ArenaBuffer> live_at_peak;  ///< largest first
};

/// How long one node of the execution order took (Session::profile_nodes).
struct NodeTiming {
  std::string name;
  std::string op_type;
  std::string domain;
  double median_ms = 0;  ///< over the timed runs; 0 for a node that does no work there (a view on the GPU)
  /// "domain::op_type", or op_type alone in the ONNX domain.
  std::string qualified_op() const { return domain.empty() ? op_type : domain + "::" + op_type; }
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
  /// The arena of the bucket a run of `batch` rows uses, at its peak (plans the bucket if no run
  /// has). CUDA engines only: the CPU runtime allocates each value from a pool instead.
  Result<ArenaReport> arena_report(int64_t batch);

  /// Where a run's time goes: runs the model on `inputs` once untimed, then `runs` (>= 1) more
  /// times, timing every node, and returns the nodes in execution order with their median times.
  /// A CUDA engine enqueues the steps one by one with device events between them (not as its CUDA
  /// graph), all queued before the device starts them, so they run back to back: a node's time is
  /// from the end of the node before to its own end, kernels and the gaps between them. The CPU
  /// runtime times each node's kernel with a steady clock (the observer, if any, is not called
  /// meanwhile).
  Result<std::vector<NodeTiming>> profile_nodes(std::span<const Tensor> inputs, int runs);
  /// The most runs profile_nodes takes (it keeps every run's time of every node until the medians).
  static constexpr int kMaxProfileRuns = 100000;

 private:
  const Engine& engine_;
  Observer* observer_ = nullptr;
  std::unique_ptr<BufferPool> pool_;
  std::unique_ptr<DeviceSession> device_;
  Status device_status_ = Status::ok();  ///< why device_ is missing on a CUDA engine
};

}  // namespace loka
