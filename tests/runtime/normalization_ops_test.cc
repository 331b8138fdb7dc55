// ============================================================================
// tests/runtime/normalization_ops_test.cc — LayerNormalization, Softmax, LogSoftmax.
//
// One-node models on fresh random inputs of awkward shapes, checked element by
// element against plain double-precision loops written here.
// ============================================================================
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model_builder.h"
#include "single_node_util.h"
#include "test_support.h"

namespace loka {
namespace {

using testing::TestAttribute;
using Attrs = std::vector<std::pair<std::string, TestAttribute>>;

/// One `op` node at `opset` declaring `outputs` outputs.
Result<std::vector<Tensor>> run_norm_node(int opset, const std::string& op, const std::vector<Tensor>& inputs,
                                          const Attrs& attrs = {}, int outputs = 1) {
  return testing::run_single_node(op, opset, inputs, attrs, static_cast<size_t>(outputs), DType::kFloat32);
}

/// Reads `t` at the multi-index `index` of `target`, numpy-broadcasting t's shape to target.
float broadcast_at(const Tensor& t, const Shape& target, const std::vector<int64_t>& index) {
  int64_t offset = 0;
  const size_t lead = target.size() - t.shape().size();
  for (size_t d = 0; d < t.shape().size(); ++d)
    offset = offset * t.shape()[d] + (t.shape()[d] == 1 ? 0 : index[lead + d]);
  return t.data<float>()[offset];
}

void check_layer_norm(const Tensor& x, const Tensor& scale, const Tensor* bias, int64_t axis, float epsilon,
                      const std::vector<Tensor>& out) {
  const int rank = x.rank();
  const int a = static_cast<int>(axis < 0 ? axis + rank : axis);
  int64_t rows = 1, n = 1;
  for (int d = 0; d < rank; ++d) (d < a ? rows : n) *= x.dim(d);
  Shape stats_shape(x.shape().begin(), x.shape().begin() + a);
  stats_shape.resize(x.shape().size(), 1);
  ASSERT_EQ(out[0].shape(), x.shape());
  ASSERT_EQ(out[1].shape(), stats_shape);
  ASSERT_EQ(out[2].shape(), stats_shape);
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < n; ++j) mean += x.data<float>()[r * n + j];
    mean /= static_cast<double>(n);
    for (int64_t j = 0; j < n; ++j) var += std::pow(x.data<float>()[r * n + j] - mean, 2);
    var /= static_cast<double>(n);
    const double inv_std = 1.0 / std::sqrt(var + epsilon);
    EXPECT_NEAR(out[1].data<float>()[r], mean, 1e-5);
    EXPECT_NEAR(out[2].data<float>()[r], inv_std, 1e-4 * inv_std);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t flat = r * n + j;
      const auto index = testing::unravel(flat, x.shape());
      double want = (x.data<float>()[flat] - mean) * inv_std * broadcast_at(scale, x.shape(), index);
      if (bias) want += broadcast_at(*bias, x.shape(), index);
      ASSERT_NEAR(out[0].data<float>()[flat], want, 1e-4 * (1 + std::fabs(want))) << "element " << flat;
    }
  }
}

