// ============================================================================
// tests/runtime/loka_ops_test.cc — the ai.loka CPU kernels against
// docs/loka_ops.md.
//
// Each op runs inside a one-node model through the Engine, on fresh random
// inputs with awkward shapes, and is compared with a reference written here
// from the doc's formulas using only the scalar FP8 codecs: QuantizedGemm
// within FP32 summation-order tolerance, QuantizedGather bit for bit,
// EmbeddingBags bit for bit against double sums of the doc's rows (and a
// BF16 table bit for bit against the float32 table of its widened values),
// LayerNormQuant bit for bit against ONNX LayerNormalization run by the same
// engine and quantized here (the doc's promise), and within FP8 rounding of a
// double-precision LayerNorm. BF16 storage (QuantizedGemm's BF16 X,
// Multiplier and Residual, and output_dtype = 16 of QuantizedGemm and
// EmbeddingBags) is checked bit for bit against the float32 op: on the widened
// values, and rounded to nearest even (awkward values written out), with the
// standard ops between ai.loka ops moving BF16 unchanged. Error cases check
// the message names the node and the offending input.
// ============================================================================
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "loka/bfloat16.h"
#include "loka/float8.h"
#include "loka/session.h"
#include "model_builder.h"
#include "test_support.h"

namespace loka {
namespace {

using testing::ModelBuilder;
using testing::TestAttribute;
using Attrs = std::vector<std::pair<std::string, TestAttribute>>;

float q_d(float value) { return fp8e4m3fn_to_float(float_to_fp8e4m3fn(value)); }

/// An FP8 tensor holding `codes`.
Tensor fp8_tensor(const Shape& shape, const std::vector<uint8_t>& codes) {
  Tensor tensor = Tensor::zeros(DType::kFloat8E4M3FN, shape);
  std::copy(codes.begin(), codes.end(), tensor.data<uint8_t>());
  return tensor;
}

/// A BF16 tensor, and the float32 tensor of its values widened (exactly: bits << 16, written out
/// here rather than through the codec the kernels use).
struct Bf16Values {
  Tensor codes;
  Tensor widened;
};
Bf16Values bf16_values(const Shape& shape, const std::vector<uint16_t>& codes) {
  Bf16Values values{Tensor::zeros(DType::kBFloat16, shape), Tensor::zeros(DType::kFloat32, shape)};
  std::copy(codes.begin(), codes.end(), values.codes.data<uint16_t>());
  for (size_t i = 0; i < codes.size(); ++i) values.widened.data<float>()[i] = float_from_bits(uint32_t{codes[i]} << 16);
  return values;
}

/// Random BF16 values in [-4, 4], with codes rounding cannot produce from them: -0 first, the
/// smallest subnormal second, a huge finite value (1.7e38; two of them overflow to inf in an
/// FP32 sum, identically on both paths) last.
Bf16Values random_bf16(std::mt19937& rng, const Shape& shape) {
  const Tensor values = testing::random_tensor(rng, shape, -4.0f, 4.0f);
  std::vector<uint16_t> codes;
  for (float v : values.values<float>()) codes.push_back(float_to_bf16(v));
  codes.front() = 0x8000;
  codes[1] = 0x0001;
  codes.back() = 0x7F00;
  return bf16_values(shape, codes);
}

/// Equal dtypes, shapes and bytes (NaN payloads included); names the first differing element.
void expect_same_bits(const Tensor& actual, const Tensor& expected) {
  ASSERT_EQ(actual.dtype(), expected.dtype());
  ASSERT_EQ(actual.shape(), expected.shape());
  const size_t size = dtype_size(actual.dtype());
  const auto* a = static_cast<const std::byte*>(actual.raw());
  const auto* b = static_cast<const std::byte*>(expected.raw());
  for (int64_t i = 0; i < actual.element_count(); ++i)
    ASSERT_EQ(std::memcmp(a + i * size, b + i * size, size), 0) << "element " << i;
}

Tensor scalar_scale(float value, bool rank1) {
  return Tensor::from_floats(rank1 ? Shape{1} : Shape{}, std::span<const float>(&value, 1));
}

float amax_of(std::span<const float> values) {
  float amax = 0.0f;
  for (float v : values) amax = std::max(amax, std::fabs(v));
  return amax;
}

/// A random [N,K] weight quantized per output channel as the doc's conventions say.
struct QuantizedWeight {
  Tensor codes;
  Tensor scale;
};
QuantizedWeight random_weight(std::mt19937& rng, int64_t n, int64_t k) {
  const Tensor w = testing::random_tensor(rng, {n, k}, -2.0f, 2.0f);
  std::vector<uint8_t> codes(static_cast<size_t>(n * k));
  std::vector<float> scales(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    const float amax = amax_of(w.values<float>().subspan(static_cast<size_t>(j * k), static_cast<size_t>(k)));
    const float scale = amax > 0.0f ? amax / 448.0f : 1.0f;
    scales[static_cast<size_t>(j)] = scale;
    for (int64_t p = 0; p < k; ++p)
      codes[static_cast<size_t>(j * k + p)] = float_to_fp8e4m3fn(w.data<float>()[j * k + p] / scale);
  }
  return {fp8_tensor({n, k}, codes), Tensor::from_floats({n}, scales)};
}

/// One graph input (fed) or initializer per node input; an empty name is an omitted input.
struct NodeInput {
  std::string name;
  Tensor tensor;
  bool fed = false;
};

/// Builds a one-node ai.loka model and runs it once; load and run errors both come back.
/// `codes_output`: a second output "yq", FLOAT8E4M3FN (QuantizedGemm's Yq).
Result<std::vector<Tensor>> run_loka_op(const std::string& op, const std::vector<NodeInput>& inputs,
                                        const Attrs& attributes = {}, const std::string& node_name = "op_node",
                                        bool codes_output = false) {
  ModelBuilder builder(17);
  builder.opset("ai.loka", 1);
  std::vector<std::string> names;
  std::vector<Tensor> feeds;
  for (const NodeInput& input : inputs) {
    names.push_back(input.name);
    if (input.name.empty()) continue;
    if (input.fed) {
      builder.input(input.name, input.tensor.dtype(), input.tensor.shape());
      feeds.push_back(input.tensor);
    } else {
      builder.initializer(input.name, input.tensor);
    }
  }
  std::vector<std::string> outputs{"y"};
  if (codes_output) outputs.push_back("yq");
  DType y_dtype = op == "LayerNormQuant" ? DType::kFloat8E4M3FN : DType::kFloat32;
  for (const auto& [name, value] : attributes)
    if (name == "output_dtype") y_dtype = static_cast<DType>(std::get<int64_t>(value));
  builder.node(op, names, outputs, attributes, node_name, "ai.loka").output_unshaped("y", y_dtype);
  if (codes_output) builder.output_unshaped("yq", DType::kFloat8E4M3FN);
  auto engine = builder.build_engine();
  if (!engine) return engine.status();
  return testing::run_once(**engine, feeds);
}

/// Expects failure (at load or run) with a message naming the node and containing `fragment`.
void expect_failure(const Result<std::vector<Tensor>>& result, const std::string& fragment) {
  ASSERT_FALSE(result) << "expected an error containing '" << fragment << "'";
  const std::string& message = result.status().message();
  EXPECT_NE(message.find("op_node"), std::string::npos) << message;
  EXPECT_NE(message.find(fragment), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

// ------------------------------------------------------------ QuantizedGemm --

struct GemmCase {
  Shape x_shape;
  int64_t n;
  std::string recipe;
  std::string activation;
  bool bias;
  bool fp8_x;
  float x_scale_factor = 1.0f;  ///< X_scale = amax/448 * factor (< 1 forces saturation)
};

/// xq of the doc, for float X.
std::vector<float> reference_quantize_x(const std::vector<float>& x, int64_t rows, int64_t k, const std::string& recipe,
                                        float x_scale) {
  std::vector<float> xq(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    float scale = x_scale;
    if (recipe == "row") {
      float amax = 0.0f;
      for (int64_t p = 0; p < k; ++p)
        if (std::isfinite(x[static_cast<size_t>(r * k + p)])) amax = std::max(amax, std::fabs(x[static_cast<size_t>(r * k + p)]));
      scale = amax > 0.0f ? amax / 448.0f : 1.0f;
    }
    for (int64_t p = 0; p < k; ++p) {
      const size_t i = static_cast<size_t>(r * k + p);
      xq[i] = q_d(x[i] / scale) * scale;
    }
  }
  return xq;
}

double reference_activation(const std::string& activation, double v) {
  if (activation == "relu") return std::max(v, 0.0);
  if (activation == "gelu") return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
  return v;
}

void check_quantized_gemm(const GemmCase& c, uint32_t seed) {
  SCOPED_TRACE("X " + shape_to_string(c.x_shape) + " N=" + std::to_string(c.n) + " recipe=" + c.recipe +
               " act=" + c.activation + (c.fp8_x ? " fp8 X" : "") + (c.bias ? " bias" : ""));
  std::mt19937 rng(seed);
  const int64_t k = c.x_shape.back();
  const int64_t rows = element_count(c.x_shape) / k;
  const Tensor x_float = testing::random_tensor(rng, c.x_shape, -3.0f, 3.0f);
  const QuantizedWeight w = random_weight(rng, c.n, k);
  const Tensor bias = testing::random_tensor(rng, {c.n});
  const float x_scale = amax_of(x_float.values<float>()) / 448.0f * c.x_scale_factor;

  // The activation the kernel reads, and the xq the doc says it dequantizes to.
  Tensor x = x_float;
  std::vector<float> xq;
  if (c.fp8_x) {
    std::vector<uint8_t> codes;
    for (float v : x_float.values<float>()) codes.push_back(float_to_fp8e4m3fn(v / x_scale));
    x = fp8_tensor(c.x_shape, codes);
    for (uint8_t code : codes) xq.push_back(fp8e4m3fn_to_float(code) * x_scale);
  } else {
    const std::vector<float> values(x_float.values<float>().begin(), x_float.values<float>().end());
    xq = reference_quantize_x(values, rows, k, c.recipe, x_scale);
  }

  std::vector<NodeInput> inputs{{"x", x, true}, {"w", w.codes}, {"w_scale", w.scale}, {"", {}}, {"x_scale", scalar_scale(x_scale, seed % 2 == 0)}};
  if (c.bias) inputs[3] = {"b", bias};
  if (c.recipe == "row" && !c.fp8_x) inputs.pop_back();  // X_scale is not needed for "row"
  auto outputs = run_loka_op("QuantizedGemm", inputs, {{"act_recipe", c.recipe}, {"activation", c.activation}});
  ASSERT_TRUE(outputs) << outputs.status().message();
  Shape expected_shape(c.x_shape.begin(), c.x_shape.end() - 1);
  expected_shape.push_back(c.n);
  const Tensor& y = (*outputs)[0];
  ASSERT_EQ(y.dtype(), DType::kFloat32);
  ASSERT_EQ(y.shape(), expected_shape);

  const uint8_t* w_codes = w.codes.data<uint8_t>();
  int checked_saturation = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < c.n; ++j) {
      double sum = c.bias ? bias.data<float>()[j] : 0.0;
      double magnitude = std::fabs(sum);
      for (int64_t p = 0; p < k; ++p) {
        const float wq = fp8e4m3fn_to_float(w_codes[j * k + p]) * w.scale.data<float>()[j];
        const double term = static_cast<double>(xq[static_cast<size_t>(r * k + p)]) * wq;
        sum += term;
        magnitude += std::fabs(term);
      }
      const double expected = reference_activation(c.activation, sum);
      const float actual = y.data<float>()[r * c.n + j];
      EXPECT_NEAR(actual, expected, 2e-6 * magnitude + 1e-6) << "at row " << r << ", column " << j;
    }
  if (c.x_scale_factor < 1.0f) {
    // Saturation did happen: some |xq| equals 448 * X_scale.
    for (float v : xq) checked_saturation += std::fabs(v) == 448.0f * x_scale;
    EXPECT_GT(checked_saturation, 0);
  }
}

TEST(QuantizedGemm, MatchesTheSpecAcrossRecipesShapesAndEpilogues) {
  const std::vector<GemmCase> cases = {
      {{2, 3, 37}, 5, "tensor", "none", true, false},         // rank-3 X, K not a multiple of 16
      {{1, 19}, 7, "row", "relu", false, false},              // one row, no bias
      {{4, 24}, 3, "tensor", "gelu", true, true},             // FP8 X with X_scale
      {{5, 33}, 17, "row", "gelu", true, false},
      {{3, 2, 1, 16}, 9, "tensor", "relu", false, true},      // rank-4 FP8 X
      {{6, 21}, 4, "tensor", "none", true, false, 0.25f},     // X_scale too small: saturates
      {{2, 1}, 1, "row", "none", true, false},                // K = 1, N = 1
  };
  uint32_t seed = 100;
  for (const GemmCase& c : cases) check_quantized_gemm(c, seed++);
}

TEST(QuantizedGemm, RowRecipeIgnoresXScaleAndHandlesZeroAndNonFiniteRows) {
  std::mt19937 rng(5);
  const int64_t k = 20, n = 6;
  Tensor x = testing::random_tensor(rng, {3, k});
  float* px = x.data<float>();
  for (int64_t p = 0; p < k; ++p) px[k + p] = 0.0f;  // row 1: all zeros -> scale 1, output = bias
  px[2 * k + 3] = INFINITY;                          // row 2: amax over finite values only
  const QuantizedWeight w = random_weight(rng, n, k);
  const Tensor bias = testing::random_tensor(rng, {n});
  const std::vector<NodeInput> base{{"x", x, true}, {"w", w.codes}, {"w_scale", w.scale}, {"b", bias}};
  auto without = run_loka_op("QuantizedGemm", base, {{"act_recipe", std::string("row")}});
  std::vector<NodeInput> with_scale = base;
  with_scale.push_back({"x_scale", scalar_scale(1e-9f, true)});
  auto with = run_loka_op("QuantizedGemm", with_scale, {{"act_recipe", std::string("row")}});
  ASSERT_TRUE(without) << without.status().message();
  ASSERT_TRUE(with) << with.status().message();
  EXPECT_EQ(testing::max_abs_difference((*without)[0], (*with)[0]), 0.0f);
  const float* y = (*without)[0].data<float>();
  for (int64_t j = 0; j < n; ++j) EXPECT_EQ(y[n + j], bias.data<float>()[j]);
  // Row 2: the infinity saturates to 448 * s with s from the finite amax, the rest as usual.
  const std::vector<float> row2(px + 2 * k, px + 3 * k);
  const std::vector<float> xq = reference_quantize_x(row2, 1, k, "row", 0.0f);
  EXPECT_TRUE(std::isfinite(xq[3]));
  for (int64_t j = 0; j < n; ++j) {
    double sum = bias.data<float>()[j];
    for (int64_t p = 0; p < k; ++p)
      sum += static_cast<double>(xq[static_cast<size_t>(p)]) *
             (fp8e4m3fn_to_float(w.codes.data<uint8_t>()[j * k + p]) * w.scale.data<float>()[j]);
    EXPECT_NEAR(y[2 * n + j], sum, 1e-4 * (1.0 + std::fabs(sum)));
  }
}

TEST(QuantizedGemm, RejectsIllFormedInputsNamingThem) {
  std::mt19937 rng(9);
  const Tensor x = testing::random_tensor(rng, {2, 8});
  const QuantizedWeight w = random_weight(rng, 3, 8);
  const Tensor s = scalar_scale(0.01f, false);
  const Tensor w_float = testing::random_tensor(rng, {3, 8});
  const QuantizedWeight w_k7 = random_weight(rng, 3, 7);
  const Tensor x_rank1 = testing::random_tensor(rng, {8});
  const Tensor x_int = Tensor::from_int64s({2, 8}, std::vector<int64_t>(16, 1));
  const auto gemm = [&](std::vector<NodeInput> inputs, Attrs attrs = {}) { return run_loka_op("QuantizedGemm", inputs, attrs); };
  // A well-formed twin runs.
  ASSERT_TRUE(gemm({{"x", x, true}, {"w", w.codes}, {"ws", w.scale}, {"", {}}, {"xs", s}}));
  expect_failure(gemm({{"x", x, true}, {"w", w_float}, {"ws", w.scale}, {"", {}}, {"xs", s}}), "W must be FLOAT8E4M3FN");
  expect_failure(gemm({{"x", x, true}, {"w", w_k7.codes}, {"ws", w_k7.scale}, {"", {}}, {"xs", s}}), "K differs");
  expect_failure(gemm({{"x", x_rank1, true}, {"w", w.codes}, {"ws", w.scale}, {"", {}}, {"xs", s}}), "X must have rank >= 2");
  expect_failure(gemm({{"x", x_int, true}, {"w", w.codes}, {"ws", w.scale}, {"", {}}, {"xs", s}}),
                 "X must be FLOAT, BFLOAT16 or FLOAT8E4M3FN, got INT64");
  expect_failure(gemm({{"x", Tensor::zeros(DType::kFloat16, {2, 8}), true}, {"w", w.codes}, {"ws", w.scale}, {"", {}}, {"xs", s}}),
                 "X must be FLOAT, BFLOAT16 or FLOAT8E4M3FN, got FLOAT16");
  expect_failure(gemm({{"x", x, true}, {"w", w.codes}, {"ws", testing::random_tensor(rng, {4})}, {"", {}}, {"xs", s}}), "W_scale must have shape [N] = [3]");
  expect_failure(gemm({{"x", x, true}, {"w", w.codes}, {"ws", w.scale}, {"b", testing::random_tensor(rng, {1, 3})}, {"xs", s}}), "B must have shape [N]");
  expect_failure(gemm({{"x", x, true}, {"w", w.codes}, {"ws", w.scale}}), "X_scale");
  expect_failure(gemm({{"x", x, true}, {"w", w.codes}, {"ws", w.scale}, {"", {}}, {"xs", scalar_scale(0.0f, true)}}), "X_scale must be finite and > 0");
  expect_failure(gemm({{"x", x, true}, {"w", w.codes}, {"ws", w.scale}, {"", {}}, {"xs", testing::random_tensor(rng, {2})}}), "X_scale must have shape [] or [1]");
  expect_failure(gemm({{"x", w.codes, true}, {"w", w.codes}, {"ws", w.scale}}, {{"act_recipe", std::string("row")}}), "X_scale");  // FP8 X needs it
  expect_failure(gemm({{"x", x, true}, {"w", w.codes}, {"ws", w.scale}, {"", {}}, {"xs", s}}, {{"act_recipe", std::string("block")}}), "act_recipe");
  expect_failure(gemm({{"x", x, true}, {"w", w.codes}, {"ws", w.scale}, {"", {}}, {"xs", s}}, {{"activation", std::string("silu")}}), "activation");
  // Y is stored as FLOAT or BFLOAT16 only.
  ASSERT_TRUE(gemm({{"x", x, true}, {"w", w.codes}, {"ws", w.scale}, {"", {}}, {"xs", s}}, {{"output_dtype", int64_t{16}}}));
  for (const int64_t dtype : {int64_t{10}, int64_t{0}, int64_t{17}})
    expect_failure(gemm({{"x", x, true}, {"w", w.codes}, {"ws", w.scale}, {"", {}}, {"xs", s}}, {{"output_dtype", dtype}}),
                   "attribute 'output_dtype' must be 1 (FLOAT) or 16 (BFLOAT16), got " + std::to_string(dtype));
  expect_failure(gemm({{"x", x, true}, {"w", w.codes}}), "3 to 8 inputs");
  // The epilogue terms must have Y's shape [2, 3] exactly: no broadcasting.
  const Tensor row = testing::random_tensor(rng, {1, 3});
  expect_failure(gemm({{"x", x, true}, {"w", w.codes}, {"ws", w.scale}, {"", {}}, {"xs", s}, {"m", row}}),
                 "Multiplier must be FLOAT or BFLOAT16 [2,3]");
  expect_failure(gemm({{"x", x, true}, {"w", w.codes}, {"ws", w.scale}, {"", {}}, {"xs", s}, {"", {}}, {"r", row}}),
                 "Residual must be FLOAT or BFLOAT16 [2,3]");
  // Either may be BFLOAT16 (of Y's shape), not FLOAT16.
  const Tensor bf16_term = Tensor::zeros(DType::kBFloat16, {2, 3});
  ASSERT_TRUE(gemm({{"x", x, true}, {"w", w.codes}, {"ws", w.scale}, {"", {}}, {"xs", s}, {"m", bf16_term}, {"r", bf16_term}}));
  expect_failure(gemm({{"x", x, true}, {"w", w.codes}, {"ws", w.scale}, {"", {}}, {"xs", s}, {"m", Tensor::zeros(DType::kFloat16, {2, 3})}}),
                 "Multiplier must be FLOAT or BFLOAT16 [2,3] (Y's shape), got FLOAT16 [2,3]");
  expect_failure(gemm({{"x", x, true}, {"w", w.codes}, {"ws", w.scale}, {"", {}}, {"xs", s}, {"", {}},
                       {"r", Tensor::zeros(DType::kBFloat16, {1, 3})}}),
                 "Residual must be FLOAT or BFLOAT16 [2,3] (Y's shape), got BFLOAT16 [1,3]");
}

TEST(QuantizedGemm, MultiplierAndResidualActAfterTheActivationAsMulThenAdd) {
  std::mt19937 rng(19);
  const Tensor x = testing::random_tensor(rng, {5, 8});
  const QuantizedWeight w = random_weight(rng, 3, 8);
  const Tensor s = scalar_scale(0.01f, false);
  const Tensor bias = testing::random_tensor(rng, {3});
  const Tensor multiplier = testing::random_tensor(rng, {5, 3}), residual = testing::random_tensor(rng, {5, 3});
  const Attrs relu = {{"activation", std::string("relu")}};
  auto plain = run_loka_op("QuantizedGemm", {{"x", x, true}, {"w", w.codes}, {"ws", w.scale}, {"b", bias}, {"xs", s}}, relu);
  auto fused = run_loka_op("QuantizedGemm", {{"x", x, true}, {"w", w.codes}, {"ws", w.scale}, {"b", bias}, {"xs", s},
                                             {"m", multiplier}, {"r", residual}}, relu);
  ASSERT_TRUE(plain) << plain.status().message();
  ASSERT_TRUE(fused) << fused.status().message();
  for (int64_t i = 0; i < 15; ++i) {
    const float expected = (*plain)[0].data<float>()[i] * multiplier.data<float>()[i] + residual.data<float>()[i];
    EXPECT_EQ((*fused)[0].data<float>()[i], expected) << i;
  }
}

TEST(QuantizedGemm, YqIsQuantizeLinearOfYBitForBit) {
  std::mt19937 rng(23);
  const Tensor x = testing::random_tensor(rng, {6, 16}, -3.0f, 3.0f);
  const QuantizedWeight w = random_weight(rng, 5, 16);
  const Tensor multiplier = testing::random_tensor(rng, {6, 5}), residual = testing::random_tensor(rng, {6, 5});
  for (const float y_scale : {0.5f, 1e-3f}) {  // 1e-3: most of Y saturates at ±448
    SCOPED_TRACE("Y_scale " + std::to_string(y_scale));
    auto result = run_loka_op("QuantizedGemm",
                              {{"x", x, true}, {"w", w.codes}, {"ws", w.scale}, {"b", testing::random_tensor(rng, {5})},
                               {"xs", scalar_scale(0.01f, false)}, {"m", multiplier}, {"r", residual},
                               {"ys", scalar_scale(y_scale, y_scale < 0.01f)}},
                              {}, "op_node", /*codes_output=*/true);
    ASSERT_TRUE(result) << result.status().message();
    ASSERT_EQ(result->size(), 2u);
    const Tensor& y = (*result)[0];
    const Tensor& yq = (*result)[1];
    ASSERT_EQ(yq.dtype(), DType::kFloat8E4M3FN);
    ASSERT_EQ(yq.shape(), y.shape());
    for (int64_t i = 0; i < y.element_count(); ++i)
      EXPECT_EQ(yq.data<uint8_t>()[i], float_to_fp8e4m3fn(y.data<float>()[i] / y_scale)) << i;
  }
}

TEST(QuantizedGemm, YqNeedsAWellFormedYScaleAndYScaleNeedsYq) {
  std::mt19937 rng(29);
  const Tensor x = testing::random_tensor(rng, {2, 8});
  const QuantizedWeight w = random_weight(rng, 3, 8);
  const Tensor s = scalar_scale(0.01f, false);
  const auto gemm = [&](const Tensor& y_scale, bool codes) {
    std::vector<NodeInput> inputs{{"x", x, true}, {"w", w.codes}, {"ws", w.scale}, {"", {}}, {"xs", s}, {"", {}}, {"", {}}};
    if (y_scale.defined()) inputs.push_back({"ys", y_scale});
    return run_loka_op("QuantizedGemm", inputs, {}, "op_node", codes);
  };
  ASSERT_TRUE(gemm(s, true));  // the well-formed twin
  expect_failure(gemm(Tensor(), true), "input 7 (Y_scale)");
  expect_failure(gemm(scalar_scale(0.0f, false), true), "Y_scale must be finite and > 0");
  expect_failure(gemm(testing::random_tensor(rng, {2}), true), "Y_scale must have shape [] or [1]");
  expect_failure(gemm(s, false), "without output 1 (Yq)");
}

// ------------------------------------------------- QuantizedGemm, BF16 storage --

TEST(QuantizedGemm, Bf16XIsItsWidenedFloatXBitForBitInBothRecipes) {
  std::mt19937 rng(41);
  const int64_t k = 24, n = 7;
  Bf16Values x = random_bf16(rng, {2, 3, k});
  // Beside -0 and the smallest subnormal (row 0) and the huge value (row 5): -inf and another
  // subnormal in row 1 (saturated under "tensor", left out of the amax under "row"), NaN in row 2.
  std::vector<uint16_t> codes(x.codes.values<uint16_t>().begin(), x.codes.values<uint16_t>().end());
  codes[k + 5] = 0xFF80;
  codes[k + 7] = 0x0023;
  codes[2 * k + 2] = 0x7FC0;
  x = bf16_values({2, 3, k}, codes);
  const QuantizedWeight w = random_weight(rng, n, k);
  const Tensor bias = testing::random_tensor(rng, {n});
  for (const std::string recipe : {"tensor", "row"}) {
    SCOPED_TRACE(recipe);
    const auto gemm = [&](const Tensor& activation) {
      return run_loka_op("QuantizedGemm", {{"x", activation, true}, {"w", w.codes}, {"ws", w.scale}, {"b", bias},
                                           {"xs", scalar_scale(0.02f, false)}},
                         {{"act_recipe", recipe}, {"activation", std::string("gelu")}});
    };
    auto from_bf16 = gemm(x.codes);
    auto from_float = gemm(x.widened);
    ASSERT_TRUE(from_bf16) << from_bf16.status().message();
    ASSERT_TRUE(from_float) << from_float.status().message();
    ASSERT_EQ((*from_bf16)[0].dtype(), DType::kFloat32);
    expect_same_bits((*from_bf16)[0], (*from_float)[0]);
    EXPECT_TRUE(std::isfinite((*from_bf16)[0].data<float>()[n])) << "row 1's -inf saturated";
    EXPECT_TRUE(std::isnan((*from_bf16)[0].data<float>()[2 * n])) << "row 2's NaN reached Y";
  }
}

TEST(QuantizedGemm, Bf16MultiplierAndResidualAreTheirWidenedValuesBitForBit) {
  std::mt19937 rng(43);
  const int64_t k = 16, n = 5;
  const Tensor x = testing::random_tensor(rng, {4, k}, -3.0f, 3.0f);
  const QuantizedWeight w = random_weight(rng, n, k);
  const Bf16Values multiplier = random_bf16(rng, {4, n}), residual = random_bf16(rng, {4, n});
  const Tensor float_multiplier = testing::random_tensor(rng, {4, n}), float_residual = testing::random_tensor(rng, {4, n});
  const Tensor bias = testing::random_tensor(rng, {n});
  const auto gemm = [&](const Tensor& m, const Tensor& r) {
    return run_loka_op("QuantizedGemm", {{"x", x, true}, {"w", w.codes}, {"ws", w.scale}, {"b", bias},
                                         {"xs", scalar_scale(0.01f, true)}, {"m", m, true}, {"r", r, true}},
                       {{"activation", std::string("relu")}});
  };
  // Each BF16 on its own (the other float32), then both.
  const struct {
    const char* label;
    Tensor m_bf16, r_bf16, m_float, r_float;
  } cases[] = {{"BF16 Multiplier", multiplier.codes, float_residual, multiplier.widened, float_residual},
               {"BF16 Residual", float_multiplier, residual.codes, float_multiplier, residual.widened},
               {"both BF16", multiplier.codes, residual.codes, multiplier.widened, residual.widened}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.label);
    auto from_bf16 = gemm(c.m_bf16, c.r_bf16);
    auto from_float = gemm(c.m_float, c.r_float);
    ASSERT_TRUE(from_bf16) << from_bf16.status().message();
    ASSERT_TRUE(from_float) << from_float.status().message();
    expect_same_bits((*from_bf16)[0], (*from_float)[0]);
  }
}

TEST(QuantizedGemm, Bf16OutputIsTheFloatYRoundedToNearestEvenAndYqIsTheFloatYq) {
  std::mt19937 rng(47);
  const int64_t k = 19, n = 13;
  const Tensor x = testing::random_tensor(rng, {8, 3, k}, -3.0f, 3.0f);
  const QuantizedWeight w = random_weight(rng, n, k);
  const Bf16Values multiplier = random_bf16(rng, {8, 3, n});
  const Tensor residual = testing::random_tensor(rng, {8, 3, n}, -8.0f, 8.0f), bias = testing::random_tensor(rng, {n});
  for (const std::string recipe : {"tensor", "row"}) {
    SCOPED_TRACE(recipe);
    const auto gemm = [&](int64_t output_dtype) {
      return run_loka_op("QuantizedGemm",
                         {{"x", x, true}, {"w", w.codes}, {"ws", w.scale}, {"b", bias}, {"xs", scalar_scale(0.01f, false)},
                          {"m", multiplier.codes}, {"r", residual}, {"ys", scalar_scale(0.03125f, false)}},
                         {{"act_recipe", recipe}, {"output_dtype", output_dtype}}, "op_node", /*codes_output=*/true);
    };
    auto rounded = gemm(16);
    auto full = gemm(1);
    ASSERT_TRUE(rounded) << rounded.status().message();
    ASSERT_TRUE(full) << full.status().message();
    const Tensor& y = (*rounded)[0];
    const Tensor& y_float = (*full)[0];
    ASSERT_EQ(y.dtype(), DType::kBFloat16);
    ASSERT_EQ(y.shape(), y_float.shape());
    for (int64_t i = 0; i < y.element_count(); ++i)
      ASSERT_EQ(y.data<uint16_t>()[i], float_to_bf16(y_float.data<float>()[i])) << "element " << i;
    // Yq from the float32 Y, before the rounding: the FLOAT op's codes, not Q(bf16(Y) / Y_scale).
    expect_same_bits((*rounded)[1], (*full)[1]);
    // Which the test can tell apart: quantizing the rounded Y moves some codes by a step.
    int moved = 0;
    for (int64_t i = 0; i < y.element_count(); ++i)
      moved += float_to_fp8e4m3fn(bf16_to_float(y.data<uint16_t>()[i]) / 0.03125f) != (*full)[1].data<uint8_t>()[i];
    EXPECT_GT(moved, 0);
  }
}

// The rounding of each awkward float32 Y, written out. X is all zeros and the activation a ReLU,
// so the product is +0 and Y = (+0 · Multiplier) + Residual: Residual's values, and -0 where
// Multiplier is -1 and Residual -0.
TEST(QuantizedGemm, Bf16OutputRoundsTiesToEvenKeepsNanAndZerosAndOverflowsToInf) {
  struct Expected {
    uint32_t y_bits;
    uint16_t code;
  };
  const std::vector<Expected> cases = {
      {0x3F808000, 0x3F80},  // 1 + 2^-8: halfway between 1 and 1 + 2^-7, ties to the even 1
      {0x3F818000, 0x3F82},  // 1 + 3·2^-8: halfway, ties up to the even 1 + 2^-6
      {0x3F808001, 0x3F81},  // just above halfway: up
      {0xBF817FFF, 0xBF81},  // just below halfway, negative: down in magnitude
      {0x80000000, 0x8000},  // -0 stays -0
      {0x00000000, 0x0000},  // +0
      {0x00018000, 0x0002},  // a subnormal halfway between two BF16 subnormals: to the even one
      {0x00008000, 0x0000},  // halfway between 0 and the smallest BF16 subnormal: to 0
      {0x807FFFFF, 0x8080},  // -(the largest float32 subnormal) rounds to -2^-126, a normal
      {0x7F7F7FFF, 0x7F7F},  // just below the midpoint above BF16's largest finite value: stays
      {0x7F7F8000, 0x7F80},  // that midpoint: ties to even, which is past the largest: +inf
      {0xFF7FFFFF, 0xFF80},  // float32's most negative finite value: -inf
      {0x7F800000, 0x7F80},  // +inf
      {0x7FC00000, 0x7FC0},  // NaN stays NaN
  };
  const int64_t n = static_cast<int64_t>(cases.size()), k = 4;
  std::mt19937 rng(53);
  const QuantizedWeight w = random_weight(rng, n, k);
  std::vector<float> multiplier(cases.size(), 1.0f), residual;
  for (size_t i = 0; i < cases.size(); ++i) {
    residual.push_back(float_from_bits(cases[i].y_bits));
    if (cases[i].y_bits == 0x80000000) multiplier[i] = -1.0f;
  }
  const auto gemm = [&](int64_t output_dtype) {
    return run_loka_op("QuantizedGemm",
                       {{"x", Tensor::zeros(DType::kFloat32, {1, k}), true}, {"w", w.codes}, {"ws", w.scale}, {"", {}},
                        {"xs", scalar_scale(1.0f, false)}, {"m", Tensor::from_floats({1, n}, multiplier)},
                        {"r", Tensor::from_floats({1, n}, residual)}, {"ys", scalar_scale(2.0f, false)}},
                       {{"activation", std::string("relu")}, {"output_dtype", output_dtype}}, "op_node", true);
  };
  auto rounded = gemm(16);
  auto full = gemm(1);
  ASSERT_TRUE(rounded) << rounded.status().message();
  ASSERT_TRUE(full) << full.status().message();
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "Y bits 0x" << std::hex << cases[i].y_bits);
    ASSERT_EQ(float_bits((*full)[0].data<float>()[i]), cases[i].y_bits) << "the float32 Y is not the case's value";
    EXPECT_EQ((*rounded)[0].data<uint16_t>()[i], cases[i].code);
  }
  expect_same_bits((*rounded)[1], (*full)[1]);
}

