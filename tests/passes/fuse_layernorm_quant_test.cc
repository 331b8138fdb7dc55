// ============================================================================
// tests/passes/fuse_layernorm_quant_test.cc — `fuse-layernorm-quant`: golden
// IR (CHECK lines) with negative twins, annotations, and the fused model on
// the CPU runtime against the unfused one: bit-identical with one shared
// scale, within FP8 resolution where the consumers' scales differed.
// ============================================================================
#include <gtest/gtest.h>

#include <cmath>

#include "canonicalize_test_util.h"
#include "loka/float8.h"
#include "mods_test_util.h"
#include "passes/ir/text_format.h"
#include "passes/probe/annotations.h"
#include "test_support.h"

namespace loka {
namespace {

/// LayerNorm read by two per-tensor QuantizedGemms with X_scales 0.5 and 0.25;
/// `extra` adds lines (another reader, an output) before the outputs.
std::string norm_into_gemms(const std::string& second_attributes = "", const std::string& extra = "") {
  return R"(graph "t" {
  opset "" 17
  opset "ai.loka" 1
  input %x : f32[batch,4]
  init %gamma : f32[4] = [1, 2, 1, 0.5]
  init %beta : f32[4] = [0, 0.5, 0, 0]
  init %w0 : f8e4m3fn[2,4] = [0x38, 0x40, 0xb8, 0x30, 0x38, 0x38, 0x38, 0x38]
  init %ws0 : f32[2] = [1, 0.5]
  init %b0 : f32[2] = [0.25, -1]
  init %xs0 : f32[] = [0.5]
  init %w1 : f8e4m3fn[1,4] = [0x40, 0xc0, 0x38, 0x00]
  init %ws1 : f32[1] = [2]
  init %xs1 : f32[1] = [0.25]
  %n = LayerNormalization(%x, %gamma, %beta) {axis = -1, epsilon = 0.001f} : f32[batch,4] @"norm"
  %a = ai.loka::QuantizedGemm(%n, %w0, %ws0, %b0, %xs0) : f32[batch,2] @"q0"
  %b = ai.loka::QuantizedGemm(%n, %w1, %ws1, _, %xs1))" + second_attributes + R"( : f32[batch,1] @"q1"
)" + extra + R"(  output %a
  output %b
})";
}

using testing::Fusion;

Fusion fuse(const std::string& input) { return testing::apply_fusion(input, "fuse-layernorm-quant"); }

void expect_unchanged(const std::string& input) { testing::expect_fusion_unchanged(input, "fuse-layernorm-quant"); }

// ------------------------------------------------------------------ golden --

TEST(FuseLayerNormQuant, NormReadByTensorRecipeGemmsBecomesLayerNormQuant) {
  const Fusion result = fuse(norm_into_gemms());
  EXPECT_TRUE(result.changed);
  EXPECT_EQ(result.statistics.at("norms-fused"), 1.0);
  EXPECT_EQ(result.statistics.at("gemms-fed"), 2.0);
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK-NOT: %xs0
CHECK-NOT: %xs1
CHECK: init %norm_y_scale : f32[] = [0.5]
CHECK-NOT: LayerNormalization
CHECK: %n_fp8 = ai.loka::LayerNormQuant(%x, %gamma, %beta, %norm_y_scale) {epsilon = 0.00100000005f} : f8e4m3fn[batch,4] @"norm"
CHECK-NEXT: %a = ai.loka::QuantizedGemm(%n_fp8, %w0, %ws0, %b0, %norm_y_scale) : f32[batch,2] @"q0"
CHECK-NEXT: %b = ai.loka::QuantizedGemm(%n_fp8, %w1, %ws1, _, %norm_y_scale) : f32[batch,1] @"q1"
CHECK-NEXT: output %a
)"),
            "")
      << result.printed;
  const auto& entry = result.annotations["nodes"]["norm"];
  EXPECT_EQ(entry["from"], nlohmann::json::array({"norm"}));
  EXPECT_EQ(entry["op"], "LayerNormQuant");
  EXPECT_EQ(entry["precision"], "fp8_e4m3");
  EXPECT_EQ(entry["y_scale"].get<double>(), 0.5);
}

TEST(FuseLayerNormQuant, ExplicitTensorRecipeAndAbsentOpsetImportAreFine) {
  std::string input = norm_into_gemms(" {act_recipe = \"tensor\"}");
  input.erase(input.find("  opset \"ai.loka\" 1\n"), std::string("  opset \"ai.loka\" 1\n").size());
  const Fusion result = fuse(input);
  EXPECT_TRUE(result.changed);
  EXPECT_NE(result.printed.find("opset \"ai.loka\" 1"), std::string::npos) << result.printed;
}

