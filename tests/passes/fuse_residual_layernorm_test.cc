// ============================================================================
// tests/passes/fuse_residual_layernorm_test.cc — `fuse-residual-layernorm`:
// golden IR (CHECK lines) with negative twins, the annotation entry, the zoo
// model it was made for (Wukong) bit-identical on the CPU runtime, and its
// QDQ lowering computing the same.
// ============================================================================
#include <gtest/gtest.h>

#include <string>

#include "canonicalize_test_util.h"
#include "mods_test_util.h"
#include "test_support.h"

namespace loka {
namespace {

/// y = LayerNormalization(a + b) over the last axis; `add` and `norm` replace those lines.
std::string residual_norm(const std::string& extra = "", const std::string& b_type = "f32[batch,4,8]",
                          const std::string& norm_attributes = "{axis = -1, epsilon = 0.001f}") {
  return R"(graph "t" {
  opset "" 17
  input %a : f32[batch,4,8]
  input %b : )" + b_type + R"(
  init %gamma : f32[8] = [1, 2, 1, 0.5, 1, 1, 1, 1]
  init %beta : f32[8] = [0, 0.5, 0, 0, 0, 0, 0, 1]
  %s = Add(%a, %b) : f32[batch,4,8] @"add"
  %y = LayerNormalization(%s, %gamma, %beta) )" + norm_attributes + R"( : f32[batch,4,8] @"norm"
)" + extra + R"(  output %y
})";
}

using testing::Fusion;

Fusion fuse(const std::string& input) { return testing::apply_fusion(input, "fuse-residual-layernorm"); }
void expect_unchanged(const std::string& input) { testing::expect_fusion_unchanged(input, "fuse-residual-layernorm"); }

// ------------------------------------------------------------------ golden --

TEST(FuseResidualLayerNorm, AddReadOnlyByALastAxisNormBecomesResidualLayerNorm) {
  const Fusion result = fuse(residual_norm());
  EXPECT_TRUE(result.changed);
  EXPECT_EQ(result.statistics.at("norms-fused"), 1.0);
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK: opset "ai.loka" 1
CHECK-NOT: Add(
CHECK-NOT: LayerNormalization(
CHECK: %y = ai.loka::ResidualLayerNorm(%a, %b, %gamma, %beta) {epsilon = 0.00100000005f} : f32[batch,4,8] @"norm"
CHECK-NEXT: output %y
)"),
            "")
      << result.printed;
  const auto& entry = result.annotations["nodes"]["norm"];
  EXPECT_EQ(entry["op"], "ResidualLayerNorm");
  EXPECT_EQ(entry["precision"], "fp32");
  EXPECT_EQ(entry["from"], nlohmann::json::array({"add", "norm"}));
}

// ---------------------------------------------------------- negative twins --

TEST(FuseResidualLayerNorm, NoFusionWhenTheAddBroadcasts) { expect_unchanged(residual_norm("", "f32[batch,1,8]")); }

TEST(FuseResidualLayerNorm, NoFusionWhenTheSumHasAnotherReader) {
  expect_unchanged(residual_norm("  %r = Relu(%s) : f32[batch,4,8] @\"relu\"\n  output %r\n"));
}

TEST(FuseResidualLayerNorm, NoFusionWhenTheSumIsAGraphOutput) { expect_unchanged(residual_norm("  output %s\n")); }

TEST(FuseResidualLayerNorm, NoFusionWhenTheNormIsNotOverTheLastAxisOnly) {
  expect_unchanged(residual_norm("", "f32[batch,4,8]", "{axis = -2, epsilon = 0.001f}"));
}

TEST(FuseResidualLayerNorm, NoFusionWhenScaleOrBiasBroadcast) {
  // LayerNormalization broadcasts a Scale of shape [1]; ResidualLayerNorm takes exactly [C].
  std::string input = residual_norm();
  input.replace(input.find("init %gamma : f32[8] = [1, 2, 1, 0.5, 1, 1, 1, 1]"), 49, "init %gamma : f32[1] = [2]");
  expect_unchanged(input);
  std::string bias = residual_norm();
  bias.replace(bias.find("init %beta : f32[8] = [0, 0.5, 0, 0, 0, 0, 0, 1]"), 48, "init %beta : f32[1] = [0.5]");
  expect_unchanged(bias);
}

TEST(FuseResidualLayerNorm, NoFusionWhenAnUnknownDimCouldDiffer) {
  std::string input = residual_norm();
  input.replace(input.find("input %a : f32[batch,4,8]"), 25, "input %a : f32[?,4,8]");
  input.replace(input.find("input %b : f32[batch,4,8]"), 25, "input %b : f32[?,4,8]");
  expect_unchanged(input);
}

// ---------------------------------------------------- the zoo and QDQ lowering --

TEST(FuseResidualLayerNorm, WukongFusesItsPostNormsAndComputesTheSameBits) {
  auto graph = testing::load_zoo_model("wukong");
  ASSERT_TRUE(graph) << graph.status().message();
  auto prepared = testing::run_pipeline(**graph, "canonicalize,infer-shapes");
  ASSERT_TRUE(prepared) << prepared.status().message();
  auto fused = (*graph)->clone();
  auto fusion = testing::run_pipeline(*fused, "fuse-residual-layernorm,infer-shapes");
  ASSERT_TRUE(fusion) << fusion.status().message();
  EXPECT_EQ(fusion->at(0).statistics.at("norms-fused"), 2.0);
  const auto eval = testing::source_dir() / "models" / "zoo" / "wukong" / "eval";
  auto difference = testing::max_output_difference_on_data(**graph, *fused, eval, 2);
  ASSERT_TRUE(difference) << difference.status().message();
  EXPECT_EQ(*difference, 0.0f);
  testing::expect_qdq_lowering_computes_the_same(*fused, eval);
}

}  // namespace
}  // namespace loka
