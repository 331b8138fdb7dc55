// ============================================================================
// loka/float8.h — bit-exact FP8 codecs with ONNX semantics (opset >= 19).
//
// FLOAT8E4M3FN: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinity;
//   S.1111.111 is NaN; largest finite 448.
// FLOAT8E5M2:   1 sign, 5 exponent (bias 15), 2 mantissa bits; IEEE-like with
//   infinities (S.11111.00) and NaNs; largest finite 57344.
// Encoding rounds to nearest, ties to even. With `saturate` (ONNX's default)
// out-of-range values and infinities clamp to the largest finite value of the
// sign; without it they become NaN (E4M3FN) or infinity (E5M2). NaN stays NaN.
// Header-only and usable from CUDA device code.
// ============================================================================
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define LOKA_HOST_DEVICE __host__ __device__
#else
#define LOKA_HOST_DEVICE
#endif

namespace loka {

/// Static description of an FP8 format; `kFiniteOnly` marks the "FN" variants without infinity.
template <int kExponentBits, int kMantissaBits, bool kFiniteOnly>
struct Float8Format {
  static constexpr int exponent_bits = kExponentBits;
  static constexpr int mantissa_bits = kMantissaBits;
  static constexpr int bias = (1 << (kExponentBits - 1)) - 1;
  static constexpr bool finite_only = kFiniteOnly;
  /// Smallest normal exponent (unbiased).
  static constexpr int min_exponent = 1 - bias;
  /// Code of the largest finite magnitude: E4M3FN 0x7E (448), E5M2 0x7B (57344).
  static constexpr uint8_t max_code = kFiniteOnly ? 0x7E : 0x7B;
  static constexpr uint8_t nan_code = 0x7F;
  static constexpr uint8_t inf_code = 0x7C;  // meaningful only when !kFiniteOnly
};

using E4M3FN = Float8Format<4, 3, true>;
using E5M2 = Float8Format<5, 2, false>;

/// Decodes one FP8 code to float, exactly.
template <typename Format>
LOKA_HOST_DEVICE inline float fp8_decode(uint8_t code) {
  const bool negative = (code & 0x80) != 0;
  const uint8_t magnitude = code & 0x7F;
  const int exponent_field = magnitude >> Format::mantissa_bits;
  const int mantissa_field = magnitude & ((1 << Format::mantissa_bits) - 1);
  float value;
  if (Format::finite_only) {
    if (magnitude == Format::nan_code) return NAN;
  } else if (exponent_field == (1 << Format::exponent_bits) - 1) {
    if (mantissa_field != 0) return NAN;
    return negative ? -INFINITY : INFINITY;
  }
  if (exponent_field == 0) {
    value = ldexpf(static_cast<float>(mantissa_field), Format::min_exponent - Format::mantissa_bits);
  } else {
    value = ldexpf(static_cast<float>(mantissa_field + (1 << Format::mantissa_bits)),
                   exponent_field - Format::bias - Format::mantissa_bits);
  }
  return negative ? -value : value;
}

/// Encodes a float to FP8: round to nearest even, then saturate or overflow as ONNX defines.
template <typename Format>
LOKA_HOST_DEVICE inline uint8_t fp8_encode(float value, bool saturate = true) {
  const uint8_t sign = std::signbit(value) ? 0x80 : 0x00;
  if (std::isnan(value)) return sign | Format::nan_code;
  const uint8_t overflow_code =
      saturate ? Format::max_code : (Format::finite_only ? Format::nan_code : Format::inf_code);
  if (std::isinf(value)) return sign | overflow_code;

  const float magnitude = std::fabs(value);
  if (magnitude == 0.0f) return sign;
  // The quantum (spacing of representable values) at this magnitude: normals
  // keep `mantissa_bits` below their leading bit, subnormals share the
  // quantum of the smallest normal binade.
  int exponent = 0;
  frexpf(magnitude, &exponent);  // magnitude = f * 2^exponent, f in [0.5, 1)
  const int unbiased = exponent - 1;
  const int quantum_exponent =
      (unbiased > Format::min_exponent ? unbiased : Format::min_exponent) - Format::mantissa_bits;
  // Scaling by a power of two is exact; rintf rounds ties to even (default mode).
  const float units = rintf(ldexpf(magnitude, -quantum_exponent));
  if (units == 0.0f) return sign;
  const float rounded = ldexpf(units, quantum_exponent);
  const float max_finite = fp8_decode<Format>(Format::max_code);
  if (rounded > max_finite) return sign | overflow_code;

  int rounded_exponent = 0;
  frexpf(rounded, &rounded_exponent);
  const int rounded_unbiased = rounded_exponent - 1;
  if (rounded_unbiased < Format::min_exponent) {  // subnormal: exponent field 0
    return sign | static_cast<uint8_t>(units);
  }
  const int mantissa = static_cast<int>(ldexpf(rounded, Format::mantissa_bits - rounded_unbiased)) -
                       (1 << Format::mantissa_bits);
  const int exponent_field = rounded_unbiased + Format::bias;
  return sign | static_cast<uint8_t>((exponent_field << Format::mantissa_bits) | mantissa);
}

inline float fp8e4m3fn_to_float(uint8_t code) { return fp8_decode<E4M3FN>(code); }
inline float fp8e5m2_to_float(uint8_t code) { return fp8_decode<E5M2>(code); }
inline uint8_t float_to_fp8e4m3fn(float value, bool saturate = true) {
  return fp8_encode<E4M3FN>(value, saturate);
}
inline uint8_t float_to_fp8e5m2(float value, bool saturate = true) {
  return fp8_encode<E5M2>(value, saturate);
}

}  // namespace loka
