// ============================================================================
// tests/passes/canonicalize_decompose_ops_test.cc — `decompose-ops`: Clip
// (input and attribute bounds, one bound, none) becomes Max/Min and matches
// ONNX Clip on NaN, ±inf and values beyond either bound; an inference
// BatchNormalization becomes Mul/Add matching the BN formula on rank 2 and 4
// inputs; PRelu, LeakyRelu, HardSigmoid, HardSwish, Sum and Mean match
// their ONNX formulas exactly; Split becomes Slices (sizes as input,
// attribute, even, opset 18's smaller last piece); negative twins (statistics not constant, training mode, a non-scalar
// bound) stay and are counted.
// ============================================================================
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "canonicalize_test_util.h"
#include "mods_test_util.h"
#include "passes/canonicalize/decompose_ops.h"
#include "test_support.h"

namespace loka {
namespace {

using testing::check_lines;

testing::Rewrite decompose(const std::string& text) {
  return testing::apply_pass_or_fail(text, decompose_ops_pass_info(), make_decompose_ops_pass());
}

/// The rewritten graph's first output on the CPU runtime.
Tensor run_after(const testing::Rewrite& r, const std::vector<Tensor>& inputs) {
  auto outputs = testing::run_graph(*r.after, inputs);
  EXPECT_TRUE(outputs) << outputs.status().message();
  return outputs ? (*outputs)[0] : Tensor();
}

/// Values beyond both bounds, at them, inside, NaN and infinities.
Tensor awkward_values() {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  return Tensor::from_floats({2, 5}, std::vector<float>{-3.0f, -1.0f, 0.25f, 2.0f, 7.5f, nan, inf, -inf, -0.0f, 1.999f});
}

/// ONNX Clip: min(max(x, lo), hi), NaN stays NaN.
void expect_clipped(const Tensor& y, const Tensor& x, float lo, float hi) {
  const std::vector<float> in = x.to_floats(), out = y.to_floats();
  ASSERT_EQ(in.size(), out.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (std::isnan(in[i])) {
      EXPECT_TRUE(std::isnan(out[i])) << i;
      continue;
    }
    EXPECT_EQ(out[i], std::min(std::max(in[i], lo), hi)) << "element " << i << " = " << in[i];
  }
}

TEST(DecomposeOps, ClipBecomesMaxThenMinUnderItsNameAndMatchesClip) {
  auto r = decompose(R"(graph "t" {
  opset "" 13
  input %x : f32[batch,5]
  init %lo : f32[] = [-1]
  init %hi : f32[] = [2]
  %y = Clip(%x, %lo, %hi) @"clamp"
  output %y
})");
  EXPECT_TRUE(r.run.changed);
  EXPECT_EQ(r.run.statistics["clips-decomposed"], 1);
  EXPECT_EQ(check_lines(r.printed, "CHECK: Max(%x, %lo)\nCHECK-NEXT: %y = Min(%clamp/max, %hi) : undefined[*] @\"clamp\""), "");
  const Tensor x = awkward_values();
  expect_clipped(run_after(r, {x}), x, -1.0f, 2.0f);
}

TEST(DecomposeOps, ClipBoundsAsAttributesOneBoundOrNone) {
  auto attributes = decompose(R"(graph "t" {
  opset "" 10
  input %x : f32[batch,5]
  %y = Clip(%x) {min = 0.5f} @"floor_only"
  output %y
})");
  EXPECT_EQ(check_lines(attributes.printed, "CHECK: %y = Max(%x, %floor_only/min) : undefined[*] @\"floor_only\"\nCHECK-NOT: Min("), "");
  const Tensor x = awkward_values();
  expect_clipped(run_after(attributes, {x}), x, 0.5f, std::numeric_limits<float>::infinity());
  auto upper = decompose(R"(graph "t" {
  opset "" 13
  input %x : f32[batch,5]
  init %hi : f32[] = [0]
  %y = Clip(%x, _, %hi) @"ceiling_only"
  output %y
})");
  EXPECT_EQ(check_lines(upper.printed, "CHECK: %y = Min(%x, %hi)"), "");
  expect_clipped(run_after(upper, {x}), x, -std::numeric_limits<float>::infinity(), 0.0f);
  auto none = decompose(R"(graph "t" {
  opset "" 13
  input %x : f32[batch,5]
  %y = Clip(%x) @"no_bounds"
  output %y
})");
  EXPECT_EQ(check_lines(none.printed, "CHECK: %y = Identity(%x)"), "");
}

