// ============================================================================
// tests/passes/canonicalize_pipeline_test.cc — the `canonicalize` driver: one
// run exposes and applies chained rewrites (Identity between MatMul and Add,
// a Constant bias, a decomposed LayerNorm), reaches a fixpoint, computes the
// same, and reports when its iteration bound stops it early.
// ============================================================================
#include <gtest/gtest.h>

#include "canonicalize_test_util.h"
#include "passes/canonicalize/canonicalize.h"

namespace loka {
namespace {

using testing::check_lines;

constexpr const char* kExported = R"(graph "t" {
  opset "" 13
  input %x : f32[batch,4]
  init %w : f32[4,3] = [0.5, -1, 2, 0.25, 1, -0.5, 1.5, 0.75, -2, 1, 0.5, -0.25]
  init %two : f32[] = [2]
  %b = Constant() {value = tensor<f32[3]>[0.1, 0.2, 0.3]} @"bias"
  %eps = Constant() {value = tensor<f32[]>[9.99999975e-06]} @"eps"
  %p = MatMul(%x, %w) @"fc"
  %pi = Identity(%p) @"identity"
  %h = Add(%pi, %b) @"fc_bias"
  %m = ReduceMean(%h) {axes = ints[-1]} @"ln"
  %d = Sub(%h, %m) @"ln_sub"
  %q = Pow(%d, %two) @"ln_pow"
  %v = ReduceMean(%q) {axes = ints[-1]} @"ln_var"
  %ve = Add(%v, %eps) @"ln_eps"
  %s = Sqrt(%ve) @"ln_sqrt"
  %y = Div(%d, %s) @"ln_div"
  output %y
})";

TEST(Canonicalize, ChainedRewritesReachTheCanonicalFormInOneRun) {
  auto r = testing::apply_pass(kExported, canonicalize_pass_info(), make_canonicalize_pass());
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_TRUE(r->run.changed);
  EXPECT_EQ(check_lines(r->printed, R"(
    CHECK: opset "" 17
    CHECK: init %w_t : f32[3,4]
    CHECK: %h = Gemm(%x, %w_t, %b) {transB = 1} : f32[batch,3] @"fc"
    CHECK-NEXT: %y = LayerNormalization(%h, %ln_scale) {axis = -1, epsilon = 9.99999975e-06f} : f32[batch,3] @"ln"
  )"), "");
  EXPECT_EQ(r->after->node_count(), 2u);
  EXPECT_EQ(r->run.statistics["fuse-matmul-add.matmul-add-fused"], 1);
  EXPECT_EQ(r->run.statistics["fuse-decomposed-layernorm.layernorms-fused"], 1);
  EXPECT_EQ(r->run.statistics["remove-identities.identities-removed"], 1);
  testing::expect_outputs_within(*r, 1e-5f, {6});

  auto again = testing::apply_pass(r->printed, canonicalize_pass_info(), make_canonicalize_pass());
  ASSERT_TRUE(again) << again.status().message();
  EXPECT_FALSE(again->run.changed);
  EXPECT_EQ(again->printed, r->printed);
}

TEST(Canonicalize, AnEinsumProjectionBecomesAGemmSiteNamedAfterIt) {
  // torch.einsum("bd,dk->bk", x, W) + b: lowered to a MatMul (named "proj"), which meets its bias.
  auto r = testing::apply_pass(R"(graph "t" {
  opset "" 17
  input %x : f32[batch,4]
  init %w : f32[4,3] = [0.5, -1, 2, 0.25, 1, -0.5, 1.5, 0.75, -2, 1, 0.5, -0.25]
  init %b : f32[3] = [0.1, 0.2, 0.3]
  %p = Einsum(%x, %w) {equation = "bd,dk->bk"} @"proj"
  %y = Add(%p, %b) @"proj_bias"
  output %y
})", canonicalize_pass_info(), make_canonicalize_pass());
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(check_lines(r->printed, R"(
    CHECK: %y = Gemm(%x, %w_t, %b) {transB = 1} : f32[batch,3] @"proj"
    CHECK-NOT: Einsum
  )"), "");
  EXPECT_EQ(r->run.statistics["lower-einsum.einsum-lowered"], 1);
  EXPECT_EQ(r->after->node_count(), 1u);
}

TEST(Canonicalize, NegativeTwinTheIterationBoundIsReported) {
  auto r = testing::apply_pass(kExported, canonicalize_pass_info(), make_canonicalize_pass(), {{"max-iterations", "1"}});
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_TRUE(r->run.changed);
  EXPECT_EQ(r->run.statistics["iteration-bound-reached"], 1);
  auto unbounded = testing::apply_pass(kExported, canonicalize_pass_info(), make_canonicalize_pass());
  ASSERT_TRUE(unbounded);
  EXPECT_EQ(unbounded->run.statistics.count("iteration-bound-reached"), 0u);
}

}  // namespace
}  // namespace loka
