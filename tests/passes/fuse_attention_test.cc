// ============================================================================
// tests/passes/fuse_attention_test.cc — `fuse-attention`: golden IR (CHECK
// lines) for the three head layouts with a negative twin per rule, the
// annotation entry, equal outputs on the CPU runtime, the zoo models with
// attention (fused, same eval outputs) and the QDQ lowering's return to
// standard ops.
// ============================================================================
#include <gtest/gtest.h>

#include "canonicalize_test_util.h"
#include "mods_test_util.h"
#include "passes/ir/text_format.h"
#include "passes/probe/annotations.h"
#include "test_support.h"

namespace loka {
namespace {

using testing::Fusion;

/// Packed QKV [batch,3,12] split as torch's reshape(B,N,3,H,D).permute(2,0,3,1,4), H = 2, D = 2;
/// `scores_to_softmax` is the text between the QK MatMul (%dots) and the Softmax input (%scores).
std::string packed_qkv(const std::string& scores_to_softmax =
                           "  %scores = Mul(%dots, %scale) : f32[batch,2,3,3] @\"scale\"\n",
                       int softmax_axis = -1, const std::string& outputs = "  output %y\n") {
  return R"(graph "t" {
  opset "" 17
  input %x : f32[batch,3,12]
  init %split : i64[5] = [0, 3, 3, 2, 2]
  init %merge : i64[3] = [0, 3, 4]
  init %i0 : i64[] = [0]
  init %i1 : i64[] = [1]
  init %i2 : i64[] = [2]
  init %scale : f32[] = [0.707106769]
  init %bias : f32[] = [0.5]
  %r = Reshape(%x, %split) : f32[batch,3,3,2,2] @"split"
  %t = Transpose(%r) {perm = ints[2, 0, 3, 1, 4]} : f32[3,batch,2,3,2] @"by_head"
  %q = Gather(%t, %i0) {axis = 0} : f32[batch,2,3,2] @"q"
  %k = Gather(%t, %i1) {axis = 0} : f32[batch,2,3,2] @"k"
  %v = Gather(%t, %i2) {axis = 0} : f32[batch,2,3,2] @"v"
  %kt = Transpose(%k) {perm = ints[0, 1, 3, 2]} : f32[batch,2,2,3] @"k_t"
  %dots = MatMul(%q, %kt) : f32[batch,2,3,3] @"qk"
)" + scores_to_softmax +
         "  %p = Softmax(%scores) {axis = " + std::to_string(softmax_axis) + R"(} : f32[batch,2,3,3] @"softmax"
  %ctx = MatMul(%p, %v) : f32[batch,2,3,2] @"pv"
  %ct = Transpose(%ctx) {perm = ints[0, 2, 1, 3]} : f32[batch,3,2,2] @"merge_t"
  %y = Reshape(%ct, %merge) : f32[batch,3,4] @"merge"
)" + outputs +
         "}";
}

/// Separate Q, K, V projections [batch,4,6] with H = 3, D = 2; K split straight to Kᵀ (perm 0,2,3,1)
/// and the scale a Div.
std::string separate_projections(int head_dim = 2) {
  const std::string d = std::to_string(head_dim), c = std::to_string(3 * head_dim);
  return R"(graph "t" {
  opset "" 17
  input %xq : f32[batch,4,)" + c + R"(]
  input %xk : f32[batch,5,)" + c + R"(]
  input %xv : f32[batch,5,)" + c + R"(]
  init %split : i64[4] = [0, 0, 3, )" + d + R"(]
  init %merge : i64[3] = [0, 0, )" + c + R"(]
  init %root : f32[1] = [1.41421354]
  %rq = Reshape(%xq, %split) : f32[batch,4,3,)" + d + R"(] @"split_q"
  %rk = Reshape(%xk, %split) : f32[batch,5,3,)" + d + R"(] @"split_k"
  %rv = Reshape(%xv, %split) : f32[batch,5,3,)" + d + R"(] @"split_v"
  %q = Transpose(%rq) {perm = ints[0, 2, 1, 3]} : f32[batch,3,4,)" + d + R"(] @"q"
  %kt = Transpose(%rk) {perm = ints[0, 2, 3, 1]} : f32[batch,3,)" + d + R"(,5] @"k_t"
  %v = Transpose(%rv) {perm = ints[0, 2, 1, 3]} : f32[batch,3,5,)" + d + R"(] @"v"
  %dots = MatMul(%q, %kt) : f32[batch,3,4,5] @"qk"
  %scores = Div(%dots, %root) : f32[batch,3,4,5] @"scale"
  %p = Softmax(%scores) {axis = 3} : f32[batch,3,4,5] @"softmax"
  %ctx = MatMul(%p, %v) : f32[batch,3,4,)" + d + R"(] @"pv"
  %ct = Transpose(%ctx) {perm = ints[0, 2, 1, 3]} : f32[batch,4,3,)" + d + R"(] @"merge_t"
  %y = Reshape(%ct, %merge) : f32[batch,4,)" + c + R"(] @"merge"
  output %y
})";
}