/// BatchNormalization of x [N, C, ...] with random statistics: the formula in double.
void expect_batch_norm_matches(const Shape& x_shape, unsigned seed) {
  SCOPED_TRACE(shape_to_string(x_shape));
  const int64_t channels = x_shape[1];
  std::mt19937 rng(seed);
  const Tensor gamma = testing::random_tensor(rng, {channels}), beta = testing::random_tensor(rng, {channels});
  const Tensor mean = testing::random_tensor(rng, {channels});
  const Tensor variance = testing::random_tensor(rng, {channels}, 0.1f, 2.0f);
  const auto values = [](const Tensor& t) {
    std::string out = "[";
    for (float v : t.to_floats()) out += (out.size() > 1 ? ", " : "") + std::to_string(v);
    return out + "]";
  };
  std::string dims;
  for (size_t d = 1; d < x_shape.size(); ++d) dims += "," + std::to_string(x_shape[d]);
  const std::string c = "f32[" + std::to_string(channels) + "]";
  auto r = decompose("graph \"t\" {\n  opset \"\" 15\n  input %x : f32[batch" + dims + "]\n  init %g : " + c + " = " +
                     values(gamma) + "\n  init %b : " + c + " = " + values(beta) + "\n  init %m : " + c + " = " +
                     values(mean) + "\n  init %v : " + c + " = " + values(variance) +
                     "\n  %y = BatchNormalization(%x, %g, %b, %m, %v) {epsilon = 0.001f} @\"bn\"\n  output %y\n}\n");
  EXPECT_EQ(r.run.statistics["batch-norms-decomposed"], 1);
  EXPECT_EQ(check_lines(r.printed, "CHECK: Mul(%x, %bn/scale)\nCHECK-NEXT: %y = Add(%bn/scale_1, %bn/shift) : undefined[*] @\"bn\""), "");
  const Tensor x = testing::random_tensor(rng, x_shape, -3.0f, 3.0f);
  const Tensor y = run_after(r, {x});
  ASSERT_EQ(y.shape(), x_shape);
  // The parameters as the graph text stored them (printed with 6 digits).
  const std::vector<float> g = gamma.to_floats(), b = beta.to_floats(), mu = mean.to_floats(), var = variance.to_floats();
  const int64_t inner = element_count(x_shape) / (x_shape[0] * channels);
  const std::vector<float> in = x.to_floats(), out = y.to_floats();
  float worst = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const size_t ch = static_cast<size_t>((static_cast<int64_t>(i) / inner) % channels);
    const float gc = std::stof(std::to_string(g[ch])), bc = std::stof(std::to_string(b[ch]));
    const float mc = std::stof(std::to_string(mu[ch])), vc = std::stof(std::to_string(var[ch]));
    const double expected = (in[i] - static_cast<double>(mc)) / std::sqrt(static_cast<double>(vc) + 0.001) * gc + bc;
    worst = std::max(worst, static_cast<float>(std::fabs(out[i] - expected)));
  }
  EXPECT_LE(worst, 2e-6f);
}

TEST(DecomposeOps, InferenceBatchNormBecomesMulAddBroadcastAlongChannels) {
  expect_batch_norm_matches({4, 6}, 1);
  expect_batch_norm_matches({2, 3, 4, 5}, 2);
}