// ---------------------------------------------------------------- FusedGemm --

// Bit-for-bit equality with the MatMul/Gemm + Add + Relu/Gelu nodes it replaces is checked in
// tests/passes/fuse_gemm_epilogue_test.cc; here the op against its spec, in double.
TEST(FusedGemm, ComputesTheActivationOfTheProductPlusBias) {
  std::mt19937 rng(23);
  const Tensor x3 = testing::random_tensor(rng, {2, 5, 7});  // leading dims are rows
  const Tensor w_kn = testing::random_tensor(rng, {7, 3});
  const Tensor bias = testing::random_tensor(rng, {3});
  for (const std::string activation : {"none", "relu", "gelu"}) {
    SCOPED_TRACE(activation);
    auto fused = run_loka_op("FusedGemm", {{"x", x3, true}, {"w", w_kn}, {"b", bias}}, {{"activation", activation}});
    ASSERT_TRUE(fused) << fused.status().message();
    ASSERT_EQ((*fused)[0].shape(), (Shape{2, 5, 3}));
    for (int64_t r = 0; r < 10; ++r)
      for (int64_t j = 0; j < 3; ++j) {
        double v = bias.data<float>()[j];
        for (int64_t p = 0; p < 7; ++p) v += double(x3.data<float>()[r * 7 + p]) * w_kn.data<float>()[p * 3 + j];
        if (activation == "relu") v = v > 0.0 ? v : 0.0;
        if (activation == "gelu") v = 0.5 * v * (1.0 + std::erf(v * M_SQRT1_2));
        EXPECT_NEAR((*fused)[0].data<float>()[r * 3 + j], v, 1e-5) << r << "," << j;
      }
  }
  // transB reads W as [N,K]: the same product as the transposed weight without it.
  const Tensor x2 = testing::random_tensor(rng, {4, 7});
  Tensor w_nk = Tensor::zeros(DType::kFloat32, {3, 7});
  for (int64_t p = 0; p < 7; ++p)
    for (int64_t j = 0; j < 3; ++j) w_nk.data<float>()[j * 7 + p] = w_kn.data<float>()[p * 3 + j];
  // The residual is one add after the activation, as the Add node it replaces.
  const Tensor residual = testing::random_tensor(rng, {2, 5, 3});
  const Attrs relu = {{"activation", std::string("relu")}};
  auto plain = run_loka_op("FusedGemm", {{"x", x3, true}, {"w", w_kn}, {"b", bias}}, relu);
  auto with_residual = run_loka_op("FusedGemm", {{"x", x3, true}, {"w", w_kn}, {"b", bias}, {"r", residual}}, relu);
  ASSERT_TRUE(plain && with_residual);
  for (int64_t i = 0; i < 30; ++i)
    EXPECT_EQ((*with_residual)[0].data<float>()[i], (*plain)[0].data<float>()[i] + residual.data<float>()[i]) << i;
  auto nn = run_loka_op("FusedGemm", {{"x", x2, true}, {"w", w_kn}});
  auto nt = run_loka_op("FusedGemm", {{"x", x2, true}, {"w", w_nk}}, {{"transB", int64_t{1}}});
  ASSERT_TRUE(nn && nt);
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ((*nn)[0].data<float>()[i], (*nt)[0].data<float>()[i]) << i;
}

