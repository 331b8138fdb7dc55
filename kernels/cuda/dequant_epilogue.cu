// ============================================================================
// kernels/cuda/dequant_epilogue.cu — the scale epilogue, one pass over [rows, cols].
//
// Memory-bound: each element reads acc (FP32 or BF16, and the optional
// multiplier and residual, each FP32 or BF16) and writes y (FP32 or BF16) and/or
// its codes once. A 2-D launch (column groups × rows) gives each
// thread fixed columns, so it loads their w_scale and bias once and then walks
// rows with no index division; the per-row x_scale is one load per row. When
// cols % 4 == 0 and every base is aligned to 4 of its elements (16 bytes for
// FP32, 8 for BF16, 4 for the codes), a thread moves 4 columns of each buffer in
// one access. The arithmetic per element is the one
// the CPU reference does, in the same order, whatever the path (dequant_value.cuh);
// the codes are those of the FP32 y (before a BF16 y's rounding) divided by the scale, as QuantizeLinear's (e4m3_quotients:
// a product with the reciprocal, divided only near a code's rounding boundary).
// The accumulator's and y's types, the activation and whether codes are written are
// template arguments (48 kernels); the two terms' types are read at run time instead
// (a branch per row that every thread of the launch takes alike, beside loads that cost
// far more: 4x fewer kernels to compile). With the activation and the codes
// decided at run time, the division in every code and the GELU's erf beside it,
// the ranker's GELU epilogue into codes ran at 22% of the copy rate (303 us at
// 163840x512 on an H200, 2026-11-28, kernel_rate_bench's inputs of the day: every
// value GELU(0)); specialised, with e4m3_quotients, 35% (185 us). In that day's
// H200 benchmark the ranker's three such epilogues took 175 us each on its data.
// ============================================================================
#include "kernels/cuda/dequant_epilogue.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/cuda/dequant_value.cuh"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/fp8_codec.cuh"