/// Runs the one-node graph `op_line` (reading %x : f32[2,5] and %y out) decomposed, on the
/// awkward values; expects `formula` elementwise (NaN where it gives NaN).
void expect_elementwise(const std::string& op_line, const std::string& statistic, float (*formula)(float),
                        const std::string& extra = "") {
  SCOPED_TRACE(op_line);
  auto r = decompose("graph \"t\" {\n  opset \"\" 17\n  input %x : f32[2,5]\n" + extra + "  " + op_line +
                     "\n  output %y\n}\n");
  EXPECT_EQ(r.run.statistics[statistic], 1);
  const std::string op = op_line.substr(op_line.find('=') + 2, op_line.find('(') - op_line.find('=') - 2);
  EXPECT_EQ(check_lines(r.printed, "CHECK-NOT: " + op + "("), "");
  const Tensor x = awkward_values();
  const std::vector<float> in = x.to_floats(), out = run_after(r, {x}).to_floats();
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const float want = formula(in[i]);
    if (std::isnan(want)) EXPECT_TRUE(std::isnan(out[i])) << "element " << i;
    else EXPECT_EQ(out[i], want) << "element " << i << " = " << in[i];
  }
}

/// ONNX's clip to [0, 1] (numpy's: NaN stays NaN).
float clip01(float v) { return std::isnan(v) ? v : std::max(0.0f, std::min(1.0f, v)); }

TEST(DecomposeOps, PReluHardSigmoidAndHardSwishMatchTheirOnnxFormulas) {
  expect_elementwise("%y = PRelu(%x, %slope) @\"act\"", "prelus-decomposed",
                     [](float x) { return x < 0 ? 0.25f * x : x; }, "  init %slope : f32[1] = [0.25]\n");
  expect_elementwise("%y = HardSigmoid(%x) {alpha = 0.3f, beta = 0.4f} @\"gate\"", "hard-sigmoids-decomposed",
                     [](float x) { return clip01(x * 0.3f + 0.4f); });
  expect_elementwise("%y = LeakyRelu(%x) {alpha = 0.125f} @\"leaky\"", "leaky-relus-decomposed",
                     [](float x) { return x < 0 ? 0.125f * x : x; });
  expect_elementwise("%y = HardSwish(%x) @\"gate\"", "hard-swishes-decomposed",
                     [](float x) { return x * clip01(x * (1.0f / 6.0f) + 0.5f); });
}

TEST(DecomposeOps, SumAndMeanBecomeAddChainsInInputOrder) {
  auto r = decompose(R"(graph "t" {
  opset "" 17
  input %a : f32[2,3]
  input %b : f32[2,3]
  input %c : f32[3]
  %s = Sum(%a, %b, %c) @"sum"
  %m = Mean(%a, %b, %c) @"mean"
  output %s
  output %m
})");
  EXPECT_EQ(check_lines(r.printed, "CHECK: Add(%a, %b)\nCHECK: %s = Add(%sum/add, %c) : undefined[*] @\"sum\"\n"
                                   "CHECK: %m = Div(%mean/add_1, %mean/count)"),
            "");
  std::mt19937 rng(5);
  const Tensor a = testing::random_tensor(rng, {2, 3}), b = testing::random_tensor(rng, {2, 3});
  const Tensor c = testing::random_tensor(rng, {3});
  auto outputs = testing::run_graph(*r.after, {a, b, c});
  ASSERT_TRUE(outputs) << outputs.status().message();
  const std::vector<float> va = a.to_floats(), vb = b.to_floats(), vc = c.to_floats();
  const std::vector<float> sum = (*outputs)[0].to_floats(), mean = (*outputs)[1].to_floats();
  for (size_t i = 0; i < 6; ++i) {
    const float s = (va[i] + vb[i]) + vc[i % 3];
    EXPECT_EQ(sum[i], s) << i;
    EXPECT_EQ(mean[i], s / 3.0f) << i;
  }
}

