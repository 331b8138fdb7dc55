// ============================================================================
// tests/runtime/quantization_ops_test.cc — QuantizeLinear, DequantizeLinear, Cast, CastLike.
//
// Each test builds a one-node model, runs it on fresh random inputs and checks
// every element against a plain loop written here with the codecs of
// loka/float8.h and loka/bfloat16.h (themselves checked against ONNX in
// tests/kernels/float8_test.cc). Error cases must fail with a message, not crash.
// ============================================================================
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "loka/bfloat16.h"
#include "loka/float8.h"
#include "model_builder.h"
#include "single_node_util.h"
#include "test_support.h"

namespace loka {
namespace {

using testing::ModelBuilder;
using testing::TestAttribute;
using Attrs = std::vector<std::pair<std::string, TestAttribute>>;

/// One `op` node at `opset` over graph inputs (an undefined tensor is an omitted optional input).
Result<std::vector<Tensor>> run_node(int opset, const std::string& op, const std::vector<Tensor>& inputs,
                                     const Attrs& attrs = {}, DType out_dtype = DType::kFloat32) {
  return testing::run_single_node(op, opset, inputs, attrs, 1, out_dtype);
}

template <typename T>
Tensor make_tensor(DType dtype, const Shape& shape, const std::vector<T>& values) {
  Tensor tensor = Tensor::zeros(dtype, shape);
  EXPECT_EQ(static_cast<size_t>(tensor.element_count()) * sizeof(T), tensor.byte_size());
  std::memcpy(tensor.raw(), values.data(), tensor.byte_size());
  return tensor;
}

/// Random floats with exact ties (k + 0.5) * scale mixed in, and some far out of range.
Tensor quantization_input(std::mt19937& rng, const Shape& shape, float scale) {
  Tensor x = testing::random_tensor(rng, shape, -200.0f * scale, 200.0f * scale);
  std::uniform_int_distribution<int> pick(0, 4), level(-300, 300);
  for (float& v : x.values<float>())
    if (pick(rng) == 0) v = (static_cast<float>(level(rng)) + 0.5f) * scale;
  return x;
}

float expected_level(float x, float scale, double zp, double low, double high) {
  const double level = std::nearbyint(static_cast<double>(x / scale)) + zp;
  return static_cast<float>(std::min(std::max(level, low), high));
}

TEST(QuantizeLinear, PerTensorUint8DefaultAndInt8WithZeroPoint) {
  std::mt19937 rng(11);
  const float scale = 0.37f;
  const Tensor x = quantization_input(rng, {7, 13}, scale);
  {
    auto y = run_node(13, "QuantizeLinear", {x, Tensor::scalar_float(scale)}, {}, DType::kUInt8);
    ASSERT_TRUE(y) << y.status().message();
    ASSERT_EQ((*y)[0].dtype(), DType::kUInt8);
    ASSERT_EQ((*y)[0].shape(), x.shape());
    for (int64_t i = 0; i < x.element_count(); ++i)
      ASSERT_EQ((*y)[0].data<uint8_t>()[i], expected_level(x.data<float>()[i], scale, 0, 0, 255)) << i;
  }
  {
    const Tensor zp = make_tensor<int8_t>(DType::kInt8, {}, {-7});
    auto y = run_node(13, "QuantizeLinear", {x, Tensor::scalar_float(scale), zp}, {}, DType::kInt8);
    ASSERT_TRUE(y) << y.status().message();
    ASSERT_EQ((*y)[0].dtype(), DType::kInt8);
    for (int64_t i = 0; i < x.element_count(); ++i)
      ASSERT_EQ((*y)[0].data<int8_t>()[i], expected_level(x.data<float>()[i], scale, -7, -128, 127)) << i;
  }
  // Ties round to even: 2.5 -> 2, 3.5 -> 4, -2.5 -> -2.
  const Tensor ties = Tensor::from_floats({3}, std::vector<float>{2.5f, 3.5f, -2.5f});
  const Tensor zero = make_tensor<int8_t>(DType::kInt8, {}, {0});
  auto y = run_node(13, "QuantizeLinear", {ties, Tensor::scalar_float(1.0f), zero}, {}, DType::kInt8);
  ASSERT_TRUE(y) << y.status().message();
  EXPECT_EQ((*y)[0].to_int64s(), (std::vector<int64_t>{2, 4, -2}));
}

TEST(QuantizeLinear, PerAxisScalesAndZeroPointsOnAwkwardShapes) {
  std::mt19937 rng(12);
  const Shape shape{3, 5, 7};
  for (int64_t axis : {0, 1, -1, 2, -3}) {
    const int64_t a = axis < 0 ? axis + 3 : axis;
    const int64_t channels = shape[static_cast<size_t>(a)];
    const Tensor scale = testing::random_tensor(rng, {channels}, 0.05f, 0.5f);
    std::vector<uint8_t> zps(static_cast<size_t>(channels));
    for (auto& z : zps) z = static_cast<uint8_t>(rng() % 256);
    const Tensor zp = make_tensor<uint8_t>(DType::kUInt8, {channels}, zps);
    const Tensor x = quantization_input(rng, shape, 0.2f);
    auto y = run_node(13, "QuantizeLinear", {x, scale, zp}, {{"axis", axis}}, DType::kUInt8);
    ASSERT_TRUE(y) << y.status().message();
    int64_t index = 0;
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 5; ++j)
        for (int64_t k = 0; k < 7; ++k, ++index) {
          const int64_t c = a == 0 ? i : a == 1 ? j : k;
          ASSERT_EQ((*y)[0].data<uint8_t>()[index],
                    expected_level(x.data<float>()[index], scale.data<float>()[c], zps[static_cast<size_t>(c)], 0, 255))
              << "axis " << axis << " index " << index;
        }
  }
}

TEST(QuantizeLinear, BlockedScalesWithRemainderBlockOpset21) {
  std::mt19937 rng(13);
  const Tensor x = quantization_input(rng, {4, 10}, 0.1f);
  const Tensor scale = testing::random_tensor(rng, {4, 3}, 0.05f, 0.3f);  // ceil(10 / 4) = 3 blocks
  const Tensor zp = make_tensor<int8_t>(DType::kInt8, {4, 3}, std::vector<int8_t>{1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12});
  auto y = run_node(21, "QuantizeLinear", {x, scale, zp}, {{"axis", int64_t{1}}, {"block_size", int64_t{4}}}, DType::kInt8);
  ASSERT_TRUE(y) << y.status().message();
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 10; ++c) {
      const int64_t s = r * 3 + c / 4;
      ASSERT_EQ((*y)[0].data<int8_t>()[r * 10 + c],
                expected_level(x.data<float>()[r * 10 + c], scale.data<float>()[s], zp.data<int8_t>()[s], -128, 127));
    }
  // output_dtype picks the type when there is no zero point.
  auto y16 = run_node(21, "QuantizeLinear", {x, scale}, {{"axis", int64_t{1}}, {"block_size", int64_t{4}},
                                                         {"output_dtype", int64_t{static_cast<int64_t>(DType::kInt16)}}},
                      DType::kInt16);
  ASSERT_TRUE(y16) << y16.status().message();
  EXPECT_EQ((*y16)[0].dtype(), DType::kInt16);
}

