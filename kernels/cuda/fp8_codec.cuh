// ============================================================================
// kernels/cuda/fp8_codec.cuh — FP8 values to and from float on the device, and
// the row recipe's E4M3 scale and encode (shared by every kernel that makes them).
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

/// Two E4M3 codes as stored (the first in the low byte) decoded by one conversion.
__device__ __forceinline__ float2 e4m3x2_decode(uint16_t codes) {
  return __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(codes, __NV_E4M3)));
}

/// The per-row dynamic E4M3 scale (the "row" recipe, quantize_rows.h) from the amax of the row's
/// finite values: amax / 448, or 1 when that amax is 0 (or the row has no finite value).
__device__ __forceinline__ float e4m3_row_scale(float amax) { return amax > 0.0f ? amax / 448.0f : 1.0f; }

/// The E4M3 code of v / scale. Divide, not multiply by a reciprocal: bit-exact with ONNX
/// QuantizeLinear and the CPU reference's row recipe.
__device__ __forceinline__ uint8_t e4m3_encode_divided(float v, float scale) { return fp8_encode(v / scale, true); }

}  // namespace loka::cuda