TEST(FusedGemm, ABatchedWMultipliesMatrixByMatrix) {
  // Y[b] = act(X[b] · op(W[b])): fold-transposes' X·Yᵀ reads W [B, N, K] in place (transB).
  std::mt19937 rng(31);
  const Tensor x = testing::random_tensor(rng, {3, 2, 5, 7});
  const Tensor w_nk = testing::random_tensor(rng, {3, 2, 4, 7});
  Tensor w_kn = Tensor::zeros(DType::kFloat32, {3, 2, 7, 4});
  for (int64_t b = 0; b < 6; ++b)
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t p = 0; p < 7; ++p) w_kn.data<float>()[b * 28 + p * 4 + j] = w_nk.data<float>()[b * 28 + j * 7 + p];
  auto nt = run_loka_op("FusedGemm", {{"x", x, true}, {"w", w_nk}}, {{"transB", int64_t{1}}, {"activation", std::string("relu")}});
  auto nn = run_loka_op("FusedGemm", {{"x", x, true}, {"w", w_kn}}, {{"activation", std::string("relu")}});
  ASSERT_TRUE(nt && nn) << (nt ? nn.status().message() : nt.status().message());
  ASSERT_EQ((*nt)[0].shape(), (Shape{3, 2, 5, 4}));
  for (int64_t b = 0; b < 6; ++b)
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 4; ++j) {
        double v = 0;
        for (int64_t p = 0; p < 7; ++p)
          v += double(x.data<float>()[(b * 5 + i) * 7 + p]) * w_nk.data<float>()[(b * 4 + j) * 7 + p];
        const int64_t at = (b * 5 + i) * 4 + j;
        EXPECT_NEAR((*nt)[0].data<float>()[at], v > 0.0 ? v : 0.0, 1e-5) << b << "," << i << "," << j;
        EXPECT_EQ((*nn)[0].data<float>()[at], (*nt)[0].data<float>()[at]) << at;
      }
  const auto gemm = [&](std::vector<NodeInput> inputs) { return run_loka_op("FusedGemm", inputs, {{"transB", int64_t{1}}}); };
  expect_failure(gemm({{"x", x, true}, {"w", testing::random_tensor(rng, {3, 1, 4, 7})}}), "X's rank and leading dims");
  expect_failure(gemm({{"x", x, true}, {"w", testing::random_tensor(rng, {6, 4, 7})}}), "X's rank and leading dims");
  expect_failure(gemm({{"x", x, true}, {"w", testing::random_tensor(rng, {3, 2, 4, 6})}}), "inner dims differ");
  expect_failure(gemm({{"x", x, true}, {"w", w_nk}, {"b", testing::random_tensor(rng, {4})}}), "no B or Residual");
}