TEST(LayerNormalization, MatchesReferenceOverAxesShapesAndBroadcasts) {
  std::mt19937 rng(21);
  struct Case {
    Shape x;
    int64_t axis;
    Shape scale;
    Shape bias;  // empty: no bias
  };
  const std::vector<Case> cases = {
      {{4, 7}, -1, {7}, {7}},
      {{2, 3, 5}, 1, {3, 5}, {5}},
      {{2, 3, 5}, -2, {1, 5}, {3, 1}},
      {{2, 3, 5}, 0, {2, 3, 5}, {}},
      {{2, 3, 5}, 1, {2, 1, 5}, {2, 3, 1}},  // Scale varies with the (outer) row
      {{1, 1}, -1, {1}, {1}},
      {{3, 1000}, 1, {1000}, {1000}},
      {{7, 13, 1}, 2, {1}, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_to_string(c.x) + " axis " + std::to_string(c.axis));
    const Tensor x = testing::random_tensor(rng, c.x, -3.0f, 5.0f);
    const Tensor scale = testing::random_tensor(rng, c.scale, 0.5f, 2.0f);
    const Tensor bias = c.bias.empty() ? Tensor() : testing::random_tensor(rng, c.bias);
    const float epsilon = 1e-3f;
    auto out = run_norm_node(17, "LayerNormalization", {x, scale, bias}, {{"axis", c.axis}, {"epsilon", epsilon}}, 3);
    ASSERT_TRUE(out) << out.status().message();
    check_layer_norm(x, scale, c.bias.empty() ? nullptr : &bias, c.axis, epsilon, *out);
  }
}

TEST(LayerNormalization, DefaultsToLastAxisAndEpsilon1e5WithOneOutput) {
  std::mt19937 rng(22);
  const Tensor x = testing::random_tensor(rng, {3, 4, 6});
  const Tensor scale = testing::random_tensor(rng, {6});
  auto out = run_norm_node(17, "LayerNormalization", {x, scale});
  ASSERT_TRUE(out) << out.status().message();
  ASSERT_EQ(out->size(), 1u);
  // Compare with the three-output run at explicit defaults.
  auto full = run_norm_node(17, "LayerNormalization", {x, scale}, {{"axis", int64_t{-1}}, {"epsilon", 1e-5f}}, 3);
  ASSERT_TRUE(full) << full.status().message();
  EXPECT_EQ(testing::max_abs_difference((*out)[0], (*full)[0]), 0.0f);
  check_layer_norm(x, scale, nullptr, -1, 1e-5f, *full);
}

TEST(LayerNormalization, RejectsBadAxisTypesShapesAndStashType) {
  const Tensor x = Tensor::zeros(DType::kFloat32, {2, 3});
  const Tensor scale = Tensor::zeros(DType::kFloat32, {3});
  const auto expect_error = [](const Result<std::vector<Tensor>>& result, const std::string& needle) {
    ASSERT_FALSE(result) << "expected an error containing '" << needle << "'";
    EXPECT_NE(result.status().message().find(needle), std::string::npos) << result.status().message();
  };
  expect_error(run_norm_node(17, "LayerNormalization", {x, scale}, {{"axis", int64_t{2}}}), "axis");
  expect_error(run_norm_node(17, "LayerNormalization", {x, scale}, {{"axis", int64_t{-3}}}), "axis");
  expect_error(run_norm_node(17, "LayerNormalization", {x, Tensor::zeros(DType::kFloat32, {4})}), "Scale");
  expect_error(run_norm_node(17, "LayerNormalization", {x, scale, Tensor::zeros(DType::kFloat32, {2, 2})}), "B of shape");
  expect_error(run_norm_node(17, "LayerNormalization", {Tensor::zeros(DType::kInt64, {2, 3}), scale}), "INT64");
  expect_error(run_norm_node(17, "LayerNormalization", {x, scale}, {{"stash_type", int64_t{11}}}), "stash_type");
  expect_error(run_norm_node(16, "LayerNormalization", {x, scale}), "LayerNormalization");
}

// ---------------------------------------------------------------- Softmax

/// Reference over [outer, n, inner] in double.
std::vector<double> reference_softmax(const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log) {
  std::vector<double> y(static_cast<size_t>(x.element_count()));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double max = -INFINITY, sum = 0;
      for (int64_t j = 0; j < n; ++j) max = std::max(max, static_cast<double>(x.data<float>()[(o * n + j) * inner + i]));
      for (int64_t j = 0; j < n; ++j) sum += std::exp(x.data<float>()[(o * n + j) * inner + i] - max);
      for (int64_t j = 0; j < n; ++j) {
        const size_t k = static_cast<size_t>((o * n + j) * inner + i);
        const double shifted = x.data<float>()[k] - max;
        y[k] = log ? shifted - std::log(sum) : std::exp(shifted) / sum;
      }
    }
  return y;
}

