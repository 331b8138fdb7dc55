// ============================================================================
// tests/cuda/dequant_epilogue_test.cc — the FP8 GEMM scale epilogue vs the host.
//
// Both launch paths (float4 columns when cols % 4 == 0 and every base is
// 16-byte aligned; scalar otherwise) must give the host formula's values bit
// for bit (GELU within 1e-6: erf differs between the libraries), and the
// codes of y (fuse-epilogue-quantize's Yq) those of the host's encode of y / scale.
// ============================================================================
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cuda/dequant_epilogue.h"
#include "loka/bfloat16.h"
#include "loka/float8.h"

namespace loka {
namespace {

class CudaDequantEpilogue : public testing::CudaTest {};

TEST_F(CudaDequantEpilogue, MatchesTheHostFormulaOnAwkwardShapes) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> value(-3.0f, 3.0f), scale(0.001f, 0.1f);
  struct Case {
    int64_t rows, cols;
    bool per_row, bias;
    cuda::GemmEpilogue act;
  };
  for (const Case& c : {Case{1, 1, false, false, cuda::GemmEpilogue::kNone}, Case{7, 13, true, true, cuda::GemmEpilogue::kRelu},
                        Case{65536, 3, true, true, cuda::GemmEpilogue::kGelu},
                        Case{513, 1024, false, true, cuda::GemmEpilogue::kRelu}}) {
    SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.cols));
    std::vector<float> acc(static_cast<size_t>(c.rows * c.cols)), xs(c.per_row ? c.rows : 1), ws(c.cols), b(c.cols);
    for (float& v : acc) v = value(rng);
    for (float& v : xs) v = scale(rng);
    for (float& v : ws) v = scale(rng);
    for (float& v : b) v = value(rng);
    acc[0] = NAN;  // NaN stays NaN through every activation
    testing::DeviceBytes d_acc(acc), d_xs(xs), d_ws(ws), d_b(b), d_y(acc.size() * sizeof(float));
    cuda::DequantEpilogueArgs args;
    args.acc = d_acc.as<float>();
    args.x_scale = d_xs.as<float>();
    args.per_row_x_scale = c.per_row;
    args.w_scale = d_ws.as<float>();
    args.bias = c.bias ? d_b.as<float>() : nullptr;
    args.activation = c.act;
    args.y = d_y.as<float>();
    args.rows = c.rows;
    args.cols = c.cols;
    ASSERT_TRUE(cuda::launch_dequant_epilogue(args, nullptr).is_ok());
    const std::vector<float> y = d_y.download_vector<float>(acc.size());
    size_t mismatches = 0;
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t n = 0; n < c.cols; ++n) {
        const size_t i = static_cast<size_t>(r * c.cols + n);
        float v = acc[i] * xs[c.per_row ? r : 0] * ws[n];
        if (c.bias) v += b[n];
        if (c.act == cuda::GemmEpilogue::kRelu) v = std::isnan(v) ? v : std::max(v, 0.0f);
        if (c.act == cuda::GemmEpilogue::kGelu) v = 0.5f * v * (1.0f + std::erf(v / std::sqrt(2.0f)));
        const bool same = (std::isnan(v) && std::isnan(y[i])) || std::fabs(v - y[i]) <= 1e-6f * (1.0f + std::fabs(v));
        if (!same && mismatches++ < 5) ADD_FAILURE() << "element " << i << ": " << y[i] << " vs " << v;
      }
    EXPECT_EQ(mismatches, 0u);
  }
}

