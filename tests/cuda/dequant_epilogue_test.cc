// ============================================================================
// tests/cuda/dequant_epilogue_test.cc — the FP8 GEMM scale epilogue vs the host.
//
// Both launch paths (4 columns a thread when cols % 4 == 0 and every base is
// aligned to 4 of its elements; scalar otherwise) must give the host formula's
// values bit for bit (GELU within 1e-6: erf differs between the libraries), and
// the codes of y (fuse-epilogue-quantize's Yq) those of the host's encode of
// y / scale, with every type of the sums, the multiplier, the residual and y
// (FP32 or BF16): a BF16 y is the FP32 result rounded to nearest even, its
// codes those of the FP32 result.
// ============================================================================
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
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

/// `values` as a buffer of `dtype` holds them: FP32 as they are, BF16 rounded to nearest even
/// (and widened back exactly, as the kernel reads them).
std::vector<float> as_stored(std::vector<float> values, DType dtype) {
  if (dtype == DType::kBFloat16)
    for (float& v : values) v = bf16_to_float(float_to_bf16(v));
  return values;
}

/// The bytes of a buffer of `dtype` (FP32 or BF16) holding `values`.
std::vector<uint8_t> storage_bytes(const std::vector<float>& values, DType dtype) {
  std::vector<uint8_t> bytes(values.size() * dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kBFloat16) {
      const uint16_t bits = float_to_bf16(values[i]);
      std::memcpy(&bytes[2 * i], &bits, sizeof bits);
    } else {
      std::memcpy(&bytes[4 * i], &values[i], sizeof(float));
    }
  }
  return bytes;
}

/// Element i of a buffer of `dtype` (FP32 or BF16) downloaded as bytes, widened to float.
float stored_value(const std::vector<uint8_t>& bytes, DType dtype, size_t i) {
  if (dtype == DType::kBFloat16) {
    uint16_t bits;
    std::memcpy(&bits, &bytes[2 * i], sizeof bits);
    return bf16_to_float(bits);
  }
  float value;
  std::memcpy(&value, &bytes[4 * i], sizeof value);
  return value;
}

/// One launch with every [rows, cols] and per-column buffer viewed at `offset` elements
/// into its allocation (offset % 4 != 0 makes the vector path refuse them).
struct PathCase {
  int64_t rows, cols, offset;
  bool per_row, bias, terms;  ///< terms: multiplier and residual (the DCN cross)
  cuda::GemmEpilogue act;
  int64_t codes_offset = -1;  ///< >= 0: also write codes, this many bytes into their buffer
  /// BF16 sums (QuantizedGemm's own op): acc rounded to BF16 on the host, y written beside it;
  /// with codes, `codes_only` writes no y at all (a node that leaves Y out).
  bool bf16_acc = false;
  bool codes_only = false;
  /// BF16 activation storage. With `terms`, each term's type (kUndefined leaves it out), and y's:
  /// y is written in place over sums of its own type, else beside them.
  DType multiplier_type = DType::kFloat32, residual_type = DType::kFloat32, y_type = DType::kFloat32;
  int64_t term_offset = -1;  ///< >= 0: the terms' views this many elements in, instead of `offset`
  /// With codes and over 100 elements, some of them saturate (without terms, y is about the bias:
  /// a few columns of it may all stay below 448 · kCodeScale).
  bool saturates = true;
};

/// The code scale of the cases that write codes: y reaches a few units, so some codes saturate.
constexpr float kCodeScale = 0.005f;

