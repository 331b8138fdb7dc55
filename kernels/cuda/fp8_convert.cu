// ============================================================================
// kernels/cuda/fp8_convert.cu — FP32 <-> FP8 conversion kernels.
//
// Uses the hardware conversion intrinsics (cvt.rn.satfinite on sm_89+), which
// round to nearest even and saturate to the largest finite value — ONNX's
// saturate=1 semantics. NaN maps to the format's NaN.
// ============================================================================
#include <cuda_fp8.h>

#include "kernels/cuda/fp8_convert.h"

namespace loka::cuda {
namespace {

__global__ void quantize_kernel(const float* values, uint8_t* codes, int64_t count, float inverse_scale, bool e4m3) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float x = values[i] * inverse_scale;
    codes[i] = e4m3 ? __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3)
                    : __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2);
  }
}

__global__ void dequantize_kernel(const uint8_t* codes, float* values, int64_t count, float scale, bool e4m3) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const __half_raw h = __nv_cvt_fp8_to_halfraw(codes[i], e4m3 ? __NV_E4M3 : __NV_E5M2);
    values[i] = __half2float(__half(h)) * scale;
  }
}

unsigned grid_for(int64_t count) {
  const int64_t blocks = (count + 255) / 256;
  return static_cast<unsigned>(blocks < 4096 ? (blocks > 0 ? blocks : 1) : 4096);
}

}  // namespace

cudaError_t launch_quantize_fp8(const float* values, uint8_t* codes, int64_t count, float scale, Fp8Kind kind,
                                cudaStream_t stream) {
  quantize_kernel<<<grid_for(count), 256, 0, stream>>>(values, codes, count, 1.0f / scale, kind == Fp8Kind::kE4M3FN);
  return cudaGetLastError();
}

cudaError_t launch_dequantize_fp8(const uint8_t* codes, float* values, int64_t count, float scale, Fp8Kind kind,
                                  cudaStream_t stream) {
  dequantize_kernel<<<grid_for(count), 256, 0, stream>>>(codes, values, count, scale, kind == Fp8Kind::kE4M3FN);
  return cudaGetLastError();
}

}  // namespace loka::cuda