namespace loka::cuda {
namespace {

template <int kVec, typename T>
__device__ __forceinline__ void load_floats(const T* p, float (&v)[kVec]) {
  const Pack<T, kVec> pack = *reinterpret_cast<const Pack<T, kVec>*>(p);
#pragma unroll
  for (int j = 0; j < kVec; ++j) v[j] = to_float(pack.v[j]);
}

template <int kVec, typename T>
__device__ __forceinline__ void store_floats(T* p, const float (&v)[kVec]) {
  Pack<T, kVec> pack;
#pragma unroll
  for (int j = 0; j < kVec; ++j) pack.v[j] = from_float<T>(v[j]);
  *reinterpret_cast<Pack<T, kVec>*>(p) = pack;
}

/// kVec elements from element i of a multiplier or residual, FP32 or BF16 as the launch says (every
/// thread takes the same branch).
template <int kVec>
__device__ __forceinline__ void load_term(const void* term, bool bf16, int64_t i, float (&v)[kVec]) {
  if (bf16) load_floats<kVec>(static_cast<const __nv_bfloat16*>(term) + i, v);
  else load_floats<kVec>(static_cast<const float*>(term) + i, v);
}

/// Threads (x: column group of kVec, y: row); rows grid-stride along gridDim.y. Acc and Y: the
/// accumulator's and y's storage types (float, or __nv_bfloat16).
template <int kVec, typename Acc, typename Y, GemmEpilogue kActivation, bool kCodes>
__global__ void dequant_epilogue_kernel(DequantEpilogueArgs args, float inv_code_scale) {
  const Acc* acc = static_cast<const Acc*>(args.acc);
  const bool multiplier_bf16 = args.multiplier_type == DType::kBFloat16;
  const bool residual_bf16 = args.residual_type == DType::kBFloat16;
  const int64_t c = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kVec;
  if (c >= args.cols) return;  // kVec > 1 only when cols % kVec == 0: a group is whole or absent
  float ws[kVec], b[kVec] = {};
  load_floats<kVec>(args.w_scale + c, ws);
  if (args.bias) load_floats<kVec>(args.bias + c, b);
  const float tensor_xs = args.per_row_x_scale ? 0.0f : args.x_scale[0];
  for (int64_t r = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; r < args.rows;
       r += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    const float xs = args.per_row_x_scale ? args.x_scale[r] : tensor_xs;
    const int64_t i = r * args.cols + c;
    float v[kVec];
    load_floats<kVec>(acc + i, v);
#pragma unroll
    for (int j = 0; j < kVec; ++j) v[j] = dequant_value(v[j], xs, ws[j], args.bias != nullptr, b[j], kActivation);
    if (args.multiplier) {
      float m[kVec];
      load_term<kVec>(args.multiplier, multiplier_bf16, i, m);
#pragma unroll
      for (int j = 0; j < kVec; ++j) v[j] = __fmul_rn(v[j], m[j]);
    }
    if (args.residual) {
      float s[kVec];
      load_term<kVec>(args.residual, residual_bf16, i, s);
#pragma unroll
      for (int j = 0; j < kVec; ++j) v[j] = __fadd_rn(v[j], s[j]);
    }
    if (args.y) store_floats<kVec>(static_cast<Y*>(args.y) + i, v);
    if constexpr (kCodes) {
      float q[kVec];
      e4m3_quotients(v, args.code_scale, inv_code_scale, q);
      Pack<uint8_t, kVec> code;
#pragma unroll
      for (int j = 0; j < kVec; ++j) code.v[j] = fp8_encode(q[j], true);
      *reinterpret_cast<Pack<uint8_t, kVec>*>(args.codes + i) = code;
    }
  }
}

/// Four columns a thread need cols % 4 == 0 and bases aligned to four elements (null ones do not count).
bool can_vectorize(const DequantEpilogueArgs& args) {
  if (args.cols % 4 != 0) return false;
  const std::pair<const void*, DType> buffers[] = {
      {args.w_scale, DType::kFloat32},           {args.bias, DType::kFloat32}, {args.acc, args.acc_type},
      {args.multiplier, args.multiplier_type}, {args.residual, args.residual_type}, {args.y, args.y_type}};
  for (const auto& [p, dtype] : buffers)
    if (p && !is_aligned(p, 4 * dtype_size(dtype))) return false;
  return args.codes == nullptr || is_aligned(args.codes, 4);
}

template <int kVec, typename Acc, typename Y, GemmEpilogue kActivation, bool kCodes>
void launch(const DequantEpilogueArgs& args, cudaStream_t stream) {
  // Enough blocks to fill the GPU several times; beyond that threads loop over rows, reusing
  // their per-column scales.
  const RowColumnLaunch shape = row_column_launch(args.rows, (args.cols + kVec - 1) / kVec, 4096);
  dequant_epilogue_kernel<kVec, Acc, Y, kActivation, kCodes>
      <<<shape.grid, shape.block, 0, stream>>>(args, e4m3_inverse_scale(args.code_scale));
}

/// The kernel for the activation and whether codes are written.
template <int kVec, typename Acc, typename Y>
void launch_specialised(const DequantEpilogueArgs& args, cudaStream_t stream) {
  const auto with = [&](auto activation) {
    constexpr GemmEpilogue kActivation = decltype(activation)::value;
    if (args.codes) launch<kVec, Acc, Y, kActivation, true>(args, stream);
    else launch<kVec, Acc, Y, kActivation, false>(args, stream);
  };
  switch (args.activation) {
    case GemmEpilogue::kRelu: with(std::integral_constant<GemmEpilogue, GemmEpilogue::kRelu>{}); break;
    case GemmEpilogue::kGelu: with(std::integral_constant<GemmEpilogue, GemmEpilogue::kGelu>{}); break;
    case GemmEpilogue::kNone: with(std::integral_constant<GemmEpilogue, GemmEpilogue::kNone>{}); break;
  }
}

/// Calls fn(T{}) with T the storage type of an FP32 or BF16 buffer (the only types checked in):
/// device_util.cuh's visit_float_type without FP16, whose kernels nothing would launch.
template <typename Fn>
void with_storage_type(DType dtype, Fn&& fn) {
  if (dtype == DType::kBFloat16) fn(__nv_bfloat16{});
  else fn(float{});
}

bool is_fp32_or_bf16(DType dtype) { return dtype == DType::kFloat32 || dtype == DType::kBFloat16; }

/// An error unless y, where it is the very buffer of an operand, has that operand's type: with
/// another element size, a thread would write elements another has yet to read.
Status check_y_aliasing(const DequantEpilogueArgs& args) {
  const std::pair<const void*, DType> operands[] = {
      {args.acc, args.acc_type}, {args.multiplier, args.multiplier_type}, {args.residual, args.residual_type}};
  for (const auto& [p, dtype] : operands)
    if (p == args.y && dtype_size(dtype) != dtype_size(args.y_type))
      return Status::error(std::string("dequant epilogue: ") + std::string(dtype_name(args.y_type)) +
                           " y cannot be written over a " + std::string(dtype_name(dtype)) + " operand");
  return Status::ok();
}

}  // namespace

Status launch_dequant_epilogue(const DequantEpilogueArgs& args, cudaStream_t stream) {
  if (args.rows < 0 || args.cols < 0) return Status::error("dequant epilogue: negative shape");
  if (args.rows == 0 || args.cols == 0) return Status::ok();
  if (!args.acc || !args.x_scale || !args.w_scale || (!args.y && !args.codes))
    return Status::error("dequant epilogue: null pointer");
  if (!is_fp32_or_bf16(args.acc_type))
    return Status::error("dequant epilogue: the accumulator must be FP32 or BF16, not " + std::string(dtype_name(args.acc_type)));
  if (!is_fp32_or_bf16(args.multiplier_type))
    return Status::error("dequant epilogue: the multiplier must be FP32 or BF16, not " +
                         std::string(dtype_name(args.multiplier_type)));
  if (!is_fp32_or_bf16(args.residual_type))
    return Status::error("dequant epilogue: the residual must be FP32 or BF16, not " +
                         std::string(dtype_name(args.residual_type)));
  if (!is_fp32_or_bf16(args.y_type))
    return Status::error("dequant epilogue: y must be FP32 or BF16, not " + std::string(dtype_name(args.y_type)));
  if (args.y) LOKA_RETURN_IF_ERROR(check_y_aliasing(args));
  if (args.codes && !(args.code_scale > 0.0f && std::isfinite(args.code_scale)))
    return Status::error("dequant epilogue: the code scale must be finite and > 0");
  const bool vector = can_vectorize(args);
  with_storage_type(args.acc_type, [&](auto acc) {
    // Only the codes written: y's type makes no kernel of its own.
    with_storage_type(args.y ? args.y_type : DType::kFloat32, [&](auto y) {
      using Acc = decltype(acc);
      using Y = decltype(y);
      if (vector) launch_specialised<4, Acc, Y>(args, stream);
      else launch_specialised<1, Acc, Y>(args, stream);
    });
  });
  return launch_status("dequant epilogue");
}

}  // namespace loka::cuda
