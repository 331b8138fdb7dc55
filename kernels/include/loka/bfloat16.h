// ============================================================================
// loka/bfloat16.h — BF16 and FP16 codecs, bit-exact, round to nearest even.
//
// BF16 keeps float32's exponent and the top 7 mantissa bits; NaN is kept
// quiet with its sign. FP16 follows IEEE 754 binary16 (overflow to infinity).
// Header-only so kernels on both sides share one definition.
// ============================================================================
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace loka {

inline uint32_t float_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}
inline float float_from_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

inline uint16_t float_to_bf16(float value) {
  const uint32_t bits = float_bits(value);
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x0040);
  const uint32_t rounding_bias = 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding_bias) >> 16);
}
inline float bf16_to_float(uint16_t code) { return float_from_bits(static_cast<uint32_t>(code) << 16); }

/// IEEE binary16 from float, round to nearest even, overflow to infinity.
inline uint16_t float_to_fp16(float value) {
  const uint32_t bits = float_bits(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  if (std::isnan(value)) return sign | 0x7E00;
  const float magnitude = std::fabs(value);
  if (std::isinf(value) || magnitude >= 65520.0f) return sign | 0x7C00;  // 65520 rounds up past max
  if (magnitude < std::ldexp(1.0f, -14)) {  // subnormal range: quantum 2^-24
    const float units = std::rint(std::ldexp(magnitude, 24));
    return sign | static_cast<uint16_t>(units);
  }
  int exponent = 0;
  std::frexp(magnitude, &exponent);
  const int unbiased = exponent - 1;
  const float units = std::rint(std::ldexp(magnitude, 10 - unbiased));  // in [1024, 2048]
  uint32_t result = static_cast<uint32_t>(unbiased + 15) << 10;
  result += static_cast<uint32_t>(units) - 1024;  // a carry into the exponent is the right answer
  return sign | static_cast<uint16_t>(result);
}

inline float fp16_to_float(uint16_t code) {
  const bool negative = (code & 0x8000) != 0;
  const int exponent_field = (code >> 10) & 0x1F;
  const int mantissa = code & 0x3FF;
  float value;
  if (exponent_field == 0x1F) {
    value = mantissa ? NAN : INFINITY;
  } else if (exponent_field == 0) {
    value = std::ldexp(static_cast<float>(mantissa), -24);
  } else {
    value = std::ldexp(static_cast<float>(mantissa + 1024), exponent_field - 25);
  }
  return negative ? -value : value;
}

}  // namespace loka