TEST(FusedGemm, Bf16XIsItsWidenedFloatXBitForBit) {
  // BF16 activation storage: a float GEMM site reads a BF16 X widened exactly, so it computes
  // what it computes on the float32 tensor of the widened values, bit for bit (-0, a subnormal
  // and 1.7e38 among them), with each epilogue, a residual, transB, rank 3 and a batched W.
  std::mt19937 rng(37);
  const Bf16Values x = random_bf16(rng, {2, 5, 7});
  const Tensor w_kn = testing::random_tensor(rng, {7, 3}), w_nk = testing::random_tensor(rng, {3, 7});
  const Tensor bias = testing::random_tensor(rng, {3}), residual = testing::random_tensor(rng, {2, 5, 3});
  for (const std::string activation : {"none", "relu", "gelu"}) {
    SCOPED_TRACE(activation);
    const auto gemm = [&](const Tensor& xs, const Tensor& w, int64_t trans_b) {
      return run_loka_op("FusedGemm", {{"x", xs, true}, {"w", w}, {"b", bias}, {"r", residual}},
                         {{"activation", activation}, {"transB", trans_b}});
    };
    for (const auto& [w, trans_b] : {std::pair{w_kn, int64_t{0}}, std::pair{w_nk, int64_t{1}}}) {
      auto from_bf16 = gemm(x.codes, w, trans_b), from_float = gemm(x.widened, w, trans_b);
      ASSERT_TRUE(from_bf16 && from_float) << (from_bf16 ? from_float.status().message() : from_bf16.status().message());
      ASSERT_EQ((*from_bf16)[0].dtype(), DType::kFloat32) << "Y stays FLOAT";
      expect_same_bits((*from_bf16)[0], (*from_float)[0]);
    }
  }
  const Bf16Values xb = random_bf16(rng, {3, 5, 7});
  const Tensor wb = testing::random_tensor(rng, {3, 4, 7});
  auto batched_bf16 = run_loka_op("FusedGemm", {{"x", xb.codes, true}, {"w", wb}}, {{"transB", int64_t{1}}});
  auto batched_float = run_loka_op("FusedGemm", {{"x", xb.widened, true}, {"w", wb}}, {{"transB", int64_t{1}}});
  ASSERT_TRUE(batched_bf16 && batched_float);
  expect_same_bits((*batched_bf16)[0], (*batched_float)[0]);
  // Only X: a BF16 W, or an FP8 X, is refused by name.
  expect_failure(run_loka_op("FusedGemm", {{"x", x.widened, true}, {"w", random_bf16(rng, {7, 3}).codes}}), "W");
  expect_failure(run_loka_op("FusedGemm", {{"x", Tensor::zeros(DType::kFloat8E4M3FN, {2, 7}), true}, {"w", w_kn}}),
                 "X must be FLOAT or BFLOAT16");
}

