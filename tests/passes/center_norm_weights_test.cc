// ============================================================================
// tests/passes/center_norm_weights_test.cc — `center-norm-weights`: golden IR
// rewrites with negative twins, exactness on random weights and on the zoo,
// and a planted common-mode site the Probe calls unsafe before and safe after.
// ============================================================================
#include <gtest/gtest.h>

#include <cmath>

#include "canonicalize_test_util.h"
#include "mods_test_util.h"
#include "passes/ir/text_format.h"
#include "test_support.h"

namespace loka {
namespace {

/// Runs the pass on `input` (IR text); the printed result, and whether it reported a change.
std::pair<std::string, bool> center(const std::string& input) {
  auto graph = ir::parse_graph(input);
  EXPECT_TRUE(graph) << graph.status().message();
  if (!graph) return {"", false};
  auto records = testing::run_pipeline(**graph, "center-norm-weights");
  EXPECT_TRUE(records) << records.status().message();
  if (!records) return {"", false};
  return {ir::print_graph(**graph), records->at(0).changed};
}

/// Expects the pass to leave `input` exactly as it was and to say so.
void expect_unchanged(const std::string& input) {
  const auto [output, changed] = center(input);
  EXPECT_FALSE(changed);
  EXPECT_EQ(output, testing::canonical_ir(input));
}

// ------------------------------------------------------------------ golden --

/// x[batch,2] -> Gemm "fc" (%w, declared by `weight`) -> LayerNorm "norm" -> y;
/// `extra` adds nodes and outputs (listed before y's).
std::string gemm_into_norm(const std::string& extra, const std::string& weight = "init %w : f32[2,3] = [1, 2, 3, 10, 20, 30]") {
  return R"(graph "t" {
  opset "" 17
  input %x : f32[batch,2]
  )" + weight + R"(
  init %gamma : f32[3] = [1, 1, 1]
  %h = Gemm(%x, %w) : f32[batch,3] @"fc"
  %y = LayerNormalization(%h, %gamma) : f32[batch,3] @"norm"
)" + extra + R"(  output %y
})";
}


constexpr const char* kGemmIntoNorm = R"(graph "t" {
  opset "" 17
  input %x : f32[batch,2]
  init %w : f32[2,3] = [1, 2, 3, 10, 20, 30]
  init %b : f32[3] = [4, 5, 6]
  init %gamma : f32[3] = [1, 1, 1]
  init %beta : f32[3] = [0, 0, 0]
  %h = Gemm(%x, %w, %b) : f32[batch,3] @"fc"
  %y = LayerNormalization(%h, %gamma, %beta) {axis = -1} : f32[batch,3] @"norm"
  output %y
})";

TEST(CenterNormWeights, GemmIntoLayerNormLosesItsCommonMode) {
  const auto [output, changed] = center(kGemmIntoNorm);
  EXPECT_TRUE(changed);
  // CHECK: row means 2 and 20 leave W; the bias mean 5 leaves b; nothing else moves.
  EXPECT_EQ(output, testing::canonical_ir(R"(graph "t" {
  opset "" 17
  input %x : f32[batch,2]
  init %w : f32[2,3] = [-1, 0, 1, -10, 0, 10]
  init %b : f32[3] = [-1, 0, 1]
  init %gamma : f32[3] = [1, 1, 1]
  init %beta : f32[3] = [0, 0, 0]
  %h = Gemm(%x, %w, %b) : f32[batch,3] @"fc"
  %y = LayerNormalization(%h, %gamma, %beta) {axis = -1} : f32[batch,3] @"norm"
  output %y
})"));
  // Already centred: a second run changes nothing.
  expect_unchanged(output);
}