void check_path_case(const PathCase& c, std::mt19937& rng) {
  const bool with_multiplier = c.terms && c.multiplier_type != DType::kUndefined;
  const bool with_residual = c.terms && c.residual_type != DType::kUndefined;
  const DType acc_type = c.bf16_acc ? DType::kBFloat16 : DType::kFloat32;
  const auto type_name = [](DType dtype) { return std::string(dtype_short_name(dtype)); };
  SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.cols) + " offset " + std::to_string(c.offset) +
               " acc " + type_name(acc_type) + (with_multiplier ? " multiplier " + type_name(c.multiplier_type) : "") +
               (with_residual ? " residual " + type_name(c.residual_type) : "") +
               (c.codes_only ? " codes only" : " y " + type_name(c.y_type)) +
               (c.term_offset >= 0 ? " term offset " + std::to_string(c.term_offset) : ""));
  std::uniform_real_distribution<float> value(-3.0f, 3.0f), scale(0.001f, 0.1f);
  const size_t count = static_cast<size_t>(c.rows * c.cols), cols = static_cast<size_t>(c.cols);
  const size_t off = static_cast<size_t>(c.offset);
  const size_t term_off = c.term_offset >= 0 ? static_cast<size_t>(c.term_offset) : off;
  auto random = [&](size_t n, size_t padding, auto& dist) {
    std::vector<float> v(n + padding);
    for (float& x : v) x = dist(rng);
    return v;
  };
  const DType multiplier_type = with_multiplier ? c.multiplier_type : DType::kFloat32;
  const DType residual_type = with_residual ? c.residual_type : DType::kFloat32;
  // The values as their buffers hold them: the sums FP32 as drawn, or rounded to BF16 (what the
  // GEMM would have written); the terms in their own types.
  const std::vector<float> acc = as_stored(random(count, off, value), acc_type),
                           x0 = as_stored(random(count, term_off, value), multiplier_type),
                           x = as_stored(random(count, term_off, value), residual_type),
                           xs = random(c.per_row ? static_cast<size_t>(c.rows) : 1, 0, scale),
                           ws = random(cols, off, scale), b = random(cols, off, value);
  testing::DeviceBytes d_acc(storage_bytes(acc, acc_type)), d_x0(storage_bytes(x0, multiplier_type)),
      d_x(storage_bytes(x, residual_type)), d_xs(xs), d_ws(ws), d_b(b);
  testing::DeviceBytes d_y(storage_bytes(std::vector<float>(count + off, -7.0f), c.y_type));
  const auto view = [](const testing::DeviceBytes& buffer, size_t elements, DType dtype) {
    return buffer.as<uint8_t>() + elements * dtype_size(dtype);
  };
  cuda::DequantEpilogueArgs args;
  args.acc = view(d_acc, off, acc_type);
  args.acc_type = acc_type;
  args.x_scale = d_xs.as<float>();
  args.per_row_x_scale = c.per_row;
  args.w_scale = d_ws.as<float>() + off;
  args.bias = c.bias ? d_b.as<float>() + off : nullptr;
  args.activation = c.act;
  args.multiplier = with_multiplier ? view(d_x0, term_off, multiplier_type) : nullptr;
  args.multiplier_type = multiplier_type;
  args.residual = with_residual ? view(d_x, term_off, residual_type) : nullptr;
  args.residual_type = residual_type;
  // Over sums of y's type: in place, as QuantizedGemm's fallback runs it; else y beside them, or none.
  const bool in_place = acc_type == c.y_type;
  testing::DeviceBytes& y_buffer = in_place ? d_acc : d_y;
  args.y = c.codes_only ? nullptr : view(y_buffer, off, c.y_type);
  args.y_type = c.y_type;
  args.rows = c.rows;
  args.cols = c.cols;
  const size_t codes_off = c.codes_offset >= 0 ? static_cast<size_t>(c.codes_offset) : 0;
  testing::DeviceBytes d_codes(std::vector<uint8_t>(count + codes_off, 0xAB));
  if (c.codes_offset >= 0) {
    args.codes = d_codes.as<uint8_t>() + codes_off;
    args.code_scale = kCodeScale;
  }
  ASSERT_TRUE(cuda::launch_dequant_epilogue(args, nullptr).is_ok());
  const std::vector<uint8_t> y_bytes = y_buffer.download_vector<uint8_t>((count + off) * dtype_size(c.y_type));
  const auto y = [&](size_t i) { return stored_value(y_bytes, c.y_type, i); };
  // What y's buffer holds where the kernel must not write: its fill, or the sums it shares.
  auto untouched_y = [&](size_t i) { return in_place ? acc[i] : -7.0f; };
  const std::vector<uint8_t> codes = d_codes.download_vector<uint8_t>(count + codes_off);
  size_t mismatches = 0, code_mismatches = 0, saturated = 0;
  // The code of `v` / kCodeScale, where v may be `slack` off (GELU's erf may move one a step).
  const auto expect_code = [&](size_t i, float v, float slack) {
    const uint8_t low = float_to_fp8e4m3fn((v - slack) / kCodeScale), high = float_to_fp8e4m3fn((v + slack) / kCodeScale);
    saturated += std::fabs(v / kCodeScale) > 448.0f;
    const uint8_t code = codes[codes_off + i];
    if (code != low && code != high && code_mismatches++ < 5)
      ADD_FAILURE() << "code " << i << ": " << int{code} << " vs " << int{low} << " for " << v;
  };
  for (size_t i = 0; i < count; ++i) {
    const size_t r = i / cols, n = i % cols;
    float v = acc[off + i] * xs[c.per_row ? r : 0] * ws[off + n];
    if (c.bias) v += b[off + n];
    if (c.act == cuda::GemmEpilogue::kRelu) v = std::isnan(v) ? v : std::max(v, 0.0f);
    if (c.act == cuda::GemmEpilogue::kGelu) v = 0.5f * v * (1.0f + std::erf(v / std::sqrt(2.0f)));
    if (with_multiplier) v *= x0[term_off + i];
    if (with_residual) v += x[term_off + i];
    // Exact but for GELU, whose erf differs between CUDA and the host library.
    const float slack = c.act == cuda::GemmEpilogue::kGelu ? 1e-6f * (1.0f + std::fabs(v)) : 0.0f;
    if (c.codes_only) {
      // No y written (sums of y's type: the buffer still holds them): the codes are those of the
      // host's value.
      ASSERT_EQ(y(off + i), untouched_y(off + i)) << "element " << i << " of y written";
      expect_code(i, v, slack);
      continue;
    }
    const float got = y(off + i);
    bool same;
    if (c.y_type == DType::kBFloat16) {
      // The FP32 result rounded to nearest even (with GELU, that of a value within its slack).
      const float low = bf16_to_float(float_to_bf16(v - slack)), high = bf16_to_float(float_to_bf16(v + slack));
      same = (std::isnan(v) && std::isnan(got)) || (got >= low && got <= high);
    } else {
      same = c.act == cuda::GemmEpilogue::kGelu ? std::fabs(v - got) <= slack : got == v;
    }
    if (!same && mismatches++ < 5) ADD_FAILURE() << "element " << i << ": " << got << " vs " << v;
    if (c.codes_offset < 0) continue;
    // The codes encode the FP32 result: the y written when that is FP32 (as QuantizeLinear would
    // read it), else the host's value (before y's rounding to BF16).
    if (c.y_type == DType::kFloat32) expect_code(i, got, 0.0f);
    else expect_code(i, v, slack);
  }
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(code_mismatches, 0u);
  if (c.codes_offset >= 0 && count > 100 && c.saturates) {
    EXPECT_GT(saturated, 0u) << "the case should saturate some codes";
  }
  // The elements in front of the view are untouched.
  for (size_t i = 0; i < off; ++i) EXPECT_EQ(y(i), untouched_y(i)) << "element " << i << " before the view";
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
           PathCase{300, 216, 2, true, true, true, GemmEpilogue::kNone, 0, true},      // FP32 bases 8 bytes off: scalar
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