TEST_F(CudaDequantEpilogue, DcnCrossAndResidualTermsMatchTheHostFormula) {
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> value(-3.0f, 3.0f), scale(0.001f, 0.1f);
  for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{1, 5}, {4097, 13}, {300, 216}}) {
    // Multiplier only, residual only, both (the DCN cross), and both one buffer (its first layer,
    // x0 ⊙ (x0 W + b) + x0).
    for (int terms = 1; terms <= 4; ++terms) {
      const bool one_buffer = terms == 4;
      const bool with_multiplier = one_buffer || (terms & 1), with_residual = one_buffer || (terms & 2);
      SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + " terms " + std::to_string(terms));
      const size_t count = static_cast<size_t>(rows * cols);
      std::vector<float> acc(count), x0(count), x(count), xs(static_cast<size_t>(rows)), ws(static_cast<size_t>(cols)),
          b(static_cast<size_t>(cols));
      for (auto* values : {&acc, &x0, &x, &b})
        for (float& v : *values) v = value(rng);
      for (auto* values : {&xs, &ws})
        for (float& v : *values) v = scale(rng);
      testing::DeviceBytes d_acc(acc), d_x0(x0), d_x(x), d_xs(xs), d_ws(ws), d_b(b);
      cuda::DequantEpilogueArgs args;
      args.acc = d_acc.as<float>();
      args.x_scale = d_xs.as<float>();
      args.per_row_x_scale = true;
      args.w_scale = d_ws.as<float>();
      args.bias = d_b.as<float>();
      args.multiplier = with_multiplier ? d_x0.as<float>() : nullptr;
      args.residual = with_residual ? (one_buffer ? d_x0 : d_x).as<float>() : nullptr;
      args.y = d_acc.as<float>();  // in place, as QuantizedGemm runs it
      args.rows = rows;
      args.cols = cols;
      ASSERT_TRUE(cuda::launch_dequant_epilogue(args, nullptr).is_ok());
      const std::vector<float> y = d_acc.download_vector<float>(count);
      size_t mismatches = 0;
      for (size_t i = 0; i < count; ++i) {
        const size_t r = i / static_cast<size_t>(cols), n = i % static_cast<size_t>(cols);
        float v = acc[i] * xs[r] * ws[n] + b[n];
        if (with_multiplier) v *= x0[i];
        if (with_residual) v += one_buffer ? x0[i] : x[i];
        if (y[i] != v && mismatches++ < 5) ADD_FAILURE() << "element " << i << ": " << y[i] << " vs " << v;
      }
      EXPECT_EQ(mismatches, 0u);
    }
  }
}

/// One launch with every [rows, cols] and per-column buffer viewed at `offset` elements
/// into its allocation (offset % 4 != 0 makes the float4 path refuse them).
struct PathCase {
  int64_t rows, cols, offset;
  bool per_row, bias, terms;  ///< terms: multiplier and residual, in place (the DCN cross)
  cuda::GemmEpilogue act;
  int64_t codes_offset = -1;  ///< >= 0: also write codes, this many bytes into their buffer
  /// BF16 sums (QuantizedGemm's own op): acc rounded to BF16 on the host, y written beside it;
  /// with codes, `codes_only` writes no y at all (a node that leaves Y out).
  bool bf16_acc = false;
  bool codes_only = false;
};

/// The code scale of the cases that write codes: y reaches a few units, so some codes saturate.
constexpr float kCodeScale = 0.005f;

