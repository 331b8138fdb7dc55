// ============================================================================
// tests/runtime/reduction_ops_test.cc — the Reduce* family, ArgMax and ArgMin.
//
// Every reduction over every axis subset of a random [3,4,5] tensor, both
// keepdims, against a reference that walks output indices and their groups;
// then the axes-as-attribute opsets, empty sets, noop_with_empty_axes,
// integer and bool inputs, arg reductions with ties, and the error cases.
// ============================================================================
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "model_builder.h"
#include "single_node_util.h"
#include "test_support.h"

namespace loka {
namespace {

using testing::TestAttribute;
using Attrs = std::vector<std::pair<std::string, TestAttribute>>;

/// One `op` node at `opset` over graph inputs (an undefined tensor is an omitted optional input).
Result<std::vector<Tensor>> run_reduce_node(int opset, const std::string& op, const std::vector<Tensor>& inputs,
                                            const Attrs& attrs = {}) {
  return testing::run_single_node(op, opset, inputs, attrs);
}

Tensor axes_tensor(const std::vector<int64_t>& axes) {
  return Tensor::from_int64s({static_cast<int64_t>(axes.size())}, axes);
}

struct ReduceOp {
  const char* name;
  std::function<double(const std::vector<double>&)> fold;
};

const std::vector<ReduceOp>& reduce_ops() {
  static const std::vector<ReduceOp> ops = {
      {"ReduceSum", [](const std::vector<double>& v) { double s = 0; for (double x : v) s += x; return s; }},
      {"ReduceMean", [](const std::vector<double>& v) { double s = 0; for (double x : v) s += x; return s / static_cast<double>(v.size()); }},
      {"ReduceMax", [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }},
      {"ReduceMin", [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }},
      {"ReduceProd", [](const std::vector<double>& v) { double p = 1; for (double x : v) p *= x; return p; }},
      {"ReduceSumSquare", [](const std::vector<double>& v) { double s = 0; for (double x : v) s += x * x; return s; }},
      {"ReduceL1", [](const std::vector<double>& v) { double s = 0; for (double x : v) s += std::fabs(x); return s; }},
      {"ReduceL2", [](const std::vector<double>& v) { double s = 0; for (double x : v) s += x * x; return std::sqrt(s); }},
      {"ReduceLogSum", [](const std::vector<double>& v) { double s = 0; for (double x : v) s += x; return std::log(s); }},
      {"ReduceLogSumExp", [](const std::vector<double>& v) { double s = 0; for (double x : v) s += std::exp(x); return std::log(s); }},
  };
  return ops;
}

/// Reference: for each output position, gather its group from the input and fold it.
std::vector<double> reference_reduce(const Tensor& x, const std::vector<bool>& reduced,
                                     const std::function<double(const std::vector<double>&)>& fold) {
  const Shape& shape = x.shape();
  Shape kept;
  for (size_t d = 0; d < shape.size(); ++d) kept.push_back(reduced[d] ? 1 : shape[d]);
  std::vector<std::vector<double>> groups(static_cast<size_t>(element_count(kept)));
  const std::vector<float> values = x.to_floats();
  for (int64_t flat = 0; flat < x.element_count(); ++flat) {
    int64_t rest = flat, out = 0, stride = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      const int64_t i = rest % shape[d];
      rest /= shape[d];
      if (!reduced[d]) out += i * stride;
      stride *= kept[d];
    }
    groups[static_cast<size_t>(out)].push_back(values[static_cast<size_t>(flat)]);
  }
  std::vector<double> result;
  for (const auto& group : groups) result.push_back(fold(group));
  return result;
}

Shape expected_shape(const Shape& shape, const std::vector<bool>& reduced, bool keepdims) {
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!reduced[d]) out.push_back(shape[d]);
    else if (keepdims) out.push_back(1);
  }
  return out;
}