/// One head on 3-D tensors (DHEN's attention module): the scale on the left of the Mul, no merge.
const char* kSingleHead = R"(graph "t" {
  opset "" 17
  input %q : f32[batch,4,3]
  input %k : f32[batch,4,3]
  input %v : f32[batch,4,3]
  init %scale : f32[] = [0.577350259]
  %kt = Transpose(%k) {perm = ints[0, 2, 1]} : f32[batch,3,4] @"k_t"
  %dots = MatMul(%q, %kt) : f32[batch,4,4] @"qk"
  %scores = Mul(%scale, %dots) : f32[batch,4,4] @"scale"
  %p = Softmax(%scores) {axis = -1} : f32[batch,4,4] @"softmax"
  %y = MatMul(%p, %v) : f32[batch,4,3] @"pv"
  output %y
})";

Fusion fuse(const std::string& input) { return testing::apply_fusion(input, "fuse-attention"); }

void expect_unchanged(const std::string& input) { testing::expect_fusion_unchanged(input, "fuse-attention"); }

/// The fused graph computes what the chain computed (same sums in the same order on the CPU).
void expect_same_outputs(const Fusion& result) {
  for (int64_t batch : {1, 3}) {
    auto difference = testing::max_output_difference(*result.before, *result.after, batch);
    ASSERT_TRUE(difference) << difference.status().message();
    EXPECT_LE(*difference, 1e-6f) << "batch " << batch;
  }
}

// ------------------------------------------------------------------ golden --

TEST(FuseAttention, PackedQkvSplitByGatherBecomesOneAttentionReadingItThrice) {
  const Fusion result = fuse(packed_qkv());
  ASSERT_TRUE(result.changed);
  EXPECT_EQ(result.statistics.at("attentions-fused"), 1.0);
  EXPECT_EQ(result.statistics.at("heads-fused"), 2.0);
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK: opset "ai.loka" 1
CHECK-NOT: Gather
CHECK-NOT: Transpose
CHECK-NOT: Softmax
CHECK: %y = ai.loka::Attention(%x, %x, %x) {head_dim = 2, heads = 2, k_offset = 4, q_offset = 0, scale = 0.707106769f, v_offset = 8} : f32[batch,3,4] @"qk"
CHECK-NEXT: output %y
)"),
            "")
      << result.printed;
  EXPECT_EQ(result.printed.find("%split"), std::string::npos) << "the split's shape constant stays behind";
  const auto& entry = result.annotations["nodes"]["qk"];
  EXPECT_EQ(entry["op"], "Attention");
  EXPECT_EQ(entry["precision"], "fp32");
  EXPECT_EQ(entry["from"], nlohmann::json::array({"qk", "scale", "softmax", "pv", "merge_t", "merge"}));
  expect_same_outputs(result);
}

TEST(FuseAttention, SeparateProjectionsWithKeysSplitStraightToTransposeAndADivScale) {
  const Fusion result = fuse(separate_projections());
  ASSERT_TRUE(result.changed);
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK: %y = ai.loka::Attention(%xq, %xk, %xv) {head_dim = 2, heads = 3, k_offset = 0, q_offset = 0, scale = 0.707106769f, v_offset = 0} : f32[batch,4,6] @"qk"
)"),
            "")
      << result.printed;
  expect_same_outputs(result);
}

TEST(FuseAttention, SingleHeadOnThreeDimensionalTensorsWithTheScaleOnTheLeft) {
  const Fusion result = fuse(kSingleHead);
  ASSERT_TRUE(result.changed);
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK-NOT: MatMul
CHECK: %y = ai.loka::Attention(%q, %k, %v) {head_dim = 3, heads = 1, k_offset = 0, q_offset = 0, scale = 0.577350259f, v_offset = 0} : f32[batch,4,3] @"qk"
CHECK-NEXT: output %y
)"),
            "")
      << result.printed;
  expect_same_outputs(result);
}

TEST(FuseAttention, NoScaleMeansScaleOne) {
  std::string input = packed_qkv("");
  input.replace(input.find("Softmax(%scores)"), std::string("Softmax(%scores)").size(), "Softmax(%dots)");
  const Fusion result = fuse(input);
  ASSERT_TRUE(result.changed);
  EXPECT_NE(result.printed.find("scale = 1f"), std::string::npos) << result.printed;
  expect_same_outputs(result);
}

