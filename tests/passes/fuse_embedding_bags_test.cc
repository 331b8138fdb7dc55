// ============================================================================
// tests/passes/fuse_embedding_bags_test.cc — `fuse-embedding-bags`: golden IR
// (CHECK lines) with a negative twin per rule, annotations, bit-identical
// outputs on the CPU runtime, every zoo model, and the QDQ lowering's return
// to standard ops.
// ============================================================================
#include <gtest/gtest.h>

#include <random>

#include "canonicalize_test_util.h"
#include "mods_test_util.h"
#include "passes/ir/text_format.h"
#include "passes/probe/annotations.h"
#include "test_support.h"

namespace loka {
namespace {

/// One bag's chain, reading columns [begin, end) of %ids: `lookup` is "gather" (float32 table
/// %t<k>) or "quantized" (FP8 table %q<k> with row scales %s<k>); `pool` is "unsqueeze" or
/// "keepdims".
std::string bag(int k, int begin, int end, const std::string& lookup = "gather", const std::string& pool = "unsqueeze") {
  const std::string n = std::to_string(k), hot = std::to_string(end - begin);
  std::string text = "  init %b" + n + " : i64[1] = [" + std::to_string(begin) + "]\n" +  //
                     "  init %e" + n + " : i64[1] = [" + std::to_string(end) + "]\n" +
                     "  %ids" + n + " = Slice(%ids, %b" + n + ", %e" + n + ", %axis1) : i64[batch," + hot + "] @\"slice_" + n + "\"\n";
  if (lookup == "gather") {
    text += "  init %t" + n + " : f32[3,2] = [0.5, -1, 2, 0.25, -3, 1.5]\n";
    text += "  %g" + n + " = Gather(%t" + n + ", %ids" + n + ") : f32[batch," + hot + ",2] @\"lookup_" + n + "\"\n";
  } else {
    text += "  init %q" + n + " : f8e4m3fn[3,2] = [0x38, 0x40, 0xb8, 0x30, 0x44, 0xc0]\n";
    text += "  init %s" + n + " : f32[3] = [0.5, 0.25, 2]\n";
    text += "  %g" + n + " = ai.loka::QuantizedGather(%q" + n + ", %s" + n + ", %ids" + n + ") : f32[batch," + hot +
            ",2] @\"lookup_" + n + "\"\n";
  }
  if (pool == "keepdims") {
    text += "  %p" + n + " = ReduceSum(%g" + n + ", %axis1) {keepdims = 1} : f32[batch,1,2] @\"sum_" + n + "\"\n";
  } else {
    text += "  %r" + n + " = ReduceSum(%g" + n + ", %axis1) {keepdims = 0} : f32[batch,2] @\"sum_" + n + "\"\n";
    text += "  %p" + n + " = Unsqueeze(%r" + n + ", %axis1) : f32[batch,1,2] @\"unsqueeze_" + n + "\"\n";
  }
  return text;
}

/// A graph over %ids : i64[batch,5] with `body` (bags and more), stacking `parts` into %out.
std::string graph_with(const std::string& body, const std::string& parts, int tokens,
                       const std::string& outputs = "  output %out\n") {
  return R"(graph "t" {
  opset "" 17
  opset "ai.loka" 1
  input %ids : i64[batch,5]
  input %dense : f32[batch,1,2]
  init %axis1 : i64[1] = [1]
)" + body + "  %out = Concat(" + parts + ") {axis = 1} : f32[batch," + std::to_string(tokens) + ",2] @\"stack\"\n" +
         outputs + "}";
}

using testing::Fusion;

Fusion fuse(const std::string& input) { return testing::apply_fusion(input, "fuse-embedding-bags"); }

void expect_unchanged(const std::string& input) { testing::expect_fusion_unchanged(input, "fuse-embedding-bags"); }

/// Fresh ids in [-3, 3) (negative ids count from the end) and dense values, for every batch size.
void expect_bit_identical(const Fusion& result) {
  ASSERT_TRUE(result.before && result.after);
  std::mt19937 rng(11);
  for (int64_t batch : {1, 7}) {
    Tensor ids = Tensor::zeros(DType::kInt64, {batch, 5});
    std::uniform_int_distribution<int64_t> id(-3, 2);
    for (int64_t& v : ids.values<int64_t>()) v = id(rng);
    const std::vector<Tensor> inputs{ids, testing::random_tensor(rng, {batch, 1, 2})};
    auto expected = testing::run_graph(*result.before, inputs);
    auto actual = testing::run_graph(*result.after, inputs);
    ASSERT_TRUE(expected && actual) << (expected ? actual.status().message() : expected.status().message());
    ASSERT_EQ(expected->size(), actual->size());
    for (size_t o = 0; o < expected->size(); ++o) {
      ASSERT_EQ((*expected)[o].shape(), (*actual)[o].shape());
      EXPECT_EQ(testing::max_abs_difference((*expected)[o], (*actual)[o]), 0.0f) << "batch " << batch;
    }
  }
}

// ------------------------------------------------------------------ golden --

TEST(FuseEmbeddingBags, StackedBagsBecomeOneTableBatchedLookup) {
  const Fusion result = fuse(graph_with(bag(0, 0, 2) + bag(1, 2, 5, "quantized"), "%p0, %p1", 2));
  EXPECT_TRUE(result.changed);
  EXPECT_EQ(result.statistics.at("bags-fused"), 2.0);
  EXPECT_EQ(result.statistics.at("nodes-created"), 1.0);
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK-NOT: Slice(
CHECK-NOT: Gather(
CHECK-NOT: ReduceSum(
CHECK: %out = ai.loka::EmbeddingBags(%ids, %t0, _, %q1, %s1) {offsets = ints[0, 2, 5]} : f32[batch,2,2] @"stack"
CHECK-NEXT: output %out
)"),
            "")
      << result.printed;
  EXPECT_EQ(result.annotations["nodes"]["stack"]["from"], nlohmann::json::array({"lookup_0", "lookup_1"}));
  EXPECT_EQ(result.annotations["nodes"]["stack"]["precision"], "fp32");  // one float32 table
  expect_bit_identical(result);
}

TEST(FuseEmbeddingBags, KeepdimsPoolingAndOtherConcatInputsStayInOrder) {
  const Fusion result =
      fuse(graph_with(bag(0, 0, 1, "quantized", "keepdims") + bag(1, 1, 3, "quantized", "keepdims"), "%dense, %p0, %p1", 3));
  EXPECT_TRUE(result.changed);
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK: %stack_embedding_bags = ai.loka::EmbeddingBags(%ids, %q0, %s0, %q1, %s1) {offsets = ints[0, 1, 3]} : f32[batch,2,2]
CHECK: %out = Concat(%dense, %stack_embedding_bags) {axis = 1} : f32[batch,3,2] @"stack"
)"),
            "")
      << result.printed;
  EXPECT_EQ(result.annotations["nodes"]["stack_embedding_bags"]["precision"], "fp8_e4m3");
  expect_bit_identical(result);
}

