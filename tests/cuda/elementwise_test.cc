// ============================================================================
// tests/cuda/elementwise_test.cc — GPU unary/binary ops vs the CPU runtime.
//
// Every op runs on fresh random inputs (seeded; specials NaN, ±inf, ±0,
// subnormals and ties mixed in) in FP32, BF16 and FP16, and is compared
// element by element with the same ONNX op run by the CPU runtime: exact for
// + - * /, Max, Min, comparisons, Neg/Abs/Relu/Sqrt/Reciprocal and casts;
// for the libm functions within the sum of both libraries' documented worst
// cases (CUDA: expf/tanhf/erff 2 ulp, logf 1; glibc: expf/logf < 1, erff 1,
// tanhf 2), one more for Sigmoid's 1/(1+e) and Gelu's products (Gelu also
// within an absolute 2e-6, where 1 + erf cancels); Pow within 1 ulp (both
// sides compute it in double and round once).
// Binary shapes: random broadcasts up to rank 6 printed on failure, plus the
// fast paths (same shape, scalar, [M,N] op [N], [M,N] op [M,1]) at
// M = 1 and 65536 with odd N, attention-mask broadcasts of rank 2 and 3, each
// with a vectorized and a scalar variant, and misaligned operands. Unary counts
// not a multiple of 4 run the packed body plus the scalar tail. Skips without a GPU.
// ============================================================================
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/shape_plan.h"
#include "loka/bfloat16.h"
#include "runtime/single_node_util.h"

namespace loka {
namespace {

using cuda::BinaryOp;
using cuda::UnaryOp;
using testing::DeviceBytes;
using testing::TestAttribute;

class CudaElementwise : public testing::CudaTest {};

constexpr DType kFloatTypes[] = {DType::kFloat32, DType::kBFloat16, DType::kFloat16};

/// `values` stored as `dtype` (rounded to nearest even for the half types).
Tensor make_tensor(const Shape& shape, const std::vector<float>& values, DType dtype) {
  Tensor tensor = Tensor::zeros(dtype, shape);
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kFloat32) tensor.data<float>()[i] = values[i];
    else tensor.data<uint16_t>()[i] = dtype == DType::kBFloat16 ? float_to_bf16(values[i]) : float_to_fp16(values[i]);
  }
  return tensor;
}

/// Random values in [low, high) with every 16th element a special value.
std::vector<float> random_values(std::mt19937& rng, int64_t count, float low, float high) {
  static const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -1e-40f, 1e30f, -1e30f,
                                   88.7f, -103.0f, 0.5f, -0.5f, 1.0f, -1.0f, 3.0f};
  std::uniform_real_distribution<float> uniform(low, high);
  std::uniform_int_distribution<size_t> special(0, std::size(specials) - 1);
  std::vector<float> values(static_cast<size_t>(count));
  for (size_t i = 0; i < values.size(); ++i) values[i] = i % 16 == 7 ? specials[special(rng)] : uniform(rng);
  return values;
}

struct UnaryCase {
  UnaryOp op;
  const char* onnx;
  int opset;
  std::vector<std::pair<std::string, TestAttribute>> attributes;
  int64_t max_ulp;  ///< FP32; the half types allow 1 unit when this is > 0
  float abs_tolerance;
};

std::vector<UnaryCase> unary_cases() {
  return {
      {UnaryOp::kRelu, "Relu", 14, {}, 0, 0.0f},
      {UnaryOp::kNeg, "Neg", 13, {}, 0, 0.0f},
      {UnaryOp::kAbs, "Abs", 13, {}, 0, 0.0f},
      {UnaryOp::kSqrt, "Sqrt", 13, {}, 0, 0.0f},
      {UnaryOp::kReciprocal, "Reciprocal", 13, {}, 0, 0.0f},
      {UnaryOp::kExp, "Exp", 13, {}, 3, 0.0f},
      {UnaryOp::kLog, "Log", 13, {}, 2, 0.0f},
      {UnaryOp::kTanh, "Tanh", 13, {}, 4, 0.0f},
      {UnaryOp::kErf, "Erf", 13, {}, 3, 0.0f},
      {UnaryOp::kSigmoid, "Sigmoid", 13, {}, 4, 0.0f},
      {UnaryOp::kGelu, "Gelu", 20, {}, 5, 2e-6f},
      {UnaryOp::kGeluTanh, "Gelu", 20, {{"approximate", std::string("tanh")}}, 6, 2e-6f},
  };
}