// ---------------------------------------------------------- negative twins --

TEST(FuseLayerNormQuant, NoFusionWhenOneReaderIsNotAQuantizedGemm) {
  expect_unchanged(norm_into_gemms("", "  %r = Relu(%n) : f32[batch,4] @\"relu\"\n  output %r\n"));
}

TEST(FuseLayerNormQuant, NoFusionWhenOneReaderQuantizesPerRow) {
  expect_unchanged(norm_into_gemms(" {act_recipe = \"row\"}"));
}

TEST(FuseLayerNormQuant, NoFusionWhenTheNormIsAGraphOutput) {
  expect_unchanged(norm_into_gemms("", "  output %n\n"));
}

TEST(FuseLayerNormQuant, NoFusionWhenAScaleIsNotConstantOrTheAxisIsNotLast) {
  std::string variable_scale = norm_into_gemms();
  variable_scale.replace(variable_scale.find("  init %xs1 : f32[1] = [0.25]"), 29, "  input %xs1 : f32[1]");
  expect_unchanged(variable_scale);
  expect_unchanged(R"(graph "t" {
  opset "" 17
  opset "ai.loka" 1
  input %x : f32[4,4]
  init %gamma : f32[4,4] = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]
  init %w0 : f8e4m3fn[1,4] = [0x38, 0x40, 0xb8, 0x30]
  init %ws0 : f32[1] = [1]
  init %xs0 : f32[] = [0.5]
  %n = LayerNormalization(%x, %gamma) {axis = 0} : f32[4,4] @"norm"
  %a = ai.loka::QuantizedGemm(%n, %w0, %ws0, _, %xs0) : f32[4,1] @"q0"
  output %a
})");
}

// --------------------------------------------------------------- numerics --

/// E4M3 codes of `w` [N, K] with one scale per output row (amax / 448), and the scales.
std::pair<Tensor, Tensor> quantize_weights(const Tensor& w) {
  const int64_t n = w.dim(0), k = w.dim(1);
  Tensor codes = Tensor::zeros(DType::kFloat8E4M3FN, {n, k});
  Tensor scales = Tensor::zeros(DType::kFloat32, {n});
  for (int64_t row = 0; row < n; ++row) {
    float amax = 0;
    for (int64_t j = 0; j < k; ++j) amax = std::max(amax, std::fabs(w.data<float>()[row * k + j]));
    const float scale = amax > 0 ? amax / 448.0f : 1.0f;
    scales.data<float>()[row] = scale;
    for (int64_t j = 0; j < k; ++j) codes.data<uint8_t>()[row * k + j] = float_to_fp8e4m3fn(w.data<float>()[row * k + j] / scale);
  }
  return {codes, scales};
}

/// x[batch, rows, k] -> LayerNorm -> one QuantizedGemm per entry of `gemms` ({N, X_scale}).
std::unique_ptr<ir::Graph> norm_feeding_gemms(std::mt19937& rng, int64_t rows, int64_t k,
                                              const std::vector<std::pair<int64_t, float>>& gemms) {
  auto graph = std::make_unique<ir::Graph>();
  graph->opsets[""] = 17;
  graph->opsets["ai.loka"] = 1;
  ir::Value* x = graph->add_value(
      "x", {DType::kFloat32, std::vector<ir::Dim>{ir::Dim::named("batch"), ir::Dim::known(rows), ir::Dim::known(k)}});
  graph->add_input(x);
  ir::Node* norm = graph->add_node("LayerNormalization", {x, graph->add_initializer("gamma", testing::random_tensor(rng, {k}, 0.5f, 2.0f)),
                                                          graph->add_initializer("beta", testing::random_tensor(rng, {k}, -0.5f, 0.5f))},
                                   1, "norm");
  norm->output(0)->set_type({DType::kFloat32, x->type().shape});
  for (size_t i = 0; i < gemms.size(); ++i) {
    const auto [n, x_scale] = gemms[i];
    const auto [codes, scales] = quantize_weights(testing::random_tensor(rng, {n, k}));
    const std::string id = std::to_string(i);
    ir::Node* gemm = graph->add_node("QuantizedGemm",
                                     {norm->output(0), graph->add_initializer("w" + id, codes), graph->add_initializer("ws" + id, scales),
                                      graph->add_initializer("b" + id, testing::random_tensor(rng, {n})),
                                      graph->add_initializer("xs" + id, Tensor::scalar_float(x_scale))},
                                     1, "gemm" + id, "ai.loka");
    graph->add_output(gemm->output(0));
  }
  return graph;
}

