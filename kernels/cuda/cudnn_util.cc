// ============================================================================
// kernels/cuda/cudnn_util.cc — shared cuDNN backend plumbing.
// ============================================================================
#include "kernels/cuda/cudnn_util.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <utility>

namespace loka::cuda {

std::string cudnn_error(cudnnStatus_t status, const std::string& what) {
  char detail[512] = {};
  cudnnGetLastErrorString(detail, sizeof detail);
  std::string message = "cuDNN " + what + " failed: " + cudnnGetErrorString(status);
  if (detail[0] != '\0') message += std::string(" (") + detail + ")";
  std::replace(message.begin(), message.end(), '\n', ' ');  // one line, whatever the library wrote
  return message;
}

namespace {

/// Idle handles per device, and what the pool has done. Never destroyed: handles may be given
/// back during static destruction, and cudnnDestroy after the CUDA runtime is torn down can
/// crash; the process's exit frees them.
struct HandlePool {
  std::mutex mutex;
  std::vector<std::vector<cudnnHandle_t>> idle;  ///< by device
  CudnnHandle::Counts counts;
};

HandlePool& handle_pool() {
  static HandlePool* const pool = new HandlePool;
  return *pool;
}

/// Empty when the cuDNN library loaded is cuDNN 9: headers of cuDNN 9 with an older library
/// found at run time would misread every attribute.
const std::string& library_mismatch() {
  static const std::string reason =
      cudnnGetVersion() < 90000
          ? "the cuDNN library loaded is " + std::to_string(cudnnGetVersion()) + ", LoKA needs cuDNN 9"
          : std::string();
  return reason;
}

}  // namespace

Result<CudnnHandle> CudnnHandle::lease() {
  if (!library_mismatch().empty()) return Status::error(library_mismatch());
  int device = 0;
  if (const cudaError_t error = cudaGetDevice(&device); error != cudaSuccess)
    return Status::error(std::string("cuDNN needs a CUDA device: ") + cudaGetErrorString(error));
  HandlePool& pool = handle_pool();
  const std::lock_guard<std::mutex> lock(pool.mutex);
  if (pool.idle.size() <= static_cast<size_t>(device)) pool.idle.resize(static_cast<size_t>(device) + 1);
  std::vector<cudnnHandle_t>& idle = pool.idle[static_cast<size_t>(device)];
  if (!idle.empty()) {
    const cudnnHandle_t handle = idle.back();
    idle.pop_back();
    ++pool.counts.leased;
    return CudnnHandle(handle, device);
  }
  // Created under the lock, one at a time (see the header).
  const auto start = std::chrono::steady_clock::now();
  cudnnHandle_t handle = nullptr;
  LOKA_CUDNN_CHECK(cudnnCreate(&handle), "cudnnCreate");
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (pool.counts.created++ == 0) pool.counts.first_create_ms = ms;
  pool.counts.create_ms += ms;
  ++pool.counts.leased;
  return CudnnHandle(handle, device);
}

CudnnHandle::CudnnHandle(CudnnHandle&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), device_(other.device_) {}

CudnnHandle& CudnnHandle::operator=(CudnnHandle&& other) noexcept {
  if (this != &other) {
    give_back();
    handle_ = std::exchange(other.handle_, nullptr);
    device_ = other.device_;
  }
  return *this;
}

CudnnHandle::~CudnnHandle() { give_back(); }

void CudnnHandle::give_back() {
  if (handle_ == nullptr) return;
  cudnnSetStream(handle_, nullptr);
  HandlePool& pool = handle_pool();
  const std::lock_guard<std::mutex> lock(pool.mutex);
  pool.idle[static_cast<size_t>(device_)].push_back(std::exchange(handle_, nullptr));
  --pool.counts.leased;
}

CudnnHandle::Counts CudnnHandle::counts() {
  HandlePool& pool = handle_pool();
  const std::lock_guard<std::mutex> lock(pool.mutex);
  return pool.counts;
}

Result<CudnnDescriptor> CudnnDescriptor::create(cudnnBackendDescriptorType_t type, const char* what) {
  CudnnDescriptor descriptor;
  descriptor.what_ = what;
  LOKA_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &descriptor.descriptor_), std::string("creating the ") + what);
  return descriptor;
}

CudnnDescriptor::CudnnDescriptor(CudnnDescriptor&& other) noexcept
    : descriptor_(std::exchange(other.descriptor_, nullptr)), what_(other.what_) {}

CudnnDescriptor& CudnnDescriptor::operator=(CudnnDescriptor&& other) noexcept {
  if (this != &other) {
    if (descriptor_) cudnnBackendDestroyDescriptor(descriptor_);
    descriptor_ = std::exchange(other.descriptor_, nullptr);
    what_ = other.what_;
  }
  return *this;
}

CudnnDescriptor::~CudnnDescriptor() {
  if (descriptor_) cudnnBackendDestroyDescriptor(descriptor_);
}