void check_path_case(const PathCase& c, std::mt19937& rng) {
  SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.cols) + " offset " + std::to_string(c.offset) +
               (c.terms ? " with multiplier and residual" : ""));
  std::uniform_real_distribution<float> value(-3.0f, 3.0f), scale(0.001f, 0.1f);
  const size_t count = static_cast<size_t>(c.rows * c.cols), cols = static_cast<size_t>(c.cols);
  const size_t off = static_cast<size_t>(c.offset);
  auto random = [&](size_t n, auto& dist) {
    std::vector<float> v(n + off);
    for (float& x : v) x = dist(rng);
    return v;
  };
  const std::vector<float> acc = random(count, value), x0 = random(count, value), x = random(count, value),
                           xs = random(c.per_row ? static_cast<size_t>(c.rows) : 1, scale), ws = random(cols, scale),
                           b = random(cols, value);
  // The sums the kernel reads: FP32 as drawn, or rounded to BF16 (what the GEMM would have written).
  std::vector<uint16_t> acc_bf16(acc.size());
  std::vector<float> sums = acc;
  for (size_t i = 0; i < acc.size(); ++i) {
    acc_bf16[i] = float_to_bf16(acc[i]);
    if (c.bf16_acc) sums[i] = bf16_to_float(acc_bf16[i]);
  }
  testing::DeviceBytes d_acc(acc), d_acc_bf16(acc_bf16), d_x0(x0), d_x(x), d_xs(xs), d_ws(ws), d_b(b);
  testing::DeviceBytes d_y(std::vector<float>(count + off, -7.0f));
  cuda::DequantEpilogueArgs args;
  if (c.bf16_acc) {
    args.acc = d_acc_bf16.as<uint16_t>() + off;
    args.acc_type = DType::kBFloat16;
  } else {
    args.acc = d_acc.as<float>() + off;
  }
  args.x_scale = d_xs.as<float>();
  args.per_row_x_scale = c.per_row;
  args.w_scale = d_ws.as<float>() + off;
  args.bias = c.bias ? d_b.as<float>() + off : nullptr;
  args.activation = c.act;
  args.multiplier = c.terms ? d_x0.as<float>() + off : nullptr;
  args.residual = c.terms ? d_x.as<float>() + off : nullptr;
  // FP32 sums: in place, as QuantizedGemm once ran it; BF16 sums: y beside them, or none.
  testing::DeviceBytes& y_buffer = c.bf16_acc ? d_y : d_acc;
  args.y = c.codes_only ? nullptr : y_buffer.as<float>() + off;
  args.rows = c.rows;
  args.cols = c.cols;
  const size_t codes_off = c.codes_offset >= 0 ? static_cast<size_t>(c.codes_offset) : 0;
  testing::DeviceBytes d_codes(std::vector<uint8_t>(count + codes_off, 0xAB));
  if (c.codes_offset >= 0) {
    args.codes = d_codes.as<uint8_t>() + codes_off;
    args.code_scale = kCodeScale;
  }
  ASSERT_TRUE(cuda::launch_dequant_epilogue(args, nullptr).is_ok());
  const std::vector<float> y = y_buffer.download_vector<float>(count + off);
  // What y's buffer holds where the kernel must not write: its fill, or the FP32 sums it shares.
  auto untouched_y = [&](size_t i) { return c.bf16_acc ? -7.0f : acc[i]; };
  const std::vector<uint8_t> codes = d_codes.download_vector<uint8_t>(count + codes_off);
  size_t mismatches = 0, code_mismatches = 0, saturated = 0;
  for (size_t i = 0; i < count; ++i) {
    const size_t r = i / cols, n = i % cols;
    float v = sums[off + i] * xs[c.per_row ? r : 0] * ws[off + n];
    if (c.bias) v += b[off + n];
    if (c.act == cuda::GemmEpilogue::kRelu) v = std::isnan(v) ? v : std::max(v, 0.0f);
    if (c.act == cuda::GemmEpilogue::kGelu) v = 0.5f * v * (1.0f + std::erf(v / std::sqrt(2.0f)));
    if (c.terms) {
      v *= x0[off + i];
      v += x[off + i];
    }
    if (c.codes_only) {
      // No y written (FP32 sums: the buffer still holds them): the codes are those of the host's
      // value (GELU's erf may move one a step).
      ASSERT_EQ(y[off + i], untouched_y(off + i)) << "element " << i << " of y written";
      const float slack = c.act == cuda::GemmEpilogue::kGelu ? 1e-6f * (1.0f + std::fabs(v)) : 0.0f;
      const uint8_t low = float_to_fp8e4m3fn((v - slack) / kCodeScale), high = float_to_fp8e4m3fn((v + slack) / kCodeScale);
      saturated += std::fabs(v / kCodeScale) > 448.0f;
      const uint8_t code = codes[codes_off + i];
      if (code != low && code != high && code_mismatches++ < 5)
        ADD_FAILURE() << "code " << i << ": " << int{code} << " vs " << int{low} << " for " << v;
      continue;
    }
    const float got = y[off + i];
    // Exact but for GELU, whose erf differs between CUDA and the host library.
    const bool same = c.act == cuda::GemmEpilogue::kGelu ? std::fabs(v - got) <= 1e-6f * (1.0f + std::fabs(v)) : got == v;
    if (!same && mismatches++ < 5) ADD_FAILURE() << "element " << i << ": " << got << " vs " << v;
    if (c.codes_offset < 0) continue;
    // The codes encode the y written (the device's), as QuantizeLinear would read it.
    const uint8_t expected = float_to_fp8e4m3fn(got / kCodeScale);
    saturated += std::fabs(got / kCodeScale) > 448.0f;
    if (codes[codes_off + i] != expected && code_mismatches++ < 5)
      ADD_FAILURE() << "code " << i << ": " << int{codes[codes_off + i]} << " vs " << int{expected} << " for " << got;
  }
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(code_mismatches, 0u);
  if (c.codes_offset >= 0 && count > 100) {
    EXPECT_GT(saturated, 0u) << "the case should saturate some codes";
  }
  // The elements in front of the view are untouched.
  for (size_t i = 0; i < off; ++i) EXPECT_EQ(y[i], untouched_y(i)) << "element " << i << " before the view";
  for (size_t i = 0; i < codes_off; ++i) EXPECT_EQ(codes[i], 0xAB) << "code " << i << " before the view";
  if (c.codes_offset < 0) {
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(codes[i], 0xAB) << "no codes asked for, code " << i << " written";
  }
}

