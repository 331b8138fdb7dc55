// ============================================================================
// tests/passes/fuse_concat_quantize_test.cc — `fuse-concat-quantize`: golden
// IR (CHECK lines) with negative twins, the annotation entry, and the
// rewritten model on the CPU runtime and through the QDQ lowering against the
// original: bit-identical outputs, saturating values included.
// ============================================================================
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "canonicalize_test_util.h"
#include "mods_test_util.h"
#include "passes/ir/text_format.h"
#include "passes/onnx/qdq_lowering.h"
#include "passes/probe/annotations.h"
#include "test_support.h"

namespace loka {
namespace {

/// DHEN's combine: a [batch, 2, 16] and b [batch, 2, 16] joined along the last axis, read by the
/// FP8 GEMM `combine` (X_scale `scale`); `extra` adds lines before the output.
std::string ensemble_combine(const std::string& scale = "0.25", const std::string& extra = "") {
  return R"(graph "t" {
  opset "" 19
  opset "ai.loka" 1
  input %a : f32[batch,2,16]
  input %b : f32[batch,2,16]
  init %w : f8e4m3fn[16,32] = )" + testing::e4m3_codes_ir(512) + R"(
  init %ws : f32[16] = )" + testing::ones_ir(16) + R"(
  init %xs : f32[] = [)" + scale + R"(]
  %joined = Concat(%a, %b) {axis = -1} : f32[batch,2,32] @"cat"
  %y = ai.loka::QuantizedGemm(%joined, %w, %ws, _, %xs) : f32[batch,2,16] @"combine"
)" + extra + R"(  output %y
})";
}

using testing::Fusion;

Fusion fuse(const std::string& input) { return testing::apply_fusion(input, "fuse-concat-quantize"); }
void expect_unchanged(const std::string& input) { testing::expect_fusion_unchanged(input, "fuse-concat-quantize"); }

// ------------------------------------------------------------------ golden --

TEST(FuseConcatQuantize, AConcatOnlyAnFp8GemmReadsEncodesItsInputsIntoTheCodes) {
  const Fusion result = fuse(ensemble_combine());
  EXPECT_TRUE(result.changed);
  EXPECT_EQ(result.statistics.at("concats-quantizing"), 1.0);
  EXPECT_EQ(result.statistics.at("quantizes-removed"), 1.0);
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK: init %joined_scale : f32[] = [0.25]
CHECK: %joined_fp8 = ai.loka::ConcatQuant(%joined_scale, %a, %b) {axis = -1} : f8e4m3fn[batch,2,32] @"cat"
CHECK: %y = ai.loka::QuantizedGemm(%joined_fp8, %w, %ws, _, %xs) : f32[batch,2,16] @"combine"
)"),
            "")
      << result.printed;
  EXPECT_EQ(result.printed.find("Concat("), std::string::npos) << result.printed;
  const auto& entry = result.annotations["nodes"]["cat"];
  EXPECT_EQ(entry["op"], "ConcatQuant");
  EXPECT_EQ(entry["precision"], "fp8_e4m3");
  EXPECT_EQ(entry["y_scale"].get<double>(), 0.25);
  EXPECT_EQ(entry["feeds"], nlohmann::json::array({"combine"}));
}

TEST(FuseConcatQuantize, TakesOverAQuantizeLinearOfTheConcat) {
  // As share-activation-quantize leaves a Concat two GEMMs read: one QuantizeLinear, whose
  // readers take the ConcatQuant's codes; it goes, with its zero point and its entry.
  const std::string input = ensemble_combine("0.25", R"(  init %zp : f8e4m3fn[] = [0x00]
  %q = QuantizeLinear(%joined, %xs, %zp) : f8e4m3fn[batch,2,32] @"joined_quantize"
  %y2 = ai.loka::QuantizedGemm(%q, %w, %ws, _, %xs) : f32[batch,2,16] @"tower"
  output %y2
)");
  const Fusion result = fuse(input);
  EXPECT_EQ(result.statistics.at("quantizes-removed"), 2.0);
  EXPECT_EQ(result.printed.find("QuantizeLinear"), std::string::npos) << result.printed;
  EXPECT_EQ(result.printed.find("%zp"), std::string::npos) << result.printed;
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK: %joined_fp8 = ai.loka::ConcatQuant(%joined_scale, %a, %b) {axis = -1}
CHECK: %y = ai.loka::QuantizedGemm(%joined_fp8, %w, %ws, _, %xs)
CHECK: %y2 = ai.loka::QuantizedGemm(%joined_fp8, %w, %ws, _, %xs)
)"),
            "")
      << result.printed;
  EXPECT_FALSE(result.annotations["nodes"].contains("joined_quantize"));
}

// ---------------------------------------------------------- negative twins --