Status CudnnDescriptor::set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
                            const void* values) {
  LOKA_CUDNN_CHECK(cudnnBackendSetAttribute(descriptor_, name, type, count, values),
                   std::string("setting attribute ") + std::to_string(static_cast<int>(name)) + " of the " + what_);
  return Status::ok();
}

Status CudnnDescriptor::set_int64s(cudnnBackendAttributeName_t name, const std::vector<int64_t>& values) {
  return set(name, CUDNN_TYPE_INT64, static_cast<int64_t>(values.size()), values.data());
}

Status CudnnDescriptor::set_descriptor(cudnnBackendAttributeName_t name, const CudnnDescriptor& value) {
  const cudnnBackendDescriptor_t raw = value.get();
  return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
}

Status CudnnDescriptor::set_descriptors(cudnnBackendAttributeName_t name, const std::vector<cudnnBackendDescriptor_t>& values) {
  return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(values.size()), values.data());
}

Status CudnnDescriptor::finalize() {
  LOKA_CUDNN_CHECK(cudnnBackendFinalize(descriptor_), std::string("finalizing the ") + what_);
  return Status::ok();
}

namespace {

/// A finalized tensor descriptor; by-value tensors are scalars the variant pack gives on the host.
Result<CudnnDescriptor> tensor_descriptor(int64_t uid, cudnnDataType_t type, const std::vector<int64_t>& dims,
                                          const std::vector<int64_t>& strides, bool is_virtual, bool is_by_value) {
  LOKA_ASSIGN_OR_RETURN(CudnnDescriptor tensor, CudnnDescriptor::create(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor descriptor"));
  const int64_t alignment = 16;
  const bool virtual_flag = is_virtual;
  LOKA_RETURN_IF_ERROR(tensor.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
  LOKA_RETURN_IF_ERROR(tensor.set_int64s(CUDNN_ATTR_TENSOR_DIMENSIONS, dims));
  LOKA_RETURN_IF_ERROR(tensor.set_int64s(CUDNN_ATTR_TENSOR_STRIDES, strides));
  LOKA_RETURN_IF_ERROR(tensor.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
  LOKA_RETURN_IF_ERROR(tensor.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment));
  LOKA_RETURN_IF_ERROR(tensor.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virtual_flag));
  if (is_by_value) LOKA_RETURN_IF_ERROR(tensor.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &is_by_value));
  LOKA_RETURN_IF_ERROR(tensor.finalize());
  return tensor;
}

}  // namespace

Result<CudnnDescriptor> cudnn_tensor(int64_t uid, cudnnDataType_t type, const std::vector<int64_t>& dims,
                                     const std::vector<int64_t>& strides, bool is_virtual) {
  return tensor_descriptor(uid, type, dims, strides, is_virtual, false);
}

Result<CudnnDescriptor> cudnn_scalar_by_value(int64_t uid, cudnnDataType_t type, size_t rank) {
  const std::vector<int64_t> ones(rank, 1);
  return tensor_descriptor(uid, type, ones, ones, false, true);
}

Result<CudnnDescriptor> cudnn_pointwise(cudnnPointwiseMode_t mode) {
  LOKA_ASSIGN_OR_RETURN(CudnnDescriptor pointwise, CudnnDescriptor::create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise descriptor"));
  const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
  LOKA_RETURN_IF_ERROR(pointwise.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
  LOKA_RETURN_IF_ERROR(pointwise.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision));
  LOKA_RETURN_IF_ERROR(pointwise.finalize());
  return pointwise;
}

Result<CudnnDescriptor> cudnn_operation(
    cudnnBackendDescriptorType_t type, const char* what,
    const std::vector<std::pair<cudnnBackendAttributeName_t, const CudnnDescriptor*>>& inputs) {
  LOKA_ASSIGN_OR_RETURN(CudnnDescriptor operation, CudnnDescriptor::create(type, what));
  for (const auto& [name, input] : inputs) LOKA_RETURN_IF_ERROR(operation.set_descriptor(name, *input));
  LOKA_RETURN_IF_ERROR(operation.finalize());
  return operation;
}

Result<CudnnPlan> build_cudnn_plan(CudnnHandle handle, const std::vector<cudnnBackendDescriptor_t>& operations,
                                   int engine, int64_t max_workspace_bytes) {
  CudnnPlan out;
  out.handle = std::move(handle);
  const cudnnHandle_t raw_handle = out.handle.get();
  LOKA_ASSIGN_OR_RETURN(out.graph, CudnnDescriptor::create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph"));
  LOKA_RETURN_IF_ERROR(out.graph.set_descriptors(CUDNN_ATTR_OPERATIONGRAPH_OPS, operations));
  // The graph and the plan name the handle they are built for (deprecated after cuDNN 9.14 in
  // favour of device properties, still accepted; 9.14 is what the GPU machines have).
  LOKA_RETURN_IF_ERROR(out.graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &raw_handle));
  LOKA_RETURN_IF_ERROR(out.graph.finalize().with_context("the graph does not build: "));

  LOKA_ASSIGN_OR_RETURN(CudnnDescriptor heuristic, CudnnDescriptor::create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "engine heuristic"));
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  LOKA_RETURN_IF_ERROR(heuristic.set_descriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, out.graph));
  LOKA_RETURN_IF_ERROR(heuristic.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode));
  LOKA_RETURN_IF_ERROR(heuristic.finalize());
  int64_t count = 0;
  LOKA_CUDNN_CHECK(cudnnBackendGetAttribute(heuristic.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                            0, &count, nullptr),
                   "counting the heuristic's engine configurations");
  out.engine_count = static_cast<int>(count);
  if (engine < 0 || engine >= count)
    return Status::error("cuDNN's heuristic offers " + std::to_string(count) + " engine configuration(s), not " +
                         std::to_string(engine + 1));
  // The results are copied into descriptors the caller creates.
  std::vector<CudnnDescriptor> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i <= engine; ++i) {
    LOKA_ASSIGN_OR_RETURN(CudnnDescriptor config, CudnnDescriptor::create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine configuration"));
    raw.push_back(config.get());
    configs.push_back(std::move(config));
  }
  int64_t returned = 0;
  LOKA_CUDNN_CHECK(cudnnBackendGetAttribute(heuristic.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                            engine + 1, &returned, raw.data()),
                   "reading the heuristic's engine configurations");
  if (returned <= engine) return Status::error("cuDNN's heuristic returned " + std::to_string(returned) + " engine configuration(s)");
  out.engine_config = std::move(configs[static_cast<size_t>(engine)]);

  LOKA_ASSIGN_OR_RETURN(out.plan, CudnnDescriptor::create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "execution plan"));
  LOKA_RETURN_IF_ERROR(out.plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &raw_handle));
  LOKA_RETURN_IF_ERROR(out.plan.set_descriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, out.engine_config));
  LOKA_RETURN_IF_ERROR(out.plan.finalize().with_context("engine configuration " + std::to_string(engine) + " does not build: "));
  LOKA_CUDNN_CHECK(cudnnBackendGetAttribute(out.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                            &returned, &out.workspace_bytes),
                   "reading the plan's workspace size");
  if (out.workspace_bytes > max_workspace_bytes)
    return Status::error("engine configuration " + std::to_string(engine) + " needs " + std::to_string(out.workspace_bytes) +
                         " bytes of workspace, more than the " + std::to_string(max_workspace_bytes) + " it is given");
  return out;
}