TEST_F(CudaDequantEpilogue, Bf16TermsAndYMatchTheHostFormulaInEveryTypeCombination) {
  // Every type of the sums, each term (absent, FP32, BF16) and y, writing y, y and its codes, or
  // the codes alone, over layouts that take 4 columns a thread (BF16 bases 8-byte aligned, FP32
  // ones 16) and ones that cannot: a row of 20, 4099 rows 1 element off, 37 columns, the terms
  // alone 2 elements off (4 bytes for BF16, 8 for FP32), and 4 off (aligned again).
  std::mt19937 rng(14);
  using cuda::GemmEpilogue;
  const DType kAbsent = DType::kUndefined, kF32 = DType::kFloat32, kBf16 = DType::kBFloat16;
  struct Layout {
    int64_t rows, cols, offset, term_offset;
  };
  const GemmEpilogue activations[] = {GemmEpilogue::kNone, GemmEpilogue::kRelu, GemmEpilogue::kGelu};
  int activation = 0;
  for (const Layout& layout : {Layout{4099, 12, 0, -1}, Layout{1, 20, 0, -1}, Layout{4099, 12, 1, -1},
                               Layout{7, 37, 0, -1}, Layout{64, 216, 0, 2}, Layout{64, 216, 0, 4}})
    for (const bool bf16_acc : {false, true})
      for (const DType multiplier : {kAbsent, kF32, kBf16})
        for (const DType residual : {kAbsent, kF32, kBf16})
          for (const DType y : {kF32, kBf16})
            for (const int outputs : {0, 1, 2}) {  // y; y and codes; the codes alone
              // The activations in turn: each meets every type somewhere, at a third of the cases.
              PathCase c{layout.rows, layout.cols, layout.offset, true, true, true, activations[activation++ % 3]};
              c.codes_offset = outputs > 0 ? 0 : -1;
              c.codes_only = outputs == 2;
              c.bf16_acc = bf16_acc;
              c.multiplier_type = multiplier;
              c.residual_type = residual;
              c.y_type = y;
              c.term_offset = layout.term_offset;
              c.saturates = multiplier != kAbsent || residual != kAbsent;
              check_path_case(c, rng);
              if (HasFatalFailure()) return;
            }
}