TEST(CenterNormWeights, TransposedWeightsAreCentredPerInputColumn) {
  const auto [output, changed] = center(R"(graph "t" {
  opset "" 17
  input %x : f32[batch,2]
  init %w : f32[3,2] = [1, 10, 2, 20, 3, 30]
  init %gamma : f32[3] = [1, 1, 1]
  %h = Gemm(%x, %w) {transB = 1} : f32[batch,3] @"fc"
  %y = LayerNormalization(%h, %gamma) : f32[batch,3] @"norm"
  output %y
})");
  EXPECT_TRUE(changed);
  EXPECT_EQ(output, testing::canonical_ir(R"(graph "t" {
  opset "" 17
  input %x : f32[batch,2]
  init %w : f32[3,2] = [-1, -10, 0, 0, 1, 10]
  init %gamma : f32[3] = [1, 1, 1]
  %h = Gemm(%x, %w) {transB = 1} : f32[batch,3] @"fc"
  %y = LayerNormalization(%h, %gamma) : f32[batch,3] @"norm"
  output %y
})"));
}

TEST(CenterNormWeights, MatMulThenConstantAddIsCentredToo) {
  const auto [output, changed] = center(R"(graph "t" {
  opset "" 17
  input %x : f32[batch,4,2]
  init %w : f32[2,3] = [0, 3, 6, 1, 1, 4]
  init %c : f32[3] = [1, 2, 6]
  init %gamma : f32[3] = [1, 1, 1]
  %h = MatMul(%x, %w) : f32[batch,4,3] @"mm"
  %s = Add(%c, %h) : f32[batch,4,3] @"bias"
  %y = LayerNormalization(%s, %gamma) {axis = 2} : f32[batch,4,3] @"norm"
  output %y
})");
  EXPECT_TRUE(changed);
  EXPECT_EQ(output, testing::canonical_ir(R"(graph "t" {
  opset "" 17
  input %x : f32[batch,4,2]
  init %w : f32[2,3] = [-3, 0, 3, -1, -1, 2]
  init %c : f32[3] = [-2, -1, 3]
  init %gamma : f32[3] = [1, 1, 1]
  %h = MatMul(%x, %w) : f32[batch,4,3] @"mm"
  %s = Add(%c, %h) : f32[batch,4,3] @"bias"
  %y = LayerNormalization(%s, %gamma) {axis = 2} : f32[batch,4,3] @"norm"
  output %y
})"));
}

TEST(CenterNormWeights, SharedWeightsAreCopiedForTheCentredGemmOnly) {
  const std::string other = "  %z = Gemm(%x, %w) : f32[batch,3] @\"other\"\n  output %z\n";
  const auto [output, changed] = center(gemm_into_norm(other));
  EXPECT_TRUE(changed);
  // CHECK: "fc" reads a centred copy; "other" keeps the original weights.
  std::string expected = gemm_into_norm(other);
  expected.replace(expected.find("%h = Gemm(%x, %w)"), 17, "%h = Gemm(%x, %w_centered)");
  expected.replace(expected.find("  %h ="), 0, "  init %w_centered : f32[2,3] = [-1, 0, 1, -10, 0, 10]\n");
  EXPECT_EQ(output, testing::canonical_ir(expected));
}

// ---------------------------------------------------------- negative twins --

TEST(CenterNormWeights, NoRewriteWhenTheGemmOutputHasAnotherReader) {
  expect_unchanged(gemm_into_norm("  %r = Relu(%h) : f32[batch,3] @\"relu\"\n  output %r\n"));
  expect_unchanged(gemm_into_norm("  output %h\n"));
  // The twin: the same graph without the second reader is rewritten.
  EXPECT_TRUE(center(gemm_into_norm("")).second);
}

TEST(CenterNormWeights, NoRewriteWhenTheLayerNormIsOverAnotherAxis) {
  expect_unchanged(R"(graph "t" {
  opset "" 17
  input %x : f32[4,2]
  init %w : f32[2,3] = [1, 2, 3, 10, 20, 30]
  init %gamma : f32[4,3] = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]
  %h = Gemm(%x, %w) : f32[4,3] @"fc"
  %y = LayerNormalization(%h, %gamma) {axis = 0} : f32[4,3] @"norm"
  output %y
})");
}

TEST(CenterNormWeights, NoRewriteWhenTheWeightsAreNotConstant) {
  expect_unchanged(gemm_into_norm("", "input %w : f32[2,3]"));
}