/// A Split of x [batch, 12] along axis 1 (`split` the node's text after the input) whose
/// pieces each feed a Relu that is a graph output.
std::string split_graph(int opset, const std::string& split, size_t pieces, const std::string& extra = "") {
  std::string outs, text = "graph \"t\" {\n  opset \"\" " + std::to_string(opset) + "\n  input %x : f32[batch,12]\n" + extra;
  for (size_t i = 0; i < pieces; ++i) outs += (i ? ", %p" : "%p") + std::to_string(i);
  text += "  " + outs + " = Split(%x" + split + " @\"qkv\"\n";
  for (size_t i = 0; i < pieces; ++i)
    text += "  %y" + std::to_string(i) + " = Relu(%p" + std::to_string(i) + ") @\"r" + std::to_string(i) + "\"\n";
  for (size_t i = 0; i < pieces; ++i) text += "  output %y" + std::to_string(i) + "\n";
  return text + "}\n";
}

TEST(DecomposeOps, SplitBecomesOneSlicePerPieceInEveryForm) {
  for (const auto& [text, pieces] : std::vector<std::pair<std::string, size_t>>{
           {split_graph(13, ", %sizes) {axis = 1}", 3, "  init %sizes : i64[3] = [2, 6, 4]\n"), 3},  // sizes input
           {split_graph(11, ") {axis = -1, split = ints[5, 7]}", 2), 2},                            // attribute
           {split_graph(13, ") {axis = 1}", 3), 3},                                                  // even
           {split_graph(18, ") {axis = 1, num_outputs = 5}", 5), 5}}) {                              // last smaller
    SCOPED_TRACE(text);
    auto r = decompose(text);
    EXPECT_EQ(r.run.statistics["splits-decomposed"], 1);
    std::string checks = "CHECK-NOT: Split(";
    for (size_t i = 0; i < pieces; ++i) checks += "\nCHECK: Slice(%x";
    EXPECT_EQ(check_lines(r.printed, checks), "");
    testing::expect_outputs_within(r, 0.0f, {1, 3});
  }
}

TEST(DecomposeOps, NegativeTwinsStayAndAreCounted) {
  auto variable = decompose(R"(graph "t" {
  opset "" 15
  input %x : f32[batch,3]
  input %m : f32[3]
  init %g : f32[3] = [1, 1, 1]
  init %b : f32[3] = [0, 0, 0]
  init %v : f32[3] = [1, 1, 1]
  %y = BatchNormalization(%x, %g, %b, %m, %v) @"bn"
  output %y
})");
  EXPECT_FALSE(variable.run.changed);
  EXPECT_EQ(variable.run.statistics["batch-norms-kept"], 1);
  auto training = decompose(R"(graph "t" {
  opset "" 15
  input %x : f32[batch,3]
  init %g : f32[3] = [1, 1, 1]
  init %b : f32[3] = [0, 0, 0]
  init %m : f32[3] = [0, 0, 0]
  init %v : f32[3] = [1, 1, 1]
  %y = BatchNormalization(%x, %g, %b, %m, %v) {training_mode = 1} @"bn"
  output %y
})");
  EXPECT_FALSE(training.run.changed);
  auto vector_bound = decompose(R"(graph "t" {
  opset "" 13
  input %x : f32[batch,2]
  init %lo : f32[2] = [0, 1]
  %y = Clip(%x, %lo) @"clamp"
  output %y
})");
  EXPECT_FALSE(vector_bound.run.changed);
  // A Split whose piece is a graph output keeps its name there; an even split of an unknown size.
  auto graph_output = decompose(R"(graph "t" {
  opset "" 13
  input %x : f32[batch,4]
  %a, %b = Split(%x) {axis = 1} @"halves"
  %y = Relu(%a) @"r"
  output %y
  output %b
})");
  EXPECT_FALSE(graph_output.run.changed);
  EXPECT_EQ(graph_output.run.statistics["splits-kept"], 1);
  auto unknown = decompose(R"(graph "t" {
  opset "" 13
  input %x : f32[batch,width]
  %a, %b = Split(%x) {axis = 1} @"halves"
  %y = Add(%a, %b) @"sum"
  output %y
})");
  EXPECT_FALSE(unknown.run.changed);
  EXPECT_EQ(vector_bound.run.statistics["clips-kept"], 1);
  EXPECT_EQ(check_lines(vector_bound.printed, "CHECK: Clip(%x, %lo)"), "");
}

}  // namespace
}  // namespace loka
