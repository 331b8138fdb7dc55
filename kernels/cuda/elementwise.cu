// ============================================================================
// kernels/cuda/elementwise.cu — unary and broadcasting binary kernels.
//
// One grid-stride kernel per (storage type, output type, index shape, vector
// width); the op is a runtime switch, uniform across the grid, so it costs a
// branch, not a kernel per op. These kernels are memory-bound, so the host
// picks the one with the least index arithmetic for the coalesced plan:
// same-shape and tensor-scalar ops read flat (no index math), broadcasts
// divide by launch constants with FastDivmod in 32 bits (no 64-bit division
// per dimension per element, which kept them far below bandwidth). A thread
// handles kVec consecutive innermost elements: packed loads for operands
// contiguous there, one broadcast load for operands of stride 0.
// ============================================================================
#include <algorithm>
#include <string>
#include <type_traits>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/fast_divmod.cuh"
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
__global__ void unary_kernel(UnaryOp op, const In* x, Out* y, int64_t count) {
  map_elements<kVec>(x, y, count, [&](In v) { return from_float<Out>(apply_unary(op, to_float(v))); });
}

/// kVec consecutive values of an operand whose innermost stride is 1 (packed) or 0 (broadcast).
template <typename T, int kVec, typename Index>
__device__ __forceinline__ void load_operand(const T* base, Index at, bool contiguous, float (&values)[kVec]) {
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

template <typename Out, int kVec>
__device__ __forceinline__ Pack<Out, kVec> binary_pack(BinaryOp op, const float (&x)[kVec], const float (&y)[kVec]) {
  Pack<Out, kVec> result;
#pragma unroll
  for (int j = 0; j < kVec; ++j) result.v[j] = binary_result<Out>(op, x[j], y[j]);
  return result;
}

/// Rank 1 after coalescing: each operand is contiguous (step 1) or one value (step 0),
/// so element i reads a[i·a_step] and b[i·b_step] with no index math at all: same-shape
/// operands and tensor-scalar ops. kVec = 4 needs every packed base aligned; the
/// count % 4 trailing elements take the scalar path inside the same launch.
template <typename T, typename Out, int kVec>
__global__ void binary_flat_kernel(BinaryOp op, const T* a, bool a_step, const T* b, bool b_step, Out* out,
                                   int64_t count) {
  grid_stride_groups<kVec>(
      count,
      [&](int64_t g) {
        float x[kVec], y[kVec];
        load_operand<T, kVec>(a, a_step ? g * kVec : 0, a_step, x);
        load_operand<T, kVec>(b, b_step ? g * kVec : 0, b_step, y);
        reinterpret_cast<Pack<Out, kVec>*>(out)[g] = binary_pack<Out, kVec>(op, x, y);
      },
      [&](int64_t i) {
        out[i] = binary_result<Out>(op, to_float(a[a_step ? i : 0]), to_float(b[b_step ? i : 0]));
      });
}

/// Coalesced broadcast iteration of rank >= 2: per dim (outermost first) a divider
/// by its extent and the a/b element strides (>= 0: broadcast strides are 0 or positive).
template <typename Divider, typename Index, int kRank>
struct BroadcastIndex {
  Divider extent[kRank];  ///< extent[0] is never divided by (its quotient is always 0)
  Index a_stride[kRank];
  Index b_stride[kRank];
};

/// General broadcast: element e = g·kVec decomposes into coordinates innermost first,
/// one division by a launch constant per inner dim — FastDivmod (multiply-high) with
/// 32-bit indices below 2^31 elements, plain 64-bit division beyond.
template <typename T, typename Out, typename Divider, typename Index, int kRank, int kVec>
__global__ void binary_strided_kernel(BinaryOp op, const T* a, const T* b, Out* out,
                                      const BroadcastIndex<Divider, Index, kRank> index, Index groups) {
  const bool a_contiguous = index.a_stride[kRank - 1] == 1;
  const bool b_contiguous = index.b_stride[kRank - 1] == 1;
  for (Index g = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; g < groups;
       g += static_cast<Index>(gridDim.x) * blockDim.x) {
    Index rest = g * kVec, at_a = 0, at_b = 0;
#pragma unroll
    for (int d = kRank - 1; d > 0; --d) {
      Index coordinate;
      rest = index.extent[d].divmod(rest, coordinate);
      at_a += coordinate * index.a_stride[d];
      at_b += coordinate * index.b_stride[d];
    }
    at_a += rest * index.a_stride[0];
    at_b += rest * index.b_stride[0];
    float x[kVec], y[kVec];
    load_operand<T, kVec>(a, at_a, a_contiguous, x);
    load_operand<T, kVec>(b, at_b, b_contiguous, y);
    reinterpret_cast<Pack<Out, kVec>*>(out)[g] = binary_pack<Out, kVec>(op, x, y);
  }
}

/// Largest element count the 32-bit strided kernels take (every index and offset < 2^31).
constexpr int64_t kMaxIndex32 = (int64_t{1} << 31) - 1;

template <typename T, typename Out, typename Divider, typename Index, int kRank, int kVec>
void launch_strided(BinaryOp op, const T* a, const T* b, Out* out, const StridedDims<3, kMaxRank>& dims,
                    cudaStream_t stream) {
  // Plans of lower rank are padded with leading extent-1 dims (used by the 64-bit kernel).
  const int pad = kRank - dims.rank;
  BroadcastIndex<Divider, Index, kRank> index{};
  for (int d = 0; d < kRank; ++d) {
    const size_t from = static_cast<size_t>(d < pad ? 0 : d - pad);
    index.extent[d] = Divider(static_cast<Index>(d < pad ? 1 : dims.extent[from]));
    index.a_stride[d] = static_cast<Index>(d < pad ? 0 : dims.stride[0][from]);
    index.b_stride[d] = static_cast<Index>(d < pad ? 0 : dims.stride[1][from]);
  }
  const int64_t groups = dims.element_count() / kVec;
  binary_strided_kernel<T, Out, Divider, Index, kRank, kVec>
      <<<blocks_for(groups), kThreadsPerBlock, 0, stream>>>(op, a, b, out, index, static_cast<Index>(groups));
}

template <typename T, typename Out, int kRank, int kVec>
void launch_strided32(BinaryOp op, const T* a, const T* b, Out* out, const StridedDims<3, kMaxRank>& dims,
                      cudaStream_t stream) {
  launch_strided<T, Out, FastDivmod, uint32_t, kRank, kVec>(op, a, b, out, dims, stream);
}

/// Picks the kernel for a coalesced plan of rank 1..6:
///   rank 1                       binary_flat_kernel (same shape, or a scalar operand);
///   rank 2..6, < 2^31 elements   binary_strided_kernel with FastDivmod and 32-bit indices
///                                (rank 2 covers "[M,N] op [N]" and "[M,N] op [M,1]");
///   >= 2^31 elements             binary_strided_kernel with 64-bit division, padded to rank 6.
/// 4 elements per thread where the innermost dim and every base allow it
/// (flat: any count; strided: rank <= 3 only, to bound the number of kernels).
template <typename T, typename Out>
void dispatch_binary(BinaryOp op, const T* a, const T* b, Out* out, const StridedDims<3, kMaxRank>& dims,
                     cudaStream_t stream) {
  const size_t inner = static_cast<size_t>(dims.rank - 1);
  const bool out_aligned = is_aligned(out, 4 * sizeof(Out));
  const auto packable = [&](int k) {  // operand k can be read 4 innermost elements at a time
    const int64_t inner_stride = dims.stride[static_cast<size_t>(k)][inner];
    bool ok = inner_stride == 0 || (inner_stride == 1 && is_aligned(k == 0 ? a : b, 4 * sizeof(T)));
    for (size_t d = 0; d < inner && ok; ++d) ok = dims.stride[static_cast<size_t>(k)][d] % 4 == 0;
    return ok;
  };
  if (dims.rank == 1) {
    const int64_t count = dims.extent[0];
    const bool a_step = dims.stride[0][0] != 0, b_step = dims.stride[1][0] != 0;
    if (out_aligned && packable(0) && packable(1))
      binary_flat_kernel<T, Out, 4><<<blocks_for(count / 4), kThreadsPerBlock, 0, stream>>>(op, a, a_step, b, b_step,
                                                                                            out, count);
    else
      binary_flat_kernel<T, Out, 1><<<blocks_for(count), kThreadsPerBlock, 0, stream>>>(op, a, a_step, b, b_step, out,
                                                                                        count);
    return;
  }
  if (dims.element_count() > kMaxIndex32) return launch_strided<T, Out, Divmod64, int64_t, 6, 1>(op, a, b, out, dims, stream);
  const bool vectorize = dims.rank <= 3 && dims.extent[inner] % 4 == 0 && out_aligned && packable(0) && packable(1);
  switch (dims.rank) {
    case 2: return vectorize ? launch_strided32<T, Out, 2, 4>(op, a, b, out, dims, stream)
                             : launch_strided32<T, Out, 2, 1>(op, a, b, out, dims, stream);
    case 3: return vectorize ? launch_strided32<T, Out, 3, 4>(op, a, b, out, dims, stream)
                             : launch_strided32<T, Out, 3, 1>(op, a, b, out, dims, stream);
    case 4: return launch_strided32<T, Out, 4, 1>(op, a, b, out, dims, stream);
    case 5: return launch_strided32<T, Out, 5, 1>(op, a, b, out, dims, stream);
    default: return launch_strided32<T, Out, 6, 1>(op, a, b, out, dims, stream);
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
      // Packed when both bases are aligned; any count (the tail runs scalar in the same launch).
      if (is_aligned(x, 4 * sizeof(In)) && is_aligned(y, 4 * sizeof(Out)))
        unary_kernel<In, Out, 4><<<blocks_for(count / 4), kThreadsPerBlock, 0, stream>>>(
            op, static_cast<const In*>(x), static_cast<Out*>(y), count);
      else
        unary_kernel<In, Out, 1><<<blocks_for(count), kThreadsPerBlock, 0, stream>>>(
            op, static_cast<const In*>(x), static_cast<Out*>(y), count);
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