TEST(CenterNormWeights, NoRewriteThroughAResidualAdd) {
  expect_unchanged(R"(graph "t" {
  opset "" 17
  input %x : f32[batch,3]
  init %w : f32[3,3] = [1, 2, 3, 10, 20, 30, 0, 0, 3]
  init %gamma : f32[3] = [1, 1, 1]
  %h = Gemm(%x, %w) : f32[batch,3] @"fc"
  %s = Add(%h, %x) : f32[batch,3] @"residual"
  %y = LayerNormalization(%s, %gamma) : f32[batch,3] @"norm"
  output %y
})");
}

// --------------------------------------------------------------- numerics --

/// x[batch,16] -> Gemm(W1 16x32, b1) -> LayerNorm -> Gemm(W2 32x8) -> y. With
/// `common_mode`, W1 row k carries +a_k on every output and b1 carries +25, as
/// in the Probe's planted model (tests/passes/probe_test.cc).
std::unique_ptr<ir::Graph> planted_model(bool common_mode, std::mt19937& rng) {
  auto [w1, b1] = testing::planted_gemm_weights(rng, common_mode);
  const Tensor gamma = testing::random_tensor(rng, {32}, 0.5f, 1.5f);
  const Tensor beta = testing::random_tensor(rng, {32}, -0.2f, 0.2f);
  const Tensor w2 = testing::random_tensor(rng, {32, 8}, -0.3f, 0.3f);
  return testing::ChainBuilder(16).gemm("planted", w1, b1).layer_norm("norm", gamma, beta).gemm("head", w2).finish();
}

/// The planted model evaluated in float64 straight from its initializers.
std::vector<double> float64_reference(const ir::Graph& graph, const Tensor& x) {
  const auto data = [&graph](const char* name) { return graph.find_value(name)->initializer()->to_floats(); };
  const std::vector<float> w1 = data("planted_w"), b1 = data("planted_b"), gamma = data("norm_gamma"),
                           beta = data("norm_beta"), w2 = data("head_w");
  const int64_t rows = x.dim(0);
  std::vector<double> y(static_cast<size_t>(rows * 8), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> h(32);
    for (int n = 0; n < 32; ++n) {
      h[n] = b1[n];
      for (int k = 0; k < 16; ++k) h[n] += static_cast<double>(x.data<float>()[r * 16 + k]) * w1[k * 32 + n];
    }
    double mean = 0, var = 0;
    for (double v : h) mean += v / 32;
    for (double v : h) var += (v - mean) * (v - mean) / 32;
    for (int n = 0; n < 32; ++n) {
      const double normed = (h[n] - mean) / std::sqrt(var + 1e-5) * gamma[n] + beta[n];
      for (int j = 0; j < 8; ++j) y[r * 8 + j] += normed * w2[n * 8 + j];
    }
  }
  return y;
}

double max_error(const std::vector<double>& exact, const Tensor& actual) {
  double worst = 0;
  for (size_t i = 0; i < exact.size(); ++i) worst = std::max(worst, std::fabs(exact[i] - actual.data<float>()[i]));
  return worst;
}

