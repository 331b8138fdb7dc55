// ============================================================================
// tests/conformance/elementwise_types_test.cc — the element types and edge
// values ONNX allows for the elementwise ops beyond what the node test data
// covers: integer overflow wraps, INT_MIN / -1 does not trap, mixed-type Pow,
// FP16/BF16 rounding once per op, broadcast on random awkward shapes.
// ============================================================================
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "loka/bfloat16.h"
#include "model_builder.h"
#include "test_support.h"

namespace loka {
namespace {

using testing::ModelBuilder;

template <typename T>
Tensor make(DType dtype, const Shape& shape, const std::vector<T>& values) {
  Tensor tensor = Tensor::zeros(dtype, shape);
  std::memcpy(tensor.raw(), values.data(), values.size() * sizeof(T));
  return tensor;
}

/// Runs one binary node `op` on (a, b) with the given output dtype.
Result<Tensor> run_binary(const std::string& op, const Tensor& a, const Tensor& b, DType out_dtype) {
  ModelBuilder builder(17);
  builder.input("a", a.dtype(), a.shape()).input("b", b.dtype(), b.shape());
  builder.node(op, {"a", "b"}, {"y"}).output_unshaped("y", out_dtype);
  LOKA_ASSIGN_OR_RETURN(auto engine, builder.build_engine());
  LOKA_ASSIGN_OR_RETURN(auto outputs, testing::run_once(*engine, {a, b}));
  return outputs[0];
}

TEST(ElementwiseTypes, IntegerArithmeticWrapsAndDivisionDoesNotTrap) {
  constexpr int32_t lo = std::numeric_limits<int32_t>::lowest(), hi = std::numeric_limits<int32_t>::max();
  const Tensor a = make<int32_t>(DType::kInt32, {3}, {hi, lo, lo});
  const Tensor b = make<int32_t>(DType::kInt32, {3}, {1, -1, 7});
  auto sum = run_binary("Add", a, b, DType::kInt32);
  ASSERT_TRUE(sum) << sum.status().message();
  EXPECT_EQ(sum->data<int32_t>()[0], lo);  // hi + 1 wraps
  auto quotient = run_binary("Div", a, b, DType::kInt32);
  ASSERT_TRUE(quotient) << quotient.status().message();
  EXPECT_EQ(quotient->data<int32_t>()[1], lo);        // lo / -1 wraps to lo
  EXPECT_EQ(quotient->data<int32_t>()[2], lo / 7);    // truncates toward zero

  const Tensor u = make<uint16_t>(DType::kUInt16, {2}, {65535, 3});
  auto product = run_binary("Mul", u, u, DType::kUInt16);
  ASSERT_TRUE(product) << product.status().message();
  EXPECT_EQ(product->data<uint16_t>()[0], 1);  // 65535^2 mod 65536
  EXPECT_EQ(product->data<uint16_t>()[1], 9);
  auto by_zero = run_binary("Div", u, make<uint16_t>(DType::kUInt16, {2}, {0, 1}), DType::kUInt16);
  ASSERT_FALSE(by_zero);
  EXPECT_NE(by_zero.status().message().find("division by zero"), std::string::npos);
}

TEST(ElementwiseTypes, EveryIntegerWidthBroadcastsAgainstReferenceLoops) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> value(-100, 100);
  const Shape a_shape{2, 1, 7}, b_shape{3, 1};
  for (DType dtype : {DType::kInt8, DType::kInt16, DType::kUInt8, DType::kUInt32, DType::kInt64, DType::kUInt64}) {
    std::vector<int64_t> av(14), bv(3);
    const bool is_unsigned = dtype == DType::kUInt8 || dtype == DType::kUInt32 || dtype == DType::kUInt64;
    for (auto& v : av) v = is_unsigned ? std::abs(value(rng)) : value(rng);
    for (auto& v : bv) v = is_unsigned ? std::abs(value(rng)) : value(rng);
    // Build the operands through Cast from INT64 so one helper covers every width.
    ModelBuilder builder(17);
    builder.input("a", DType::kInt64, a_shape).input("b", DType::kInt64, b_shape);
    builder.node("Cast", {"a"}, {"ac"}, {{"to", int64_t(dtype)}}).node("Cast", {"b"}, {"bc"}, {{"to", int64_t(dtype)}});
    builder.node("Max", {"ac", "bc"}, {"m"}).node("Sub", {"ac", "bc"}, {"d"}).node("Less", {"ac", "bc"}, {"l"});
    builder.node("Cast", {"m"}, {"max"}, {{"to", int64_t(DType::kInt64)}});
    builder.node("Cast", {"d"}, {"diff"}, {{"to", int64_t(DType::kInt64)}});
    builder.output_unshaped("max", DType::kInt64).output_unshaped("diff", DType::kInt64).output_unshaped("l", DType::kBool);
    auto engine = builder.build_engine();
    ASSERT_TRUE(engine) << engine.status().message();
    auto outputs = testing::run_once(**engine, {Tensor::from_int64s(a_shape, av), Tensor::from_int64s(b_shape, bv)});
    ASSERT_TRUE(outputs) << dtype_name(dtype) << ": " << outputs.status().message();
    ASSERT_EQ((*outputs)[0].shape(), (Shape{2, 3, 7}));
    const size_t bits = dtype_size(dtype) * 8;
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t k = 0; k < 7; ++k) {
          const int64_t x = av[size_t(i * 7 + k)], y = bv[size_t(j)], o = (i * 3 + j) * 7 + k;
          EXPECT_EQ((*outputs)[0].data<int64_t>()[o], std::max(x, y)) << dtype_name(dtype);
          EXPECT_EQ((*outputs)[2].data<uint8_t>()[o], x < y) << dtype_name(dtype);
          // x - y in the narrow type, read back through Cast (sign- or zero-extended).
          uint64_t wrapped = static_cast<uint64_t>(x - y);
          if (bits < 64) wrapped &= (uint64_t{1} << bits) - 1;
          int64_t expect = static_cast<int64_t>(wrapped);
          if (!is_unsigned && bits < 64 && (wrapped >> (bits - 1)))
            expect = static_cast<int64_t>(wrapped) - (int64_t{1} << bits);
          EXPECT_EQ((*outputs)[1].data<int64_t>()[o], expect) << dtype_name(dtype) << " " << x << "-" << y;
        }
  }
}