TEST(FusedGemm, RejectsIllFormedInputsNamingThem) {
  std::mt19937 rng(29);
  const Tensor x = testing::random_tensor(rng, {2, 8});
  const Tensor w = testing::random_tensor(rng, {8, 3});
  const auto gemm = [&](std::vector<NodeInput> inputs, Attrs attrs = {}) { return run_loka_op("FusedGemm", inputs, attrs); };
  ASSERT_TRUE(gemm({{"x", x, true}, {"w", w}, {"b", testing::random_tensor(rng, {3})}}));
  expect_failure(gemm({{"x", x, true}, {"w", testing::random_tensor(rng, {7, 3})}}), "inner dims differ");
  expect_failure(gemm({{"x", x, true}, {"w", w}}, {{"transB", int64_t{1}}}), "inner dims differ");
  expect_failure(gemm({{"x", testing::random_tensor(rng, {8}), true}, {"w", w}}), "X must have rank >= 2");
  expect_failure(gemm({{"x", x, true}, {"w", testing::random_tensor(rng, {8, 3, 1})}}), "X's rank and leading dims");
  expect_failure(gemm({{"x", x, true}, {"w", testing::random_tensor(rng, {8})}}), "W must be 2-D");
  expect_failure(gemm({{"x", x, true}, {"w", w}, {"b", testing::random_tensor(rng, {1, 3})}}), "B must have shape [N] = [3]");
  expect_failure(gemm({{"x", x, true}, {"w", w}}, {{"transB", int64_t{2}}}), "transB");
  expect_failure(gemm({{"x", x, true}, {"w", w}}, {{"activation", std::string("silu")}}), "activation");
  expect_failure(gemm({{"x", x, true}, {"w", w}, {"", {}}, {"r", testing::random_tensor(rng, {1, 3})}}),
                 "Residual must be FLOAT [2,3]");
  expect_failure(gemm({{"x", x, true}}), "2 to 4 inputs");
}

// ----------------------------------------------------------- LayerNormQuant --

TEST(LayerNormQuant, IsOnnxLayerNormalizationThenQuantizeBitForBit) {
  struct Case {
    Shape shape;
    bool bias;
    float epsilon;
    float scale_factor;  ///< Y_scale = amax/448 * factor (< 1 forces saturation)
  };
  const std::vector<Case> cases = {{{2, 3, 21}, true, 1e-5f, 1.0f},
                                   {{1, 7}, false, 1e-3f, 1.0f},
                                   {{5, 48}, true, 1e-5f, 0.2f},
                                   {{4, 1}, true, 1e-5f, 1.0f},  // C = 1: normalized value is 0, output = Q(B / Y_scale)
                                   {{9}, false, 0.5f, 1.0f}};
  uint32_t seed = 300;
  for (const Case& c : cases) {
    SCOPED_TRACE("X " + shape_to_string(c.shape) + " eps=" + std::to_string(c.epsilon));
    std::mt19937 rng(seed++);
    const int64_t channels = c.shape.back();
    Tensor x = testing::random_tensor(rng, c.shape, -4.0f, 4.0f);
    for (float& v : x.values<float>()) v += 2.0f;  // a non-zero mean
    const Tensor gamma = testing::random_tensor(rng, {channels}, 0.5f, 2.0f);
    const Tensor beta = testing::random_tensor(rng, {channels});
    const float y_scale = 4.0f / 448.0f * c.scale_factor;
    const std::vector<std::string> ln_inputs{"x", "gamma", c.bias ? "beta" : ""};
    const Attrs attrs{{"epsilon", c.epsilon}};

    ModelBuilder builder(17);
    builder.opset("ai.loka", 1)
        .input("x", DType::kFloat32, c.shape)
        .initializer("gamma", gamma)
        .initializer("beta", beta)
        .initializer("y_scale", scalar_scale(y_scale, channels % 2 == 0))
        .node("LayerNormalization", ln_inputs, {"ln"}, {{"epsilon", c.epsilon}, {"axis", int64_t{-1}}}, "ln_node")
        .node("LayerNormQuant", {"x", "gamma", c.bias ? "beta" : "", "y_scale"}, {"q"}, attrs, "lnq_node", "ai.loka")
        .output_unshaped("ln", DType::kFloat32)
        .output_unshaped("q", DType::kFloat8E4M3FN);
    auto engine = builder.build_engine();
    ASSERT_TRUE(engine) << engine.status().message();
    auto outputs = testing::run_once(**engine, {x});
    ASSERT_TRUE(outputs) << outputs.status().message();
    const Tensor& ln = (*outputs)[0];
    const Tensor& q = (*outputs)[1];
    ASSERT_EQ(q.dtype(), DType::kFloat8E4M3FN);
    ASSERT_EQ(q.shape(), c.shape);

    int saturated = 0;
    const int64_t rows = element_count(c.shape) / channels;
    for (int64_t r = 0; r < rows; ++r) {
      // Independent double-precision LayerNorm of the row.
      const float* row = x.data<float>() + r * channels;
      double mean = 0.0, var = 0.0;
      for (int64_t j = 0; j < channels; ++j) mean += row[j];
      mean /= static_cast<double>(channels);
      for (int64_t j = 0; j < channels; ++j) var += (row[j] - mean) * (row[j] - mean);
      var /= static_cast<double>(channels);
      for (int64_t j = 0; j < channels; ++j) {
        const size_t i = static_cast<size_t>(r * channels + j);
        const uint8_t code = q.data<uint8_t>()[i];
        // Bit for bit: Q(ONNX LayerNormalization / Y_scale).
        ASSERT_EQ(code, float_to_fp8e4m3fn(ln.data<float>()[i] / y_scale)) << "at " << i;
        const double expected = ((row[j] - mean) / std::sqrt(var + c.epsilon) * gamma.data<float>()[j] +
                                 (c.bias ? beta.data<float>()[j] : 0.0)) / y_scale;
        const double decoded = fp8e4m3fn_to_float(code);
        if (std::fabs(expected) >= 448.0) {
          EXPECT_EQ(decoded, std::copysign(448.0, expected)) << "at " << i;
          ++saturated;
        } else {
          // Within one FP8 rounding (3 mantissa bits; subnormal quantum 2^-9) plus FP32 slack.
          EXPECT_NEAR(decoded, expected, std::fabs(expected) / 16.0 + std::ldexp(1.0, -10) + 1e-4) << "at " << i;
        }
      }
    }
    if (c.scale_factor < 1.0f) {
      EXPECT_GT(saturated, 0);
    }
  }
}

TEST(LayerNormQuant, RejectsIllFormedInputsNamingThem) {
  std::mt19937 rng(11);
  const Tensor x = testing::random_tensor(rng, {3, 6});
  const Tensor gamma = testing::random_tensor(rng, {6});
  const Tensor s = scalar_scale(0.01f, true);
  const auto lnq = [&](std::vector<NodeInput> inputs, Attrs attrs = {}) { return run_loka_op("LayerNormQuant", inputs, attrs); };
  ASSERT_TRUE(lnq({{"x", x, true}, {"g", gamma}, {"", {}}, {"s", s}}));
  expect_failure(lnq({{"x", x, true}, {"g", testing::random_tensor(rng, {5})}, {"", {}}, {"s", s}}), "Scale must have shape [C] = [6]");
  expect_failure(lnq({{"x", x, true}, {"g", gamma}, {"b", testing::random_tensor(rng, {3, 6})}, {"s", s}}), "B must have shape [C]");
  expect_failure(lnq({{"x", x, true}, {"g", gamma}, {"", {}}, {"", {}}}), "Y_scale");
  expect_failure(lnq({{"x", x, true}, {"g", gamma}, {"", {}}, {"s", scalar_scale(-1.0f, false)}}), "Y_scale must be finite and > 0");
  expect_failure(lnq({{"x", Tensor::from_int64s({3, 6}, std::vector<int64_t>(18, 2)), true}, {"g", gamma}, {"", {}}, {"s", s}}), "X must be FLOAT");
  expect_failure(lnq({{"x", x, true}, {"g", gamma}}), "takes 4 inputs, got 2");
}

// -------------------------------------------------------------- ConcatQuant --

TEST(ConcatQuant, IsOnnxConcatThenQuantizeLinearBitForBit) {
  std::mt19937 rng(13);
  const Tensor a = testing::random_tensor(rng, {2, 3, 4}, -9.0f, 9.0f), b = testing::random_tensor(rng, {2, 3, 2}, -9.0f, 9.0f);
  const float scale = 0.0123f;  // no power of two: the division, not a reciprocal
  auto out = run_loka_op("ConcatQuant", {{"s", scalar_scale(scale, false)}, {"a", a, true}, {"b", b, true}}, {{"axis", int64_t{-1}}});
  ASSERT_TRUE(out) << out.status().message();
  const Tensor& codes = (*out)[0];
  ASSERT_EQ(codes.dtype(), DType::kFloat8E4M3FN);
  ASSERT_EQ(codes.shape(), (Shape{2, 3, 6}));
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t c = 0; c < 6; ++c) {
      const float v = c < 4 ? a.data<float>()[r * 4 + c] : b.data<float>()[r * 2 + c - 4];
      EXPECT_EQ(codes.data<uint8_t>()[r * 6 + c], float_to_fp8e4m3fn(v / scale)) << r << "," << c;
    }
}

