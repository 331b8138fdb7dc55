// ============================================================================
// kernels/cuda/cudnn_util.h — the cuDNN 9 backend (graph) API plumbing the
// cuDNN planners share: one-line errors, handles leased from a per-device
// pool, owned descriptors with typed attribute setters, "finalize the graph,
// ask the heuristic, build engine configuration N into an execution plan",
// a variant pack rebuilt only when a run's pointers change, and the three
// together as what a graph kernel owns (CudnnGraphKernel).
//
// Handles: each planned kernel leases one handle when it is created and
// keeps it, exclusively, until it is destroyed; its plan is built with that
// handle and always executes with it (an execution plan names its handle,
// CUDNN_ATTR_EXECUTION_PLAN_HANDLE). Why not one handle per thread, created
// on first use: the runtime plans on one thread and may run on another, and
// the first run of a bucket is inside CUDA stream capture, where cudnnCreate
// (it allocates device memory) would invalidate the capture. Why not one
// shared handle: cudnnSetStream then execute is a pair no two threads may
// interleave, and a lock would serialize 8 concurrent sessions. Why a pool
// rather than cudnnCreate per kernel: cudnnCreate allocates device memory
// and cudnnDestroy frees it (an implicit device synchronization); the
// autotuner plans and drops two cuDNN candidates per GEMM shape, and the
// runtime plans per batch bucket, so returned handles are reused instead.
// Handles are created one at a time under the pool's lock: cuDNN asks that
// the first cudnnCreate run alone, and concurrent cudnnCreate calls have been
// seen to stall for seconds (openxla/xla#28497).
//
// Only compiled when CMake found cuDNN (LOKA_HAVE_CUDNN); callers include it
// from .cc files behind that macro. No cudnn-frontend: it is not installed,
// and the backend API is all a fixed graph needs.
// ============================================================================
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn_graph.h>

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "loka/status.h"

static_assert(CUDNN_MAJOR >= 9, "LoKA's cuDNN graphs use the cuDNN 9 backend API");

namespace loka::cuda {

/// "cuDNN WHAT failed: STATUS (the library's last error message)", on one line.
std::string cudnn_error(cudnnStatus_t status, const std::string& what);

#define LOKA_CUDNN_CHECK(call, what)                                                                    \
  do {                                                                                                  \
    const cudnnStatus_t cudnn_status_ = (call);                                                         \
    if (cudnn_status_ != CUDNN_STATUS_SUCCESS) return ::loka::Status::error(::loka::cuda::cudnn_error(cudnn_status_, what)); \
  } while (0)

/// A cuDNN handle of one device, held by one owner (a planned kernel) at a time: leased from the
/// process's pool, given back when destroyed (destroy the owner once the work it enqueued is
/// done, as with any device memory it frees). The owner sets its stream before each use; a
/// handle goes back with the default stream set, so an idle one names no stream that may die.
class CudnnHandle {
 public:
  /// An idle handle of the current device, or a new one; or why there is none (no cuDNN 9
  /// library at run time, no device). Call it when planning: it may allocate (never in capture).
  static Result<CudnnHandle> lease();
  CudnnHandle() = default;
  CudnnHandle(CudnnHandle&& other) noexcept;
  CudnnHandle& operator=(CudnnHandle&& other) noexcept;
  CudnnHandle(const CudnnHandle&) = delete;
  CudnnHandle& operator=(const CudnnHandle&) = delete;
  ~CudnnHandle();

  cudnnHandle_t get() const { return handle_; }

  /// What the pool has done so far (all devices).
  struct Counts {
    int created = 0;              ///< successful cudnnCreate calls (idle handles are kept for reuse)
    int leased = 0;               ///< held by owners now
    double first_create_ms = 0;   ///< the first cudnnCreate (it also loads the library's parts)
    double create_ms = 0;         ///< all cudnnCreate calls, summed
  };
  static Counts counts();

 private:
  CudnnHandle(cudnnHandle_t handle, int device) : handle_(handle), device_(device) {}
  void give_back();
  cudnnHandle_t handle_ = nullptr;
  int device_ = 0;
};

/// An owned backend descriptor.
class CudnnDescriptor {
 public:
  CudnnDescriptor() = default;
  /// A new descriptor of `type`.
  static Result<CudnnDescriptor> create(cudnnBackendDescriptorType_t type, const char* what);
  CudnnDescriptor(CudnnDescriptor&& other) noexcept;
  CudnnDescriptor& operator=(CudnnDescriptor&& other) noexcept;
  CudnnDescriptor(const CudnnDescriptor&) = delete;
  CudnnDescriptor& operator=(const CudnnDescriptor&) = delete;
  ~CudnnDescriptor();

  cudnnBackendDescriptor_t get() const { return descriptor_; }
  Status set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count, const void* values);
  Status set_int64s(cudnnBackendAttributeName_t name, const std::vector<int64_t>& values);
  Status set_descriptor(cudnnBackendAttributeName_t name, const CudnnDescriptor& value);
  Status set_descriptors(cudnnBackendAttributeName_t name, const std::vector<cudnnBackendDescriptor_t>& values);
  Status finalize();

