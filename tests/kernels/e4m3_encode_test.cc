// ============================================================================
// tests/kernels/e4m3_encode_test.cc — the CPU's fast E4M3FN encoder and decode
// table (kernels/cpu/e4m3_encode.h) give exactly loka/float8.h's codes and
// values, and the fake quantization built on them (kernels/cpu/fp8_quantize.h)
// exactly the portable codec's round trip.
//
// float8_test.cc checks loka/float8.h against ONNX; here the fast encoder is
// checked against it: every float whose upper 20 bits differ (sign, exponent,
// the 3 kept mantissa bits, the rounding bit and 8 sticky bits) with low bits
// that sit on, beside and between rounding ties, plus the named edge values.
// (All 2^32 floats were compared once, 2026-11-26: no difference.)
// ============================================================================
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
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

/// The bits of a float, with every NaN as one pattern: the codecs agree on NaN, not on its payload.
uint32_t bits_or_nan(float value) { return std::isnan(value) ? 0x7FC00000u : std::bit_cast<uint32_t>(value); }

TEST(E4m3Encode, TheDecodeTableHoldsEveryCodesValue) {
  const std::array<float, 256>& values = cpu::e4m3fn_values();
  for (int code = 0; code < 256; ++code) {
    const float expected = fp8e4m3fn_to_float(static_cast<uint8_t>(code));
    EXPECT_EQ(bits_or_nan(values[static_cast<size_t>(code)]), bits_or_nan(expected)) << "code " << code;
    if (!std::isnan(expected)) {
      EXPECT_EQ(std::signbit(values[static_cast<size_t>(code)]), std::signbit(expected)) << code;
    }
  }
  EXPECT_TRUE(std::isnan(values[0x7F]) && std::isnan(values[0xFF]));
  EXPECT_EQ(values[0x7E], 448.0f);
  EXPECT_EQ(std::bit_cast<uint32_t>(values[0x80]), 0x80000000u) << "negative zero";
}

// The Probe's and the runtime's FP8 emulation: per tensor, per row and per column, in both formats,
// bit for bit what the portable codec gives (value / scale, encode, decode, times scale).
TEST(E4m3Encode, FakeQuantizationIsThePortableCodecsRoundTripBitForBit) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 40.0f);
  std::uniform_int_distribution<uint32_t> any_bits;
  const int64_t rows = 37, cols = 53;  // neither a multiple of 16
  std::vector<float> values(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = i % 3 == 0 ? std::bit_cast<float>(any_bits(rng)) : normal(rng);  // NaN, inf, subnormals too
  values[1] = std::numeric_limits<float>::quiet_NaN();
  values[2] = -std::numeric_limits<float>::infinity();
  values[4] = -0.0f;
  const auto reference = [](float value, float scale, cpu::Fp8Format format) {
    return format == cpu::Fp8Format::kE4M3FN ? fp8e4m3fn_to_float(float_to_fp8e4m3fn(value / scale)) * scale
                                             : fp8e5m2_to_float(float_to_fp8e5m2(value / scale)) * scale;
  };
  for (const cpu::Fp8Format format : {cpu::Fp8Format::kE4M3FN, cpu::Fp8Format::kE5M2}) {
    SCOPED_TRACE(format == cpu::Fp8Format::kE4M3FN ? "e4m3fn" : "e5m2");
    for (const float scale : {1.0f, 0.0213f, 3.7f, 1e-30f}) {
      std::vector<float> actual = values;
      cpu::fake_quantize_per_tensor(actual, scale, format);
      for (size_t i = 0; i < values.size(); ++i)
        ASSERT_EQ(bits_or_nan(actual[i]), bits_or_nan(reference(values[i], scale, format)))
            << "value " << values[i] << " scale " << scale;
    }
    std::vector<float> per_row = values, per_column = values;
    cpu::fake_quantize_per_row(per_row, rows, cols, format);
    cpu::fake_quantize_per_column(per_column, rows, cols, format);
    for (int64_t r = 0; r < rows; ++r) {
      const std::span<const float> row(values.data() + r * cols, static_cast<size_t>(cols));
      const float row_scale = cpu::fp8_scale_for_amax(cpu::finite_amax(row), format);
      for (int64_t c = 0; c < cols; ++c) {
        const size_t i = static_cast<size_t>(r * cols + c);
        ASSERT_EQ(bits_or_nan(per_row[i]), bits_or_nan(reference(values[i], row_scale, format))) << r << "," << c;
        std::vector<float> column(static_cast<size_t>(rows));
        for (int64_t k = 0; k < rows; ++k) column[static_cast<size_t>(k)] = values[static_cast<size_t>(k * cols + c)];
        const float column_scale = cpu::fp8_scale_for_amax(cpu::finite_amax(column), format);
        ASSERT_EQ(bits_or_nan(per_column[i]), bits_or_nan(reference(values[i], column_scale, format))) << r << "," << c;
      }
    }
  }
}

}  // namespace
}  // namespace loka
