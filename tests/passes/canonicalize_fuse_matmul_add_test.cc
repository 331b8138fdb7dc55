// ============================================================================
// tests/passes/canonicalize_fuse_matmul_add_test.cc — `fuse-matmul-add`:
// golden fusion, the twins that must not fuse (two users, 3-D A, non-bias
// addend, non-constant weights), and numerics on random weights.
// ============================================================================
#include <gtest/gtest.h>

#include <random>

#include "canonicalize_test_util.h"
#include "passes/canonicalize/fuse_matmul_add.h"

namespace loka {
namespace {

using testing::check_lines;

testing::Rewrite fuse(const std::string& text) {
  return testing::apply_pass_or_fail(text, fuse_matmul_add_pass_info(), make_fuse_matmul_add_pass());
}

/// "[v0, v1, ...]" of `count` random values.
std::string random_values(std::mt19937& rng, int64_t count) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::string out = "[";
  for (int64_t i = 0; i < count; ++i) out += (i ? ", " : "") + std::to_string(dist(rng));
  return out + "]";
}

std::string linear(std::mt19937& rng, int64_t k, int64_t n, const std::string& bias_type, int64_t bias_count,
                   const std::string& extra = "", const std::string& a_type = "") {
  const std::string K = std::to_string(k), N = std::to_string(n);
  return "graph \"t\" {\n  opset \"\" 17\n  input %x : " + (a_type.empty() ? "f32[batch," + K + "]" : a_type) +
         "\n  init %w : f32[" + K + "," + N + "] = " + random_values(rng, k * n) + "\n  init %b : " + bias_type +
         " = " + random_values(rng, bias_count) + R"(
  %p = MatMul(%x, %w) @"matmul"
  %y = Add(%b, %p) @"add"
)" + extra + "  output %y\n}\n";
}

TEST(FuseMatMulAdd, MatMulAndBiasBecomeOneGemm) {
  std::mt19937 rng(3);
  for (auto [k, n] : {std::pair<int64_t, int64_t>{5, 3}, {1, 7}, {17, 1}}) {
    for (const auto& [bias_type, count] : std::vector<std::pair<std::string, int64_t>>{
             {"f32[" + std::to_string(n) + "]", n}, {"f32[1," + std::to_string(n) + "]", n}, {"f32[]", 1}}) {
      auto r = fuse(linear(rng, k, n, bias_type, count));
      EXPECT_TRUE(r.run.changed) << bias_type;
      const std::string bias = bias_type.rfind("f32[1,", 0) == 0 ? "%b_row" : "%b";
      EXPECT_EQ(check_lines(r.printed, "CHECK: %y = Gemm(%x, %w, " + bias + ") : f32[batch," + std::to_string(n) +
                                           "] @\"matmul\""),
                "");
      EXPECT_EQ(r.after->node_count(), 1u);
      testing::expect_outputs_within(r, 1e-5f, {4});
    }
  }
}

TEST(FuseMatMulAdd, NegativeTwinTwoUsersOfTheProduct) {
  std::mt19937 rng(4);
  auto r = fuse(linear(rng, 4, 3, "f32[3]", 3, "  %z = Relu(%p) @\"second_user\"\n  output %z\n"));
  EXPECT_FALSE(r.run.changed);
  EXPECT_EQ(check_lines(r.printed, "CHECK: MatMul(%x, %w)\nCHECK: Add(%b, %p)"), "");
}

TEST(FuseMatMulAdd, NegativeTwinsBatchedANonBiasAddendVariableWeights) {
  std::mt19937 rng(5);
  EXPECT_FALSE(fuse(linear(rng, 4, 3, "f32[3]", 3, "", "f32[batch,2,4]")).run.changed);
  EXPECT_FALSE(fuse(linear(rng, 4, 3, "f32[2,3]", 6, "", "f32[2,4]")).run.changed);
  EXPECT_FALSE(fuse(linear(rng, 4, 3, "f32[3,1]", 3, "", "f32[3,4]")).run.changed);
  auto variable = fuse(R"(graph "t" {
  opset "" 17
  input %x : f32[batch,4]
  input %w : f32[4,3]
  init %b : f32[3] = [1, 2, 3]
  %p = MatMul(%x, %w) @"matmul"
  %y = Add(%p, %b) @"add"
  output %y
})");
  EXPECT_FALSE(variable.run.changed);
}

}  // namespace
}  // namespace loka
