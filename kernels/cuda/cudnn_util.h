// ============================================================================
// kernels/cuda/cudnn_util.h — the cuDNN 9 backend (graph) API plumbing the
// cuDNN planners share: one-line errors, one handle per thread, owned
// descriptors with typed attribute setters, and "finalize the graph, ask the
// heuristic, build engine configuration N into an execution plan".
//
// Only compiled when CMake found cuDNN (LOKA_HAVE_CUDNN); callers include it
// from .cc files behind that macro. No cudnn-frontend: it is not installed,
// and the backend API is all a fixed graph needs.
// ============================================================================
#pragma once

#include <cudnn_graph.h>

#include <cstdint>
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

/// This thread's cuDNN handle, or why there is none (no cuDNN 9 library at run time, no device).
Result<cudnnHandle_t> cudnn_thread_handle();

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

/// A finalized descriptor of `type` whose attributes `inputs` name other descriptors (an
/// operation and its tensors), set in order.
Result<CudnnDescriptor> cudnn_operation(
    cudnnBackendDescriptorType_t type, const char* what,
    const std::vector<std::pair<cudnnBackendAttributeName_t, const CudnnDescriptor*>>& inputs);

/// An execution plan with its engine configuration (the plan refers to it) and workspace size.
struct CudnnPlan {
  CudnnDescriptor graph;
  CudnnDescriptor engine_config;
  CudnnDescriptor plan;
  int64_t workspace_bytes = 0;
  int engine_count = 0;  ///< how many configurations the heuristic offered
};

/// Finalizes an operation graph of `operations` (in order) on `handle`, asks heuristic mode A
/// for its engine configurations and builds the `engine`-th into an execution plan needing at
/// most `max_workspace_bytes`. Errors say, on one line, which step refused and why.
Result<CudnnPlan> build_cudnn_plan(cudnnHandle_t handle, const std::vector<cudnnBackendDescriptor_t>& operations,
                                   int engine, int64_t max_workspace_bytes);

/// Runs `plan` on `stream` with the tensors `uids` at `pointers` and `workspace`.
Status execute_cudnn_plan(const CudnnPlan& plan, const std::vector<int64_t>& uids, const std::vector<void*>& pointers,
                          void* workspace, cudaStream_t stream);

}  // namespace loka::cuda
