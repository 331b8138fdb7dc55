// ============================================================================
// tests/passes/canonicalize_fold_shape_chains_test.cc — `fold-shape-chains`:
// exporter shape chains over static dims fold, Reshape targets over a
// symbolic batch become exact constants (0 = copy, a single -1), and the
// twins where that would not be exact (two symbols, allowzero) stay.
// ============================================================================
#include <gtest/gtest.h>

#include "canonicalize_test_util.h"
#include "passes/canonicalize/fold_shape_chains.h"

namespace loka {
namespace {

using testing::apply_pass;
using testing::check_lines;

testing::Rewrite fold(const std::string& text) {
  return testing::apply_pass_or_fail(text, fold_shape_chains_pass_info(), make_fold_shape_chains_pass());
}

void expect_same_outputs(const testing::Rewrite& r) { testing::expect_outputs_within(r, 0.0f, {1, 2, 5}); }

/// x : [batch,2,4] reshaped to a target gathered from Shape(x) at `order`.
std::string gathered_reshape(const std::string& input_type, const std::vector<int>& order,
                             const std::string& reshape_attributes = "") {
  std::string text = "graph \"t\" {\n  opset \"\" 17\n  input %x : " + input_type + R"(
  init %axes : i64[1] = [0]
  %s = Shape(%x) @"shape"
)";
  std::string parts;
  for (size_t i = 0; i < order.size(); ++i) {
    const std::string k = std::to_string(i);
    text += "  init %i" + k + " : i64[] = [" + std::to_string(order[i]) + "]\n";
    text += "  %g" + k + " = Gather(%s, %i" + k + ") @\"gather_" + k + "\"\n";
    text += "  %u" + k + " = Unsqueeze(%g" + k + ", %axes) @\"unsqueeze_" + k + "\"\n";
    parts += (i ? ", %u" : "%u") + k;
  }
  text += "  %t = Concat(" + parts + ") {axis = 0} @\"concat\"\n";
  text += "  %y = Reshape(%x, %t)" + reshape_attributes + " @\"reshape\"\n  output %y\n}\n";
  return text;
}

TEST(FoldShapeChains, StaticShapeFoldsCompletely) {
  auto r = fold(gathered_reshape("f32[3,2,4]", {2, 0, 1}));
  EXPECT_TRUE(r.run.changed);
  EXPECT_EQ(r.run.statistics["shapes-folded"], 1);
  EXPECT_EQ(check_lines(r.printed, R"(
    CHECK: init %t : i64[3] = [4, 3, 2]
    CHECK: %y = Reshape(%x, %t) : f32[4,3,2] @"reshape"
  )"), "");
  testing::expect_outputs_within(r, 0.0f, {3});
}

TEST(FoldShapeChains, SymbolicBatchGivesACopyTarget) {
  // [batch, 8] from Concat(Shape(x)[0], Shape(x)[1] * Shape(x)[2]) as TorchScript writes a flatten.
  auto r = fold(R"(graph "t" {
  opset "" 17
  input %x : f32[batch,2,4]
  init %zero : i64[] = [0]
  init %one : i64[] = [1]
  init %two : i64[] = [2]
  init %axes : i64[1] = [0]
  %s = Shape(%x) @"shape"
  %b = Gather(%s, %zero) @"gather_batch"
  %h = Gather(%s, %one) @"gather_h"
  %w = Gather(%s, %two) @"gather_w"
  %hw = Mul(%h, %w) @"mul"
  %ub = Unsqueeze(%b, %axes) @"unsqueeze_b"
  %uhw = Unsqueeze(%hw, %axes) @"unsqueeze_hw"
  %t = Concat(%ub, %uhw) {axis = 0} @"concat"
  %y = Reshape(%x, %t) @"reshape"
  output %y
})");
  EXPECT_TRUE(r.run.changed);
  EXPECT_EQ(r.run.statistics["reshape-targets-resolved"], 1);
  EXPECT_EQ(check_lines(r.printed, R"(
    CHECK: init %uhw : i64[1] = [8]
    CHECK: init %reshape_shape : i64[2] = [0, 8]
    CHECK: %y = Reshape(%x, %reshape_shape) : f32[batch,8] @"reshape"
  )"), "");
  expect_same_outputs(r);
}

TEST(FoldShapeChains, OneMisplacedSymbolBecomesMinusOne) {
  auto r = fold(gathered_reshape("f32[batch,2,4]", {2, 1, 0}));
  EXPECT_EQ(r.run.statistics["reshape-targets-resolved"], 1);
  EXPECT_EQ(check_lines(r.printed, R"(
    CHECK: init %reshape_shape : i64[3] = [4, 2, -1]
    CHECK: %y = Reshape(%x, %reshape_shape) : f32[4,2,batch] @"reshape"
  )"), "");
  expect_same_outputs(r);
}

TEST(FoldShapeChains, NegativeTwinsTwoSymbolsOrAllowZeroKeepTheChain) {
  auto two = fold(gathered_reshape("f32[batch,seq,4]", {1, 0, 2}));
  EXPECT_EQ(two.run.statistics["reshape-targets-resolved"], 0);
  EXPECT_EQ(check_lines(two.printed, "CHECK: Shape(%x)\nCHECK: Reshape(%x, %t)"), "");
  expect_same_outputs(two);
  auto allow_zero = fold(gathered_reshape("f32[batch,2,4]", {0, 1, 2}, " {allowzero = 1}"));
  EXPECT_EQ(allow_zero.run.statistics["reshape-targets-resolved"], 0);
  EXPECT_EQ(check_lines(allow_zero.printed, "CHECK: Reshape(%x, %t) {allowzero = 1}"), "");
  auto plain = fold(gathered_reshape("f32[batch,2,4]", {0, 1, 2}));
  EXPECT_EQ(check_lines(plain.printed, "CHECK: init %reshape_shape : i64[3] = [0, 2, 4]"), "");
}

}  // namespace
}  // namespace loka
