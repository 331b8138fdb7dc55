// ============================================================================
// kernels/cuda/elementwise.cu — unary and broadcasting binary kernels.
//
// One grid-stride kernel per (storage type, output type, coalesced rank,
// vector width); the op is a runtime switch, uniform across the grid, so it
// costs a branch, not a kernel per op. A thread handles kVec consecutive
// innermost elements: packed loads for operands contiguous there, one
// broadcast load for operands of stride 0.
// ============================================================================
#include <algorithm>
#include <string>
#include <type_traits>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/shape_plan.h"

namespace loka::cuda {
namespace {

// The CPU's constants, rounded to float the same way (static_cast of the double).
constexpr float kSqrtHalf = static_cast<float>(0.70710678118654752440);
constexpr float kSqrtTwoOverPi = static_cast<float>(0.79788456080286535588);

/// The CPU runtime's formulas (runtime/ops/elementwise.cc); __f*_rn keep nvcc from fusing
/// a multiply and an add into one FMA, which would round differently.
__device__ __forceinline__ float apply_unary(UnaryOp op, float x) {
  switch (op) {
    case UnaryOp::kIdentity: return x;
    case UnaryOp::kRelu: return x > 0.0f ? x : (isnan(x) ? x : 0.0f);
    case UnaryOp::kSigmoid: return 1.0f / (1.0f + expf(-x));
    case UnaryOp::kTanh: return tanhf(x);
    case UnaryOp::kErf: return erff(x);
    case UnaryOp::kGelu: return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, erff(__fmul_rn(x, kSqrtHalf))));
    case UnaryOp::kGeluTanh: {
      const float cube = __fmul_rn(__fmul_rn(__fmul_rn(0.044715f, x), x), x);
      const float inner = __fmul_rn(kSqrtTwoOverPi, __fadd_rn(x, cube));
      return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, tanhf(inner)));
    }
    case UnaryOp::kNeg: return -x;
    case UnaryOp::kSqrt: return sqrtf(x);
    case UnaryOp::kExp: return expf(x);
    case UnaryOp::kLog: return logf(x);
    case UnaryOp::kAbs: return fabsf(x);
    case UnaryOp::kReciprocal: return 1.0f / x;
  }
  return x;
}

__device__ __forceinline__ float apply_arithmetic(BinaryOp op, float x, float y) {
  switch (op) {
    case BinaryOp::kAdd: return x + y;
    case BinaryOp::kSub: return x - y;
    case BinaryOp::kMul: return x * y;
    case BinaryOp::kDiv: return x / y;
    // In double, rounded once: what the CPU computes (std::pow on doubles).
    case BinaryOp::kPow: return static_cast<float>(pow(static_cast<double>(x), static_cast<double>(y)));
    // NaN in either operand wins, as on the CPU.
    case BinaryOp::kMax: return (isnan(x) || x > y) ? x : y;
    case BinaryOp::kMin: return (isnan(x) || x < y) ? x : y;
    default: return 0.0f;
  }
}

__device__ __forceinline__ bool apply_comparison(BinaryOp op, float x, float y) {
  switch (op) {
    case BinaryOp::kEqual: return x == y;
    case BinaryOp::kLess: return x < y;
    case BinaryOp::kGreater: return x > y;
    case BinaryOp::kLessOrEqual: return x <= y;
    default: return x >= y;
  }
}

template <typename Out>
__device__ __forceinline__ Out binary_result(BinaryOp op, float x, float y) {
  if constexpr (std::is_same_v<Out, uint8_t>) return apply_comparison(op, x, y) ? 1 : 0;
  else return from_float<Out>(apply_arithmetic(op, x, y));
}

template <typename In, typename Out, int kVec>
__global__ void unary_kernel(UnaryOp op, const In* x, Out* y, int64_t groups) {
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < groups;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const Pack<In, kVec> in = reinterpret_cast<const Pack<In, kVec>*>(x)[g];
    Pack<Out, kVec> out;
#pragma unroll
    for (int j = 0; j < kVec; ++j) out.v[j] = from_float<Out>(apply_unary(op, to_float(in.v[j])));
    reinterpret_cast<Pack<Out, kVec>*>(y)[g] = out;
  }
}