TEST(Reduce, EveryOpEveryAxisSubsetBothKeepdimsOpset18) {
  std::mt19937 rng(31);
  const Shape shape{3, 4, 5};
  const std::vector<std::vector<int64_t>> axis_sets = {{}, {0}, {1}, {-1}, {0, 2}, {-3, 1}, {2, 1, 0}};
  for (const ReduceOp& op : reduce_ops()) {
    // Positive inputs keep LogSum defined; the products stay moderate.
    const Tensor x = testing::random_tensor(rng, shape, 0.5f, 1.5f);
    for (const auto& axes : axis_sets) {
      for (int64_t keepdims : {1, 0}) {
        SCOPED_TRACE(std::string(op.name) + " axes " + shape_to_string(axes) + " keepdims " + std::to_string(keepdims));
        auto y = run_reduce_node(18, op.name, {x, axes_tensor(axes)}, {{"keepdims", keepdims}});
        ASSERT_TRUE(y) << y.status().message();
        std::vector<bool> reduced(3, axes.empty());
        for (int64_t a : axes) reduced[static_cast<size_t>(a < 0 ? a + 3 : a)] = true;
        ASSERT_EQ((*y)[0].shape(), expected_shape(shape, reduced, keepdims != 0));
        const auto want = reference_reduce(x, reduced, op.fold);
        ASSERT_EQ(static_cast<size_t>((*y)[0].element_count()), want.size());
        for (size_t k = 0; k < want.size(); ++k)
          ASSERT_NEAR((*y)[0].data<float>()[k], want[k], 1e-5 * (1 + std::fabs(want[k]))) << k;
      }
    }
  }
}

TEST(Reduce, AxesAttributeBeforeTheInputOpsetAndAxesInputForReduceSum13) {
  std::mt19937 rng(32);
  const Tensor x = testing::random_tensor(rng, {2, 7, 3});
  const std::vector<bool> middle = {false, true, false};
  for (const ReduceOp& op : reduce_ops()) {
    if (std::string(op.name) == "ReduceLogSum") continue;  // negative inputs
    auto y = run_reduce_node(13, op.name, {x}, {{"axes", std::vector<int64_t>{-2}}, {"keepdims", int64_t{0}}});
    if (std::string(op.name) == "ReduceSum") {  // axes is an input from opset 13
      ASSERT_FALSE(y);
      y = run_reduce_node(13, op.name, {x, axes_tensor({-2})}, {{"keepdims", int64_t{0}}});
    }
    ASSERT_TRUE(y) << op.name << ": " << y.status().message();
    ASSERT_EQ((*y)[0].shape(), (Shape{2, 3})) << op.name;
    const auto want = reference_reduce(x, middle, op.fold);
    for (size_t k = 0; k < want.size(); ++k)
      ASSERT_NEAR((*y)[0].data<float>()[k], want[k], 1e-5 * (1 + std::fabs(want[k]))) << op.name << " " << k;
  }
  // No axes attribute at all: reduce everything, keepdims gives [1,1,1].
  auto all = run_reduce_node(11, "ReduceMax", {x});
  ASSERT_TRUE(all) << all.status().message();
  EXPECT_EQ((*all)[0].shape(), (Shape{1, 1, 1}));
  const auto values = x.to_floats();
  EXPECT_EQ((*all)[0].data<float>()[0], *std::max_element(values.begin(), values.end()));
}

