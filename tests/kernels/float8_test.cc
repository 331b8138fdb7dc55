// ============================================================================
// tests/kernels/float8_test.cc — the FP8 / BF16 / FP16 codecs against ONNX.
//
// Two independent oracles: golden files made by ONNX's reference evaluator
// (tests/data/fp8/make_golden.py, cross-checked there against ml_dtypes and an
// exact model), and in-test brute-force models (nearest representable value
// by search, ties to the even code) run over a strided sweep of all float32
// bit patterns. NaN inputs only need to give some NaN code: ONNX (ml_dtypes)
// writes E5M2 NaN as 0x7E, LoKA and CUDA as 0x7F.
// ============================================================================
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "kernels/cpu/fp8_quantize.h"
#include "loka/bfloat16.h"
#include "loka/float8.h"
#include "test_support.h"

namespace loka {
namespace {

std::vector<char> read_golden(const char* name) {
  const auto path = testing::source_dir() / "tests" / "data" / "fp8" / name;
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

template <typename T>
T load(const char* bytes) {
  T value;
  std::memcpy(&value, bytes, sizeof value);
  return value;
}

bool same_float(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || float_bits(a) == float_bits(b);
}

bool is_nan_e4m3(uint8_t code) { return std::isnan(fp8e4m3fn_to_float(code)); }
bool is_nan_e5m2(uint8_t code) { return std::isnan(fp8e5m2_to_float(code)); }

/// Reference encoder by search: the nearest of the sorted representable magnitudes,
/// ties to the even code, with a virtual code one ulp past the maximum meaning "overflow".
class SearchEncoder {
 public:
  SearchEncoder(float (*decode)(uint8_t), uint8_t max_code, uint8_t overflow_code)
      : max_code_(max_code), overflow_code_(overflow_code) {
    for (int c = 0; c <= max_code; ++c) values_.push_back(decode(static_cast<uint8_t>(c)));
    values_.push_back(2.0 * values_.back() - values_[values_.size() - 2]);
  }
  /// The code, or -1 for "any NaN".
  int encode(float x, bool saturate) const {
    if (std::isnan(x)) return -1;
    const int sign = std::signbit(x) ? 0x80 : 0;
    double magnitude = std::fabs(static_cast<double>(x));
    const double max_value = values_[max_code_];
    if (saturate) magnitude = std::min(magnitude, max_value);
    int code;
    if (magnitude >= values_.back()) {
      code = max_code_ + 1;
    } else {
      const size_t hi = static_cast<size_t>(std::upper_bound(values_.begin(), values_.end(), magnitude) - values_.begin());
      const size_t lo = hi - 1;
      const double dl = magnitude - values_[lo], dh = values_[hi] - magnitude;  // exact in double
      code = static_cast<int>((dl < dh || (dl == dh && lo % 2 == 0)) ? lo : hi);
    }
    if (code == max_code_ + 1) code = overflow_code_;
    return code | sign;
  }

 private:
  std::vector<double> values_;
  int max_code_;
  int overflow_code_;
};

const SearchEncoder& e4m3_reference() {
  static const SearchEncoder encoder(fp8e4m3fn_to_float, 0x7E, 0x7F);
  return encoder;
}
const SearchEncoder& e5m2_reference() {
  static const SearchEncoder encoder(fp8e5m2_to_float, 0x7B, 0x7C);
  return encoder;
}

/// A strided walk over all 2^32 float32 bit patterns plus every pattern near zero and near FP8 max.
std::vector<float> float_sweep() {
  std::vector<float> values;
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 4093) values.push_back(float_from_bits(static_cast<uint32_t>(bits)));
  for (uint32_t bits = 0; bits < 20000; ++bits) {
    values.push_back(float_from_bits(bits));
    values.push_back(float_from_bits(bits | 0x80000000u));
  }
  for (float center : {448.0f, 464.0f, 480.0f, 57344.0f, 61440.0f, 0.015625f, 0.001953125f, 1.52587890625e-05f}) {
    uint32_t bits = float_bits(center);
    for (uint32_t d = 0; d < 2000; ++d) {
      values.push_back(float_from_bits(bits - 1000 + d));
      values.push_back(-float_from_bits(bits - 1000 + d));
    }
  }
  return values;
}

TEST(Float8, DecodesAll256CodesLikeOnnx) {
  const std::vector<char> golden = read_golden("decode.bin");
  ASSERT_EQ(golden.size(), 256u * 8) << "missing tests/data/fp8/decode.bin";
  int nan_e4m3 = 0, nan_e5m2 = 0;
  for (int c = 0; c < 256; ++c) {
    const float want_e4m3 = load<float>(&golden[static_cast<size_t>(c) * 8]);
    const float want_e5m2 = load<float>(&golden[static_cast<size_t>(c) * 8 + 4]);
    const uint8_t code = static_cast<uint8_t>(c);
    EXPECT_TRUE(same_float(fp8e4m3fn_to_float(code), want_e4m3)) << "E4M3FN code " << c;
    EXPECT_TRUE(same_float(fp8e5m2_to_float(code), want_e5m2)) << "E5M2 code " << c;
    nan_e4m3 += std::isnan(want_e4m3);
    nan_e5m2 += std::isnan(want_e5m2);
  }
  EXPECT_EQ(nan_e4m3, 2);  // S.1111.111
  EXPECT_EQ(nan_e5m2, 6);  // S.11111.{01,10,11}
  EXPECT_EQ(fp8e4m3fn_to_float(0x7E), 448.0f);
  EXPECT_EQ(fp8e5m2_to_float(0x7B), 57344.0f);
  EXPECT_EQ(fp8e5m2_to_float(0xFC), -INFINITY);
  EXPECT_EQ(fp8e4m3fn_to_float(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8e5m2_to_float(0x01), std::ldexp(1.0f, -16));
}

TEST(Float8, EncodesOnnxGoldenSweepBitExactly) {
  const std::vector<char> golden = read_golden("encode.bin");
  constexpr size_t kRecord = 12;
  ASSERT_GT(golden.size(), 1000 * kRecord) << "missing tests/data/fp8/encode.bin";
  ASSERT_EQ(golden.size() % kRecord, 0u);
  int failures = 0;
  for (size_t offset = 0; offset < golden.size() && failures < 20; offset += kRecord) {
    const char* record = &golden[offset];
    const float x = load<float>(record);
    const uint8_t want[4] = {load<uint8_t>(record + 4), load<uint8_t>(record + 5), load<uint8_t>(record + 6),
                             load<uint8_t>(record + 7)};
    const uint16_t want_bf16 = load<uint16_t>(record + 8), want_fp16 = load<uint16_t>(record + 10);
    const uint8_t got[4] = {float_to_fp8e4m3fn(x, true), float_to_fp8e4m3fn(x, false), float_to_fp8e5m2(x, true),
                            float_to_fp8e5m2(x, false)};
    const char* names[4] = {"e4m3fn saturate", "e4m3fn no-saturate", "e5m2 saturate", "e5m2 no-saturate"};
    for (int k = 0; k < 4; ++k) {
      const bool nan_want = k < 2 ? is_nan_e4m3(want[k]) : is_nan_e5m2(want[k]);
      const bool nan_got = k < 2 ? is_nan_e4m3(got[k]) : is_nan_e5m2(got[k]);
      const bool ok = nan_want ? nan_got : got[k] == want[k];
      if (!ok) {
        ++failures;
        ADD_FAILURE() << names[k] << ": x=" << x << " (bits 0x" << std::hex << float_bits(x) << ") got 0x"
                      << int{got[k]} << " want 0x" << int{want[k]};
      }
    }
    const uint16_t bf16 = float_to_bf16(x), fp16 = float_to_fp16(x);
    if (std::isnan(bf16_to_float(want_bf16)) ? !std::isnan(bf16_to_float(bf16)) : bf16 != want_bf16) {
      ++failures;
      ADD_FAILURE() << "bf16: x=" << x << " got 0x" << std::hex << bf16 << " want 0x" << want_bf16;
    }
    if (std::isnan(fp16_to_float(want_fp16)) ? !std::isnan(fp16_to_float(fp16)) : fp16 != want_fp16) {
      ++failures;
      ADD_FAILURE() << "fp16: x=" << x << " got 0x" << std::hex << fp16 << " want 0x" << want_fp16;
    }
  }
}

TEST(Float8, EncodeMatchesSearchModelOnStridedFloatSweep) {
  int failures = 0;
  for (float x : float_sweep()) {
    for (bool saturate : {true, false}) {
      const int want_e4m3 = e4m3_reference().encode(x, saturate);
      const int want_e5m2 = e5m2_reference().encode(x, saturate);
      const uint8_t got_e4m3 = float_to_fp8e4m3fn(x, saturate), got_e5m2 = float_to_fp8e5m2(x, saturate);
      if ((want_e4m3 < 0) ? !is_nan_e4m3(got_e4m3) : got_e4m3 != want_e4m3) {
        if (++failures < 20)
          ADD_FAILURE() << "e4m3fn x=" << x << " saturate=" << saturate << " got " << int{got_e4m3} << " want " << want_e4m3;
      }
      if ((want_e5m2 < 0) ? !is_nan_e5m2(got_e5m2) : got_e5m2 != want_e5m2) {
        if (++failures < 20)
          ADD_FAILURE() << "e5m2 x=" << x << " saturate=" << saturate << " got " << int{got_e5m2} << " want " << want_e5m2;
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST(Float8, EveryFiniteCodeRoundTripsAndSpecialsFollowOnnxTable) {
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = static_cast<uint8_t>(c);
    for (bool saturate : {true, false}) {
      if (!is_nan_e4m3(code)) {
        EXPECT_EQ(float_to_fp8e4m3fn(fp8e4m3fn_to_float(code), saturate), code) << c;
      }
      const float v = fp8e5m2_to_float(code);
      // Infinity round-trips only without saturation (saturation clamps it to the max).
      if (!is_nan_e5m2(code) && (!std::isinf(v) || !saturate)) {
        EXPECT_EQ(float_to_fp8e5m2(v, saturate), code) << c;
      }
    }
  }
  // ONNX's Cast table for infinities and out-of-range values.
  EXPECT_EQ(float_to_fp8e4m3fn(INFINITY, true), 0x7E);
  EXPECT_EQ(float_to_fp8e4m3fn(-INFINITY, true), 0xFE);
  EXPECT_TRUE(is_nan_e4m3(float_to_fp8e4m3fn(INFINITY, false)));
  EXPECT_TRUE(is_nan_e4m3(float_to_fp8e4m3fn(1e6f, false)));
  EXPECT_EQ(float_to_fp8e4m3fn(464.0f, false), 0x7E);  // tie between 448 and "480": even wins
  EXPECT_EQ(float_to_fp8e5m2(INFINITY, true), 0x7B);
  EXPECT_EQ(float_to_fp8e5m2(-INFINITY, false), 0xFC);
  EXPECT_EQ(float_to_fp8e5m2(61440.0f, false), 0x7C);  // tie between 57344 and 65536: even is infinity
  EXPECT_EQ(float_to_fp8e5m2(61440.0f, true), 0x7B);
  EXPECT_EQ(float_to_fp8e4m3fn(-0.0f), 0x80);
  EXPECT_EQ(float_to_fp8e5m2(-0.0f), 0x80);
  EXPECT_EQ(float_to_fp8e4m3fn(std::ldexp(1.0f, -10)), 0x00);  // half the smallest subnormal: tie to 0
  EXPECT_EQ(float_to_fp8e4m3fn(std::ldexp(3.0f, -10)), 0x02);  // 1.5 quanta: tie to the even code 2
}

// The format magnitudes the Probe's statistics divide the range by are the codes' own values.
TEST(Float8, FormatMagnitudesAreThoseOfTheirCodes) {
  using cpu::Fp8Format;
  EXPECT_EQ(cpu::fp8_max(Fp8Format::kE4M3FN), fp8e4m3fn_to_float(E4M3FN::max_code));
  EXPECT_EQ(cpu::fp8_max(Fp8Format::kE5M2), fp8e5m2_to_float(E5M2::max_code));
  EXPECT_EQ(cpu::fp8_smallest_normal(Fp8Format::kE4M3FN), fp8e4m3fn_to_float(0x08));  // exponent field 1
  EXPECT_EQ(cpu::fp8_smallest_normal(Fp8Format::kE5M2), fp8e5m2_to_float(0x04));
  EXPECT_EQ(cpu::fp8_smallest_subnormal(Fp8Format::kE4M3FN), fp8e4m3fn_to_float(0x01));
  EXPECT_EQ(cpu::fp8_smallest_subnormal(Fp8Format::kE5M2), fp8e5m2_to_float(0x01));
  // Half the smallest subnormal rounds to zero (ties to even), just above it to the subnormal.
  EXPECT_EQ(float_to_fp8e4m3fn(0.5f * cpu::fp8_smallest_subnormal(Fp8Format::kE4M3FN)), 0x00);
  EXPECT_EQ(float_to_fp8e4m3fn(0.51f * cpu::fp8_smallest_subnormal(Fp8Format::kE4M3FN)), 0x01);
}

TEST(BFloat16, MatchesNearestEvenModelAndDecodesEveryCode) {
  for (uint32_t code = 0; code < 65536; ++code) {
    const float value = bf16_to_float(static_cast<uint16_t>(code));
    EXPECT_EQ(float_bits(value), code << 16);
    if (std::isnan(value)) {
      ASSERT_TRUE(std::isnan(bf16_to_float(float_to_bf16(value))));
    } else {
      ASSERT_EQ(float_to_bf16(value), code) << code;
    }
  }
  int failures = 0;
  for (float x : float_sweep()) {
    const uint16_t got = float_to_bf16(x);
    if (std::isnan(x)) {
      if (!std::isnan(bf16_to_float(got)) || (got >> 15) != (float_bits(x) >> 31)) ++failures;
      continue;
    }
    // Model: the two bf16 neighbours of x; the nearer wins, ties go to the even code.
    const uint32_t lo = float_bits(x) >> 16;
    const double dl = std::fabs(static_cast<double>(x) - bf16_to_float(static_cast<uint16_t>(lo)));
    // Past the largest finite bf16 the next "value" is 2^128 (IEEE overflow threshold).
    const double hi = ((lo + 1) & 0x7FFF) == 0x7F80 ? std::copysign(std::ldexp(1.0, 128), x)
                                                    : static_cast<double>(bf16_to_float(static_cast<uint16_t>(lo + 1)));
    const double dh = std::fabs(hi - x);
    const uint32_t want = (std::isinf(x) || dl < dh || (dl == dh && lo % 2 == 0)) ? lo : lo + 1;
    if (got != want && ++failures < 20) ADD_FAILURE() << "bf16 x=" << x << " got " << got << " want " << want;
  }
  EXPECT_EQ(failures, 0);
}

TEST(Float16, MatchesCompilerHalfConversion) {
#if defined(__FLT16_MAX__)
  for (uint32_t code = 0; code < 65536; ++code) {
    _Float16 half;
    const uint16_t bits = static_cast<uint16_t>(code);
    std::memcpy(&half, &bits, sizeof bits);
    ASSERT_TRUE(same_float(fp16_to_float(bits), static_cast<float>(half))) << code;
    if (!std::isnan(fp16_to_float(bits))) {
      ASSERT_EQ(float_to_fp16(fp16_to_float(bits)), bits) << code;
    }
  }
  int failures = 0;
  for (float x : float_sweep()) {
    const _Float16 half = static_cast<_Float16>(x);
    uint16_t want;
    std::memcpy(&want, &half, sizeof want);
    const uint16_t got = float_to_fp16(x);
    const bool ok = std::isnan(x) ? std::isnan(fp16_to_float(got)) : got == want;
    if (!ok && ++failures < 20) ADD_FAILURE() << "fp16 x=" << x << " got " << got << " want " << want;
  }
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(float_to_fp16(65519.99f), 0x7BFF);
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7C00);
#else
  GTEST_SKIP() << "this compiler has no _Float16 to compare with";
#endif
}

}  // namespace
}  // namespace loka
