// ============================================================================
// kernels/cuda/cudnn_layer_norm.cc — the LayerNorm graph: tensors, the
// optional residual add before the norm, the plan, and the variant pack per run. Without cuDNN in the build, create() says so and
// nothing else is compiled.
// ============================================================================
#include "kernels/cuda/cudnn_layer_norm.h"

#include <cmath>
#include <string>
#include <utility>

#include "kernels/cuda/cudnn_fp8_gemm.h"  // cudnn_unavailable_reason()
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/gemm_types.h"      // kGemmWorkspaceBytes

#if LOKA_HAVE_CUDNN
#include <array>
#include <vector>

#include "kernels/cuda/cudnn_util.h"
#endif

namespace loka::cuda {
namespace {

std::string describe(const CudnnLayerNormProblem& p) {
  return "cuDNN LayerNorm rows=" + std::to_string(p.rows) + " cols=" + std::to_string(p.cols) +
         (p.has_bias ? " +bias" : "") + (p.has_residual ? " +residual" : "") + (p.fp8_output ? " ->e4m3" : " ->f32");
}

}  // namespace

Status CudnnLayerNorm::can_implement(const CudnnLayerNormProblem& p) {
  if (p.rows <= 0 || p.cols <= 0) return Status::error(describe(p) + ": needs positive rows and cols");
  // The norm followed by a by-value division into an E4M3 tensor built, and its first run
  // (1 row, 1 column) hit an illegal memory access that killed the CUDA context (H100, cuDNN
  // 9.14, 2026-11-26): LayerNormQuant keeps LoKA's kernel.
  if (p.fp8_output)
    return Status::error(describe(p) + ": an E4M3 output is not offered (its graph faulted on an H100 with cuDNN 9.14)");
  if (!std::isfinite(p.epsilon) || p.epsilon < 0.0f)
    return Status::error(describe(p) + ": needs a finite epsilon >= 0, not " + std::to_string(p.epsilon));
  return Status::ok();
}

#if LOKA_HAVE_CUDNN

namespace {

/// The variant pack's names for the graph's tensors (virtual ones from kFirstVirtual).
enum : int64_t { kX = 1, kResidual, kScale, kBias, kEpsilon, kY, kFirstVirtual = 100 };

bool aligned16(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

/// Frees a device allocation the kernel owns.
struct FreeDeviceMemory {
  void operator()(void* memory) const { device_free(memory); }
};

}  // namespace

struct CudnnLayerNorm::Impl {
  CudnnGraphKernel graph;   ///< descriptors, plan and the last run's pack (run() is one thread at a time)
  float epsilon = 0.0f;     ///< the by-value epsilon the pack points at (the problem's)
  std::unique_ptr<void, FreeDeviceMemory> zero_bias;  ///< [cols] zeros when the problem has no bias
};

namespace {

/// The operations of the graph drawn in the header, in order. cuDNN's LayerNorm normalizes each
/// outer index over the other dimensions, so the rows are [rows, cols, 1, 1] and scale and bias
/// [1, cols, 1, 1] (as cudnn-frontend's LayerNorm samples lay them out), row-major.
Result<std::vector<cudnnBackendDescriptor_t>> build_operations(const CudnnLayerNormProblem& p,
                                                                CudnnGraphKernel& graph) {
  std::vector<cudnnBackendDescriptor_t> operations;
  const auto pointwise = [&](cudnnPointwiseMode_t mode, const char* what, const CudnnDescriptor* a,
                             const CudnnDescriptor* b, const CudnnDescriptor* y) -> Status {
    LOKA_ASSIGN_OR_RETURN(const CudnnDescriptor* descriptor, graph.keep(cudnn_pointwise(mode)));
    LOKA_ASSIGN_OR_RETURN(const CudnnDescriptor* operation,
                          graph.keep(cudnn_operation(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, what,
                                                     {{CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, descriptor},
                                                      {CUDNN_ATTR_OPERATION_POINTWISE_XDESC, a},
                                                      {CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b},
                                                      {CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y}})));
    operations.push_back(operation->get());
    return Status::ok();
  };
  const std::vector<int64_t> row_dims{p.rows, p.cols, 1, 1}, parameter_dims{1, p.cols, 1, 1};
  const std::vector<int64_t> strides{p.cols, 1, p.cols, p.cols};
  const size_t rank = row_dims.size();

  LOKA_ASSIGN_OR_RETURN(const CudnnDescriptor* input,
                        graph.keep(cudnn_tensor(kX, CUDNN_DATA_FLOAT, row_dims, strides, false)));
  if (p.has_residual) {
    LOKA_ASSIGN_OR_RETURN(const CudnnDescriptor* residual,
                          graph.keep(cudnn_tensor(kResidual, CUDNN_DATA_FLOAT, row_dims, strides, false)));
    LOKA_ASSIGN_OR_RETURN(const CudnnDescriptor* sum,
                          graph.keep(cudnn_tensor(kFirstVirtual, CUDNN_DATA_FLOAT, row_dims, strides, true)));
    LOKA_RETURN_IF_ERROR(pointwise(CUDNN_POINTWISE_ADD, "residual add operation", input, residual, sum));
    input = sum;
  }

  LOKA_ASSIGN_OR_RETURN(const CudnnDescriptor* scale,
                        graph.keep(cudnn_tensor(kScale, CUDNN_DATA_FLOAT, parameter_dims, strides, false)));
  LOKA_ASSIGN_OR_RETURN(const CudnnDescriptor* bias,
                        graph.keep(cudnn_tensor(kBias, CUDNN_DATA_FLOAT, parameter_dims, strides, false)));
  LOKA_ASSIGN_OR_RETURN(const CudnnDescriptor* epsilon,
                        graph.keep(cudnn_scalar_by_value(kEpsilon, CUDNN_DATA_FLOAT, rank)));
  LOKA_ASSIGN_OR_RETURN(const CudnnDescriptor* values,
                        graph.keep(cudnn_tensor(kY, CUDNN_DATA_FLOAT, row_dims, strides, false)));
  LOKA_ASSIGN_OR_RETURN(CudnnDescriptor norm, CudnnDescriptor::create(CUDNN_BACKEND_OPERATION_NORM_FORWARD_DESCRIPTOR,
                                                                       "LayerNorm operation"));
  const cudnnBackendNormMode_t mode = CUDNN_LAYER_NORM;
  const cudnnBackendNormFwdPhase_t phase = CUDNN_NORM_FWD_INFERENCE;  // statistics computed, not written out
  LOKA_RETURN_IF_ERROR(norm.set(CUDNN_ATTR_OPERATION_NORM_FWD_MODE, CUDNN_TYPE_NORM_MODE, 1, &mode));
  LOKA_RETURN_IF_ERROR(norm.set(CUDNN_ATTR_OPERATION_NORM_FWD_PHASE, CUDNN_TYPE_NORM_FWD_PHASE, 1, &phase));
  const std::pair<cudnnBackendAttributeName_t, const CudnnDescriptor*> norm_tensors[] = {
      {CUDNN_ATTR_OPERATION_NORM_FWD_XDESC, input},         {CUDNN_ATTR_OPERATION_NORM_FWD_SCALE_DESC, scale},
      {CUDNN_ATTR_OPERATION_NORM_FWD_BIAS_DESC, bias},      {CUDNN_ATTR_OPERATION_NORM_FWD_EPSILON_DESC, epsilon},
      {CUDNN_ATTR_OPERATION_NORM_FWD_YDESC, values}};
  for (const auto& [name, tensor] : norm_tensors) LOKA_RETURN_IF_ERROR(norm.set_descriptor(name, *tensor));
  LOKA_RETURN_IF_ERROR(norm.finalize());
  LOKA_ASSIGN_OR_RETURN(const CudnnDescriptor* normalization, graph.keep(std::move(norm)));
  operations.push_back(normalization->get());
  return operations;
}

/// `floats` zeros in device memory, written before this returns (a kernel's run may use them on
/// any stream).
Result<std::unique_ptr<void, FreeDeviceMemory>> device_zeros(int64_t floats) {
  void* memory = nullptr;
  const size_t bytes = static_cast<size_t>(floats) * sizeof(float);
  cudaError_t error = device_malloc(&memory, bytes);
  std::unique_ptr<void, FreeDeviceMemory> zeros(error == cudaSuccess ? memory : nullptr);
  if (error == cudaSuccess) error = cudaMemsetAsync(memory, 0, bytes, nullptr);
  if (error == cudaSuccess) error = cudaStreamSynchronize(nullptr);
  if (error != cudaSuccess) return Status::error(std::string("allocating the zero bias: ") + cudaGetErrorString(error));
  return zeros;
}

}  // namespace

Result<std::unique_ptr<CudnnLayerNorm>> CudnnLayerNorm::create(const CudnnLayerNormProblem& p, int engine) {
  LOKA_RETURN_IF_ERROR(can_implement(p));
  const std::string what = describe(p) + " (engine " + std::to_string(engine) + "): ";
  auto impl = std::make_unique<Impl>();
  impl->epsilon = p.epsilon;
  Result<std::vector<cudnnBackendDescriptor_t>> operations = build_operations(p, impl->graph);
  LOKA_RETURN_IF_ERROR(operations.status().with_context(what));
  const Status planned = impl->graph.plan(*operations, engine, static_cast<int64_t>(kGemmWorkspaceBytes));
  LOKA_RETURN_IF_ERROR(planned.with_context(what));
  if (!p.has_bias) {
    Result<std::unique_ptr<void, FreeDeviceMemory>> zeros = device_zeros(p.cols);
    LOKA_RETURN_IF_ERROR(zeros.status().with_context(what));
    impl->zero_bias = std::move(zeros).value();
  }
  return std::unique_ptr<CudnnLayerNorm>(new CudnnLayerNorm(p, std::move(impl)));
}

int CudnnLayerNorm::engine_count() const { return impl_->graph.engine_count(); }

size_t CudnnLayerNorm::workspace_bytes() const { return static_cast<size_t>(impl_->graph.workspace_bytes()); }

Status CudnnLayerNorm::run(const LayerNormArgs& args, void* workspace, cudaStream_t stream) const {
  const CudnnLayerNormProblem& p = problem_;
  if (args.rows != p.rows || args.cols != p.cols || args.epsilon != p.epsilon)
    return Status::error(describe(p) + ": the run's rows=" + std::to_string(args.rows) + " cols=" + std::to_string(args.cols) +
                         " epsilon=" + std::to_string(args.epsilon) + " differ from the problem's (the plan is built for them)");
  if ((args.bias != nullptr) != p.has_bias || (args.residual != nullptr) != p.has_residual)
    return Status::error(describe(p) + ": bias and residual must be given exactly when the problem has them");
  if (args.amax != nullptr) return Status::error(describe(p) + ": the graph computes no amax");
  if (args.y == nullptr || args.y_codes != nullptr) return Status::error(describe(p) + ": writes FP32: needs y (not y_codes)");

  // Fixed-size lists: a steady-state run allocates nothing on the host either.
  std::array<int64_t, 6> uids{kX, kScale, kBias, kY};
  std::array<void*, 6> pointers{const_cast<float*>(args.x), const_cast<float*>(args.scale),
                                p.has_bias ? const_cast<float*>(args.bias) : impl_->zero_bias.get(), args.y};
  size_t count = 4;
  if (p.has_residual) {
    uids[count] = kResidual;
    pointers[count++] = const_cast<float*>(args.residual);
  }
  for (size_t i = 0; i < count; ++i)
    if (pointers[i] == nullptr || !aligned16(pointers[i]))
      return Status::error(describe(p) + ": every operand must be given and 16-byte aligned (the graph's tensors say so)");
  // The scalars, by value: host addresses the kernel owns, so the pack can be kept between runs.
  uids[count] = kEpsilon;
  pointers[count++] = &impl_->epsilon;
  const Status status =
      impl_->graph.run(std::span(uids).first(count), std::span(pointers).first(count), workspace, stream);
  return status ? status : status.with_context(describe(p) + ": ");  // the name only on failure
}

#else  // no cuDNN in this build

struct CudnnLayerNorm::Impl {};

Result<std::unique_ptr<CudnnLayerNorm>> CudnnLayerNorm::create(const CudnnLayerNormProblem& p, int) {
  LOKA_RETURN_IF_ERROR(can_implement(p));
  return Status::error(describe(p) + ": " + cudnn_unavailable_reason());
}

int CudnnLayerNorm::engine_count() const { return 0; }

size_t CudnnLayerNorm::workspace_bytes() const { return 0; }

Status CudnnLayerNorm::run(const LayerNormArgs&, void*, cudaStream_t) const {
  return Status::error(describe(problem_) + ": " + cudnn_unavailable_reason());
}

#endif

// After Impl's definition (either one): unique_ptr<Impl> deletes it here.
CudnnLayerNorm::~CudnnLayerNorm() = default;
CudnnLayerNorm::CudnnLayerNorm(CudnnLayerNormProblem problem, std::unique_ptr<Impl> impl)
    : problem_(problem), impl_(std::move(impl)) {}

}  // namespace loka::cuda