TEST(QuantizeLinear, Fp8OutputsSaturateOrOverflow) {
  std::mt19937 rng(14);
  Tensor x = testing::random_tensor(rng, {6, 9}, -2000.0f, 2000.0f);
  x.data<float>()[0] = INFINITY;
  x.data<float>()[1] = -1e30f;
  x.data<float>()[2] = -0.0f;
  const float scale = 1.5f;
  for (DType type : {DType::kFloat8E4M3FN, DType::kFloat8E5M2}) {
    for (int64_t saturate : {1, 0}) {
      const Tensor zp = Tensor::zeros(type, {});
      auto y = run_node(19, "QuantizeLinear", {x, Tensor::scalar_float(scale), zp}, {{"saturate", saturate}}, type);
      ASSERT_TRUE(y) << y.status().message();
      ASSERT_EQ((*y)[0].dtype(), type);
      for (int64_t i = 0; i < x.element_count(); ++i) {
        const float q = x.data<float>()[i] / scale;
        const uint8_t want = type == DType::kFloat8E4M3FN ? float_to_fp8e4m3fn(q, saturate) : float_to_fp8e5m2(q, saturate);
        ASSERT_EQ((*y)[0].data<uint8_t>()[i], want) << i;
      }
      const uint8_t first = (*y)[0].data<uint8_t>()[0];
      if (type == DType::kFloat8E4M3FN) EXPECT_EQ(first, saturate ? 0x7E : 0x7F);
      else EXPECT_EQ(first, saturate ? 0x7B : 0x7C);
      EXPECT_EQ((*y)[0].data<uint8_t>()[2], 0x80);
    }
  }
}