// ---------------------------------------------------------- negative twins --

TEST(FuseEmbeddingBags, NoFusionWhenAnIntermediateHasAnotherReader) {
  // The pooled bag is also a graph output: fusing would drop it.
  expect_unchanged(graph_with(bag(0, 0, 2), "%p0", 1, "  output %out\n  output %r0\n"));
}

TEST(FuseEmbeddingBags, NoFusionOfMeanPoolingOrStridedSlices) {
  std::string mean = bag(0, 0, 2);
  mean.replace(mean.find("ReduceSum"), 9, "ReduceMean");
  expect_unchanged(graph_with(mean, "%p0", 1));
  // Every other id of [0, 4): two ids, so the chain's types say 2.
  std::string strided = bag(0, 0, 4);
  strided.replace(strided.find("%axis1) : i64"), 13, "%axis1, %two) : i64");
  for (size_t at; (at = strided.find("batch,4")) != std::string::npos;) strided.replace(at, 7, "batch,2");
  expect_unchanged(graph_with("  init %two : i64[1] = [2]\n" + strided, "%p0", 1));
}

TEST(FuseEmbeddingBags, NonContiguousBagsSplitIntoSeparateRuns) {
  // Bag 1 starts where bag 0 does not end: two runs, each its own node, order kept.
  const Fusion result = fuse(graph_with(bag(0, 0, 2) + bag(1, 3, 5), "%p0, %p1", 2));
  EXPECT_EQ(result.statistics.at("nodes-created"), 2.0);
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK: ai.loka::EmbeddingBags(%ids, %t0) {offsets = ints[0, 2]}
CHECK: ai.loka::EmbeddingBags(%ids, %t1) {offsets = ints[3, 5]}
CHECK: %out = Concat(
)"),
            "")
      << result.printed;
  expect_bit_identical(result);
}

// ------------------------------------------------- the zoo and QDQ lowering --

TEST(FuseEmbeddingBags, EveryZooModelFusesItsTablesAndComputesTheSame) {
  for (const std::string& name : testing::zoo_model_names()) {
    SCOPED_TRACE(name);
    auto graph = testing::load_zoo_model(name);
    ASSERT_TRUE(graph) << graph.status().message();
    CompileSettings settings;  // pin-precision's own choice: a mix of FP8 and float32 tables
    settings.calibration_data = (testing::source_dir() / "models" / "zoo" / name / "calib").string();
    auto prepared = testing::run_pipeline(
        **graph, "canonicalize,infer-shapes,probe{batches=3},pin-precision,insert-scales,infer-shapes", settings);
    ASSERT_TRUE(prepared) << prepared.status().message();
    auto fused = (*graph)->clone();
    auto fusion = testing::run_pipeline(*fused, "fuse-embedding-bags,infer-shapes");
    ASSERT_TRUE(fusion) << fusion.status().message();
    EXPECT_EQ(fusion->at(0).statistics.at("bags-fused"), 26.0);
    EXPECT_EQ(fusion->at(0).statistics.at("nodes-created"), 1.0);
    const auto eval = testing::source_dir() / "models" / "zoo" / name / "eval";
    auto difference = testing::max_output_difference_on_data(**graph, *fused, eval, 1);
    ASSERT_TRUE(difference) << difference.status().message();
    EXPECT_EQ(*difference, 0.0f);
    // --format qdq turns the fused op back into standard ops computing the same values.
    testing::expect_qdq_lowering_computes_the_same(*fused, eval);
  }
}

}  // namespace
}  // namespace loka