 private:
  cudnnBackendDescriptor_t descriptor_ = nullptr;
  const char* what_ = "";
};

/// A finalized tensor descriptor: row-major `dims` (strides given), `uid` as the variant pack
/// names it; virtual tensors live inside the graph only.
Result<CudnnDescriptor> cudnn_tensor(int64_t uid, cudnnDataType_t type, const std::vector<int64_t>& dims,
                                     const std::vector<int64_t>& strides, bool is_virtual);

/// A finalized scalar tensor passed by value (CUDNN_ATTR_TENSOR_IS_BY_VALUE): `rank` dimensions
/// of 1, as many as the graph's other tensors have. Its variant-pack pointer is a host address
/// whose value cuDNN reads when the plan is enqueued (a captured CUDA graph keeps that value).
Result<CudnnDescriptor> cudnn_scalar_by_value(int64_t uid, cudnnDataType_t type, size_t rank);

/// A finalized pointwise descriptor of `mode`, computing in FP32.
Result<CudnnDescriptor> cudnn_pointwise(cudnnPointwiseMode_t mode);

/// A finalized descriptor of `type` whose attributes `inputs` name other descriptors (an
/// operation and its tensors), set in order.
Result<CudnnDescriptor> cudnn_operation(
    cudnnBackendDescriptorType_t type, const char* what,
    const std::vector<std::pair<cudnnBackendAttributeName_t, const CudnnDescriptor*>>& inputs);

/// An execution plan with the handle it was built with (declared first: it outlives the
/// descriptors naming it), its engine configuration (the plan refers to it) and workspace size.
struct CudnnPlan {
  CudnnHandle handle;
  CudnnDescriptor graph;
  CudnnDescriptor engine_config;
  CudnnDescriptor plan;
  int64_t workspace_bytes = 0;
  int engine_count = 0;  ///< how many configurations the heuristic offered
};

/// Finalizes an operation graph of `operations` (in order) on `handle`, asks heuristic mode A
/// for its engine configurations and builds the `engine`-th into an execution plan needing at
/// most `max_workspace_bytes`; the plan keeps the handle. Errors say, on one line, which step
/// refused and why (the handle then goes back to the pool).
Result<CudnnPlan> build_cudnn_plan(CudnnHandle handle, const std::vector<cudnnBackendDescriptor_t>& operations,
                                   int engine, int64_t max_workspace_bytes);

/// The tensors `uids` at `pointers` and the workspace of a run, as a finalized variant pack.
/// bind() rebuilds it only when something differs from the last bind: a runtime step runs with
/// the same pointers every time, so steady-state runs create no descriptor and allocate nothing.
class CudnnVariantPack {
 public:
  Status bind(std::span<const int64_t> uids, std::span<void* const> pointers, void* workspace);
  cudnnBackendDescriptor_t get() const { return pack_.get(); }

 private:
  CudnnDescriptor pack_;
  std::vector<int64_t> uids_;
  std::vector<void*> pointers_;
  void* workspace_ = nullptr;
};

/// Enqueues `plan` on `stream` with its own handle and the operands `pack` binds. Host work
/// only (no allocation, no synchronization): CUDA graphs capture it. Not reentrant: the plan's
/// handle takes `stream` for the call, so one thread at a time runs a plan.
Status execute_cudnn_plan(const CudnnPlan& plan, const CudnnVariantPack& pack, cudaStream_t stream);

/// What a kernel made of one cuDNN graph owns: the graph's descriptors (alive as long as the
/// plan that names them), its plan with a handle of its own, and the last run's variant pack.
/// A kernel keeps the descriptors it builds, plans their operations once, then runs.
class CudnnGraphKernel {
 public:
  /// Keeps a finalized descriptor (a tensor or an operation) for the plan's lifetime, at an
  /// address that stays put; or passes on why it was not made.
  Result<const CudnnDescriptor*> keep(Result<CudnnDescriptor> made);
  /// Leases the kernel's handle and builds configuration `engine` of `operations`, as
  /// build_cudnn_plan does. Call it when planning: it may allocate (never in capture).
  Status plan(const std::vector<cudnnBackendDescriptor_t>& operations, int engine, int64_t max_workspace_bytes);
  /// Binds `uids` at `pointers` and `workspace` (the pack is kept while they stay the same) and
  /// enqueues the plan on `stream`; a plan needing workspace and given none is an error. One
  /// thread at a time (see execute_cudnn_plan).
  Status run(std::span<const int64_t> uids, std::span<void* const> pointers, void* workspace, cudaStream_t stream);

  int engine_count() const { return plan_.engine_count; }
  int64_t workspace_bytes() const { return plan_.workspace_bytes; }

 private:
  std::deque<CudnnDescriptor> parts_;
  CudnnPlan plan_;
  CudnnVariantPack pack_;
};

}  // namespace loka::cuda