Tensor run_unary_on_gpu(UnaryOp op, const Tensor& x, DType out_dtype, int64_t misalignment = 0) {
  const size_t in_size = dtype_size(x.dtype()), out_size = dtype_size(out_dtype);
  const int64_t count = x.element_count();
  DeviceBytes d_x(x.byte_size() + 16), d_y(static_cast<size_t>(count) * out_size + 16);
  char* x_base = d_x.as<char>() + misalignment * static_cast<int64_t>(in_size);
  char* y_base = d_y.as<char>() + misalignment * static_cast<int64_t>(out_size);
  EXPECT_EQ(cudaMemcpy(x_base, x.raw(), x.byte_size(), cudaMemcpyHostToDevice), cudaSuccess);
  const Status status = cuda::launch_unary(op, x_base, x.dtype(), y_base, out_dtype, count, nullptr);
  EXPECT_TRUE(status.is_ok()) << status.message();
  Tensor y = Tensor::zeros(out_dtype, x.shape());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(y.raw(), y_base, y.byte_size(), cudaMemcpyDeviceToHost), cudaSuccess);
  return y;
}

TEST_F(CudaElementwise, UnaryOpsMatchTheCpuRuntime) {
  std::mt19937 rng(1234);
  for (const UnaryCase& c : unary_cases()) {
    for (DType dtype : kFloatTypes) {
      for (int64_t count : {1, 3, 4, 1001, 65536 * 4 + 3}) {
        SCOPED_TRACE(std::string(c.onnx) + " " + std::string(dtype_name(dtype)) + " count=" + std::to_string(count) +
                     " (seed 1234)");
        const float range = c.op == UnaryOp::kExp ? 100.0f : 8.0f;
        const Tensor x = make_tensor({count}, random_values(rng, count, -range, range), dtype);
        auto expected = testing::run_single_node(c.onnx, c.opset, {x}, c.attributes);
        ASSERT_TRUE(expected) << expected.status().message();
        const int64_t units = dtype == DType::kFloat32 ? c.max_ulp : (c.max_ulp > 0 ? 1 : 0);
        testing::expect_close(run_unary_on_gpu(c.op, x, dtype), (*expected)[0], units, c.abs_tolerance);
      }
    }
  }
}

TEST_F(CudaElementwise, MisalignedBuffersTakeTheScalarPathAndStillMatch) {
  std::mt19937 rng(99);
  const Tensor x = make_tensor({4096}, random_values(rng, 4096, -5.0f, 5.0f), DType::kFloat32);
  auto expected = testing::run_single_node("Tanh", 13, {x});
  ASSERT_TRUE(expected) << expected.status().message();
  // The tolerance of the aligned Tanh case above: CUDA's tanhf is within 2 ulp
  // of the true value and glibc's within 2 more.
  testing::expect_close(run_unary_on_gpu(UnaryOp::kTanh, x, DType::kFloat32, 1), (*expected)[0], 4);
}

TEST_F(CudaElementwise, CastsBetweenFloatTypesMatchTheCpuRuntime) {
  std::mt19937 rng(5);
  for (DType from : kFloatTypes) {
    for (DType to : kFloatTypes) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
      const Tensor x = make_tensor({70001}, random_values(rng, 70001, -70000.0f, 70000.0f), from);
      auto expected = testing::run_single_node("Cast", 19, {x}, {{"to", static_cast<int64_t>(to)}}, 1, to);
      ASSERT_TRUE(expected) << expected.status().message();
      testing::expect_close(run_unary_on_gpu(UnaryOp::kIdentity, x, to), (*expected)[0], 0);
    }
  }
}

struct BinaryName {
  BinaryOp op;
  const char* onnx;
};
constexpr BinaryName kBinaryOps[] = {
    {BinaryOp::kAdd, "Add"},     {BinaryOp::kSub, "Sub"},         {BinaryOp::kMul, "Mul"},
    {BinaryOp::kDiv, "Div"},     {BinaryOp::kPow, "Pow"},         {BinaryOp::kMax, "Max"},
    {BinaryOp::kMin, "Min"},     {BinaryOp::kEqual, "Equal"},     {BinaryOp::kLess, "Less"},
    {BinaryOp::kGreater, "Greater"}, {BinaryOp::kLessOrEqual, "LessOrEqual"}, {BinaryOp::kGreaterOrEqual, "GreaterOrEqual"},
};

