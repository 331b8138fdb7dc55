// ============================================================================
// tests/runtime/attention_op_test.cc — ai.loka Attention on the CPU against
// docs/loka_ops.md: a hand-computed case, a double-precision reference on
// random packed and separate inputs, NaN rows, and ill-formed inputs and
// attributes rejected with a one-line error naming them.
// ============================================================================
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "loka/session.h"
#include "model_builder.h"
#include "test_support.h"

namespace loka {
namespace {

using testing::ModelBuilder;
using testing::TestAttribute;
using Attrs = std::vector<std::pair<std::string, TestAttribute>>;

struct Layout {
  int64_t heads = 1, head_dim = 1;
  float scale = 1.0f;
  int64_t q_offset = 0, k_offset = 0, v_offset = 0;
};

Attrs attributes_of(const Layout& layout) {
  return {{"heads", layout.heads},       {"head_dim", layout.head_dim}, {"scale", layout.scale},
          {"q_offset", layout.q_offset}, {"k_offset", layout.k_offset}, {"v_offset", layout.v_offset}};
}

/// Runs one Attention node on `q`, `k`, `v` (`packed`: one input read three times).
Result<std::vector<Tensor>> run_attention(const Attrs& attributes, const Tensor& q, const Tensor& k, const Tensor& v,
                                          bool packed = false) {
  ModelBuilder builder(17);
  builder.opset("ai.loka", 1);
  builder.input("q", DType::kFloat32, q.shape());
  if (!packed) builder.input("k", DType::kFloat32, k.shape()).input("v", DType::kFloat32, v.shape());
  const std::vector<std::string> inputs = packed ? std::vector<std::string>{"q", "q", "q"}
                                                 : std::vector<std::string>{"q", "k", "v"};
  builder.node("Attention", inputs, {"y"}, attributes, "attn", "ai.loka").output_unshaped("y", DType::kFloat32);
  auto engine = builder.build_engine();
  if (!engine) return engine.status();
  return testing::run_once(**engine, packed ? std::vector<Tensor>{q} : std::vector<Tensor>{q, k, v});
}

/// The doc's formula in double precision.
std::vector<double> reference(const Layout& l, const Tensor& q, const Tensor& k, const Tensor& v) {
  const int64_t b_count = q.dim(0), nq = q.dim(1), nk = k.dim(1), width = l.heads * l.head_dim;
  std::vector<double> y(static_cast<size_t>(b_count * nq * width));
  const float *pq = q.data<float>(), *pk = k.data<float>(), *pv = v.data<float>();
  for (int64_t b = 0; b < b_count; ++b)
    for (int64_t h = 0; h < l.heads; ++h)
      for (int64_t i = 0; i < nq; ++i) {
        std::vector<double> s(static_cast<size_t>(nk));
        double max = -INFINITY, sum = 0.0;
        for (int64_t j = 0; j < nk; ++j) {
          double dot = 0.0;
          for (int64_t e = 0; e < l.head_dim; ++e)
            dot += double(pq[(b * nq + i) * q.dim(2) + l.q_offset + h * l.head_dim + e]) *
                   pk[(b * nk + j) * k.dim(2) + l.k_offset + h * l.head_dim + e];
          s[size_t(j)] = dot * l.scale;
          max = std::max(max, s[size_t(j)]);
        }
        for (double& value : s) sum += (value = std::exp(value - max));
        for (int64_t e = 0; e < l.head_dim; ++e) {
          double acc = 0.0;
          for (int64_t j = 0; j < nk; ++j)
            acc += s[size_t(j)] / sum * pv[(b * nk + j) * v.dim(2) + l.v_offset + h * l.head_dim + e];
          y[size_t((b * nq + i) * width + h * l.head_dim + e)] = acc;
        }
      }
  return y;
}

TEST(Attention, HandComputedTwoKeys) {
  // One query (1, 0), keys (1, 0) and (0, 1), values 10 and 20; scale 2: scores 2 and 0.
  const Tensor q = Tensor::from_floats({1, 1, 2}, std::vector<float>{1, 0});
  const Tensor k = Tensor::from_floats({1, 2, 2}, std::vector<float>{1, 0, 0, 1});
  const Tensor v = Tensor::from_floats({1, 2, 1}, std::vector<float>{10, 20});
  Layout layout{1, 1, 2.0f};
  layout.head_dim = 1;
  // head_dim 1 reads column 0 of q and k only: q·k = 1 and 0.
  auto outputs = run_attention(attributes_of(layout), q, k, v);
  ASSERT_TRUE(outputs) << outputs.status().message();
  const double p0 = std::exp(2.0) / (std::exp(2.0) + 1.0);
  EXPECT_NEAR(outputs->at(0).data<float>()[0], 10.0 * p0 + 20.0 * (1.0 - p0), 1e-5);
  EXPECT_EQ(outputs->at(0).shape(), (Shape{1, 1, 1}));
}

TEST(Attention, MatchesTheDoubleReferenceOnPackedAndSeparateInputs) {
  std::mt19937 rng(11);
  for (const bool packed : {true, false}) {
    for (const auto& [batch, n, heads, dim] : std::vector<std::array<int64_t, 4>>{{1, 1, 1, 1}, {3, 40, 2, 8}, {2, 7, 3, 17}}) {
      SCOPED_TRACE(std::to_string(packed) + " " + std::to_string(n) + "x" + std::to_string(heads) + "x" + std::to_string(dim));
      Layout layout{heads, dim, 1.0f / std::sqrt(float(dim))};
      Tensor q, k, v;
      if (packed) {
        q = testing::random_tensor(rng, {batch, n, 3 * heads * dim}, -2.0f, 2.0f);
        layout.k_offset = heads * dim, layout.v_offset = 2 * heads * dim;
        k = v = q;
      } else {  // wider rows than the heads need, heads from nonzero offsets, more keys than queries
        layout.q_offset = 1, layout.k_offset = 2, layout.v_offset = 3;
        q = testing::random_tensor(rng, {batch, n, heads * dim + 1}, -2.0f, 2.0f);
        k = testing::random_tensor(rng, {batch, n + 2, heads * dim + 5}, -2.0f, 2.0f);
        v = testing::random_tensor(rng, {batch, n + 2, heads * dim + 3}, -2.0f, 2.0f);
      }
      auto outputs = run_attention(attributes_of(layout), q, k, v, packed);
      ASSERT_TRUE(outputs) << outputs.status().message();
      const Tensor& y = outputs->at(0);
      EXPECT_EQ(y.shape(), (Shape{batch, n, heads * dim}));
      const std::vector<double> expected = reference(layout, q, k, v);
      for (size_t i = 0; i < expected.size(); ++i) ASSERT_NEAR(y.data<float>()[i], expected[i], 2e-6) << i;
    }
  }
}

TEST(Attention, ANanScoreMakesOnlyItsQueryRowNan) {
  std::mt19937 rng(3);
  Tensor q = testing::random_tensor(rng, {1, 3, 4});
  const Tensor k = testing::random_tensor(rng, {1, 5, 4});
  const Tensor v = testing::random_tensor(rng, {1, 5, 4});
  q.data<float>()[4] = std::nanf("");  // query 1
  auto outputs = run_attention(attributes_of(Layout{2, 2, 1.0f}), q, k, v);
  ASSERT_TRUE(outputs) << outputs.status().message();
  const float* y = outputs->at(0).data<float>();
  for (int i = 0; i < 3; ++i)
    for (int e = 0; e < 4; ++e) EXPECT_EQ(std::isnan(y[i * 4 + e]), i == 1 && e < 2) << i << "," << e;
}

TEST(Attention, RejectsIllFormedInputsAndAttributesNamingThem) {
  std::mt19937 rng(5);
  const Tensor q = testing::random_tensor(rng, {2, 3, 4});
  const Tensor k = testing::random_tensor(rng, {2, 3, 4});
  const Tensor narrow = testing::random_tensor(rng, {2, 3, 3});
  const Tensor other_batch = testing::random_tensor(rng, {1, 3, 4});
  const Tensor fewer_keys = testing::random_tensor(rng, {2, 2, 4});
  const Tensor matrix = testing::random_tensor(rng, {6, 4});
  const Layout two_by_two{2, 2, 1.0f};
  struct Case {
    Attrs attributes;
    Tensor q, k, v;
    std::vector<std::string> needles;
  };
  Layout offset_too_far = two_by_two;
  offset_too_far.v_offset = 1;
  const std::vector<Case> cases{
      {attributes_of(two_by_two), q, k, narrow, {"attn", "V", "columns"}},
      {attributes_of(offset_too_far), q, k, k, {"attn", "V", "need 5"}},
      {attributes_of(two_by_two), q, other_batch, k, {"attn", "share B"}},
      {attributes_of(two_by_two), q, k, fewer_keys, {"attn", "same number of keys"}},
      {attributes_of(two_by_two), matrix, k, k, {"attn", "Q", "3-D"}},
      {attributes_of(Layout{0, 2, 1.0f}), q, k, k, {"attn", "heads", ">= 1"}},
      {attributes_of(Layout{2, 2, INFINITY}), q, k, k, {"attn", "scale", "finite"}},
  };
  for (const Case& c : cases) {
    auto outputs = run_attention(c.attributes, c.q, c.k, c.v);
    ASSERT_FALSE(outputs) << c.needles.back();
    testing::expect_one_line_error(outputs.status(), c.needles);
  }
}

}  // namespace
}  // namespace loka