/// Coalesced broadcast iteration: extent and a/b element strides per dim, outermost first.
template <int kRank>
struct BroadcastIndex {
  int64_t extent[kRank];
  int64_t a_stride[kRank];
  int64_t b_stride[kRank];
};

/// kVec consecutive values of an operand whose innermost stride is 1 (packed) or 0 (broadcast).
template <typename T, int kVec>
__device__ __forceinline__ void load_operand(const T* base, int64_t at, bool contiguous, float (&values)[kVec]) {
  if (kVec > 1 && contiguous) {
    const Pack<T, kVec> pack = *reinterpret_cast<const Pack<T, kVec>*>(base + at);
#pragma unroll
    for (int j = 0; j < kVec; ++j) values[j] = to_float(pack.v[j]);
  } else {
    const float value = to_float(base[at]);
#pragma unroll
    for (int j = 0; j < kVec; ++j) values[j] = value;
  }
}

template <typename T, typename Out, int kRank, int kVec>
__global__ void binary_kernel(BinaryOp op, const T* a, const T* b, Out* out, const BroadcastIndex<kRank> index,
                              int64_t groups) {
  const bool a_contiguous = index.a_stride[kRank - 1] == 1;
  const bool b_contiguous = index.b_stride[kRank - 1] == 1;
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < groups;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rest = g * kVec, at_a = 0, at_b = 0;
#pragma unroll
    for (int d = kRank - 1; d >= 0; --d) {
      const int64_t coordinate = rest % index.extent[d];
      rest /= index.extent[d];
      at_a += coordinate * index.a_stride[d];
      at_b += coordinate * index.b_stride[d];
    }
    float x[kVec], y[kVec];
    load_operand<T, kVec>(a, at_a, a_contiguous, x);
    load_operand<T, kVec>(b, at_b, b_contiguous, y);
    Pack<Out, kVec> result;
#pragma unroll
    for (int j = 0; j < kVec; ++j) result.v[j] = binary_result<Out>(op, x[j], y[j]);
    reinterpret_cast<Pack<Out, kVec>*>(out)[g] = result;
  }
}

bool aligned(const void* pointer, size_t bytes) { return reinterpret_cast<uintptr_t>(pointer) % bytes == 0; }

template <typename T, typename Out, int kRank, int kVec>
void launch_binary_kernel(BinaryOp op, const T* a, const T* b, Out* out, const StridedDims<3, kMaxRank>& dims,
                          cudaStream_t stream) {
  BroadcastIndex<kRank> index{};
  for (int d = 0; d < kRank; ++d) {
    index.extent[d] = dims.extent[static_cast<size_t>(d)];
    index.a_stride[d] = dims.stride[0][static_cast<size_t>(d)];
    index.b_stride[d] = dims.stride[1][static_cast<size_t>(d)];
  }
  const int64_t groups = dims.element_count() / kVec;
  binary_kernel<T, Out, kRank, kVec><<<blocks_for(groups), kThreadsPerBlock, 0, stream>>>(op, a, b, out, index, groups);
}

/// Picks the kernel for a coalesced plan of rank 1..6: 4 elements per thread where
/// the innermost dim allows it (rank <= 3 only, to bound the number of kernels).
template <typename T, typename Out>
void dispatch_binary(BinaryOp op, const T* a, const T* b, Out* out, const StridedDims<3, kMaxRank>& dims,
                     cudaStream_t stream) {
  const size_t inner = static_cast<size_t>(dims.rank - 1);
  bool vectorize = dims.rank <= 3 && dims.extent[inner] % 4 == 0 && aligned(out, 4 * sizeof(Out));
  for (int k = 0; k < 2 && vectorize; ++k) {
    const int64_t inner_stride = dims.stride[static_cast<size_t>(k)][inner];
    vectorize = inner_stride == 0 || (inner_stride == 1 && aligned(k == 0 ? a : b, 4 * sizeof(T)));
    for (size_t d = 0; d < inner && vectorize; ++d) vectorize = dims.stride[static_cast<size_t>(k)][d] % 4 == 0;
  }
  switch (dims.rank) {
    case 1: return vectorize ? launch_binary_kernel<T, Out, 1, 4>(op, a, b, out, dims, stream)
                             : launch_binary_kernel<T, Out, 1, 1>(op, a, b, out, dims, stream);
    case 2: return vectorize ? launch_binary_kernel<T, Out, 2, 4>(op, a, b, out, dims, stream)
                             : launch_binary_kernel<T, Out, 2, 1>(op, a, b, out, dims, stream);
    case 3: return vectorize ? launch_binary_kernel<T, Out, 3, 4>(op, a, b, out, dims, stream)
                             : launch_binary_kernel<T, Out, 3, 1>(op, a, b, out, dims, stream);
    case 4: return launch_binary_kernel<T, Out, 4, 1>(op, a, b, out, dims, stream);
    case 5: return launch_binary_kernel<T, Out, 5, 1>(op, a, b, out, dims, stream);
    default: return launch_binary_kernel<T, Out, 6, 1>(op, a, b, out, dims, stream);
  }
}