/// Operand values: random, with ties (multiples of 0.5) so comparisons see equality,
/// integers for Pow's exponent so negative bases give finite powers.
std::vector<float> operand_values(std::mt19937& rng, int64_t count, bool exponent) {
  std::vector<float> values = random_values(rng, count, exponent ? -3.0f : -4.0f, exponent ? 3.0f : 4.0f);
  std::bernoulli_distribution tie(0.3);
  for (float& v : values)
    if (std::isfinite(v) && tie(rng)) v = std::round(v * 2.0f) / 2.0f;
  return values;
}

/// Runs `op` on the GPU and on the CPU runtime and compares every element.
void check_binary(const BinaryName& name, const Shape& a_shape, const Shape& b_shape, DType dtype, std::mt19937& rng,
                  int64_t misalignment = 0) {
  SCOPED_TRACE(std::string(name.onnx) + " " + std::string(dtype_name(dtype)) + " A" + shape_to_string(a_shape) + " B" +
               shape_to_string(b_shape) + (misalignment ? " misaligned" : ""));
  const Tensor a = make_tensor(a_shape, operand_values(rng, element_count(a_shape), false), dtype);
  const Tensor b = make_tensor(b_shape, operand_values(rng, element_count(b_shape), name.op == BinaryOp::kPow), dtype);
  const bool comparison = cuda::is_comparison(name.op);
  const DType out_dtype = comparison ? DType::kBool : dtype;
  auto expected = testing::run_single_node(name.onnx, 13, {a, b}, {}, 1, out_dtype);
  ASSERT_TRUE(expected) << expected.status().message();
  const Tensor& want = (*expected)[0];

  const int64_t elem = static_cast<int64_t>(dtype_size(dtype)), out_elem = static_cast<int64_t>(dtype_size(out_dtype));
  DeviceBytes d_a(a.byte_size() + 16), d_b(b.byte_size() + 16), d_out(want.byte_size() + 16);
  char* pa = d_a.as<char>() + misalignment * elem;
  char* pb = d_b.as<char>() + misalignment * elem;
  char* pout = d_out.as<char>() + misalignment * out_elem;
  ASSERT_EQ(cudaMemcpy(pa, a.raw(), a.byte_size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(pb, b.raw(), b.byte_size(), cudaMemcpyHostToDevice), cudaSuccess);
  const Status status = cuda::launch_binary(name.op, pa, a_shape, pb, b_shape, dtype, pout, nullptr);
  ASSERT_TRUE(status.is_ok()) << status.message();
  Tensor got = Tensor::zeros(out_dtype, want.shape());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(got.raw(), pout, got.byte_size(), cudaMemcpyDeviceToHost), cudaSuccess);
  if (comparison) {
    testing::expect_same_bytes(got.raw(), want.raw(), static_cast<size_t>(got.element_count()), 1);
  } else {
    testing::expect_close(got, want, name.op == BinaryOp::kPow ? 1 : 0);
  }
}

/// A random broadcast pair up to rank 6: each operand drops leading dims and sets dims to 1 at random.
std::pair<Shape, Shape> random_broadcast(std::mt19937& rng) {
  std::uniform_int_distribution<int> rank_dist(0, 6), dim(1, 5);
  std::bernoulli_distribution ones(0.35), empty(0.03);
  const int rank = rank_dist(rng);
  Shape out(static_cast<size_t>(rank));
  for (int64_t& d : out) d = empty(rng) ? 0 : dim(rng);
  auto operand = [&]() {
    const int drop = std::uniform_int_distribution<int>(0, rank)(rng) / 2;
    Shape s(out.begin() + drop, out.end());
    for (int64_t& d : s)
      if (ones(rng)) d = 1;
    return s;
  };
  Shape a = operand(), b = operand();
  return {a, b};
}

TEST_F(CudaElementwise, RandomBroadcastsUpToRank6MatchTheCpuRuntime) {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 400; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial) + " (seed 42)");
    const auto [a_shape, b_shape] = random_broadcast(rng);
    const BinaryName& name = kBinaryOps[static_cast<size_t>(trial) % std::size(kBinaryOps)];
    check_binary(name, a_shape, b_shape, kFloatTypes[static_cast<size_t>(trial / 7) % 3], rng);
  }
}