// ---------------------------------------------------------- negative twins --

TEST(FuseAttention, NoFusionOfMaskedScores) {
  expect_unchanged(packed_qkv("  %scaled = Mul(%dots, %scale) : f32[batch,2,3,3] @\"scale\"\n"
                              "  %scores = Add(%scaled, %bias) : f32[batch,2,3,3] @\"mask\"\n"));
}

TEST(FuseAttention, NoFusionOfASoftmaxOverQueries) { expect_unchanged(packed_qkv(
    "  %scores = Mul(%dots, %scale) : f32[batch,2,3,3] @\"scale\"\n", 2)); }

TEST(FuseAttention, NoFusionWhenTheProbabilitiesAreAlsoAGraphOutput) {
  expect_unchanged(packed_qkv("  %scores = Mul(%dots, %scale) : f32[batch,2,3,3] @\"scale\"\n", -1,
                              "  output %y\n  output %p\n"));
}

TEST(FuseAttention, NoFusionOfAScaleThatIsNotOneConstant) {
  expect_unchanged(packed_qkv("  %scores = Mul(%dots, %dots) : f32[batch,2,3,3] @\"scale\"\n"));
}

TEST(FuseAttention, NoFusionOfHeadsWiderThanTheKernelTakes) {
  EXPECT_TRUE(fuse(separate_projections(128)).changed);
  expect_unchanged(separate_projections(129));
}

TEST(FuseAttention, NoFusionWhenAMatMulIsPinnedToBf16) {
  auto graph = ir::parse_graph(separate_projections());
  ASSERT_TRUE(graph) << graph.status().message();
  auto document = read_annotations(**graph);
  ASSERT_TRUE(document);
  (*document)["nodes"]["pv"] = {{"name", "pv"}, {"precision", "bf16"}, {"pinned_by", "pv=bf16"}};
  write_annotations(**graph, *document);
  auto records = testing::run_pipeline(**graph, "infer-shapes,fuse-attention");
  ASSERT_TRUE(records) << records.status().message();
  EXPECT_FALSE(records->at(1).changed);
  // Its twin: an explicit fp32 annotation fuses.
  (*document)["nodes"]["pv"]["precision"] = "fp32";
  write_annotations(**graph, *document);
  records = testing::run_pipeline(**graph, "fuse-attention");
  ASSERT_TRUE(records) << records.status().message();
  EXPECT_TRUE(records->at(0).changed);
}

// ------------------------------------------------- the zoo and QDQ lowering --

TEST(FuseAttention, ZooModelsWithAttentionFuseItAndComputeTheSame) {
  const std::map<std::string, double> expected{{"attention_ranker", 2.0}, {"dhen", 2.0}};
  for (const auto& [name, count] : expected) {
    SCOPED_TRACE(name);
    auto graph = testing::load_zoo_model(name);
    ASSERT_TRUE(graph) << graph.status().message();
    auto prepared = testing::run_pipeline(**graph, "canonicalize,infer-shapes");
    ASSERT_TRUE(prepared) << prepared.status().message();
    auto fused = (*graph)->clone();
    auto fusion = testing::run_pipeline(*fused, "fuse-attention,infer-shapes");
    ASSERT_TRUE(fusion) << fusion.status().message();
    EXPECT_EQ(fusion->at(0).statistics.at("attentions-fused"), count);
    for (const ir::Node* node : fused->nodes()) EXPECT_FALSE(node->is("Softmax")) << node->name();
    const auto eval = testing::source_dir() / "models" / "zoo" / name / "eval";
    auto difference = testing::max_output_difference_on_data(**graph, *fused, eval, 1);
    ASSERT_TRUE(difference) << difference.status().message();
    EXPECT_LE(*difference, 1e-6f);
    // --format qdq turns the fused op back into standard ops computing the same values.
    testing::expect_qdq_lowering_computes_the_same(*fused, eval);
  }
}

TEST(FuseAttention, ModelsWithoutAttentionAreUntouched) {
  for (const char* name : {"dlrm_dcnv2", "wukong"}) {
    SCOPED_TRACE(name);
    auto graph = testing::load_zoo_model(name);
    ASSERT_TRUE(graph) << graph.status().message();
    auto records = testing::run_pipeline(**graph, "canonicalize,infer-shapes,fuse-attention");
    ASSERT_TRUE(records) << records.status().message();
    EXPECT_FALSE(records->back().changed);
  }
}

}  // namespace
}  // namespace loka
