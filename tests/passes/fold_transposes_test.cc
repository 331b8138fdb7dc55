// ============================================================================
// tests/passes/fold_transposes_test.cc — `fold-transposes`: golden IR (CHECK
// lines) with negative twins, the zoo model it was made for (DHEN's X·Xᵀ)
// bit-identical on the CPU runtime, and its QDQ lowering computing the same.
// ============================================================================
#include <gtest/gtest.h>

#include <string>

#include "canonicalize_test_util.h"
#include "mods_test_util.h"
#include "test_support.h"

namespace loka {
namespace {

/// y = MatMul(a, Transpose(x)) over a strided batch; the arguments replace the parts a twin changes.
std::string transposed_product(const std::string& extra = "", const std::string& x_type = "f32[batch,6,8]",
                               const std::string& perm = "ints[0, 2, 1]", const std::string& t_type = "f32[batch,8,6]") {
  return R"(graph "t" {
  opset "" 17
  input %a : f32[batch,4,8]
  input %x : )" + x_type + R"(
  %t = Transpose(%x) {perm = )" + perm + R"(} : )" + t_type + R"( @"transpose"
  %y = MatMul(%a, %t) : f32[batch,4,6] @"dots"
)" + extra + R"(  output %y
})";
}

using testing::Fusion;

Fusion fold(const std::string& input) { return testing::apply_fusion(input, "fold-transposes"); }
void expect_unchanged(const std::string& input) { testing::expect_fusion_unchanged(input, "fold-transposes"); }

// ------------------------------------------------------------------ golden --

TEST(FoldTransposes, MatMulOfATransposedOperandReadsItInPlace) {
  const Fusion result = fold(transposed_product());
  EXPECT_TRUE(result.changed);
  EXPECT_EQ(result.statistics.at("transposes-folded"), 1.0);
  EXPECT_EQ(result.statistics.at("transposes-erased"), 1.0);
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK: opset "ai.loka" 1
CHECK-NOT: Transpose(
CHECK-NOT: MatMul(
CHECK: %y = ai.loka::FusedGemm(%a, %x) {transB = 1} : f32[batch,4,6] @"dots"
CHECK-NEXT: output %y
)"),
            "")
      << result.printed;
}

TEST(FoldTransposes, XTimesItsOwnTransposeReadsXTwice) {
  const Fusion result = fold(R"(graph "t" {
  opset "" 17
  input %x : f32[batch,5,8]
  %t = Transpose(%x) {perm = ints[0, 2, 1]} : f32[batch,8,5] @"transpose"
  %y = MatMul(%x, %t) : f32[batch,5,5] @"dots"
  output %y
})");
  EXPECT_TRUE(result.changed);
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK: %y = ai.loka::FusedGemm(%x, %x) {transB = 1} : f32[batch,5,5] @"dots"
)"),
            "")
      << result.printed;
}

TEST(FoldTransposes, ATransposeWithAnotherReaderStays) {
  const Fusion result = fold(transposed_product("  %r = Relu(%t) : f32[batch,8,6] @\"relu\"\n  output %r\n"));
  EXPECT_TRUE(result.changed);
  EXPECT_EQ(result.statistics.at("transposes-folded"), 1.0);
  EXPECT_EQ(result.statistics.count("transposes-erased"), 0u);
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK: %t = Transpose(%x)
CHECK: Relu(%t)
CHECK: %y = ai.loka::FusedGemm(%a, %x) {transB = 1}
)"),
            "")
      << result.printed;
}

// ---------------------------------------------------------- negative twins --

TEST(FoldTransposes, NoFoldForAnotherPerm) {
  // [batch, 8, 6] read as [0, 1, 2] -> [1, 0, 2] is not a per-matrix transpose.
  expect_unchanged(R"(graph "t" {
  opset "" 17
  input %a : f32[4,batch,8]
  input %x : f32[batch,4,6]
  %t = Transpose(%x) {perm = ints[1, 0, 2]} : f32[4,batch,6] @"transpose"
  %y = MatMul(%a, %t) : f32[4,batch,6] @"dots"
  output %y
})");
}

TEST(FoldTransposes, NoFoldWhenTheBatchBroadcasts) {
  expect_unchanged(transposed_product("", "f32[1,6,8]", "ints[0, 2, 1]", "f32[1,8,6]"));
}

TEST(FoldTransposes, NoFoldWhenABatchDimIsUnknown) {
  std::string input = transposed_product();
  input.replace(input.find("input %a : f32[batch,4,8]"), 25, "input %a : f32[?,4,8]");
  input.replace(input.find("input %x : f32[batch,6,8]"), 25, "input %x : f32[?,6,8]");
  input.replace(input.find(": f32[batch,8,6]"), 16, ": f32[?,8,6]");
  input.replace(input.find(": f32[batch,4,6]"), 16, ": f32[?,4,6]");
  expect_unchanged(input);
}

TEST(FoldTransposes, NoFoldOfATransposedLeftOperand) {
  expect_unchanged(R"(graph "t" {
  opset "" 17
  input %x : f32[batch,8,4]
  input %b : f32[batch,8,6]
  %t = Transpose(%x) {perm = ints[0, 2, 1]} : f32[batch,4,8] @"transpose"
  %y = MatMul(%t, %b) : f32[batch,4,6] @"dots"
  output %y
})");
}

TEST(FoldTransposes, NoFoldOfAMatrixProduct) {
  expect_unchanged(R"(graph "t" {
  opset "" 17
  input %a : f32[4,8]
  input %x : f32[6,8]
  %t = Transpose(%x) {perm = ints[1, 0]} : f32[8,6] @"transpose"
  %y = MatMul(%a, %t) : f32[4,6] @"dots"
  output %y
})");
}

// ---------------------------------------------------- the zoo and QDQ lowering --

TEST(FoldTransposes, DhenReadsItsDotInteractionsInPlaceAndComputesTheSameBits) {
  auto graph = testing::load_zoo_model("dhen");
  ASSERT_TRUE(graph) << graph.status().message();
  auto folded = (*graph)->clone();
  auto fold_run = testing::run_pipeline(*folded, "fold-transposes,infer-shapes");
  ASSERT_TRUE(fold_run) << fold_run.status().message();
  EXPECT_GE(fold_run->at(0).statistics.at("transposes-folded"), 2.0);  // one dot module per layer
  const auto eval = testing::source_dir() / "models" / "zoo" / "dhen" / "eval";
  auto difference = testing::max_output_difference_on_data(**graph, *folded, eval, 2);
  ASSERT_TRUE(difference) << difference.status().message();
  EXPECT_EQ(*difference, 0.0f);
  testing::expect_qdq_lowering_computes_the_same(*folded, eval);
}

}  // namespace
}  // namespace loka
