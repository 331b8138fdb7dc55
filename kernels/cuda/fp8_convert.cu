// ============================================================================
// kernels/cuda/fp8_convert.cu — FP32 (and BF16) <-> FP8 conversion kernels.
//
// Uses the hardware conversion intrinsics (cvt.rn.satfinite on sm_89+), which
// round to nearest even and saturate to the largest finite value — ONNX's
// saturate=1 semantics. NaN maps to the format's NaN. BF16 values are widened
// exactly and take the FP32 path. Memory-bound: a thread moves 4 values per
// access (float4 or 8 bytes of BF16 / 32-bit codes) when both bases allow,
// grid-stride, with the count % 4 tail in the same launch.
// ============================================================================
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/fp8_codec.cuh"
#include "kernels/cuda/fp8_convert.h"

namespace loka::cuda {
namespace {

/// FP8 code of x / scale: x · inverse (the host's reciprocal: the codes the Probe measured), or the
/// exact FP32 division (kDivide: QuantizeLinear).
template <bool kDivide>
__device__ __forceinline__ uint8_t quantize_one(float x, float scale, float inverse, bool e4m3) {
  return fp8_encode(kDivide ? __fdiv_rn(x, scale) : x * inverse, e4m3);
}

__device__ __forceinline__ float dequantize_one(uint8_t code, float scale, bool e4m3) {
  return fp8_decode(code, e4m3) * scale;
}

/// kVec = 4: 4 values in (a float4, or 8 bytes of BF16, widened exactly), 4 codes out as one 32-bit
/// store (values aligned to 4 of theirs, codes to 4 bytes).
template <int kVec, bool kDivide, typename In>
__global__ void quantize_kernel(const In* values, uint8_t* codes, int64_t count, float scale, float inverse,
                                bool e4m3) {
  map_elements<kVec>(values, codes, count,
                     [&](In v) { return quantize_one<kDivide>(to_float(v), scale, inverse, e4m3); });
}

template <int kVec>
__global__ void dequantize_kernel(const uint8_t* codes, float* values, int64_t count, float scale, bool e4m3) {
  map_elements<kVec>(codes, values, count, [&](uint8_t code) { return dequantize_one(code, scale, e4m3); });
}

template <typename In>
bool packable(const In* values, const uint8_t* codes) {
  return is_aligned(values, 4 * sizeof(In)) && is_aligned(codes, 4);
}

/// Rows of `cols` values into rows of codes `codes_pitch` apart, divided by the scale (E4M3FN).
/// Threads: x a column group of kVec, y a row; rows grid-stride along gridDim.y.
template <int kVec>
__global__ void quantize_rows_into_kernel(const float* values, int64_t rows, int64_t cols, float scale, uint8_t* codes,
                                          int64_t codes_pitch) {
  const int64_t c = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kVec;
  if (c >= cols) return;  // kVec > 1 only when cols % kVec == 0
  for (int64_t r = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; r < rows;
       r += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    const Pack<float, kVec> in = *reinterpret_cast<const Pack<float, kVec>*>(values + r * cols + c);
    Pack<uint8_t, kVec> out;
#pragma unroll
    for (int j = 0; j < kVec; ++j) out.v[j] = quantize_one<true>(in.v[j], scale, 0.0f, true);
    *reinterpret_cast<Pack<uint8_t, kVec>*>(codes + r * codes_pitch + c) = out;
  }
}

template <int kVec>
void launch_quantize_rows_into(const float* values, int64_t rows, int64_t cols, float scale, uint8_t* codes,
                               int64_t codes_pitch, cudaStream_t stream) {
  const RowColumnLaunch shape = row_column_launch(rows, cols / kVec, 8192);
  quantize_rows_into_kernel<kVec><<<shape.grid, shape.block, 0, stream>>>(values, rows, cols, scale, codes, codes_pitch);
}

template <bool kDivide, typename In>
void launch_quantize(const In* values, uint8_t* codes, int64_t count, float scale, bool e4m3, cudaStream_t stream) {
  const float inverse = 1.0f / scale;  // on the host, as the codes the Probe measured were computed
  if (packable(values, codes))
    quantize_kernel<4, kDivide><<<blocks_for(count / 4), kThreadsPerBlock, 0, stream>>>(values, codes, count, scale,
                                                                                         inverse, e4m3);
  else
    quantize_kernel<1, kDivide><<<blocks_for(count), kThreadsPerBlock, 0, stream>>>(values, codes, count, scale,
                                                                                    inverse, e4m3);
}

template <typename In>
cudaError_t launch_quantize_values(const In* values, uint8_t* codes, int64_t count, float scale, Fp8Kind kind,
                                   cudaStream_t stream, ScaleDivision division) {
  if (count <= 0) return cudaSuccess;
  const bool e4m3 = kind == Fp8Kind::kE4M3FN;
  if (division == ScaleDivision::kDivide)
    launch_quantize<true>(values, codes, count, scale, e4m3, stream);
  else
    launch_quantize<false>(values, codes, count, scale, e4m3, stream);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_quantize_fp8(const float* values, uint8_t* codes, int64_t count, float scale, Fp8Kind kind,
                                cudaStream_t stream, ScaleDivision division) {
  return launch_quantize_values(values, codes, count, scale, kind, stream, division);
}

cudaError_t launch_quantize_fp8(const void* values, DType dtype, uint8_t* codes, int64_t count, float scale,
                                Fp8Kind kind, cudaStream_t stream, ScaleDivision division) {
  switch (dtype) {
    case DType::kFloat32:
      return launch_quantize_values(static_cast<const float*>(values), codes, count, scale, kind, stream, division);
    case DType::kBFloat16:
      return launch_quantize_values(static_cast<const __nv_bfloat16*>(values), codes, count, scale, kind, stream,
                                    division);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t launch_quantize_e4m3_rows_into(const float* values, int64_t rows, int64_t cols, float scale, uint8_t* codes,
                                          int64_t codes_pitch, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  if (cols % 4 == 0 && codes_pitch % 4 == 0 && packable(values, codes))
    launch_quantize_rows_into<4>(values, rows, cols, scale, codes, codes_pitch, stream);
  else
    launch_quantize_rows_into<1>(values, rows, cols, scale, codes, codes_pitch, stream);
  return cudaGetLastError();
}

cudaError_t launch_dequantize_fp8(const uint8_t* codes, float* values, int64_t count, float scale, Fp8Kind kind,
                                  cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  const bool e4m3 = kind == Fp8Kind::kE4M3FN;
  if (packable(values, codes))
    dequantize_kernel<4><<<blocks_for(count / 4), kThreadsPerBlock, 0, stream>>>(codes, values, count, scale, e4m3);
  else
    dequantize_kernel<1><<<blocks_for(count), kThreadsPerBlock, 0, stream>>>(codes, values, count, scale, e4m3);
  return cudaGetLastError();
}

}  // namespace loka::cuda