TEST(FuseConcatQuantize, NoCodesForAConcatAnFp32ReaderAlsoReads) {
  expect_unchanged(ensemble_combine("0.25", "  output %joined\n"));
  expect_unchanged(ensemble_combine("0.25", R"(  %r = Relu(%joined) : f32[batch,2,32] @"relu"
  output %r
)"));
}

TEST(FuseConcatQuantize, NoCodesWhenTwoReadersUseDifferentScales) {
  expect_unchanged(ensemble_combine("0.25", R"(  init %xs2 : f32[] = [0.5]
  %y2 = ai.loka::QuantizedGemm(%joined, %w, %ws, _, %xs2) : f32[batch,2,16] @"tower"
  output %y2
)"));
}

TEST(FuseConcatQuantize, NoCodesForAPerRowReader) {
  std::string input = ensemble_combine();
  const std::string gemm = "QuantizedGemm(%joined, %w, %ws, _, %xs)";
  input.replace(input.find(gemm), gemm.size(), gemm + " {act_recipe = \"row\"}");
  expect_unchanged(input);
}

TEST(FuseConcatQuantize, NoCodesForAReaderOffTheFp8TensorCores) {
  // W [16, 24]: K = 24 runs emulated or in BF16, which reads float X as cheaply.
  std::string input = ensemble_combine();
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"input %b : f32[batch,2,16]", "input %b : f32[batch,2,8]"},
           {"f32[batch,2,32]", "f32[batch,2,24]"},
           {"init %w : f8e4m3fn[16,32] = " + testing::e4m3_codes_ir(512), "init %w : f8e4m3fn[16,24] = " + testing::e4m3_codes_ir(384)}})
    input.replace(input.find(from), from.size(), to);
  expect_unchanged(input);
}

// --------------------------------------------------------------- numerics --

/// The combine on random inputs wide enough to saturate part of the codes at X_scale 2/448.
std::unique_ptr<ir::Graph> combine_network(std::mt19937& rng) {
  auto graph = std::make_unique<ir::Graph>();
  graph->opsets[""] = 19;
  graph->opsets["ai.loka"] = 1;
  std::vector<ir::Value*> parts;
  for (const char* name : {"a", "b", "c"}) {
    ir::Value* part = graph->add_value(name, {DType::kFloat32, std::vector<ir::Dim>{ir::Dim::named("batch"), ir::Dim::known(3), ir::Dim::known(16)}});
    graph->add_input(part);
    parts.push_back(part);
  }
  ir::Node* concat = graph->add_node("Concat", parts, 1, "cat");
  concat->mutable_attributes().set("axis", int64_t{2});
  ir::Node* gemm = graph->add_node(
      "QuantizedGemm",
      {concat->output(0), graph->add_initializer("w", testing::random_e4m3_weight(rng, 32, 48)),
       graph->add_initializer("ws", testing::random_tensor(rng, {32}, 0.01f, 0.1f)),
       graph->add_initializer("b", testing::random_tensor(rng, {32})),
       graph->add_initializer("xs", Tensor::scalar_float(2.0f / 448.0f))},
      1, "combine", "ai.loka");
  graph->add_output(gemm->output(0));
  auto prepared = testing::run_pipeline(*graph, "infer-shapes");
  EXPECT_TRUE(prepared) << prepared.status().message();
  return graph;
}

TEST(FuseConcatQuantize, OutputsAreBitIdenticalOnTheCpuRuntimeAndThroughTheQdqLowering) {
  std::mt19937 rng(83);
  auto graph = combine_network(rng);
  auto fused = graph->clone();
  auto records = testing::run_pipeline(*fused, "fuse-concat-quantize,infer-shapes");
  ASSERT_TRUE(records) << records.status().message();
  ASSERT_EQ(records->at(0).statistics.at("concats-quantizing"), 1.0);
  auto lowered = fused->clone();
  ASSERT_TRUE(lower_to_qdq(*lowered).is_ok());
  for (const ir::Node* node : lowered->nodes()) EXPECT_NE(node->domain(), "ai.loka") << node->name();
  for (const int64_t batch : {1, 7}) {
    std::vector<Tensor> inputs;
    for (int i = 0; i < 3; ++i) inputs.push_back(testing::random_tensor(rng, {batch, 3, 16}, -4.0f, 4.0f));
    auto before = testing::run_graph(*graph, inputs);
    auto after = testing::run_graph(*fused, inputs);
    auto qdq = testing::run_graph(*lowered, inputs);
    ASSERT_TRUE(before && after && qdq) << (before ? (after ? qdq.status() : after.status()) : before.status()).message();
    EXPECT_EQ(testing::max_abs_difference((*before)[0], (*after)[0]), 0.0f);
    EXPECT_EQ(testing::max_abs_difference((*after)[0], (*qdq)[0]), 0.0f);
  }
}

}  // namespace
}  // namespace loka
