// ============================================================================
// tests/passes/canonicalize_upgrade_opset_test.cc — `upgrade-opset`: each
// signature change converted (golden) and computing the same on the runtime
// at both opsets; errors name the node and leave the graph unchanged.
// ============================================================================
#include <gtest/gtest.h>

#include "canonicalize_test_util.h"
#include "passes/canonicalize/upgrade_opset.h"
#include "passes/ir/text_format.h"

namespace loka {
namespace {

using testing::check_lines;

Result<testing::Rewrite> upgrade(const std::string& text, int target) {
  return testing::apply_pass(text, upgrade_opset_pass_info(), make_upgrade_opset_pass(),
                             {{"target", std::to_string(target)}});
}

constexpr const char* kOpset9 = R"(graph "t" {
  opset "" 9
  input %x : f32[batch,4,6]
  %sl = Slice(%x) {starts = ints[1], ends = ints[3], axes = ints[1]} @"slice"
  %pd = Pad(%sl) {pads = ints[0, 0, 1, 0, 0, 2], value = 1.5f} @"pad"
  %dr = Dropout(%pd) {ratio = 0.25f} @"dropout"
  %us = Unsqueeze(%dr) {axes = ints[0]} @"unsqueeze"
  %sq = Squeeze(%us) {axes = ints[0]} @"squeeze"
  %s0, %s1 = Split(%sq) {axis = 2, split = ints[3, 6]} @"split"
  %e0, %e1, %e2 = Split(%x) {axis = 2} @"split_even"
  %sm = Softmax(%s1) {axis = 1} @"softmax_flat"
  %ls = LogSoftmax(%s0) {axis = 2} @"logsoftmax_last"
  %rs = ReduceSum(%sm) {axes = ints[1], keepdims = 0} @"reduce_sum"
  %rm = ReduceMean(%ls) {axes = ints[2]} @"reduce_mean"
  %rall = ReduceMax(%e1) {keepdims = 0} @"reduce_all"
  output %rs
  output %rm
  output %rall
  output %e2
})";

TEST(UpgradeOpset, EverySignatureChangeIsConvertedAndComputesTheSame) {
  auto r = upgrade(kOpset9, 18);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_TRUE(r->run.changed);
  EXPECT_EQ(check_lines(r->printed, R"(
    CHECK: opset "" 18
    CHECK: init %slice_starts : i64[1] = [1]
    CHECK: init %pad_pads : i64[6] = [0, 0, 1, 0, 0, 2]
    CHECK: init %pad_value : f32[] = [1.5]
    CHECK: init %dropout_ratio : f32[] = [0.25]
    CHECK: %sl = Slice(%x, %slice_starts, %slice_ends, %slice_axes) :
    CHECK-NEXT: %pd = Pad(%sl, %pad_pads, %pad_value) :
    CHECK-NEXT: %dr = Dropout(%pd, %dropout_ratio) :
    CHECK-NEXT: %us = Unsqueeze(%dr, %unsqueeze_axes) :
    CHECK-NEXT: %sq = Squeeze(%us, %squeeze_axes) :
    CHECK-NEXT: Split(%sq, %split_split) {axis = 2} :
    CHECK-NEXT: Split(%x) {axis = 2, num_outputs = 3} :
    CHECK-NEXT: LogSoftmax(%s0) {axis = 2} :
    CHECK-NEXT: ReduceMean(%ls, %reduce_mean_axes) :
    CHECK-NEXT: %rall = ReduceMax(%e1) {keepdims = 0} :
    CHECK-NEXT: Flatten(%s1) {axis = 1} : f32[batch,12] @"softmax_flat/flatten"
    CHECK-NEXT: Softmax(%softmax_flat/flatten) {axis = 1} : f32[batch,12]
    CHECK-NEXT: Shape(%s1)
    CHECK-NEXT: %sm = Reshape(%softmax_flat/2d, %softmax_flat/shape) : f32[batch,2,6]
    CHECK-NEXT: ReduceSum(%sm, %reduce_sum_axes) {keepdims = 0}
  )"), "");
  for (int64_t batch : {1, 3}) {
    testing::expect_outputs_within(*r, 0.0f, {batch});
  }
}

TEST(UpgradeOpset, ClipBoundsBecomeInputsOfTheDataType) {
  auto r = upgrade(R"(graph "t" {
  opset "" 10
  input %x : f32[batch,4]
  %y = Clip(%x) {max = 6f} @"clip"
  output %y
})", 13);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(check_lines(r->printed, "CHECK: init %clip_max : f32[] = [6]\nCHECK: %y = Clip(%x, _, %clip_max) :"), "");
}

TEST(UpgradeOpset, NegativeTwinsUnconvertibleNodesAreNamedAndNothingChanges) {
  const std::string unknown = R"(graph "t" {
  opset "" 11
  input %x : f32[batch,4]
  %a = Unsqueeze(%x) {axes = ints[0]} @"unsqueeze"
  %y = Hardmax(%a) @"hard"
  output %y
})";
  auto graph = ir::parse_graph(unknown);
  ASSERT_TRUE(graph);
  const std::string before = ir::print_graph(**graph);
  auto converted = upgrade_opset(**graph, 17);
  ASSERT_FALSE(converted);
  EXPECT_NE(converted.status().message().find("node 'hard' (Hardmax)"), std::string::npos) << converted.status().message();
  EXPECT_EQ(ir::print_graph(**graph), before);  // all or nothing: the Unsqueeze is untouched

  auto mask = upgrade(R"(graph "t" {
  opset "" 9
  input %x : f32[batch,4]
  %y, %m = Dropout(%x) @"dropout_mask"
  output %y
  output %m
})", 12);
  ASSERT_FALSE(mask);
  EXPECT_NE(mask.status().message().find("node 'dropout_mask' (Dropout)"), std::string::npos);

  auto old = upgrade("graph \"t\" {\n  opset \"\" 6\n  input %x : f32[2]\n  %y = Relu(%x) @\"r\"\n  output %y\n}\n", 17);
  ASSERT_FALSE(old);
  EXPECT_NE(old.status().message().find("older than 7"), std::string::npos);
}

TEST(UpgradeOpset, NegativeTwinATargetAtOrBelowTheOpsetChangesNothing) {
  auto r = upgrade(kOpset9, 9);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_FALSE(r->run.changed);
  EXPECT_EQ(check_lines(r->printed, "CHECK: opset \"\" 9\nCHECK: Slice(%x) {axes"), "");
}

}  // namespace
}  // namespace loka