TEST(CenterNormWeights, CentredModelComputesTheSameAndPlantedSiteBecomesSafe) {
  std::mt19937 rng(5);
  auto graph = planted_model(/*common_mode=*/true, rng);
  const auto calib = testing::write_random_inputs(rng, "x", {64, 16}, 6);
  auto before = testing::probe_graph(*graph, calib, "batches=6", "rel_l2=0.05");
  ASSERT_TRUE(before) << before.status().message();
  EXPECT_EQ((*before)["nodes"]["planted"]["verdict"], "unsafe") << (*before)["nodes"]["planted"].dump();

  auto centred = graph->clone();
  auto records = testing::run_pipeline(*centred, "center-norm-weights");
  ASSERT_TRUE(records) << records.status().message();
  EXPECT_TRUE(records->at(0).changed);
  EXPECT_EQ(records->at(0).statistics.at("gemms-centered"), 1.0);
  // Exact: against a float64 evaluation of the original model, the centred one is
  // within 1e-5 and no worse than the original (whose LayerNorm cancels a common
  // mode of ~1000 in FP32 and so loses digits the centred model keeps).
  const Tensor x = testing::random_tensor(rng, {64, 16});
  const std::vector<double> exact = float64_reference(*graph, x);
  auto original_out = testing::run_graph(*graph, {x});
  auto centred_out = testing::run_graph(*centred, {x});
  ASSERT_TRUE(original_out && centred_out);
  const double centred_error = max_error(exact, (*centred_out)[0]);
  EXPECT_LE(centred_error, 1e-5);
  EXPECT_LE(centred_error, max_error(exact, (*original_out)[0]));

  auto after = testing::probe_graph(*centred, calib, "batches=6", "rel_l2=0.05");
  ASSERT_TRUE(after) << after.status().message();
  EXPECT_EQ((*after)["nodes"]["planted"]["verdict"], "safe") << (*after)["nodes"]["planted"].dump();
  EXPECT_LT((*after)["nodes"]["planted"]["error"]["rel_l2_mean"].get<double>(),
            (*before)["nodes"]["planted"]["error"]["rel_l2_mean"].get<double>() / 4);
}

TEST(CenterNormWeights, RandomShapesStayExact) {
  std::mt19937 rng(11);
  for (const auto& [k, n, trans_b] : {std::tuple{1, 2, 0}, {7, 5, 1}, {33, 17, 0}, {3, 64, 1}, {4, 1, 0}}) {
    Tensor w = testing::random_tensor(rng, trans_b ? Shape{n, k} : Shape{k, n}, -2.0f, 2.0f);
    for (float& v : w.values<float>()) v += 3.0f;
    ir::Graph g;
    g.opsets[""] = 17;
    g.add_input(g.add_value("x", {DType::kFloat32, std::vector<ir::Dim>{ir::Dim::named("batch"), ir::Dim::known(k)}}));
    ir::Node* gemm = g.add_node("Gemm", {g.find_value("x"), g.add_initializer("w", w),
                                         g.add_initializer("b", testing::random_tensor(rng, {n}, 5.0f, 6.0f))}, 1, "fc");
    gemm->mutable_attributes().set("transB", int64_t{trans_b});
    ir::Node* norm = g.add_node("LayerNormalization", {gemm->output(0), g.add_initializer("gamma", testing::random_tensor(rng, {n}))}, 1, "norm");
    g.add_output(norm->output(0));
    auto centred = g.clone();
    auto records = testing::run_pipeline(*centred, "center-norm-weights");
    ASSERT_TRUE(records) << records.status().message();
    EXPECT_EQ(records->at(0).changed, n >= 2) << "k=" << k << " n=" << n;
    auto difference = testing::max_output_difference(g, *centred, /*batch=*/9);
    ASSERT_TRUE(difference) << difference.status().message();
    EXPECT_LE(*difference, 1e-5f) << "k=" << k << " n=" << n;
  }
}

class CenterNormWeightsZoo : public ::testing::TestWithParam<std::string> {};

TEST_P(CenterNormWeightsZoo, OutputsWithin1e5OnEvalData) {
  auto graph = testing::load_zoo_model(GetParam());
  ASSERT_TRUE(graph) << graph.status().message();
  auto rewritten = (*graph)->clone();
  auto records = testing::run_pipeline(*rewritten, "center-norm-weights");
  ASSERT_TRUE(records) << records.status().message();
  auto difference = testing::max_output_difference_on_data(**graph, *rewritten, testing::source_dir() / "models" / "zoo" / GetParam() / "eval", 2);
  ASSERT_TRUE(difference) << difference.status().message();
  EXPECT_LE(*difference, 1e-5f);
}

INSTANTIATE_TEST_SUITE_P(Zoo, CenterNormWeightsZoo, ::testing::ValuesIn(testing::zoo_model_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace loka
