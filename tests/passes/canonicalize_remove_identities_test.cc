// ============================================================================
// tests/passes/canonicalize_remove_identities_test.cc — `remove-identities`:
// Identity and inference Dropout go; twins (graph output names, a read mask,
// a non-constant training flag) stay.
// ============================================================================
#include <gtest/gtest.h>

#include "canonicalize_test_util.h"
#include "passes/canonicalize/remove_identities.h"

namespace loka {
namespace {

using testing::check_lines;

testing::Rewrite remove(const std::string& text) {
  return testing::apply_pass_or_fail(text, remove_identities_pass_info(), make_remove_identities_pass());
}

TEST(RemoveIdentities, IdentityAndInferenceDropoutAreBypassed) {
  auto r = remove(R"(graph "t" {
  opset "" 17
  input %x : f32[batch,5]
  init %ratio : f32[] = [0.25]
  init %off : bool[] = [0]
  %a = Identity(%x) @"identity"
  %b = Dropout(%a) @"dropout_plain"
  %c, %mask = Dropout(%b, %ratio, %off) @"dropout_flagged"
  %y = Relu(%c) @"relu"
  output %y
})");
  EXPECT_TRUE(r.run.changed);
  EXPECT_EQ(r.run.statistics["identities-removed"], 1);
  EXPECT_EQ(r.run.statistics["dropouts-removed"], 2);
  EXPECT_EQ(check_lines(r.printed, "CHECK: %y = Relu(%x)"), "");
  EXPECT_EQ(r.after->node_count(), 1u);
  testing::expect_outputs_within(r, 0.0f, {3});
}

TEST(RemoveIdentities, NegativeTwinsOutputNamesMasksAndRuntimeFlagsStay) {
  auto r = remove(R"(graph "t" {
  opset "" 17
  input %x : f32[batch,5]
  input %train : bool[]
  %a = Relu(%x) @"relu"
  %y = Identity(%a) @"names_the_output"
  %b, %mask = Dropout(%a) @"mask_read"
  %c = Dropout(%a, _, %train) @"runtime_flag"
  %m = Cast(%mask) {to = 1} @"cast"
  %z = Add(%b, %m) @"add"
  %w = Add(%z, %c) @"add2"
  output %y
  output %w
})");
  EXPECT_FALSE(r.run.changed);
  EXPECT_EQ(check_lines(r.printed, R"(
    CHECK: Identity(%a)
    CHECK: Dropout(%a) : f32[batch,5], bool[batch,5] @"mask_read"
    CHECK: Dropout(%a, _, %train)
  )"), "");
}

}  // namespace
}  // namespace loka