Status CudnnVariantPack::bind(std::span<const int64_t> uids, std::span<void* const> pointers, void* workspace) {
  if (pack_.get() != nullptr && workspace == workspace_ && std::ranges::equal(uids, uids_) &&
      std::ranges::equal(pointers, pointers_))
    return Status::ok();
  pack_ = CudnnDescriptor();  // a failed rebuild leaves no pack to reuse
  LOKA_ASSIGN_OR_RETURN(CudnnDescriptor pack, CudnnDescriptor::create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack"));
  LOKA_RETURN_IF_ERROR(pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()), uids.data()));
  LOKA_RETURN_IF_ERROR(pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                                static_cast<int64_t>(pointers.size()), pointers.data()));
  LOKA_RETURN_IF_ERROR(pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace));
  LOKA_RETURN_IF_ERROR(pack.finalize());
  pack_ = std::move(pack);
  uids_.assign(uids.begin(), uids.end());
  pointers_.assign(pointers.begin(), pointers.end());
  workspace_ = workspace;
  return Status::ok();
}

Status execute_cudnn_plan(const CudnnPlan& plan, const CudnnVariantPack& pack, cudaStream_t stream) {
  const cudnnHandle_t handle = plan.handle.get();
  LOKA_CUDNN_CHECK(cudnnSetStream(handle, stream), "cudnnSetStream");
  LOKA_CUDNN_CHECK(cudnnBackendExecute(handle, plan.plan.get(), pack.get()), "executing the plan");
  return Status::ok();
}

Result<const CudnnDescriptor*> CudnnGraphKernel::keep(Result<CudnnDescriptor> made) {
  LOKA_RETURN_IF_ERROR(made.status());
  parts_.push_back(std::move(made).value());
  return &parts_.back();
}

Status CudnnGraphKernel::plan(const std::vector<cudnnBackendDescriptor_t>& operations, int engine,
                              int64_t max_workspace_bytes) {
  LOKA_ASSIGN_OR_RETURN(CudnnHandle handle, CudnnHandle::lease());
  LOKA_ASSIGN_OR_RETURN(plan_, build_cudnn_plan(std::move(handle), operations, engine, max_workspace_bytes));
  return Status::ok();
}

Status CudnnGraphKernel::run(std::span<const int64_t> uids, std::span<void* const> pointers, void* workspace,
                             cudaStream_t stream) {
  if (plan_.workspace_bytes > 0 && workspace == nullptr)
    return Status::error("the plan needs " + std::to_string(plan_.workspace_bytes) + " bytes of workspace and none was given");
  LOKA_RETURN_IF_ERROR(pack_.bind(uids, pointers, workspace));
  return execute_cudnn_plan(plan_, pack_, stream);
}

}  // namespace loka::cuda
