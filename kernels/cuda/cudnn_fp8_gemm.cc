// ============================================================================
// kernels/cuda/cudnn_fp8_gemm.cc — the FP8 matmul graph: tensors, operations,
// plan, and the variant pack per run. Without cuDNN in the build, create()
// says so and nothing else is compiled.
// ============================================================================
#include "kernels/cuda/cudnn_fp8_gemm.h"

#if LOKA_HAVE_CUDNN
#include <array>
#include <deque>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cuda/cudnn_util.h"
#endif

namespace loka::cuda {
namespace {

std::string describe(const CudnnFp8GemmProblem& p) {
  return "cuDNN FP8 GEMM M=" + std::to_string(p.m) + " N=" + std::to_string(p.n) + " K=" + std::to_string(p.k);
}

}  // namespace

Status CudnnFp8Gemm::can_implement(const CudnnFp8GemmProblem& p) {
  if (p.m <= 0 || p.n <= 0 || p.k <= 0) return Status::error(describe(p) + ": needs positive M, N, K");
  // Rows of X and W (K bytes) and of Y (4N bytes) start 16-byte aligned, as FP8 tensor-core loads need.
  if (p.k % 16 != 0) return Status::error(describe(p) + ": needs K a multiple of 16");
  if (p.n % 16 != 0) return Status::error(describe(p) + ": needs N a multiple of 16");
  if (p.epilogue == GemmEpilogue::kGelu)
    return Status::error(describe(p) + ": the graph fuses bias and ReLU only (LoKA's GELU is exact; not expressed here)");
  return Status::ok();
}

#if LOKA_HAVE_CUDNN

namespace {

/// The variant pack's names for the graph's tensors (virtual ones count up from kFirstVirtual).
enum : int64_t { kX = 1, kW, kXScale, kWScale, kBias, kResidual, kY, kFirstVirtual = 100 };

bool aligned16(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

}  // namespace

struct CudnnFp8Gemm::Impl {
  std::deque<CudnnDescriptor> parts;  ///< tensors and operations, alive as long as the plan
  CudnnPlan plan;                     ///< with the kernel's own handle
  CudnnVariantPack pack;              ///< the last run's operands (run() is one thread at a time)
};

std::string cudnn_unavailable_reason() {
  const Result<CudnnHandle> handle = CudnnHandle::lease();  // given back at once, kept for the next plan
  return handle.is_ok() ? std::string() : handle.status().message();
}

int cudnn_runtime_version() { return static_cast<int>(cudnnGetVersion()); }

CudnnHandleCounts cudnn_handle_counts() {
  const CudnnHandle::Counts counts = CudnnHandle::counts();
  return {counts.created, counts.leased, counts.first_create_ms, counts.create_ms};
}

namespace {

/// A finalized descriptor of `type` with the enum-valued `attributes` set (the matmul's compute
/// type; a pointwise descriptor's mode and precision).
template <typename... Values>
Result<CudnnDescriptor> configured(cudnnBackendDescriptorType_t type, const char* what,
                                   const std::pair<cudnnBackendAttributeName_t, Values>&... attributes) {
  LOKA_ASSIGN_OR_RETURN(CudnnDescriptor descriptor, CudnnDescriptor::create(type, what));
  Status status = Status::ok();
  const auto set = [&](cudnnBackendAttributeName_t name, const auto& value) {
    using Value = std::decay_t<decltype(value)>;
    const cudnnBackendAttributeType_t kind =
        std::is_same_v<Value, cudnnPointwiseMode_t> ? CUDNN_TYPE_POINTWISE_MODE : CUDNN_TYPE_DATA_TYPE;
    if (status) status = descriptor.set(name, kind, 1, &value);
  };
  (set(attributes.first, attributes.second), ...);
  LOKA_RETURN_IF_ERROR(status);
  LOKA_RETURN_IF_ERROR(descriptor.finalize());
  return descriptor;
}

/// The graph's descriptors, kept alive with the plan (stable addresses: a deque).
using Parts = std::deque<CudnnDescriptor>;

Result<const CudnnDescriptor*> keep(Parts& parts, Result<CudnnDescriptor> made) {
  LOKA_RETURN_IF_ERROR(made.status());
  parts.push_back(std::move(made).value());
  return &parts.back();
}

/// The operations of the graph drawn in the header, in order.
Result<std::vector<cudnnBackendDescriptor_t>> build_operations(const CudnnFp8GemmProblem& p, Parts& parts) {
  const int64_t m = p.m, n = p.n, k = p.k;
  const std::vector<int64_t> output_dims{1, m, n}, output_strides{m * n, n, 1};
  // X row-major [M,K]; W [N,K] row-major is the [K,N] operand with strides (1, K): "TN".
  LOKA_ASSIGN_OR_RETURN(const CudnnDescriptor* x, keep(parts, cudnn_tensor(kX, CUDNN_DATA_FP8_E4M3, {1, m, k}, {m * k, k, 1}, false)));
  LOKA_ASSIGN_OR_RETURN(const CudnnDescriptor* w, keep(parts, cudnn_tensor(kW, CUDNN_DATA_FP8_E4M3, {1, k, n}, {n * k, 1, k}, false)));
  LOKA_ASSIGN_OR_RETURN(const CudnnDescriptor* accumulator,
                        keep(parts, cudnn_tensor(kFirstVirtual, CUDNN_DATA_FLOAT, output_dims, output_strides, true)));
  LOKA_ASSIGN_OR_RETURN(const CudnnDescriptor* matmul,
                        keep(parts, configured(CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul descriptor",
                                               std::pair{CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_DATA_FLOAT})));
  LOKA_ASSIGN_OR_RETURN(const CudnnDescriptor* product,
                        keep(parts, cudnn_operation(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "FP8 matmul operation",
                                                    {{CUDNN_ATTR_OPERATION_MATMUL_ADESC, x},
                                                     {CUDNN_ATTR_OPERATION_MATMUL_BDESC, w},
                                                     {CUDNN_ATTR_OPERATION_MATMUL_CDESC, accumulator},
                                                     {CUDNN_ATTR_OPERATION_MATMUL_DESC, matmul}})));
  std::vector<cudnnBackendDescriptor_t> operations{product->get()};

  // The pointwise tail, in QuantizedGemm's order; the last step writes Y, the others virtual tensors.
  struct Step {
    cudnnPointwiseMode_t mode;
    int64_t operand;               ///< uid of the second input (0: unary)
    std::vector<int64_t> dims;     ///< its extent: [1,1,1] (the activation scale), [1,1,N] or [1,M,N]
  };
  std::vector<Step> steps{{CUDNN_POINTWISE_MUL, kXScale, {1, 1, 1}}, {CUDNN_POINTWISE_MUL, kWScale, {1, 1, n}}};
  if (p.has_bias) steps.push_back({CUDNN_POINTWISE_ADD, kBias, {1, 1, n}});
  if (p.epilogue == GemmEpilogue::kRelu) steps.push_back({CUDNN_POINTWISE_RELU_FWD, 0, {}});
  if (p.has_residual) steps.push_back({CUDNN_POINTWISE_ADD, kResidual, output_dims});
  const CudnnDescriptor* input = accumulator;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& step = steps[i];
    const bool last = i + 1 == steps.size();
    LOKA_ASSIGN_OR_RETURN(const CudnnDescriptor* output,
                          keep(parts, cudnn_tensor(last ? kY : kFirstVirtual + 1 + static_cast<int64_t>(i), CUDNN_DATA_FLOAT,
                                                   output_dims, output_strides, !last)));
    LOKA_ASSIGN_OR_RETURN(const CudnnDescriptor* mode,
                          keep(parts, configured(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise descriptor",
                                                 std::pair{CUDNN_ATTR_POINTWISE_MODE, step.mode},
                                                 std::pair{CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_DATA_FLOAT})));
    std::vector<std::pair<cudnnBackendAttributeName_t, const CudnnDescriptor*>> inputs{
        {CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, mode}, {CUDNN_ATTR_OPERATION_POINTWISE_XDESC, input}};
    if (step.operand != 0) {
      // Broadcast operands: stride 0 is not needed, a dimension of 1 broadcasts; row-major strides.
      const std::vector<int64_t> strides{step.dims[1] * step.dims[2], step.dims[2], 1};
      LOKA_ASSIGN_OR_RETURN(const CudnnDescriptor* operand,
                            keep(parts, cudnn_tensor(step.operand, CUDNN_DATA_FLOAT, step.dims, strides, false)));
      inputs.push_back({CUDNN_ATTR_OPERATION_POINTWISE_BDESC, operand});
    }
    inputs.push_back({CUDNN_ATTR_OPERATION_POINTWISE_YDESC, output});
    LOKA_ASSIGN_OR_RETURN(const CudnnDescriptor* operation,
                          keep(parts, cudnn_operation(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "pointwise operation", inputs)));
    operations.push_back(operation->get());
    input = output;
  }
  return operations;
}

}  // namespace

Result<std::unique_ptr<CudnnFp8Gemm>> CudnnFp8Gemm::create(const CudnnFp8GemmProblem& p, int engine) {
  LOKA_RETURN_IF_ERROR(can_implement(p));
  const std::string what = describe(p) + " (engine " + std::to_string(engine) + "): ";
  // The kernel's own handle, leased now (planning may allocate; runs may be captured).
  Result<CudnnHandle> handle = CudnnHandle::lease();
  LOKA_RETURN_IF_ERROR(handle.status().with_context(what));
  auto impl = std::make_unique<Impl>();
  Result<std::vector<cudnnBackendDescriptor_t>> operations = build_operations(p, impl->parts);
  LOKA_RETURN_IF_ERROR(operations.status().with_context(what));
  Result<CudnnPlan> plan =
      build_cudnn_plan(std::move(handle).value(), *operations, engine, static_cast<int64_t>(kGemmWorkspaceBytes));
  LOKA_RETURN_IF_ERROR(plan.status().with_context(what));
  impl->plan = std::move(plan).value();
  return std::unique_ptr<CudnnFp8Gemm>(new CudnnFp8Gemm(p, std::move(impl)));
}

int CudnnFp8Gemm::engine_count() const { return impl_->plan.engine_count; }

Status CudnnFp8Gemm::run(const CudnnFp8GemmArgs& args, void* workspace, cudaStream_t stream) const {
  // Fixed-size lists: a steady-state run allocates nothing on the host either.
  std::array<int64_t, 7> uids{kX, kW, kXScale, kWScale, kY};
  std::array<void*, 7> pointers{const_cast<uint8_t*>(args.x), const_cast<uint8_t*>(args.w),
                                const_cast<float*>(args.x_scale), const_cast<float*>(args.w_scale), args.y};
  size_t count = 5;
  if (problem_.has_bias) {
    uids[count] = kBias;
    pointers[count++] = const_cast<float*>(args.bias);
  }
  if (problem_.has_residual) {
    uids[count] = kResidual;
    pointers[count++] = const_cast<float*>(args.residual);
  }
  for (size_t i = 0; i < count; ++i)
    if (pointers[i] == nullptr || !aligned16(pointers[i]))
      return Status::error(describe(problem_) + ": every operand must be given and 16-byte aligned (the graph's tensors say so)");
  if (impl_->plan.workspace_bytes > 0 && workspace == nullptr)
    return Status::error(describe(problem_) + ": the plan needs " + std::to_string(impl_->plan.workspace_bytes) +
                         " bytes of workspace and none was given");
  Status status = impl_->pack.bind(std::span(uids).first(count), std::span(pointers).first(count), workspace);
  if (status) status = execute_cudnn_plan(impl_->plan, impl_->pack, stream);
  return status ? status : status.with_context(describe(problem_) + ": ");  // the name only on failure
}

#else  // no cuDNN in this build

struct CudnnFp8Gemm::Impl {};

std::string cudnn_unavailable_reason() {
  return "this build has no cuDNN (CMake found no cudnn_graph.h and libcudnn, or LOKA_ENABLE_CUDNN=OFF)";
}

int cudnn_runtime_version() { return 0; }

CudnnHandleCounts cudnn_handle_counts() { return {}; }

Result<std::unique_ptr<CudnnFp8Gemm>> CudnnFp8Gemm::create(const CudnnFp8GemmProblem& p, int) {
  LOKA_RETURN_IF_ERROR(can_implement(p));
  return Status::error(describe(p) + ": " + cudnn_unavailable_reason());
}

int CudnnFp8Gemm::engine_count() const { return 0; }

Status CudnnFp8Gemm::run(const CudnnFp8GemmArgs&, void*, cudaStream_t) const {
  return Status::error(describe(problem_) + ": " + cudnn_unavailable_reason());
}

#endif

// After Impl's definition (either one): unique_ptr<Impl> deletes it here.
CudnnFp8Gemm::~CudnnFp8Gemm() = default;
CudnnFp8Gemm::CudnnFp8Gemm(CudnnFp8GemmProblem problem, std::unique_ptr<Impl> impl)
    : problem_(problem), impl_(std::move(impl)) {}

}  // namespace loka::cuda