TEST(ElementwiseTypes, PowTakesAnExponentOfAnotherType) {
  const Tensor base = make<int32_t>(DType::kInt32, {3}, {2, -3, 5});
  const Tensor exponent = Tensor::from_floats({3}, std::vector<float>{3.0f, 2.0f, 0.5f});
  auto y = run_binary("Pow", base, exponent, DType::kInt32);
  ASSERT_TRUE(y) << y.status().message();
  EXPECT_EQ(y->data<int32_t>()[0], 8);
  EXPECT_EQ(y->data<int32_t>()[1], 9);
  EXPECT_EQ(y->data<int32_t>()[2], static_cast<int32_t>(std::pow(5.0, 0.5)));
}

TEST(ElementwiseTypes, HalfTypesRoundOncePerOpAndDoubleStaysDouble) {
  std::mt19937 rng(9);
  const Tensor xf = testing::random_tensor(rng, {4, 5}, -3.0f, 3.0f);
  const Tensor yf = testing::random_tensor(rng, {5}, -3.0f, 3.0f);
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    const auto encode = [dtype](float v) { return dtype == DType::kBFloat16 ? float_to_bf16(v) : float_to_fp16(v); };
    const auto decode = [dtype](uint16_t c) { return dtype == DType::kBFloat16 ? bf16_to_float(c) : fp16_to_float(c); };
    std::vector<uint16_t> xc(20), yc(5);
    for (size_t i = 0; i < 20; ++i) xc[i] = encode(xf.data<float>()[i]);
    for (size_t i = 0; i < 5; ++i) yc[i] = encode(yf.data<float>()[i]);
    auto y = run_binary("Mul", make<uint16_t>(dtype, {4, 5}, xc), make<uint16_t>(dtype, {5}, yc), dtype);
    ASSERT_TRUE(y) << y.status().message();
    for (size_t i = 0; i < 20; ++i)
      EXPECT_EQ(y->data<uint16_t>()[i], encode(decode(xc[i]) * decode(yc[i % 5]))) << dtype_name(dtype) << " " << i;
  }
  ModelBuilder builder(17);
  builder.input("x", DType::kFloat64, {3}).node("Exp", {"x"}, {"y"}).output("y", DType::kFloat64, {3});
  auto engine = builder.build_engine();
  ASSERT_TRUE(engine) << engine.status().message();
  const Tensor x = make<double>(DType::kFloat64, {3}, {1e-10, 1.0, -700.0});
  auto outputs = testing::run_once(**engine, {x});
  ASSERT_TRUE(outputs) << outputs.status().message();
  for (int i = 0; i < 3; ++i) EXPECT_EQ((*outputs)[0].data<double>()[i], std::exp(x.data<double>()[i]));  // exact: no float rounding
}

}  // namespace
}  // namespace loka
