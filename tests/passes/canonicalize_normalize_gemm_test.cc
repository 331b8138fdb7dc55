// ============================================================================
// tests/passes/canonicalize_normalize_gemm_test.cc — `normalize-gemm`: alpha
// and beta folded into constants, weights stored [N,K] with transB=1, transA
// materialised on constants; twins on activations; numerics.
// ============================================================================
#include <gtest/gtest.h>

#include "canonicalize_test_util.h"
#include "passes/canonicalize/normalize_gemm.h"

namespace loka {
namespace {

using testing::check_lines;

testing::Rewrite normalize(const std::string& text) {
  return testing::apply_pass_or_fail(text, normalize_gemm_pass_info(), make_normalize_gemm_pass());
}

void expect_close(const testing::Rewrite& r) { testing::expect_outputs_within(r, 1e-5f, {5}); }

TEST(NormalizeGemm, ScalesFoldAndWeightsAreStoredTransposed) {
  auto r = normalize(R"(graph "t" {
  opset "" 17
  input %x : f32[batch,2]
  init %w : f32[2,3] = [1, 2, 3, 4, 5, 6]
  init %c : f32[1,3] = [1, 2, 3]
  %y = Gemm(%x, %w, %c) {alpha = 0.5f, beta = 2f, transA = 0, transB = 0} @"gemm"
  %z = Gemm(%x, %w) {alpha = 0.5f} @"gemm_shared"
  output %y
  output %z
})");
  EXPECT_TRUE(r.run.changed);
  EXPECT_EQ(check_lines(r.printed, R"(
    CHECK: init %w_t : f32[3,2] = [0.5, 2, 1, 2.5, 1.5, 3]
    CHECK: init %c_scaled : f32[3] = [2, 4, 6]
    CHECK: %y = Gemm(%x, %w_t, %c_scaled) {transB = 1} : f32[batch,3] @"gemm"
    CHECK: %z = Gemm(%x, %w_t) {transB = 1} : f32[batch,3] @"gemm_shared"
  )"), "");
  EXPECT_EQ(r.run.statistics["weights-transposed"], 2);
  expect_close(r);
  // Canonical already: a second run changes nothing.
  auto again = normalize(r.printed);
  EXPECT_FALSE(again.run.changed);
}

TEST(NormalizeGemm, ConstantTransposedAIsMaterialised) {
  auto r = normalize(R"(graph "t" {
  opset "" 17
  input %x : f32[2,batch]
  init %a : f32[2,3] = [1, 2, 3, 4, 5, 6]
  %y = Gemm(%a, %x) {transA = 1} @"gemm"
  output %y
})");
  EXPECT_TRUE(r.run.changed);
  EXPECT_EQ(check_lines(r.printed, R"(
    CHECK: init %a_t : f32[3,2] = [1, 4, 2, 5, 3, 6]
    CHECK: %y = Gemm(%a_t, %x) : f32[3,batch] @"gemm"
  )"), "");
  expect_close(r);
}

TEST(NormalizeGemm, NegativeTwinScalesOnActivationsStayAttributes) {
  auto r = normalize(R"(graph "t" {
  opset "" 17
  input %x : f32[batch,2]
  input %w : f32[3,2]
  input %c : f32[3]
  %y = Gemm(%x, %w, %c) {alpha = 0.5f, beta = 2f, transB = 1} @"gemm"
  output %y
})");
  EXPECT_FALSE(r.run.changed);
  EXPECT_EQ(check_lines(r.printed, "CHECK: Gemm(%x, %w, %c) {alpha = 0.5f, beta = 2f, transB = 1}"), "");
}

}  // namespace
}  // namespace loka