/// Unit scales and no bias make y the sums exactly, so the codes must be those of the IEEE quotient
/// y / code_scale (the kernel multiplies by the reciprocal and divides only near a boundary): the
/// sums put it on, and a few float steps either side of, every E4M3 rounding boundary (the
/// subnormal ones included), around 2^-11, zero, 448 and beyond, and at infinity and NaN, with
/// both signs; code scales with a normal reciprocal, powers of two, and ones without (division).
TEST_F(CudaDequantEpilogue, CodesAtRoundingBoundariesAreThoseOfTheIeeeQuotient) {
  std::vector<float> code_values;  // the non-negative E4M3 values, increasing
  for (int code = 0; code <= 0x7E; ++code) code_values.push_back(fp8e4m3fn_to_float(static_cast<uint8_t>(code)));
  std::vector<float> targets = {0.0f, 0x1p-12f, 0x1p-11f, 0x1p-6f, 432.0f, 448.0f, 464.0f, 500.0f, 1e6f};
  for (size_t c = 0; c + 1 < code_values.size(); ++c) targets.push_back((code_values[c] + code_values[c + 1]) / 2);
  for (const float code_scale : {0.01f, 1.0f / 3.0f, 3.0f, 0.0078125f, 0x1p127f, 6e-39f, 3e38f}) {
    SCOPED_TRACE("code_scale " + std::to_string(code_scale));
    std::vector<float> sums;
    for (const float target : targets) {
      for (int steps = -4; steps <= 4; ++steps) {
        float v = target * code_scale;
        for (int s = 0; s < std::abs(steps); ++s) v = std::nextafter(v, steps < 0 ? 0.0f : INFINITY);
        if (std::isfinite(v)) sums.insert(sums.end(), {v, -v});
      }
    }
    sums.insert(sums.end(), {INFINITY, -INFINITY, std::numeric_limits<float>::quiet_NaN(), FLT_MAX});
    for (const int64_t cols : {12, 13}) {  // the float4 path and the scalar one
      SCOPED_TRACE("cols " + std::to_string(cols));
      std::vector<float> padded = sums;
      while (padded.size() % cols != 0) padded.push_back(0.0f);
      const int64_t rows = static_cast<int64_t>(padded.size()) / cols;
      const std::vector<float> ones(static_cast<size_t>(std::max(rows, cols)), 1.0f);
      testing::DeviceBytes d_acc(padded), d_ones(ones), d_codes(std::vector<uint8_t>(padded.size(), 0xAB));
      cuda::DequantEpilogueArgs args;
      args.acc = d_acc.as<float>();
      args.x_scale = d_ones.as<float>();
      args.w_scale = d_ones.as<float>();
      args.codes = d_codes.as<uint8_t>();
      args.code_scale = code_scale;
      args.rows = rows;
      args.cols = cols;
      ASSERT_TRUE(cuda::launch_dequant_epilogue(args, nullptr).is_ok());
      const std::vector<uint8_t> codes = d_codes.download_vector<uint8_t>(padded.size());
      size_t mismatches = 0;
      for (size_t i = 0; i < padded.size(); ++i) {
        const uint8_t expected = float_to_fp8e4m3fn(padded[i] / code_scale);
        if (codes[i] != expected && mismatches++ < 5)
          ADD_FAILURE() << "sum " << padded[i] << ": code " << int{codes[i]} << " vs " << int{expected};
      }
      EXPECT_EQ(mismatches, 0u);
    }
  }
}

