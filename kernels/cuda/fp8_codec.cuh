// ============================================================================
// kernels/cuda/fp8_codec.cuh — one FP8 value to and from float, on the device.
//
// The hardware conversions (cvt.rn.satfinite on sm_89+): round to nearest even,
// saturate to the largest finite value (ONNX saturate=1), NaN to the format's
// NaN. Decoding goes through half, which holds every E4M3 and E5M2 value exactly.
// ============================================================================
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace loka::cuda {

__device__ __forceinline__ uint8_t fp8_encode(float scaled, bool e4m3) {
  return e4m3 ? __nv_cvt_float_to_fp8(scaled, __NV_SATFINITE, __NV_E4M3)
              : __nv_cvt_float_to_fp8(scaled, __NV_SATFINITE, __NV_E5M2);
}

__device__ __forceinline__ float fp8_decode(uint8_t code, bool e4m3) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(code, e4m3 ? __NV_E4M3 : __NV_E5M2)));
}

}  // namespace loka::cuda