TEST(ConcatQuant, RejectsIllFormedInputsNamingThem) {
  std::mt19937 rng(14);
  const Tensor a = testing::random_tensor(rng, {2, 4}), b = testing::random_tensor(rng, {3, 4});
  const auto cq = [&](std::vector<NodeInput> inputs, Attrs attrs = {{"axis", int64_t{1}}}) {
    return run_loka_op("ConcatQuant", inputs, attrs);
  };
  const Tensor s = scalar_scale(0.5f, true);
  ASSERT_TRUE(cq({{"s", s}, {"a", a, true}, {"a2", a, true}}));
  expect_failure(cq({{"s", s}, {"a", a, true}, {"b", b, true}}), "cannot concatenate");
  expect_failure(cq({{"s", scalar_scale(0.0f, false)}, {"a", a, true}}), "Y_scale must be finite and > 0");
  expect_failure(cq({{"s", s}, {"a", Tensor::from_int64s({2, 4}, std::vector<int64_t>(8, 1)), true}}), "must be FLOAT");
  expect_failure(cq({{"s", s}}), "at least one input");
  expect_failure(cq({{"s", s}, {"a", a, true}}, {}), "axis");
}

// -------------------------------------------------------- ResidualLayerNorm --

TEST(ResidualLayerNorm, IsOnnxAddThenLayerNormalizationBitForBit) {
  uint32_t seed = 320;
  for (const auto& [shape, bias] : {std::pair<Shape, bool>{{2, 3, 21}, true}, {{1, 7}, false}, {{5, 64}, true}, {{4, 1}, true}}) {
    SCOPED_TRACE("X " + shape_to_string(shape));
    std::mt19937 rng(seed++);
    const int64_t channels = shape.back();
    const Tensor x = testing::random_tensor(rng, shape, -4.0f, 6.0f);
    const Tensor residual = testing::random_tensor(rng, shape, -30.0f, 30.0f);
    ModelBuilder builder(17);
    builder.opset("ai.loka", 1)
        .input("x", DType::kFloat32, shape)
        .input("r", DType::kFloat32, shape)
        .initializer("gamma", testing::random_tensor(rng, {channels}, 0.5f, 2.0f))
        .initializer("beta", testing::random_tensor(rng, {channels}))
        .node("Add", {"x", "r"}, {"sum"}, {}, "add_node")
        .node("LayerNormalization", {"sum", "gamma", bias ? "beta" : ""}, {"ln"}, {{"epsilon", 1e-3f}, {"axis", int64_t{-1}}},
              "ln_node")
        .node("ResidualLayerNorm", {"x", "r", "gamma", bias ? "beta" : ""}, {"fused"}, {{"epsilon", 1e-3f}}, "rln_node",
              "ai.loka")
        .output_unshaped("ln", DType::kFloat32)
        .output_unshaped("fused", DType::kFloat32);
    auto engine = builder.build_engine();
    ASSERT_TRUE(engine) << engine.status().message();
    auto outputs = testing::run_once(**engine, {x, residual});
    ASSERT_TRUE(outputs) << outputs.status().message();
    ASSERT_EQ((*outputs)[1].shape(), shape);
    EXPECT_EQ(testing::max_abs_difference((*outputs)[0], (*outputs)[1]), 0.0f);
  }
}

TEST(ResidualLayerNorm, RejectsIllFormedInputsNamingThem) {
  std::mt19937 rng(13);
  const Tensor x = testing::random_tensor(rng, {3, 6});
  const Tensor gamma = testing::random_tensor(rng, {6});
  const auto rln = [&](std::vector<NodeInput> inputs) { return run_loka_op("ResidualLayerNorm", inputs); };
  ASSERT_TRUE(rln({{"x", x, true}, {"r", x, true}, {"g", gamma}}));
  expect_failure(rln({{"x", x, true}, {"r", testing::random_tensor(rng, {3, 1}), true}, {"g", gamma}}),
                 "Residual must have X's shape [3,6]");
  expect_failure(rln({{"x", x, true}, {"r", x, true}, {"g", testing::random_tensor(rng, {5})}}), "Scale must have shape [C] = [6]");
  expect_failure(rln({{"x", x, true}, {"r", x, true}, {"g", gamma}, {"b", testing::random_tensor(rng, {2})}}), "B must have shape [C]");
  expect_failure(rln({{"x", x, true}, {"r", Tensor::from_int64s({3, 6}, std::vector<int64_t>(18, 2)), true}, {"g", gamma}}),
                 "Residual must be FLOAT");
  expect_failure(rln({{"x", x, true}, {"r", x, true}}), "3 to 4 inputs");
}

// -------------------------------------------------- division, not reciprocal --

// 10.9375 / 7 is exactly 1.5625, the midpoint of the E4M3 neighbours 1.5 and 1.625, so ties-to-even
// gives 1.5; 10.9375 * fl(1/7) lands just above the midpoint and would give 1.625. The doc (as ONNX
// QuantizeLinear) says x / scale is one FP32 division.
TEST(LokaOps, QuantizeDividesByTheScaleAsQuantizeLinear) {
  const float value = 10.9375f, scale = 7.0f;
  ASSERT_EQ(value / scale, 1.5625f);
  ASSERT_EQ(q_d(value * (1.0f / scale)), 1.625f);  // the trap the kernels must avoid
  // LayerNormQuant: X = [-4, 4] with epsilon 0 normalizes to exactly [-1, 1]; gamma makes it ±10.9375.
  const std::vector<float> x_values{-4.0f, 4.0f}, gamma_values{value, value};
  auto lnq = run_loka_op("LayerNormQuant",
                         {{"x", Tensor::from_floats({1, 2}, x_values), true},
                          {"g", Tensor::from_floats({2}, gamma_values)},
                          {"", {}},
                          {"s", scalar_scale(scale, false)}},
                         {{"epsilon", 0.0f}});
  ASSERT_TRUE(lnq) << lnq.status().message();
  EXPECT_EQ(fp8e4m3fn_to_float((*lnq)[0].data<uint8_t>()[0]), -1.5f);
  EXPECT_EQ(fp8e4m3fn_to_float((*lnq)[0].data<uint8_t>()[1]), 1.5f);
  // QuantizedGemm "tensor": Y = D(Q(10.9375 / 7)) * 7 * (1.0 * 1) = 10.5.
  const std::vector<float> one{1.0f};
  auto gemm = run_loka_op("QuantizedGemm",
                          {{"x", Tensor::from_floats({1, 1}, std::vector<float>{value}), true},
                           {"w", fp8_tensor({1, 1}, {float_to_fp8e4m3fn(1.0f)})},
                           {"ws", Tensor::from_floats({1}, one)},
                           {"", {}},
                           {"xs", scalar_scale(scale, true)}});
  ASSERT_TRUE(gemm) << gemm.status().message();
  EXPECT_EQ((*gemm)[0].data<float>()[0], 10.5f);
}

// ---------------------------------------------------------- QuantizedGather --

template <typename Index>
Tensor index_tensor(const Shape& shape, const std::vector<int64_t>& ids) {
  if constexpr (sizeof(Index) == 8) {
    return Tensor::from_int64s(shape, ids);
  } else {
    Tensor tensor = Tensor::zeros(DType::kInt32, shape);
    for (size_t i = 0; i < ids.size(); ++i) tensor.data<int32_t>()[i] = static_cast<int32_t>(ids[i]);
    return tensor;
  }
}

TEST(QuantizedGather, LooksUpRowsPerRowAndPerTensorWithNegativeIds) {
  std::mt19937 rng(21);
  const int64_t v = 11, d = 6;
  std::vector<uint8_t> codes(static_cast<size_t>(v * d));
  std::uniform_int_distribution<int> code_dist(0, 255);
  for (uint8_t& code : codes) {
    do code = static_cast<uint8_t>(code_dist(rng));
    while ((code & 0x7F) == 0x7F);  // no NaN codes, so equality below is meaningful
  }
  const Tensor table = fp8_tensor({v, d}, codes);
  const Tensor per_row = testing::random_tensor(rng, {v}, 0.001f, 0.1f);
  const Tensor per_tensor = testing::random_tensor(rng, {1}, 0.001f, 0.1f);
  std::uniform_int_distribution<int64_t> id_dist(-v, v - 1);
  struct Case {
    Shape ids_shape;
    bool int32;
    bool per_row;
  };
  for (const Case& c : std::vector<Case>{{{2, 3}, false, true}, {{7}, true, true}, {{4, 1, 2}, true, false},
                                         {{}, false, false}, {{0, 5}, false, true}}) {
    SCOPED_TRACE("Indices " + shape_to_string(c.ids_shape) + (c.int32 ? " int32" : " int64") + (c.per_row ? " per-row" : " per-tensor"));
    std::vector<int64_t> ids(static_cast<size_t>(element_count(c.ids_shape)));
    for (int64_t& id : ids) id = id_dist(rng);
    if (ids.size() >= 2) {
      ids[0] = -v;     // the extremes of the valid range
      ids[1] = v - 1;
    }
    const Tensor indices = c.int32 ? index_tensor<int32_t>(c.ids_shape, ids) : index_tensor<int64_t>(c.ids_shape, ids);
    const Tensor& scale = c.per_row ? per_row : per_tensor;
    auto outputs = run_loka_op("QuantizedGather", {{"table", table}, {"scale", scale}, {"ids", indices, true}});
    ASSERT_TRUE(outputs) << outputs.status().message();
    const Tensor& y = (*outputs)[0];
    Shape expected_shape = c.ids_shape;
    expected_shape.push_back(d);
    ASSERT_EQ(y.dtype(), DType::kFloat32);
    ASSERT_EQ(y.shape(), expected_shape);
    for (size_t i = 0; i < ids.size(); ++i) {
      const int64_t row = ids[i] < 0 ? ids[i] + v : ids[i];
      const float s = scale.data<float>()[c.per_row ? row : 0];
      for (int64_t j = 0; j < d; ++j)
        ASSERT_EQ(y.data<float>()[static_cast<int64_t>(i) * d + j],
                  fp8e4m3fn_to_float(codes[static_cast<size_t>(row * d + j)]) * s)
            << "id " << ids[i] << ", column " << j;
    }
  }
}

TEST(QuantizedGather, RejectsOutOfRangeIdsAndIllFormedInputs) {
  std::mt19937 rng(23);
  const Tensor table = fp8_tensor({5, 4}, std::vector<uint8_t>(20, 0x38));
  const Tensor scale = testing::random_tensor(rng, {5}, 0.1f, 1.0f);
  const auto gather = [&](const Tensor& t, const Tensor& s, const Tensor& ids) {
    return run_loka_op("QuantizedGather", {{"table", t}, {"scale", s}, {"ids", ids, true}});
  };
  ASSERT_TRUE(gather(table, scale, index_tensor<int64_t>({3}, {0, -5, 4})));
  expect_failure(gather(table, scale, index_tensor<int64_t>({3}, {0, 5, 1})), "Indices[1] = 5 is outside [-5, 5)");
  expect_failure(gather(table, scale, index_tensor<int32_t>({2, 2}, {0, 1, 2, -6})), "Indices[3] = -6");
  expect_failure(gather(table, scale, index_tensor<int64_t>({1}, {int64_t{1} << 40})), std::to_string(int64_t{1} << 40));
  expect_failure(gather(testing::random_tensor(rng, {5, 4}), scale, index_tensor<int64_t>({1}, {0})), "Table must be FLOAT8E4M3FN");
  expect_failure(gather(fp8_tensor({20}, std::vector<uint8_t>(20, 0)), scale, index_tensor<int64_t>({1}, {0})), "Table must be 2-D");
  expect_failure(gather(table, testing::random_tensor(rng, {4}), index_tensor<int64_t>({1}, {0})), "Row_scale must have shape [V] = [5] or [1]");
  expect_failure(gather(table, scale, testing::random_tensor(rng, {2})), "Indices must be INT64 or INT32");
}