TEST_F(CudaDequantEpilogue, VectorizedAndScalarPathsMatchTheHostFormula) {
  std::mt19937 rng(13);
  using cuda::GemmEpilogue;
  for (const PathCase& c : {
           PathCase{4096, 256, 0, true, true, false, GemmEpilogue::kGelu},   // float4 columns (DHEN-like)
           PathCase{4096, 256, 1, true, true, false, GemmEpilogue::kRelu},   // misaligned view: scalar
           PathCase{5, 64, 4, true, true, false, GemmEpilogue::kNone},       // offset 16 bytes: float4 again
           PathCase{3, 3456, 0, false, true, false, GemmEpilogue::kRelu},    // per-tensor x scale, wide rows
           PathCase{65536, 4, 0, true, false, false, GemmEpilogue::kNone},   // one float4 per row, many rows
           PathCase{70000, 8, 0, true, true, false, GemmEpilogue::kNone},    // rows beyond the row-block cap
           PathCase{33, 37, 0, true, true, false, GemmEpilogue::kRelu},      // cols % 4 != 0: scalar
           PathCase{1, 1, 0, false, false, false, GemmEpilogue::kNone},      // batch 1, one column
           PathCase{300, 216, 0, true, true, true, GemmEpilogue::kNone},     // DCN cross, float4
           PathCase{300, 216, 3, true, true, true, GemmEpilogue::kNone},     // DCN cross, misaligned
           PathCase{1000, 1028, 0, true, true, true, GemmEpilogue::kRelu},   // > 256 column threads per row
           // With codes (fuse-epilogue-quantize's Yq):
           PathCase{4096, 3456, 0, false, true, true, GemmEpilogue::kNone, 0},  // DLRM-DCNv2's cross, float4
           PathCase{300, 216, 3, true, true, true, GemmEpilogue::kNone, 3},     // misaligned floats: scalar
           PathCase{300, 216, 0, true, true, true, GemmEpilogue::kNone, 2},     // misaligned codes alone: scalar
           PathCase{33, 37, 0, false, true, true, GemmEpilogue::kRelu, 0},      // cols % 4 != 0: scalar
           PathCase{1, 16, 0, false, false, true, GemmEpilogue::kNone, 0},      // batch 1
           PathCase{300, 216, 0, true, true, false, GemmEpilogue::kGelu, 0},    // GELU into y and codes, float4
           // BF16 sums (QuantizedGemm's own op), y beside them:
           PathCase{4096, 3456, 0, false, true, true, GemmEpilogue::kNone, 0, true},   // DLRM-DCNv2's cross
           PathCase{300, 216, 2, true, true, true, GemmEpilogue::kNone, 0, true},      // 8-byte aligned sums: 4 a thread
           PathCase{300, 216, 1, true, true, true, GemmEpilogue::kRelu, 1, true},      // misaligned: scalar
           PathCase{33, 37, 0, true, true, false, GemmEpilogue::kGelu, -1, true},      // cols % 4 != 0, no codes
           PathCase{33, 37, 0, true, true, false, GemmEpilogue::kGelu, 0, true},       // GELU into y and codes, scalar
           // ... writing the codes alone (a node that leaves Y out: the ranker's FFN hidden layer):
           PathCase{4096, 512, 0, false, true, false, GemmEpilogue::kGelu, 0, true, true},
           PathCase{1, 16, 0, false, true, false, GemmEpilogue::kRelu, 0, true, true},       // batch 1
           PathCase{7, 13, 1, true, false, false, GemmEpilogue::kNone, 3, true, true},       // scalar path
           PathCase{64, 24, 0, true, true, false, GemmEpilogue::kGelu, 0, false, true},     // FP32 sums, GELU
       })
    check_path_case(c, rng);
}

TEST_F(CudaDequantEpilogue, EmptyOutputsLaunchNothingAndNullPointersAreRefused) {
  cuda::DequantEpilogueArgs args;
  EXPECT_TRUE(cuda::launch_dequant_epilogue(args, nullptr).is_ok());
  args.rows = 2;
  args.cols = 2;
  EXPECT_FALSE(cuda::launch_dequant_epilogue(args, nullptr).is_ok());
  // A code scale that would divide into NaN or infinity is refused.
  testing::DeviceBytes d_values(std::vector<float>(4, 1.0f));
  testing::DeviceBytes d_codes(std::vector<uint8_t>(4, 0));
  args.acc = args.x_scale = args.w_scale = d_values.as<float>();
  args.y = d_values.as<float>();
  args.codes = d_codes.as<uint8_t>();
  for (const float bad : {0.0f, -1.0f, INFINITY, NAN}) {
    args.code_scale = bad;
    EXPECT_FALSE(cuda::launch_dequant_epilogue(args, nullptr).is_ok()) << bad;
  }
  args.code_scale = 0.5f;
  EXPECT_TRUE(cuda::launch_dequant_epilogue(args, nullptr).is_ok());
}

}  // namespace
}  // namespace loka