TEST(DequantizeLinear, IntegerFp8AndInt32InputsPerTensorAndPerAxis) {
  std::mt19937 rng(15);
  std::vector<int8_t> codes(4 * 6);
  for (auto& c : codes) c = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
  const Tensor x = make_tensor<int8_t>(DType::kInt8, {4, 6}, codes);
  const Tensor scale = testing::random_tensor(rng, {6}, 0.01f, 1.0f);
  const Tensor zp = make_tensor<int8_t>(DType::kInt8, {6}, std::vector<int8_t>{-128, -3, 0, 5, 100, 127});
  auto y = run_node(13, "DequantizeLinear", {x, scale, zp}, {{"axis", int64_t{-1}}});
  ASSERT_TRUE(y) << y.status().message();
  ASSERT_EQ((*y)[0].dtype(), DType::kFloat32);
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 6; ++c) {
      const float want = (static_cast<float>(codes[static_cast<size_t>(r * 6 + c)]) - static_cast<float>(zp.data<int8_t>()[c])) *
                         scale.data<float>()[c];
      ASSERT_EQ((*y)[0].data<float>()[r * 6 + c], want);
    }

  // FP8 input: every code (NaN codes stay NaN) times a per-tensor scale.
  for (DType type : {DType::kFloat8E4M3FN, DType::kFloat8E5M2}) {
    std::vector<uint8_t> all(256);
    for (int i = 0; i < 256; ++i) all[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
    auto fy = run_node(19, "DequantizeLinear", {make_tensor<uint8_t>(type, {16, 16}, all), Tensor::scalar_float(0.25f)});
    ASSERT_TRUE(fy) << fy.status().message();
    for (int i = 0; i < 256; ++i) {
      const uint8_t code = static_cast<uint8_t>(i);
      const float want = (type == DType::kFloat8E4M3FN ? fp8e4m3fn_to_float(code) : fp8e5m2_to_float(code)) * 0.25f;
      const float got = (*fy)[0].data<float>()[i];
      ASSERT_TRUE(std::isnan(want) ? std::isnan(got) : got == want) << i;
    }
  }

  // INT32 input (bias-style) without zero point; a FLOAT16 scale makes a FLOAT16 output.
  const Tensor x32 = make_tensor<int32_t>(DType::kInt32, {3}, std::vector<int32_t>{-100000, 7, 123456});
  const Tensor half_scale = make_tensor<uint16_t>(DType::kFloat16, {}, std::vector<uint16_t>{float_to_fp16(0.001f)});
  auto hy = run_node(19, "DequantizeLinear", {x32, half_scale}, {}, DType::kFloat16);
  ASSERT_TRUE(hy) << hy.status().message();
  ASSERT_EQ((*hy)[0].dtype(), DType::kFloat16);
  const float s = fp16_to_float(float_to_fp16(0.001f));
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ((*hy)[0].data<uint16_t>()[i], float_to_fp16(static_cast<float>(x32.data<int32_t>()[i]) * s));
}

TEST(QuantizeDequantize, RoundTripErrorIsAtMostHalfAStep) {
  std::mt19937 rng(16);
  const Tensor x = testing::random_tensor(rng, {33, 17}, -1.0f, 1.0f);
  const float scale = 2.0f / 255.0f;
  ModelBuilder builder(13);
  builder.input("x", DType::kFloat32, {33, 17})
      .initializer("s", Tensor::scalar_float(scale))
      .initializer("z", make_tensor<uint8_t>(DType::kUInt8, {}, {128}))
      .node("QuantizeLinear", {"x", "s", "z"}, {"q"})
      .node("DequantizeLinear", {"q", "s", "z"}, {"y"})
      .output("y", DType::kFloat32, {33, 17});
  auto engine = builder.build_engine();
  ASSERT_TRUE(engine) << engine.status().message();
  auto y = testing::run_once(**engine, {x});
  ASSERT_TRUE(y) << y.status().message();
  EXPECT_LE(testing::max_abs_difference((*y)[0], x), scale * 0.5f + 1e-6f);
}