TEST_F(CudaElementwise, FastPathShapesMatchTheCpuRuntime) {
  std::mt19937 rng(7);
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{65536, 13}, {65536, 13}},  // same shape, odd width
      {{65536, 16}, {16}},         // row broadcast, vectorizable
      {{65536, 13}, {13}},         // row broadcast, odd width
      {{13}, {65536, 13}},         // broadcast on the left operand
      {{1, 7}, {7}},               // batch 1
      {{65536, 12}, {65536, 1}},   // column broadcast
      {{5, 1}, {1, 6}},            // outer product
      {{}, {3, 4}},                // scalar
      {{}, {}},                    // scalar op scalar
      {{2, 3, 65536}, {3, 1}},     // middle broadcast
      {{4099}, {1}},
      // Flat kernel (rank 1 after coalescing): float4 body and a count % 4 tail in one launch.
      {{4099}, {4099}},            // same shape, 3-element tail
      {{4101}, {}},                // tensor op scalar
      {{}, {4098}},                // scalar op tensor
      {{2, 3}, {2, 3}},            // fewer elements than one float4
      // Strided kernels (FastDivmod, 32-bit indices), the shapes the zoo runs.
      {{4096, 256}, {4096, 1}},             // column broadcast, 4 per thread
      {{300, 3456}, {3456}},                // row broadcast at a DHEN width
      {{64, 4, 27, 27}, {27, 27}},          // attention mask over batch and heads: rank 2, odd inner
      {{64, 4, 27, 27}, {64, 1, 1, 27}},    // key-padding mask: rank 3, odd inner
      {{16, 4, 40, 40}, {16, 1, 40, 40}},   // per-sample mask: rank 3, 4 per thread
      {{3, 1, 5, 2, 7}, {4, 1, 2, 1}},      // rank 4 and 5 after coalescing
      {{2, 3, 1, 5, 2, 7}, {3, 4, 1, 2, 1}},
  };
  for (const BinaryName& name : kBinaryOps)
    for (DType dtype : kFloatTypes)
      for (const auto& [a, b] : shapes) check_binary(name, a, b, dtype, rng);
  // Misaligned bases: packed loads are refused, results unchanged.
  check_binary({BinaryOp::kMul, "Mul"}, {1000, 16}, {16}, DType::kFloat32, rng, 1);
  check_binary({BinaryOp::kLess, "Less"}, {1000, 16}, {1000, 16}, DType::kBFloat16, rng, 1);
  check_binary({BinaryOp::kAdd, "Add"}, {4099}, {4099}, DType::kFloat32, rng, 3);
  check_binary({BinaryOp::kDiv, "Div"}, {4099}, {}, DType::kFloat16, rng, 1);
  check_binary({BinaryOp::kSub, "Sub"}, {4096, 256}, {4096, 1}, DType::kFloat32, rng, 2);
  check_binary({BinaryOp::kMax, "Max"}, {16, 4, 40, 40}, {16, 1, 40, 40}, DType::kFloat32, rng, 1);
}

TEST(CudaElementwiseArgs, BadShapesAndTypesAreRefusedWithAReason) {
  int dummy = 0;
  Status status = cuda::launch_binary(BinaryOp::kAdd, &dummy, {2, 3}, &dummy, {4}, DType::kFloat32, &dummy, nullptr);
  EXPECT_NE(status.message().find("shapes [2,3] and [4] do not broadcast"), std::string::npos) << status.message();
  status = cuda::launch_binary(BinaryOp::kAdd, &dummy, {1, 1, 1, 1, 1, 1, 1}, &dummy, {1}, DType::kFloat32, &dummy, nullptr);
  EXPECT_NE(status.message().find("above the CUDA kernels' limit of 6"), std::string::npos) << status.message();
  status = cuda::launch_binary(BinaryOp::kAdd, &dummy, {1}, &dummy, {1}, DType::kInt64, &dummy, nullptr);
  EXPECT_NE(status.message().find("got INT64"), std::string::npos) << status.message();
  status = cuda::launch_unary(UnaryOp::kExp, &dummy, DType::kFloat32, &dummy, DType::kFloat8E4M3FN, 1, nullptr);
  EXPECT_NE(status.message().find("got FLOAT and FLOAT8E4M3FN"), std::string::npos) << status.message();
}

}  // namespace
}  // namespace loka
