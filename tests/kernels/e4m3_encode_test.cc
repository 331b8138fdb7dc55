// ============================================================================
// tests/kernels/e4m3_encode_test.cc — the CPU's fast E4M3FN encoder
// (kernels/cpu/e4m3_encode.h) gives exactly loka/float8.h's codes.
//
// float8_test.cc checks loka/float8.h against ONNX; here the fast encoder is
// checked against it: every float whose upper 20 bits differ (sign, exponent,
// the 3 kept mantissa bits, the rounding bit and 8 sticky bits) with low bits
// that sit on, beside and between rounding ties, plus the named edge values.
// (All 2^32 floats were compared once, 2026-11-26: no difference.)
// ============================================================================
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/e4m3_encode.h"
#include "kernels/cpu/fp8_quantize.h"
#include "loka/float8.h"

namespace loka {
namespace {

TEST(E4m3Encode, MatchesTheReferenceCodecOverASweepOfAllFloatBitPatterns) {
  const uint32_t low_bits[] = {0x000, 0x001, 0x2AA, 0x555, 0x7FF, 0x800, 0x801, 0xFFE, 0xFFF};
  size_t mismatches = 0;
  for (uint32_t high = 0; high < (1u << 20); ++high) {
    for (const uint32_t low : low_bits) {
      const uint32_t bits = (high << 12) | low;
      const float value = std::bit_cast<float>(bits);
      const uint8_t expected = float_to_fp8e4m3fn(value);
      const uint8_t actual = cpu::e4m3fn_code(value);
      if (actual != expected && ++mismatches <= 10)
        ADD_FAILURE() << std::hex << "bits 0x" << bits << ": 0x" << int{actual} << ", expected 0x" << int{expected};
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST(E4m3Encode, EdgeValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const float value : {0.0f, -0.0f, 448.0f, -448.0f, 464.0f, 465.0f, 480.0f, 1e30f, inf, -inf, nan, -nan,
                            std::ldexp(1.0f, -6), std::ldexp(1.0f, -9), std::ldexp(1.0f, -10),
                            std::ldexp(1.5f, -10), std::numeric_limits<float>::denorm_min(),
                            std::numeric_limits<float>::min()})
    EXPECT_EQ(cpu::e4m3fn_code(value), float_to_fp8e4m3fn(value)) << value;
  EXPECT_EQ(cpu::e4m3fn_code(-0.0f), 0x80);
  EXPECT_EQ(cpu::e4m3fn_code(1000.0f), 0x7E) << "saturates";
  EXPECT_EQ(cpu::e4m3fn_code(-inf), 0xFE) << "saturates";
}

TEST(E4m3Encode, QuantizeRowsDividesByTheScaleLikeQuantizeLinear) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> values(4099);
  for (float& v : values) v = normal(rng);
  values[5] = std::numeric_limits<float>::quiet_NaN();
  values[6] = -std::numeric_limits<float>::infinity();
  for (const float scale : {1.0f, 0.0078125f, 0.0213f, 3.7f}) {
    std::vector<uint8_t> codes(values.size());
    cpu::quantize_e4m3fn(values, scale, codes.data());
    for (size_t i = 0; i < values.size(); ++i)
      ASSERT_EQ(codes[i], float_to_fp8e4m3fn(values[i] / scale)) << "value " << values[i] << " scale " << scale;
  }
}

}  // namespace
}  // namespace loka