TEST(Softmax, Opset13NormalizesAlongOneAxis) {
  std::mt19937 rng(23);
  const Shape shape{3, 4, 5};
  for (bool log : {false, true}) {
    for (int64_t axis : {0, 1, 2, -1, -3}) {
      SCOPED_TRACE((log ? "LogSoftmax axis " : "Softmax axis ") + std::to_string(axis));
      const Tensor x = testing::random_tensor(rng, shape, -10.0f, 10.0f);
      auto y = run_norm_node(13, log ? "LogSoftmax" : "Softmax", {x}, {{"axis", axis}});
      ASSERT_TRUE(y) << y.status().message();
      const int a = static_cast<int>(axis < 0 ? axis + 3 : axis);
      int64_t outer = 1, inner = 1;
      for (int d = 0; d < 3; ++d) {
        if (d < a) outer *= shape[static_cast<size_t>(d)];
        if (d > a) inner *= shape[static_cast<size_t>(d)];
      }
      const auto want = reference_softmax(x, outer, shape[static_cast<size_t>(a)], inner, log);
      for (size_t k = 0; k < want.size(); ++k) ASSERT_NEAR((*y)[0].data<float>()[k], want[k], 1e-5 * (1 + std::fabs(want[k]))) << k;
    }
  }
}

TEST(Softmax, BeforeOpset13CoercesToTwoDimensions) {
  std::mt19937 rng(24);
  const Tensor x = testing::random_tensor(rng, {2, 3, 7}, -4.0f, 4.0f);
  for (bool log : {false, true}) {
    // Default axis 1: each of the 2 rows of 21 elements is one distribution.
    auto y = run_norm_node(11, log ? "LogSoftmax" : "Softmax", {x});
    ASSERT_TRUE(y) << y.status().message();
    const auto want = reference_softmax(x, 2, 21, 1, log);
    for (size_t k = 0; k < want.size(); ++k) ASSERT_NEAR((*y)[0].data<float>()[k], want[k], 1e-5 * (1 + std::fabs(want[k])));
  }
}

TEST(Softmax, StableForHugeInputsAndPropagatesNan) {
  const Tensor x = Tensor::from_floats({2, 3}, std::vector<float>{1000.0f, 1001.0f, 1002.0f, 1.0f, NAN, 2.0f});
  auto y = run_norm_node(13, "Softmax", {x});
  ASSERT_TRUE(y) << y.status().message();
  const float* p = (*y)[0].data<float>();
  const double z = 1 + std::exp(-1.0) + std::exp(-2.0);
  EXPECT_NEAR(p[2], 1 / z, 1e-6);
  EXPECT_NEAR(p[0] + p[1] + p[2], 1.0, 1e-6);
  for (int k = 3; k < 6; ++k) EXPECT_TRUE(std::isnan(p[k]));
  auto ly = run_norm_node(13, "LogSoftmax", {x});
  ASSERT_TRUE(ly) << ly.status().message();
  EXPECT_NEAR((*ly)[0].data<float>()[2], -std::log(z), 1e-6);
}

TEST(Softmax, RejectsBadAxisAndType) {
  const Tensor x = Tensor::zeros(DType::kFloat32, {2, 3});
  EXPECT_FALSE(run_norm_node(13, "Softmax", {x}, {{"axis", int64_t{2}}}));
  EXPECT_FALSE(run_norm_node(13, "LogSoftmax", {x}, {{"axis", int64_t{-3}}}));
  auto wrong = run_norm_node(13, "Softmax", {Tensor::zeros(DType::kInt32, {2, 3})});
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.status().message().find("INT32"), std::string::npos) << wrong.status().message();
}

}  // namespace
}  // namespace loka