// ------------------------------------------------------------ EmbeddingBags --

/// Random FP8 codes without NaN, so equality checks mean something.
std::vector<uint8_t> finite_codes(std::mt19937& rng, size_t count) {
  std::uniform_int_distribution<int> code_dist(0, 255);
  std::vector<uint8_t> codes(count);
  for (uint8_t& code : codes) {
    do code = static_cast<uint8_t>(code_dist(rng));
    while ((code & 0x7F) == 0x7F);
  }
  return codes;
}

TEST(EmbeddingBags, PoolsEveryTableIntoItsTokenBitForBit) {
  std::mt19937 rng(31);
  // Three tables of D = 5 (odd): float32, FP8 per row, FP8 per tensor; bags of 1, 3 and 2 ids
  // starting at column 1 of a 7-column id matrix (column 0 and 6 belong to nobody).
  const int64_t d = 5;
  const std::vector<int64_t> rows{4, 9, 3}, offsets{1, 2, 5, 7};
  const Tensor f32_table = testing::random_tensor(rng, {rows[0], d});
  const std::vector<uint8_t> codes1 = finite_codes(rng, static_cast<size_t>(rows[1] * d));
  const std::vector<uint8_t> codes2 = finite_codes(rng, static_cast<size_t>(rows[2] * d));
  const Tensor scale1 = testing::random_tensor(rng, {rows[1]}, 0.01f, 0.1f);
  const Tensor scale2 = testing::random_tensor(rng, {1}, 0.01f, 0.1f);
  for (const int64_t batch : {int64_t{1}, int64_t{6}}) {
    for (const bool int32 : {false, true}) {
      SCOPED_TRACE("batch " + std::to_string(batch) + (int32 ? " int32" : " int64"));
      std::vector<int64_t> ids(static_cast<size_t>(batch * 8 - batch));  // [batch, 7]
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t k = 0; k < 7; ++k) {
          const size_t t = k < 2 ? 0 : k < 5 ? 1 : 2;
          std::uniform_int_distribution<int64_t> id(-rows[t], rows[t] - 1);  // negatives count from the end
          ids[static_cast<size_t>(b * 7 + k)] = id(rng);
        }
      const Tensor indices = int32 ? index_tensor<int32_t>({batch, 7}, ids) : index_tensor<int64_t>({batch, 7}, ids);
      auto outputs = run_loka_op("EmbeddingBags",
                                 {{"ids", indices, true}, {"t0", f32_table}, {"", Tensor()}, {"t1", fp8_tensor({rows[1], d}, codes1)},
                                  {"s1", scale1}, {"t2", fp8_tensor({rows[2], d}, codes2)}, {"s2", scale2}},
                                 {{"offsets", offsets}});
      ASSERT_TRUE(outputs) << outputs.status().message();
      const Tensor& y = (*outputs)[0];
      ASSERT_EQ(y.shape(), (Shape{batch, 3, d}));
      for (int64_t b = 0; b < batch; ++b)
        for (size_t t = 0; t < 3; ++t)
          for (int64_t j = 0; j < d; ++j) {
            double sum = 0.0;
            for (int64_t k = offsets[t]; k < offsets[t + 1]; ++k) {
              const int64_t id = ids[static_cast<size_t>(b * 7 + k)];
              const int64_t row = id < 0 ? id + rows[t] : id;
              if (t == 0) sum += f32_table.data<float>()[row * d + j];
              if (t == 1) sum += fp8e4m3fn_to_float(codes1[static_cast<size_t>(row * d + j)]) * scale1.data<float>()[row];
              if (t == 2) sum += fp8e4m3fn_to_float(codes2[static_cast<size_t>(row * d + j)]) * scale2.data<float>()[0];
            }
            ASSERT_EQ(y.data<float>()[(b * 3 + static_cast<int64_t>(t)) * d + j], static_cast<float>(sum))
                << "sample " << b << ", table " << t << ", column " << j;
          }
    }
  }
}

TEST(EmbeddingBags, Bf16TablesPoolExactlyAsTheFloat32TablesOfTheirWidenedValues) {
  std::mt19937 rng(35);
  // Four tables of D = 13 (not a multiple of 8): BF16 (bag 3), float32 (bag 1), FP8 per row
  // (bag 2), BF16 (bag 1, last, its Row_scale dropped) over columns 0..6 of an 8-column matrix.
  const int64_t d = 13, h = 8;
  const std::vector<int64_t> rows{6, 4, 9, 3}, offsets{0, 3, 4, 6, 7};
  const Bf16Values bf0 = random_bf16(rng, {rows[0], d});
  const Tensor f32_table = testing::random_tensor(rng, {rows[1], d});
  const Tensor fp8_table = fp8_tensor({rows[2], d}, finite_codes(rng, static_cast<size_t>(rows[2] * d)));
  const Tensor scale2 = testing::random_tensor(rng, {rows[2]}, 0.01f, 0.1f);
  const Bf16Values bf3 = random_bf16(rng, {rows[3], d});
  for (const int64_t batch : {int64_t{1}, int64_t{5}}) {
    for (const bool int32 : {false, true}) {
      SCOPED_TRACE("batch " + std::to_string(batch) + (int32 ? " int32" : " int64"));
      std::vector<int64_t> ids(static_cast<size_t>(batch * h), 0);
      for (int64_t b = 0; b < batch; ++b)
        for (size_t t = 0; t < 4; ++t)
          for (int64_t k = offsets[t]; k < offsets[t + 1]; ++k) {
            std::uniform_int_distribution<int64_t> id(-rows[t], rows[t] - 1);  // negatives count from the end
            ids[static_cast<size_t>(b * h + k)] = id(rng);
          }
      // Sample 0 reads the special codes: -0 and the subnormal (row 0) and the huge value (last row) twice.
      ids[0] = 0;
      ids[1] = rows[0] - 1;
      ids[2] = -1;
      const Tensor indices = int32 ? index_tensor<int32_t>({batch, h}, ids) : index_tensor<int64_t>({batch, h}, ids);
      const auto bags = [&](const Tensor& t0, const Tensor& t3) {
        return run_loka_op("EmbeddingBags", {{"ids", indices, true}, {"t0", t0}, {"", Tensor()}, {"t1", f32_table},
                                             {"", Tensor()}, {"t2", fp8_table}, {"s2", scale2}, {"t3", t3}},
                           {{"offsets", offsets}});
      };
      auto actual = bags(bf0.codes, bf3.codes);
      ASSERT_TRUE(actual) << actual.status().message();
      auto expected = bags(bf0.widened, bf3.widened);
      ASSERT_TRUE(expected) << expected.status().message();
      const Tensor& y = (*actual)[0];
      ASSERT_EQ(y.dtype(), DType::kFloat32);
      ASSERT_EQ(y.shape(), (Shape{batch, 4, d}));
      ASSERT_EQ(y.shape(), (*expected)[0].shape());
      for (int64_t i = 0; i < y.element_count(); ++i)
        ASSERT_EQ(float_bits(y.data<float>()[i]), float_bits((*expected)[0].data<float>()[i]))
            << "sample " << i / (4 * d) << ", table " << i / d % 4 << ", column " << i % d;
      EXPECT_TRUE(std::isinf(y.data<float>()[d - 1])) << "the huge code twice overflows, as in FP32";
      // And the float32 op is the doc's double sum of the widened rows (bag 0 of sample 0, column 2).
      double sum = 0.0;
      for (int64_t k = 0; k < 3; ++k) {
        const int64_t row = ids[static_cast<size_t>(k)] < 0 ? ids[static_cast<size_t>(k)] + rows[0] : ids[static_cast<size_t>(k)];
        sum += bf0.widened.data<float>()[row * d + 2];
      }
      EXPECT_EQ(y.data<float>()[2], static_cast<float>(sum));
    }
  }
}

TEST(EmbeddingBags, Bf16OutputIsTheFloatResultRoundedToNearestEven) {
  std::mt19937 rng(57);
  // Table 0 (float32) holds awkward values in rows 0 and 1, each pooled alone (a bag of one id gives
  // the row back exactly); table 1 (BF16, bag of 3) and table 2 (FP8) give ordinary sums.
  const int64_t d = 4;
  std::vector<float> awkward = {float_from_bits(0x3F808000), float_from_bits(0x3F818000), float_from_bits(0x3F808001),
                                float_from_bits(0x7FC00000), float_from_bits(0x00018000), float_from_bits(0x7F7F8000),
                                float_from_bits(0x7F7F7FFF), float_from_bits(0xFF7FFFFF)};
  const Tensor random_rows = testing::random_tensor(rng, {2, d});
  awkward.insert(awkward.end(), random_rows.values<float>().begin(), random_rows.values<float>().end());
  const Tensor t0 = Tensor::from_floats({4, d}, awkward);
  const Bf16Values t1 = random_bf16(rng, {6, d});
  const Tensor t2 = fp8_tensor({3, d}, finite_codes(rng, static_cast<size_t>(3 * d)));
  const Tensor s2 = testing::random_tensor(rng, {3}, 0.01f, 0.1f);
  const Tensor ids = index_tensor<int64_t>({3, 5}, {0, 1, 2, 3, 0, 1, 5, 4, -1, 2, 3, 0, 0, 1, -2});
  const auto bags = [&](int64_t output_dtype) {
    return run_loka_op("EmbeddingBags", {{"ids", ids, true}, {"t0", t0}, {"", {}}, {"t1", t1.codes}, {"", {}}, {"t2", t2}, {"s2", s2}},
                       {{"offsets", std::vector<int64_t>{0, 1, 4, 5}}, {"output_dtype", output_dtype}});
  };
  auto rounded = bags(16);
  auto full = bags(1);
  ASSERT_TRUE(rounded) << rounded.status().message();
  ASSERT_TRUE(full) << full.status().message();
  const Tensor& y = (*rounded)[0];
  ASSERT_EQ(y.dtype(), DType::kBFloat16);
  ASSERT_EQ(y.shape(), (Shape{3, 3, d}));
  for (int64_t i = 0; i < y.element_count(); ++i)
    ASSERT_EQ(y.data<uint16_t>()[i], float_to_bf16((*full)[0].data<float>()[i])) << "element " << i;
  // Sample 0 pools row 0, sample 1 row 1 of table 0: ties to even, NaN, a subnormal, overflow.
  const uint16_t* codes = y.data<uint16_t>();
  EXPECT_EQ(std::vector<uint16_t>(codes, codes + 3), (std::vector<uint16_t>{0x3F80, 0x3F82, 0x3F81}));
  EXPECT_TRUE(std::isnan(bf16_to_float(codes[3])));
  EXPECT_EQ(std::vector<uint16_t>(codes + 3 * d, codes + 4 * d), (std::vector<uint16_t>{0x0002, 0x7F80, 0x7F7F, 0xFF80}));
}