bool is_compute_type(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kBFloat16 || dtype == DType::kFloat16;
}

}  // namespace

bool is_comparison(BinaryOp op) { return op >= BinaryOp::kEqual; }

Status launch_unary(UnaryOp op, const void* x, DType x_dtype, void* y, DType y_dtype, int64_t count,
                    cudaStream_t stream) {
  if (!is_compute_type(x_dtype) || !is_compute_type(y_dtype))
    return Status::error("unary op: X and Y must be FLOAT, BFLOAT16 or FLOAT16, got " + std::string(dtype_name(x_dtype)) +
                         " and " + std::string(dtype_name(y_dtype)));
  if (count < 0) return Status::error("unary op: negative element count " + std::to_string(count));
  if (count == 0) return Status::ok();
  visit_float_type(x_dtype, [&](auto in_zero) {
    visit_float_type(y_dtype, [&](auto out_zero) {
      using In = decltype(in_zero);
      using Out = decltype(out_zero);
      const bool vectorize = count % 4 == 0 && aligned(x, 4 * sizeof(In)) && aligned(y, 4 * sizeof(Out));
      const int64_t groups = vectorize ? count / 4 : count;
      if (vectorize)
        unary_kernel<In, Out, 4><<<blocks_for(groups), kThreadsPerBlock, 0, stream>>>(
            op, static_cast<const In*>(x), static_cast<Out*>(y), groups);
      else
        unary_kernel<In, Out, 1><<<blocks_for(groups), kThreadsPerBlock, 0, stream>>>(
            op, static_cast<const In*>(x), static_cast<Out*>(y), groups);
    });
  });
  return launch_status("unary op");
}

Status launch_binary(BinaryOp op, const void* a, const std::vector<int64_t>& a_shape, const void* b,
                     const std::vector<int64_t>& b_shape, DType dtype, void* out, cudaStream_t stream) {
  if (!is_compute_type(dtype))
    return Status::error("binary op: operands must be FLOAT, BFLOAT16 or FLOAT16, got " + std::string(dtype_name(dtype)));
  LOKA_RETURN_IF_ERROR(check_shape(a_shape, "binary op: A"));
  LOKA_RETURN_IF_ERROR(check_shape(b_shape, "binary op: B"));
  LOKA_ASSIGN_OR_RETURN(const std::vector<int64_t> out_shape, broadcast_shape(a_shape, b_shape));
  const std::vector<int64_t> a_strides = broadcast_strides(a_shape, out_shape);
  const std::vector<int64_t> b_strides = broadcast_strides(b_shape, out_shape);
  const std::vector<int64_t> out_strides = contiguous_strides(out_shape);
  StridedDims<3, kMaxRank> dims;
  for (size_t d = 0; d < out_shape.size(); ++d) dims.push(out_shape[d], {a_strides[d], b_strides[d], out_strides[d]});
  if (dims.element_count() == 0) return Status::ok();
  coalesce(dims);
  if (dims.rank == 0) dims.push(1, {0, 0, 1});  // scalar op scalar
  visit_float_type(dtype, [&](auto zero) {
    using T = decltype(zero);
    const auto* pa = static_cast<const T*>(a);
    const auto* pb = static_cast<const T*>(b);
    if (is_comparison(op)) dispatch_binary(op, pa, pb, static_cast<uint8_t*>(out), dims, stream);
    else dispatch_binary(op, pa, pb, static_cast<T*>(out), dims, stream);
  });
  return launch_status("binary op");
}

}  // namespace loka::cuda