TEST(QuantizationOps, RejectBadModelsAndInputsWithAMessage) {
  const Tensor x = Tensor::from_floats({2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  const auto expect_error = [](const Result<std::vector<Tensor>>& result, const std::string& needle) {
    ASSERT_FALSE(result) << "expected an error containing '" << needle << "'";
    EXPECT_NE(result.status().message().find(needle), std::string::npos) << result.status().message();
  };
  // Per-axis scale of the wrong length, and an axis out of range.
  expect_error(run_node(13, "QuantizeLinear", {x, Tensor::from_floats({2}, std::vector<float>{1, 1})}, {{"axis", int64_t{1}}}),
               "scale");
  expect_error(run_node(13, "QuantizeLinear", {x, Tensor::from_floats({3}, std::vector<float>{1, 1, 1})}, {{"axis", int64_t{2}}}),
               "axis");
  // Zero point and output_dtype disagree; FP8 zero point not zero; wrong input dtypes.
  expect_error(run_node(21, "QuantizeLinear", {x, Tensor::scalar_float(1), make_tensor<uint8_t>(DType::kUInt8, {}, {0})},
                        {{"output_dtype", int64_t{3}}}),
               "output_dtype");
  expect_error(run_node(19, "QuantizeLinear",
                        {x, Tensor::scalar_float(1), make_tensor<uint8_t>(DType::kFloat8E4M3FN, {}, {0x38})}),
               "zero point");
  expect_error(run_node(13, "QuantizeLinear", {Tensor::from_int64s({1}, std::vector<int64_t>{1}), Tensor::scalar_float(1)}),
               "INT64");
  expect_error(run_node(13, "DequantizeLinear", {x, Tensor::scalar_float(1)}), "FLOAT");
  expect_error(run_node(13, "DequantizeLinear",
                        {make_tensor<uint8_t>(DType::kUInt8, {2}, {1, 2}), Tensor::scalar_float(1),
                         make_tensor<int8_t>(DType::kInt8, {}, {0})}),
               "differs");
  // A 2-D scale needs opset 21 (blocked quantization); a blocked scale of the wrong shape.
  expect_error(run_node(19, "QuantizeLinear", {x, Tensor::from_floats({2, 1}, std::vector<float>{1, 1})}), "opset 21");
  expect_error(run_node(21, "QuantizeLinear", {x, Tensor::from_floats({2, 1}, std::vector<float>{1, 1})},
                        {{"axis", int64_t{1}}, {"block_size", int64_t{2}}}),
               "blocked");
  // Cast to STRING or to an unknown type fails at load time.
  expect_error(run_node(13, "Cast", {x}, {{"to", int64_t{8}}}), "Cast to type 8");
  expect_error(run_node(13, "Cast", {x}, {{"to", int64_t{99}}}), "not supported");
}

// ---------------------------------------------------------------- Cast

TEST(Cast, FloatToNarrowFloatsUsesTheCodecs) {
  std::mt19937 rng(17);
  Tensor x = testing::random_tensor(rng, {5, 41}, -70000.0f, 70000.0f);
  float* px = x.data<float>();
  px[0] = NAN;
  px[1] = -INFINITY;
  px[2] = 1e-7f;
  px[3] = -0.0f;
  for (int64_t i = 4; i < 60; ++i) px[i] /= 1000.0f;  // some in FP8's normal range
  for (DType to : {DType::kFloat16, DType::kBFloat16, DType::kFloat8E4M3FN, DType::kFloat8E5M2}) {
    for (int64_t saturate : {1, 0}) {
      auto y = run_node(19, "Cast", {x}, {{"to", static_cast<int64_t>(to)}, {"saturate", saturate}}, to);
      ASSERT_TRUE(y) << y.status().message();
      const Tensor& out = (*y)[0];
      ASSERT_EQ(out.dtype(), to);
      for (int64_t i = 0; i < x.element_count(); ++i) {
        switch (to) {
          case DType::kFloat16: ASSERT_EQ(out.data<uint16_t>()[i], float_to_fp16(px[i])) << i; break;
          case DType::kBFloat16: ASSERT_EQ(out.data<uint16_t>()[i], float_to_bf16(px[i])) << i; break;
          case DType::kFloat8E4M3FN: ASSERT_EQ(out.data<uint8_t>()[i], float_to_fp8e4m3fn(px[i], saturate)) << i; break;
          default: ASSERT_EQ(out.data<uint8_t>()[i], float_to_fp8e5m2(px[i], saturate)) << i; break;
        }
      }
    }
  }
}

TEST(Cast, NarrowFloatsDecodeExactlyAndChainBackToFloat) {
  std::vector<uint16_t> halves(65536);
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<uint16_t>(i);
  for (DType from : {DType::kFloat16, DType::kBFloat16}) {
    auto y = run_node(13, "Cast", {make_tensor<uint16_t>(from, {256, 256}, halves)}, {{"to", int64_t{1}}});
    ASSERT_TRUE(y) << y.status().message();
    for (size_t i = 0; i < halves.size(); ++i) {
      const float want = from == DType::kFloat16 ? fp16_to_float(halves[i]) : bf16_to_float(halves[i]);
      const float got = (*y)[0].data<float>()[i];
      ASSERT_TRUE(std::isnan(want) ? std::isnan(got) : float_bits(got) == float_bits(want)) << i;
    }
  }
  // FP8 -> FP16 is exact (every E4M3/E5M2 value is an FP16 value).
  std::vector<uint8_t> codes(256);
  for (size_t i = 0; i < 256; ++i) codes[i] = static_cast<uint8_t>(i);
  auto y = run_node(19, "Cast", {make_tensor<uint8_t>(DType::kFloat8E5M2, {256}, codes)}, {{"to", int64_t{10}}}, DType::kFloat16);
  ASSERT_TRUE(y) << y.status().message();
  for (size_t i = 0; i < 256; ++i) {
    const float want = fp8e5m2_to_float(static_cast<uint8_t>(i));
    const float got = fp16_to_float((*y)[0].data<uint16_t>()[i]);
    ASSERT_TRUE(std::isnan(want) ? std::isnan(got) : got == want) << i;
  }
}

TEST(Cast, FloatToIntegerTruncatesSaturatesAndMapsNanToZero) {
  const Tensor x = Tensor::from_floats({8}, std::vector<float>{2.9f, -2.9f, 300.0f, -300.0f, NAN, INFINITY, -0.5f, 1e20f});
  auto y8 = run_node(13, "Cast", {x}, {{"to", int64_t{3}}}, DType::kInt8);
  ASSERT_TRUE(y8) << y8.status().message();
  EXPECT_EQ((*y8)[0].to_int64s(), (std::vector<int64_t>{2, -2, 127, -128, 0, 127, 0, 127}));
  auto yu8 = run_node(13, "Cast", {x}, {{"to", int64_t{2}}}, DType::kUInt8);
  ASSERT_TRUE(yu8) << yu8.status().message();
  EXPECT_EQ((*yu8)[0].to_int64s(), (std::vector<int64_t>{2, 0, 255, 0, 0, 255, 0, 255}));
  auto y64 = run_node(13, "Cast", {x}, {{"to", int64_t{7}}}, DType::kInt64);
  ASSERT_TRUE(y64) << y64.status().message();
  EXPECT_EQ((*y64)[0].to_int64s(), (std::vector<int64_t>{2, -2, 300, -300, 0, std::numeric_limits<int64_t>::max(), 0,
                                                         std::numeric_limits<int64_t>::max()}));
  auto yb = run_node(13, "Cast", {x}, {{"to", int64_t{9}}}, DType::kBool);
  ASSERT_TRUE(yb) << yb.status().message();
  EXPECT_EQ((*yb)[0].to_int64s(), (std::vector<int64_t>{1, 1, 1, 1, 1, 1, 1, 1}));
  const Tensor zeros = Tensor::from_floats({2}, std::vector<float>{0.0f, -0.0f});
  auto zb = run_node(13, "Cast", {zeros}, {{"to", int64_t{9}}}, DType::kBool);
  ASSERT_TRUE(zb) << zb.status().message();
  EXPECT_EQ((*zb)[0].to_int64s(), (std::vector<int64_t>{0, 0}));
}

TEST(Cast, IntegersWrapBoolsAreZeroOneAndLargeIntsRoundOnce) {
  const Tensor x = Tensor::from_int64s({5}, std::vector<int64_t>{300, -129, 65535, -1, (int64_t{1} << 40) + 3});
  auto y8 = run_node(13, "Cast", {x}, {{"to", int64_t{3}}}, DType::kInt8);
  ASSERT_TRUE(y8) << y8.status().message();
  EXPECT_EQ((*y8)[0].to_int64s(), (std::vector<int64_t>{44, 127, -1, -1, 3}));
  auto yu16 = run_node(13, "Cast", {x}, {{"to", int64_t{4}}}, DType::kUInt16);
  ASSERT_TRUE(yu16) << yu16.status().message();
  EXPECT_EQ((*yu16)[0].to_int64s(), (std::vector<int64_t>{300, 65407, 65535, 65535, 3}));
  auto yf = run_node(13, "Cast", {x}, {{"to", int64_t{1}}});
  ASSERT_TRUE(yf) << yf.status().message();
  EXPECT_EQ((*yf)[0].to_floats(), (std::vector<float>{300.0f, -129.0f, 65535.0f, -1.0f, static_cast<float>((int64_t{1} << 40) + 3)}));

  const Tensor b = make_tensor<uint8_t>(DType::kBool, {3}, {0, 1, 1});
  auto bf = run_node(13, "Cast", {b}, {{"to", int64_t{1}}});
  ASSERT_TRUE(bf) << bf.status().message();
  EXPECT_EQ((*bf)[0].to_floats(), (std::vector<float>{0.0f, 1.0f, 1.0f}));
  auto b8 = run_node(19, "Cast", {b}, {{"to", int64_t{17}}}, DType::kFloat8E4M3FN);
  ASSERT_TRUE(b8) << b8.status().message();
  EXPECT_EQ((*b8)[0].to_floats(), (std::vector<float>{0.0f, 1.0f, 1.0f}));
}

TEST(Cast, DoubleToHalfRoundsOnceNotTwice) {
  // 1 + 2^-11 is the FP16 tie between 1 and 1 + 2^-10; a hair above it must round up.
  // Narrowing to float first would land exactly on the tie and round down to 1.
  const double above_tie = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  const double below_tie = 1.0 + std::ldexp(1.0, -11) - std::ldexp(1.0, -40);
  const Tensor x = make_tensor<double>(DType::kFloat64, {2}, std::vector<double>{above_tie, below_tie});
  auto y = run_node(13, "Cast", {x}, {{"to", int64_t{10}}}, DType::kFloat16);
  ASSERT_TRUE(y) << y.status().message();
  EXPECT_EQ((*y)[0].data<uint16_t>()[0], 0x3C01);
  EXPECT_EQ((*y)[0].data<uint16_t>()[1], 0x3C00);
  // Same for E4M3FN: 1 + 2^-4 is the tie between 1 and 1.125.
  const Tensor x8 = make_tensor<double>(DType::kFloat64, {1}, std::vector<double>{1.0 + std::ldexp(1.0, -4) + std::ldexp(1.0, -35)});
  auto y8 = run_node(19, "Cast", {x8}, {{"to", int64_t{17}}}, DType::kFloat8E4M3FN);
  ASSERT_TRUE(y8) << y8.status().message();
  EXPECT_EQ((*y8)[0].data<uint8_t>()[0], float_to_fp8e4m3fn(1.125f));
}

TEST(CastLike, TakesTheTargetsTypeAndHonoursSaturate) {
  const Tensor x = Tensor::from_floats({3}, std::vector<float>{1000.0f, -0.3f, 2.0f});
  const Tensor like = Tensor::zeros(DType::kFloat8E4M3FN, {1});
  auto y = run_node(19, "CastLike", {x, like}, {{"saturate", int64_t{0}}}, DType::kFloat8E4M3FN);
  ASSERT_TRUE(y) << y.status().message();
  ASSERT_EQ((*y)[0].dtype(), DType::kFloat8E4M3FN);
  EXPECT_EQ((*y)[0].data<uint8_t>()[0], 0x7F);  // NaN without saturation
  EXPECT_EQ((*y)[0].data<uint8_t>()[1], float_to_fp8e4m3fn(-0.3f));
  EXPECT_EQ((*y)[0].data<uint8_t>()[2], float_to_fp8e4m3fn(2.0f));
  auto yi = run_node(15, "CastLike", {x, Tensor::from_int64s({1}, std::vector<int64_t>{0})}, {}, DType::kInt64);
  ASSERT_TRUE(yi) << yi.status().message();
  EXPECT_EQ((*yi)[0].to_int64s(), (std::vector<int64_t>{1000, 0, 2}));
}

}  // namespace
}  // namespace loka