TEST(Reduce, EmptyAxesReduceAllOrAreTheIdentityWithNoop) {
  std::mt19937 rng(33);
  const Tensor x = testing::random_tensor(rng, {4, 3});
  auto all = run_reduce_node(13, "ReduceSum", {x, axes_tensor({})}, {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(all) << all.status().message();
  EXPECT_EQ((*all)[0].shape(), Shape{});
  double sum = 0;
  for (float v : x.to_floats()) sum += v;
  EXPECT_NEAR((*all)[0].data<float>()[0], sum, 1e-5);
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceL2"}) {
    const int opset = std::string(op) == "ReduceSum" ? 13 : 18;
    auto noop = run_reduce_node(opset, op, {x, axes_tensor({})}, {{"noop_with_empty_axes", int64_t{1}}});
    ASSERT_TRUE(noop) << noop.status().message();
    EXPECT_EQ((*noop)[0].shape(), x.shape());
    EXPECT_EQ(testing::max_abs_difference((*noop)[0], x), 0.0f);
    // An omitted axes input counts as empty too.
    auto omitted = run_reduce_node(opset, op, {x}, {{"noop_with_empty_axes", int64_t{1}}});
    ASSERT_TRUE(omitted) << omitted.status().message();
    EXPECT_EQ(testing::max_abs_difference((*omitted)[0], x), 0.0f);
  }
}

TEST(Reduce, EmptySetGivesEachOpsIdentity) {
  const Tensor x = Tensor::zeros(DType::kFloat32, {2, 0, 4});
  const std::vector<std::pair<const char*, float>> expected = {
      {"ReduceSum", 0.0f},     {"ReduceProd", 1.0f},      {"ReduceMax", -INFINITY}, {"ReduceMin", INFINITY},
      {"ReduceL1", 0.0f},      {"ReduceL2", 0.0f},        {"ReduceSumSquare", 0.0f}, {"ReduceLogSum", -INFINITY},
      {"ReduceLogSumExp", -INFINITY}};
  for (const auto& [op, value] : expected) {
    auto y = run_reduce_node(18, op, {x, axes_tensor({1})});
    ASSERT_TRUE(y) << op << ": " << y.status().message();
    ASSERT_EQ((*y)[0].shape(), (Shape{2, 1, 4})) << op;
    for (float v : (*y)[0].to_floats()) EXPECT_EQ(v, value) << op;
  }
  auto mean = run_reduce_node(18, "ReduceMean", {x, axes_tensor({1})});
  ASSERT_TRUE(mean) << mean.status().message();
  EXPECT_TRUE(std::isnan((*mean)[0].data<float>()[0]));
  // A zero-sized kept axis: an empty output of the right shape.
  auto empty = run_reduce_node(13, "ReduceSum", {x, axes_tensor({2})});
  ASSERT_TRUE(empty) << empty.status().message();
  EXPECT_EQ((*empty)[0].shape(), (Shape{2, 0, 1}));
}

TEST(Reduce, IntegerAndBoolInputsAndNanPropagation) {
  const Tensor ints = Tensor::from_int64s({2, 3}, std::vector<int64_t>{1, -7, 4, (int64_t{1} << 40), 3, -2});
  auto sum = run_reduce_node(18, "ReduceSum", {ints, axes_tensor({1})}, {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(sum) << sum.status().message();
  EXPECT_EQ((*sum)[0].to_int64s(), (std::vector<int64_t>{-2, (int64_t{1} << 40) + 1}));
  auto mean = run_reduce_node(18, "ReduceMean", {ints, axes_tensor({1})}, {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(mean) << mean.status().message();
  EXPECT_EQ((*mean)[0].to_int64s(), (std::vector<int64_t>{0, ((int64_t{1} << 40) + 1) / 3}));
  auto min = run_reduce_node(18, "ReduceMin", {ints, axes_tensor({0})}, {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(min) << min.status().message();
  EXPECT_EQ((*min)[0].to_int64s(), (std::vector<int64_t>{1, -7, -2}));

  Tensor bools = Tensor::zeros(DType::kBool, {2, 2});
  bools.data<uint8_t>()[1] = 1;  // [[0,1],[0,0]]
  auto any = run_reduce_node(20, "ReduceMax", {bools, axes_tensor({1})}, {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(any) << any.status().message();
  EXPECT_EQ((*any)[0].dtype(), DType::kBool);
  EXPECT_EQ((*any)[0].to_int64s(), (std::vector<int64_t>{1, 0}));
  auto all = run_reduce_node(20, "ReduceMin", {bools, axes_tensor({0})}, {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(all) << all.status().message();
  EXPECT_EQ((*all)[0].to_int64s(), (std::vector<int64_t>{0, 0}));
  EXPECT_FALSE(run_reduce_node(20, "ReduceSum", {bools, axes_tensor({0})}));

  const Tensor with_nan = Tensor::from_floats({2, 2}, std::vector<float>{NAN, 1.0f, 2.0f, 3.0f});
  for (const char* op : {"ReduceMax", "ReduceMin"}) {
    auto y = run_reduce_node(18, op, {with_nan, axes_tensor({1})}, {{"keepdims", int64_t{0}}});
    ASSERT_TRUE(y) << y.status().message();
    EXPECT_TRUE(std::isnan((*y)[0].data<float>()[0])) << op;
    EXPECT_FALSE(std::isnan((*y)[0].data<float>()[1])) << op;
  }
}

TEST(Reduce, RejectsDuplicateAndOutOfRangeAxesAndBadTypes) {
  const Tensor x = Tensor::zeros(DType::kFloat32, {2, 3});
  const auto expect_error = [](const Result<std::vector<Tensor>>& result, const std::string& needle) {
    ASSERT_FALSE(result) << "expected an error containing '" << needle << "'";
    EXPECT_NE(result.status().message().find(needle), std::string::npos) << result.status().message();
  };
  expect_error(run_reduce_node(18, "ReduceMean", {x, axes_tensor({1, -1})}), "twice");
  expect_error(run_reduce_node(18, "ReduceMean", {x, axes_tensor({2})}), "out of range");
  expect_error(run_reduce_node(13, "ReduceMean", {x}, {{"axes", std::vector<int64_t>{-3}}}), "out of range");
  expect_error(run_reduce_node(18, "ReduceMean", {x}, {{"axes", std::vector<int64_t>{0}}}), "input");
  expect_error(run_reduce_node(18, "ReduceSum", {x, Tensor::from_floats({1}, std::vector<float>{0})}), "axes");
  expect_error(run_reduce_node(18, "ReduceSum", {Tensor::zeros(DType::kFloat16, {2})}), "FLOAT16");
  expect_error(run_reduce_node(18, "ReduceLogSum", {Tensor::from_int64s({1}, std::vector<int64_t>{2})}), "INT64");
}

// ---------------------------------------------------------------- ArgMax / ArgMin

TEST(ArgMaxArgMin, MatchReferenceOnEveryAxisWithTiesAndKeepdims) {
  std::mt19937 rng(34);
  const Shape shape{3, 4, 5};
  Tensor x = testing::random_tensor(rng, shape);
  // Quantize to a few levels so ties are common.
  for (float& v : x.values<float>()) v = std::round(v * 2.0f);
  for (bool max : {true, false}) {
    for (int64_t axis : {0, 1, 2, -1}) {
      for (int64_t keepdims : {1, 0}) {
        for (int64_t last : {0, 1}) {
          auto y = run_reduce_node(13, max ? "ArgMax" : "ArgMin", {x},
                                   {{"axis", axis}, {"keepdims", keepdims}, {"select_last_index", last}});
          ASSERT_TRUE(y) << y.status().message();
          const Tensor& out = (*y)[0];
          ASSERT_EQ(out.dtype(), DType::kInt64);
          const int a = static_cast<int>(axis < 0 ? axis + 3 : axis);
          std::vector<bool> reduced(3, false);
          reduced[static_cast<size_t>(a)] = true;
          ASSERT_EQ(out.shape(), expected_shape(shape, reduced, keepdims != 0));
          // Reference: index within each group, found by scanning the group in order.
          const auto want = reference_reduce(x, reduced, [&](const std::vector<double>& group) {
            size_t best = 0;
            for (size_t j = 1; j < group.size(); ++j) {
              const bool better = max ? group[j] > group[best] : group[j] < group[best];
              if (better || (last && group[j] == group[best])) best = j;
            }
            return static_cast<double>(best);
          });
          const auto got = out.to_int64s();
          for (size_t k = 0; k < want.size(); ++k) ASSERT_EQ(got[k], static_cast<int64_t>(want[k])) << k;
        }
      }
    }
  }
  EXPECT_FALSE(run_reduce_node(13, "ArgMax", {x}, {{"axis", int64_t{3}}}));
  EXPECT_FALSE(run_reduce_node(13, "ArgMax", {Tensor::zeros(DType::kFloat32, {2, 0})}, {{"axis", int64_t{1}}}));
}

}  // namespace
}  // namespace loka
