// ============================================================================
// kernels/cuda/fp8_codec.cuh — FP8 values to and from float on the device, the
// row recipe's E4M3 scale and encode, and QuantizeLinear's division by a static
// scale done as a product where that gives the same code (shared by every kernel
// that makes them).
//
// The hardware conversions (cvt.rn.satfinite on sm_89+): round to nearest even,
// saturate to the largest finite value (ONNX saturate=1), NaN to the format's
// NaN. Decoding goes through half, which holds every E4M3 and E5M2 value exactly.
// ============================================================================
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>
#include <limits>

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

/// The E4M3 code of v / scale, dividing every time: for scales made on the device (the row
/// recipe's), which have no host reciprocal for e4m3_quotients, and kernels not moved to it.
/// Bit-exact with ONNX QuantizeLinear and the CPU reference's row recipe.
__device__ __forceinline__ uint8_t e4m3_encode_divided(float v, float scale) { return fp8_encode(v / scale, true); }

/// True when q = v · inv_scale (rounded) might not have the E4M3 code of the IEEE quotient
/// v / scale, so the division must decide.
///
/// With scale and inv_scale normal floats and q in the normal float range, q and the quotient
/// differ by a factor within 1 ± 3·2^-24 (three roundings of at most half an ulp: the reciprocal,
/// the product, the quotient), so their bit patterns are at most 3 apart. A code (nearest even,
/// SATFINITE) changes only at a rounding boundary, so the two codes can differ only if one lies
/// that close:
///  - |q| in [2^-6, 448]: the boundaries are the midpoints 2^e · (1 + (2i+1)/16) between normal
///    codes, the floats whose 20 mantissa bits below E4M3's three are exactly 0x80000; q within
///    kSlack patterns of one divides (the bit patterns of a sign are ordered like the values, and
///    midpoints are 2^20 patterns apart, binade edges included).
///  - |q| above 448: past the last boundary (432) every value saturates to ±448, infinities too;
///    the test above may divide there needlessly, never wrongly.
///  - |q| <= 2^-11: both lie below the first boundary (2^-10), a zero code with v's sign.
///  - 2^-11 < |q| < 2^-6: E4M3 subnormals, boundaries elsewhere: divides (rare when scale is
///    near amax / 448: |v| < amax / 28672).
///  - q NaN (v NaN, or inv_scale NaN for a scale without a normal reciprocal): divides.
__device__ __forceinline__ bool e4m3_code_needs_division(float q) {
  constexpr uint32_t kSlack = 8;  // patterns either side of a midpoint; 3 would do
  const float magnitude = fabsf(q);
  const bool small_or_nan = !(magnitude <= 0x1p-11f || magnitude >= 0x1p-6f);
  // (bits - (0x80000 - kSlack)) mod 2^20 <= 2·kSlack, the modulo by shifting the 12 high bits out.
  const bool near_midpoint = (__float_as_uint(q) + (kSlack - 0x80000u)) << 12 <= (2 * kSlack) << 12;
  return small_or_nan || near_midpoint;
}

/// The quotients v[e] / scale as QuantizeLinear rounds them before encoding, or values with the
/// same E4M3 codes: products with inv_scale (e4m3_inverse_scale), and the exact divisions (all kN,
/// rarely) where one product lies near a code's rounding boundary. The division it avoids cost
/// 5-11% of a memory-bound E4M3-writing epilogue's time (H200, 2026-11-28).
template <int kN>
__device__ __forceinline__ void e4m3_quotients(const float (&v)[kN], float scale, float inv_scale, float (&q)[kN]) {
  bool divide = false;
#pragma unroll
  for (int e = 0; e < kN; ++e) {
    q[e] = __fmul_rn(v[e], inv_scale);
    divide |= e4m3_code_needs_division(q[e]);
  }
  if (divide) {
#pragma unroll
    for (int e = 0; e < kN; ++e) q[e] = __fdiv_rn(v[e], scale);
  }
}

/// inv_scale for e4m3_quotients, once per launch on the host: 1 / scale rounded to float, or NaN
/// where scale or that reciprocal is not a normal float (every code then divides).
inline float e4m3_inverse_scale(float scale) {
  const float reciprocal = 1.0f / scale;
  const bool normal = std::fpclassify(scale) == FP_NORMAL && std::fpclassify(reciprocal) == FP_NORMAL;
  return normal ? reciprocal : std::numeric_limits<float>::quiet_NaN();
}

}  // namespace loka::cuda