/// Unit scales and no bias make the FP32 result the sums exactly (and so does ⊙ 1 + -0 through
/// BF16 terms, -0 included): a BF16 y must be each rounded to nearest even, bit for bit (any NaN
/// for NaN), at ties both ways and a bit either side, subnormals, the largest floats (some round
/// to infinity), ±0 and ±infinity. The codes are those of the FP32 result, not of y: values
/// 2^-12 off an E4M3 midpoint round onto it in BF16, where the code would tie the other way.
TEST_F(CudaDequantEpilogue, Bf16YIsTheResultRoundedToNearestEvenAndTheCodesAreOfTheResultBeforeIt) {
  std::vector<float> sums;
  for (const uint32_t bits : {0x3F808000u, 0x3F818000u, 0x3F808001u, 0x3F807FFFu, 0x3F818001u, 0x3F817FFFu,
                              0x00008000u, 0x00018000u, 0x00000001u, 0x007FFFFFu, 0x00800000u, 0x7F7FFFFFu,
                              0x7F7F7FFFu, 0x7F7F8000u, 0x7F7EFFFFu, 0x00000000u, 0x7F800000u, 0x7FC00000u,
                              0x7F800001u, 0x7FFFFFFFu})
    sums.insert(sums.end(), {float_from_bits(bits), float_from_bits(bits ^ 0x80000000u)});
  size_t codes_tell_apart = 0;
  for (int code = 0; code < 0x7E; ++code) {
    const float midpoint = (fp8e4m3fn_to_float(static_cast<uint8_t>(code)) + fp8e4m3fn_to_float(static_cast<uint8_t>(code + 1))) / 2;
    for (const float v : {midpoint * (1.0f + 0x1p-12f), midpoint * (1.0f - 0x1p-12f)}) {
      sums.insert(sums.end(), {v, -v});
      codes_tell_apart += float_to_fp8e4m3fn(v) != float_to_fp8e4m3fn(bf16_to_float(float_to_bf16(v)));
    }
  }
  ASSERT_GT(codes_tell_apart, 50u) << "the midpoint values should give other codes after BF16 rounding";
  for (const bool terms : {false, true}) {
    for (const int64_t cols : {12, 13}) {  // 4 columns a thread, and one
      SCOPED_TRACE(std::string(terms ? "with" : "without") + " BF16 terms, cols " + std::to_string(cols));
      std::vector<float> padded = sums;
      while (padded.size() % static_cast<size_t>(cols) != 0) padded.push_back(0.0f);
      const int64_t rows = static_cast<int64_t>(padded.size()) / cols;
      const size_t count = padded.size();
      const std::vector<float> ones(static_cast<size_t>(std::max(rows, cols)), 1.0f);
      testing::DeviceBytes d_acc(padded), d_ones(ones), d_y(count * 2), d_codes(count);
      testing::DeviceBytes d_multiplier(std::vector<uint16_t>(count, float_to_bf16(1.0f)));
      testing::DeviceBytes d_residual(std::vector<uint16_t>(count, float_to_bf16(-0.0f)));
      cuda::DequantEpilogueArgs args;
      args.acc = d_acc.get();
      args.x_scale = args.w_scale = d_ones.as<float>();
      if (terms) {
        args.multiplier = d_multiplier.get();
        args.multiplier_type = DType::kBFloat16;
        args.residual = d_residual.get();
        args.residual_type = DType::kBFloat16;
      }
      args.y = d_y.get();
      args.y_type = DType::kBFloat16;
      args.codes = d_codes.as<uint8_t>();
      args.code_scale = 1.0f;
      args.rows = rows;
      args.cols = cols;
      ASSERT_TRUE(cuda::launch_dequant_epilogue(args, nullptr).is_ok());
      const std::vector<uint16_t> y = d_y.download_vector<uint16_t>(count);
      const std::vector<uint8_t> codes = d_codes.download_vector<uint8_t>(count);
      size_t mismatches = 0;
      for (size_t i = 0; i < count; ++i) {
        const float v = padded[i];
        const uint16_t expected = float_to_bf16(v);
        // A NaN's sign and payload are the multiply's to keep or not: any NaN will do.
        const bool same_y = std::isnan(v) ? std::isnan(bf16_to_float(y[i])) : y[i] == expected;
        const bool same_code = std::isnan(v) ? (codes[i] & 0x7F) == 0x7F : codes[i] == float_to_fp8e4m3fn(v);
        if ((!same_y || !same_code) && mismatches++ < 5)
          ADD_FAILURE() << "sum " << v << " (bits " << std::hex << float_bits(v) << "): y " << y[i] << " vs "
                        << expected << ", code " << int{codes[i]} << " vs " << int{float_to_fp8e4m3fn(v)};
      }
      EXPECT_EQ(mismatches, 0u);
    }
  }
}