TEST(EmbeddingBags, RejectsOutOfRangeIdsAndIllFormedInputsNamingThem) {
  std::mt19937 rng(33);
  const Tensor table = testing::random_tensor(rng, {5, 4});
  const Tensor fp8 = fp8_tensor({5, 4}, std::vector<uint8_t>(20, 0x38));
  const Tensor scale = testing::random_tensor(rng, {5}, 0.1f, 1.0f);
  const Tensor ids = index_tensor<int64_t>({2, 3}, {0, 1, -5, 4, 2, 3});
  const auto bags = [&](const std::vector<NodeInput>& inputs, const std::vector<int64_t>& offsets) {
    return run_loka_op("EmbeddingBags", inputs, {{"offsets", offsets}});
  };
  ASSERT_TRUE(bags({{"ids", ids, true}, {"t", table}}, {0, 3}));
  ASSERT_TRUE(bags({{"ids", ids, true}, {"t", fp8}, {"s", scale}}, {1, 3}));
  expect_failure(bags({{"ids", index_tensor<int64_t>({1, 3}, {0, 5, 1}), true}, {"t", table}}, {0, 3}),
                 "Indices[0, 1] = 5 is outside [-5, 5) of Table_0");
  expect_failure(bags({{"ids", index_tensor<int32_t>({1, 3}, {0, 1, -6}), true}, {"t", table}, {"", Tensor()}, {"f", fp8}, {"s", scale}},
                      {0, 2, 3}),
                 "Indices[0, 2] = -6 is outside [-5, 5) of Table_1");
  expect_failure(bags({{"ids", ids, true}, {"t", table}}, {0, 4}), "beyond Indices' 3 columns");
  expect_failure(bags({{"ids", ids, true}, {"t", table}, {"", Tensor()}, {"u", table}}, {0, 2, 2}), "strictly increasing");
  expect_failure(bags({{"ids", ids, true}, {"t", table}}, {0, 1, 3}), "must have 2 entries");
  expect_failure(run_loka_op("EmbeddingBags", {{"ids", ids, true}, {"t", table}},
                             {{"offsets", std::vector<int64_t>{0, 3}}, {"output_dtype", int64_t{10}}}),
                 "attribute 'output_dtype' must be 1 (FLOAT) or 16 (BFLOAT16), got 10");
  expect_failure(bags({{"ids", ids, true}, {"t", table}, {"s", scale}}, {0, 3}), "Row_scale_0 is given for float32 Table_0");
  expect_failure(bags({{"ids", ids, true}, {"t", fp8}}, {0, 3}), "missing input 2 (Row_scale_0)");
  expect_failure(bags({{"ids", ids, true}, {"t", table}, {"", Tensor()}, {"w", testing::random_tensor(rng, {5, 3})}}, {0, 1, 3}),
                 "Table_1 has rows of 3, Table_0 of 4");
  expect_failure(bags({{"ids", index_tensor<int64_t>({6}, {0, 1, 2, 3, 4, 0}), true}, {"t", table}}, {0, 3}),
                 "Indices must be 2-D");
  // BF16 tables take no Row_scale, like float32 ones; FLOAT16 is not a table format.
  const Tensor bf16 = Tensor::zeros(DType::kBFloat16, {5, 4});
  ASSERT_TRUE(bags({{"ids", ids, true}, {"b", bf16}}, {0, 3}));
  expect_failure(bags({{"ids", ids, true}, {"b", bf16}, {"s", scale}}, {0, 3}), "Row_scale_0 is given for BFLOAT16 Table_0");
  expect_failure(bags({{"ids", ids, true}, {"t", table}, {"", Tensor()}, {"h", Tensor::zeros(DType::kFloat16, {5, 4})}}, {0, 1, 3}),
                 "Table_1 must be FLOAT, BFLOAT16 or FLOAT8E4M3FN, got FLOAT16");
}

// ------------------------------------------------- BF16 between ai.loka ops --

// BF16 storage of DLRM's DCN stream: the standard ops found between ai.loka ops move BF16 tensors
// unchanged (Unsqueeze, Squeeze, Concat, Flatten, Reshape, Identity), Cast converts both ways, and
// QuantizeLinear reads BF16 with a float32 scale (widened exactly, then one FP32 division).
TEST(LokaOps, Bf16ActivationsPassThroughTheStandardOpsBetweenThem) {
  std::mt19937 rng(59);
  const int64_t batch = 3, d = 4, k = 3 * d;
  const Tensor x = testing::random_tensor(rng, {batch, d}, -3.0f, 3.0f);
  const Bf16Values table = random_bf16(rng, {5, d});
  const Tensor ids = index_tensor<int64_t>({batch, 2}, {0, 4, 1, 2, 3, -1});
  const QuantizedWeight w = random_weight(rng, k, k);
  const float y_scale = 0.05f;
  ModelBuilder builder(19);
  builder.opset("ai.loka", 1);
  builder.input("x", DType::kFloat32, {batch, d}).input("ids", DType::kInt64, {batch, 2});
  builder.initializer("table", table.codes).initializer("w", w.codes).initializer("ws", w.scale);
  builder.initializer("xs", scalar_scale(0.02f, false)).initializer("ys", scalar_scale(y_scale, false));
  builder.initializer("zero", Tensor::zeros(DType::kFloat8E4M3FN, {}));
  builder.initializer("axis1", Tensor::from_int64s({1}, std::vector<int64_t>{1}));
  builder.initializer("rows", Tensor::from_int64s({2}, std::vector<int64_t>{0, -1}));
  builder.node("Cast", {"x"}, {"x0"}, {{"to", int64_t{16}}})
      .node("Unsqueeze", {"x0", "axis1"}, {"x0_token"})
      .node("Squeeze", {"x0_token", "axis1"}, {"x0_back"})
      .node("EmbeddingBags", {"ids", "table", "", "table"}, {"e"},
            {{"offsets", std::vector<int64_t>{0, 1, 2}}, {"output_dtype", int64_t{16}}}, "bags", "ai.loka")
      .node("Concat", {"x0_token", "e"}, {"tokens"}, {{"axis", int64_t{1}}})
      .node("Flatten", {"tokens"}, {"h"}, {{"axis", int64_t{1}}})
      .node("Reshape", {"tokens", "rows"}, {"h_reshaped"})
      .node("Identity", {"h"}, {"h_same"})
      .node("QuantizedGemm", {"h_same", "w", "ws", "", "xs", "h", "h_reshaped", "ys"}, {"c", "cq"},
            {{"output_dtype", int64_t{16}}}, "cross", "ai.loka")
      .node("QuantizeLinear", {"c", "ys", "zero"}, {"c_codes"})
      .node("Cast", {"c"}, {"c_float"}, {{"to", int64_t{1}}});
  for (const char* name : {"x0_back", "h", "h_reshaped", "c"}) builder.output_unshaped(name, DType::kBFloat16);
  builder.output_unshaped("cq", DType::kFloat8E4M3FN).output_unshaped("c_codes", DType::kFloat8E4M3FN);
  builder.output_unshaped("c_float", DType::kFloat32);
  auto engine = builder.build_engine();
  ASSERT_TRUE(engine) << engine.status().message();
  auto outputs = testing::run_once(**engine, {x, ids});
  ASSERT_TRUE(outputs) << outputs.status().message();
  const Tensor &x0_back = (*outputs)[0], &h = (*outputs)[1], &h_reshaped = (*outputs)[2], &c = (*outputs)[3];
  const Tensor &cq = (*outputs)[4], &c_codes = (*outputs)[5], &c_float = (*outputs)[6];

  // Cast rounds x; Unsqueeze then Squeeze give it back.
  ASSERT_EQ(x0_back.dtype(), DType::kBFloat16);
  for (int64_t i = 0; i < x.element_count(); ++i) ASSERT_EQ(x0_back.data<uint16_t>()[i], float_to_bf16(x.data<float>()[i])) << i;
  // h: each sample's x0 then its two pooled rows, as the op alone writes them.
  auto pooled = run_loka_op("EmbeddingBags", {{"ids", ids, true}, {"t", table.codes}, {"", {}}, {"u", table.codes}},
                            {{"offsets", std::vector<int64_t>{0, 1, 2}}, {"output_dtype", int64_t{16}}});
  ASSERT_TRUE(pooled) << pooled.status().message();
  std::vector<uint16_t> expected_h;
  for (int64_t b = 0; b < batch; ++b) {
    expected_h.insert(expected_h.end(), x0_back.data<uint16_t>() + b * d, x0_back.data<uint16_t>() + (b + 1) * d);
    expected_h.insert(expected_h.end(), (*pooled)[0].data<uint16_t>() + b * 2 * d, (*pooled)[0].data<uint16_t>() + (b + 1) * 2 * d);
  }
  const Bf16Values stream = bf16_values({batch, k}, expected_h);
  expect_same_bits(h, stream.codes);
  expect_same_bits(h_reshaped, stream.codes);
  // The cross layer reads h as X, Multiplier and Residual, as the op alone does.
  auto alone = run_loka_op("QuantizedGemm",
                           {{"h", stream.codes, true}, {"w", w.codes}, {"ws", w.scale}, {"", {}}, {"xs", scalar_scale(0.02f, false)},
                            {"m", stream.codes}, {"r", stream.codes}, {"ys", scalar_scale(y_scale, false)}},
                           {{"output_dtype", int64_t{16}}}, "op_node", /*codes_output=*/true);
  ASSERT_TRUE(alone) << alone.status().message();
  expect_same_bits(c, (*alone)[0]);
  expect_same_bits(cq, (*alone)[1]);
  // QuantizeLinear of the BF16 c and Cast back to float: both widen exactly.
  for (int64_t i = 0; i < c.element_count(); ++i) {
    const float widened = float_from_bits(uint32_t{c.data<uint16_t>()[i]} << 16);
    ASSERT_EQ(float_bits(c_float.data<float>()[i]), float_bits(widened)) << i;
    ASSERT_EQ(c_codes.data<uint8_t>()[i], float_to_fp8e4m3fn(widened / y_scale)) << i;
  }
}

}  // namespace
}  // namespace loka