TEST(FuseLayerNormQuant, OneSharedScaleComputesBitForBitTheSame) {
  std::mt19937 rng(31);
  for (const auto& [rows, k] : {std::pair<int64_t, int64_t>{1, 4}, {3, 17}, {5, 64}, {2, 3}}) {
    // LayerNorm outputs here stay within |gamma|·sqrt(k) + |beta|: one calibrated scale for all readers.
    const float scale = (2.0f * std::sqrt(static_cast<float>(k)) + 0.5f) / 448.0f;
    auto graph = norm_feeding_gemms(rng, rows, k, {{7, scale}, {1, scale}, {16, scale}});
    auto fused = graph->clone();
    auto records = testing::run_pipeline(*fused, "fuse-layernorm-quant");
    ASSERT_TRUE(records) << records.status().message();
    ASSERT_TRUE(records->at(0).changed);
    auto difference = testing::max_output_difference(*graph, *fused, /*batch=*/6, /*seed=*/static_cast<unsigned>(k));
    ASSERT_TRUE(difference) << difference.status().message();
    EXPECT_EQ(*difference, 0.0f) << "rows=" << rows << " k=" << k;
  }
}

TEST(FuseLayerNormQuant, DifferentScalesShareTheLargestWithoutSaturating) {
  std::mt19937 rng(37);
  const int64_t k = 24;
  const float wide = 12.0f / 448.0f;   // covers every LayerNorm output here
  const float narrow = 1.5f / 448.0f;  // would clip: the fused node must not use it
  auto graph = norm_feeding_gemms(rng, 2, k, {{8, narrow}, {5, wide}});
  auto fused = graph->clone();
  ASSERT_TRUE(testing::run_pipeline(*fused, "fuse-layernorm-quant"));
  const Tensor x = testing::random_tensor(rng, {4, 2, k}, -3.0f, 3.0f);
  auto before = testing::run_graph(*graph, {x});
  auto after = testing::run_graph(*fused, {x});
  ASSERT_TRUE(before && after) << (before ? after.status() : before.status()).message();
  // The reader calibrated with the shared (largest) scale sees exactly what it saw.
  EXPECT_EQ(testing::max_abs_difference((*before)[1], (*after)[1]), 0.0f);
  // The other now reads unclipped values: the fused result is the float GEMM's
  // to FP8 accuracy, whereas its own narrow scale saturated.
  double error_after = 0, error_before = 0, norm = 0;
  const float* y_after = (*after)[0].data<float>();
  const float* y_before = (*before)[0].data<float>();
  // A float evaluation of reader 0: LayerNorm in double, weights dequantized.
  const Tensor& gamma = *graph->find_value("gamma")->initializer();
  const Tensor& beta = *graph->find_value("beta")->initializer();
  const Tensor& codes = *graph->find_value("w0")->initializer();
  const Tensor& scales = *graph->find_value("ws0")->initializer();
  const Tensor& bias = *graph->find_value("b0")->initializer();
  for (int64_t r = 0; r < 8; ++r) {
    const float* row = x.data<float>() + r * k;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < k; ++j) mean += row[j] / static_cast<double>(k);
    for (int64_t j = 0; j < k; ++j) var += (row[j] - mean) * (row[j] - mean) / static_cast<double>(k);
    for (int64_t n = 0; n < 8; ++n) {
      double y = bias.data<float>()[n];
      for (int64_t j = 0; j < k; ++j) {
        const double normed = (row[j] - mean) / std::sqrt(var + 1e-5) * gamma.data<float>()[j] + beta.data<float>()[j];
        y += normed * fp8e4m3fn_to_float(codes.data<uint8_t>()[n * k + j]) * scales.data<float>()[n];
      }
      error_after += (y_after[r * 8 + n] - y) * (y_after[r * 8 + n] - y);
      error_before += (y_before[r * 8 + n] - y) * (y_before[r * 8 + n] - y);
      norm += y * y;
    }
  }
  EXPECT_LT(std::sqrt(error_after / norm), 0.1) << "fused reader 0 should be FP8-accurate";
  EXPECT_LT(error_after, error_before) << "the narrow scale clipped; the shared largest one does not";
}

}  // namespace
}  // namespace loka
