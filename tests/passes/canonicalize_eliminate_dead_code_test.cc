// ============================================================================
// tests/passes/canonicalize_eliminate_dead_code_test.cc —
// `eliminate-dead-code`: dead chains and unread initializers go; graph inputs,
// outputs and everything they depend on stay.
// ============================================================================
#include <gtest/gtest.h>

#include "canonicalize_test_util.h"
#include "passes/canonicalize/eliminate_dead_code.h"

namespace loka {
namespace {

using testing::check_lines;

TEST(EliminateDeadCode, DeadChainsAndUnreadInitializersGo) {
  auto r = testing::apply_pass(R"(graph "t" {
  opset "" 17
  input %x : f32[batch,3]
  input %unused : f32[2]
  init %w : f32[3] = [1, 2, 3]
  init %dead_w : f32[3] = [4, 5, 6]
  init %orphan : f32[1] = [7]
  %a = Mul(%x, %w) @"live"
  %d1 = Add(%x, %dead_w) @"dead_1"
  %d2 = Relu(%d1) @"dead_2"
  %s, %mask = Dropout(%a) @"live_with_unread_mask"
  output %s
})", eliminate_dead_code_pass_info(), make_eliminate_dead_code_pass());
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_TRUE(r->run.changed);
  EXPECT_EQ(r->run.statistics["nodes-removed"], 2);
  EXPECT_EQ(r->run.statistics["initializers-removed"], 2);
  EXPECT_EQ(check_lines(r->printed, R"(
    CHECK: input %x
    CHECK-NEXT: input %unused
    CHECK-NEXT: init %w
    CHECK-NEXT: %a = Mul(%x, %w)
    CHECK-NEXT: %s, %mask = Dropout(%a)
  )"), "");
  testing::expect_outputs_within(*r, 0.0f, {3});
}

TEST(EliminateDeadCode, NegativeTwinALiveGraphIsUnchanged) {
  auto r = testing::apply_pass(R"(graph "t" {
  opset "" 17
  input %x : f32[batch,3]
  init %w : f32[3] = [1, 2, 3]
  %a = Mul(%x, %w) @"live"
  %b = Relu(%a) @"also_live"
  output %a
  output %b
})", eliminate_dead_code_pass_info(), make_eliminate_dead_code_pass());
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_FALSE(r->run.changed);
  EXPECT_EQ(r->after->node_count(), 2u);
}

}  // namespace
}  // namespace loka
