// ============================================================================
// kernels/cuda/dequant_epilogue.cu — the scale epilogue, one pass over [rows, cols].
//
// Memory-bound: each element reads acc (FP32 or BF16, and the optional
// multiplier and residual) and writes y and/or its codes once. A 2-D launch (column groups × rows) gives each
// thread fixed columns, so it loads their w_scale and bias once and then walks
// rows with no index division; the per-row x_scale is one load per row. When
// cols % 4 == 0 and every [rows, cols] and per-column base is 16-byte aligned,
// a thread moves 4 columns as float4. The arithmetic per element is the one
// the CPU reference does, in the same order, whatever the path (dequant_value.cuh);
// the codes are those of y divided by the scale, as QuantizeLinear's (e4m3_quotients:
// a product with the reciprocal, divided only near a code's rounding boundary).
// The activation and whether codes are written are template arguments: with them
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

/// Threads (x: column group of kVec, y: row); rows grid-stride along gridDim.y. Acc: the
/// accumulator's storage type (float, or __nv_bfloat16 when the GEMM rounded it).
template <int kVec, typename Acc, GemmEpilogue kActivation, bool kCodes>
__global__ void dequant_epilogue_kernel(DequantEpilogueArgs args, float inv_code_scale) {
  const Acc* acc = static_cast<const Acc*>(args.acc);
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
      load_floats<kVec>(args.multiplier + i, m);
#pragma unroll
      for (int j = 0; j < kVec; ++j) v[j] = __fmul_rn(v[j], m[j]);
    }
    if (args.residual) {
      float s[kVec];
      load_floats<kVec>(args.residual + i, s);
#pragma unroll
      for (int j = 0; j < kVec; ++j) v[j] = __fadd_rn(v[j], s[j]);
    }
    if (args.y) {
      Pack<float, kVec> out;
#pragma unroll
      for (int j = 0; j < kVec; ++j) out.v[j] = v[j];
      *reinterpret_cast<Pack<float, kVec>*>(args.y + i) = out;
    }
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
  for (const float* p : {args.w_scale, args.bias, args.multiplier, args.residual, static_cast<const float*>(args.y)})
    if (p && !is_aligned(p, 16)) return false;
  if (!is_aligned(args.acc, args.acc_type == DType::kBFloat16 ? 8 : 16)) return false;
  return args.codes == nullptr || is_aligned(args.codes, 4);
}

template <int kVec, typename Acc, GemmEpilogue kActivation, bool kCodes>
void launch(const DequantEpilogueArgs& args, cudaStream_t stream) {
  // Enough blocks to fill the GPU several times; beyond that threads loop over rows, reusing
  // their per-column scales.
  const RowColumnLaunch shape = row_column_launch(args.rows, (args.cols + kVec - 1) / kVec, 4096);
  dequant_epilogue_kernel<kVec, Acc, kActivation, kCodes>
      <<<shape.grid, shape.block, 0, stream>>>(args, e4m3_inverse_scale(args.code_scale));
}

/// The kernel for the activation and whether codes are written.
template <int kVec, typename Acc>
void launch_specialised(const DequantEpilogueArgs& args, cudaStream_t stream) {
  const auto with = [&](auto activation) {
    constexpr GemmEpilogue kActivation = decltype(activation)::value;
    if (args.codes) launch<kVec, Acc, kActivation, true>(args, stream);
    else launch<kVec, Acc, kActivation, false>(args, stream);
  };
  switch (args.activation) {
    case GemmEpilogue::kRelu: with(std::integral_constant<GemmEpilogue, GemmEpilogue::kRelu>{}); break;
    case GemmEpilogue::kGelu: with(std::integral_constant<GemmEpilogue, GemmEpilogue::kGelu>{}); break;
    case GemmEpilogue::kNone: with(std::integral_constant<GemmEpilogue, GemmEpilogue::kNone>{}); break;
  }
}

}  // namespace

Status launch_dequant_epilogue(const DequantEpilogueArgs& args, cudaStream_t stream) {
  if (args.rows < 0 || args.cols < 0) return Status::error("dequant epilogue: negative shape");
  if (args.rows == 0 || args.cols == 0) return Status::ok();
  if (!args.acc || !args.x_scale || !args.w_scale || (!args.y && !args.codes))
    return Status::error("dequant epilogue: null pointer");
  if (args.acc_type != DType::kFloat32 && args.acc_type != DType::kBFloat16)
    return Status::error("dequant epilogue: the accumulator must be FP32 or BF16");
  if (args.acc_type == DType::kBFloat16 && args.acc == args.y)
    return Status::error("dequant epilogue: a BF16 accumulator cannot be written over by FP32 y");
  if (args.codes && !(args.code_scale > 0.0f && std::isfinite(args.code_scale)))
    return Status::error("dequant epilogue: the code scale must be finite and > 0");
  const bool vector = can_vectorize(args);
  if (args.acc_type == DType::kBFloat16) {
    if (vector) launch_specialised<4, __nv_bfloat16>(args, stream);
    else launch_specialised<1, __nv_bfloat16>(args, stream);
  } else {
    if (vector) launch_specialised<4, float>(args, stream);
    else launch_specialised<1, float>(args, stream);
  }
  return launch_status("dequant epilogue");
}

}  // namespace loka::cuda