TEST_F(CudaDequantEpilogue, OtherTypesAndYOverAnOperandOfAnotherTypeAreRefused) {
  testing::DeviceBytes d_values(std::vector<float>(16, 1.0f)), d_other(std::vector<float>(16, 1.0f));
  cuda::DequantEpilogueArgs base;
  base.acc = base.x_scale = base.w_scale = d_values.as<float>();
  base.y = d_other.get();
  base.rows = 2;
  base.cols = 2;
  ASSERT_TRUE(cuda::launch_dequant_epilogue(base, nullptr).is_ok());
  for (const DType bad : {DType::kFloat16, DType::kFloat8E4M3FN, DType::kUndefined}) {
    SCOPED_TRACE(std::string(dtype_name(bad)));
    cuda::DequantEpilogueArgs args = base;
    args.acc_type = bad;
    EXPECT_FALSE(cuda::launch_dequant_epilogue(args, nullptr).is_ok());
    args = base;
    args.multiplier = d_values.get();
    args.multiplier_type = bad;
    const Status multiplier = cuda::launch_dequant_epilogue(args, nullptr);
    EXPECT_NE(multiplier.message().find("multiplier"), std::string::npos) << multiplier.message();
    args = base;
    args.residual = d_values.get();
    args.residual_type = bad;
    const Status residual = cuda::launch_dequant_epilogue(args, nullptr);
    EXPECT_NE(residual.message().find("residual"), std::string::npos) << residual.message();
    args = base;
    args.y_type = bad;
    EXPECT_FALSE(cuda::launch_dequant_epilogue(args, nullptr).is_ok());
  }
  // y over an operand of its own type is in place; over one of another, elements would be written
  // before another thread read them.
  cuda::DequantEpilogueArgs args = base;
  args.y = d_values.get();
  EXPECT_TRUE(cuda::launch_dequant_epilogue(args, nullptr).is_ok());
  args.y_type = DType::kBFloat16;
  EXPECT_FALSE(cuda::launch_dequant_epilogue(args, nullptr).is_ok());  // BF16 y over FP32 sums
  args.acc = d_other.get();
  args.residual = d_values.get();
  args.residual_type = DType::kBFloat16;
  EXPECT_TRUE(cuda::launch_dequant_epilogue(args, nullptr).is_ok());  // over a BF16 residual
  args.residual_type = DType::kFloat32;
  EXPECT_FALSE(cuda::launch_dequant_epilogue(args, nullptr).is_ok());
  args = base;
  args.acc_type = DType::kBFloat16;
  args.y = d_values.get();  // FP32 y over BF16 sums
  EXPECT_FALSE(cuda::launch_dequant_epilogue(args, nullptr).is_ok());
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
