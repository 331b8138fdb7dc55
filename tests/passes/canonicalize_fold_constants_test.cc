// ============================================================================
// tests/passes/canonicalize_fold_constants_test.cc — `fold-constants`: golden
// IR with negative twins (non-constant inputs, Q/DQ, the size bound) and the
// folded graph computing the same as the original on the CPU runtime.
// ============================================================================
#include <gtest/gtest.h>

#include <random>

#include "canonicalize_test_util.h"
#include "passes/canonicalize/fold_constants.h"

namespace loka {
namespace {

using testing::apply_pass;
using testing::check_lines;

testing::Rewrite fold(const std::string& text, const std::map<std::string, std::string>& options = {}) {
  return testing::apply_pass_or_fail(text, fold_constants_pass_info(), make_fold_constants_pass(), options);
}

constexpr const char* kChain = R"(graph "t" {
  opset "" 17
  input %x : f32[batch,4]
  init %a : f32[4] = [1, 2, 3, 4]
  init %shape : i64[2] = [2, 2]
  %c = Constant() {value = tensor<f32[4]>[0.5, 0.5, 0.5, 0.5]} @"half"
  %s = Add(%a, %c) @"fold_add"
  %t = Mul(%s, %s) @"fold_mul"
  %r = Reshape(%t, %shape) @"fold_reshape"
  %f = Reshape(%r, %n) @"fold_flat"
  %n = Constant() {value = tensor<i64[1]>[4]} @"four"
  %y = Add(%x, %f) @"live"
  output %y
})";

TEST(FoldConstants, ChainsOfConstantsBecomeInitializers) {
  auto r = fold(kChain);
  EXPECT_TRUE(r.run.changed);
  EXPECT_EQ(check_lines(r.printed, R"(
    CHECK: init %f : f32[4] = [2.25, 6.25, 12.25, 20.25]
    CHECK: %y = Add(%x, %f) : f32[batch,4] @"live"
  )"), "");
  EXPECT_EQ(r.after->node_count(), 1u);  // Constants and Reshapes all gone
  EXPECT_EQ(r.run.statistics["constants-to-initializers"], 2);
  EXPECT_EQ(r.run.statistics["nodes-folded"], 4);
  testing::expect_outputs_within(r, 0.0f);  // the runtime's own kernels: bit-identical
}

TEST(FoldConstants, NegativeTwinNodesReadingInputsOrQuantizationStay) {
  auto r = fold(R"(graph "t" {
  opset "" 19
  input %x : f32[batch,4]
  init %scale : f32[] = [0.5]
  init %w : f32[4] = [1, 2, 3, 4]
  %q = QuantizeLinear(%w, %scale) @"quantize"
  %d = DequantizeLinear(%q, %scale) @"dequantize"
  %y = Add(%x, %d) @"live"
  %z = Relu(%y) @"relu"
  output %z
})");
  EXPECT_FALSE(r.run.changed);
  EXPECT_EQ(check_lines(r.printed, R"(
    CHECK: QuantizeLinear(%w, %scale)
    CHECK: DequantizeLinear(%q, %scale)
    CHECK: Add(%x, %d)
    CHECK: Relu(%y)
  )"), "");
}

TEST(FoldConstants, ResultsBeyondTheBoundStayComputed) {
  const std::string text = R"(graph "t" {
  opset "" 17
  input %x : f32[batch,16]
  init %v : f32[1] = [3]
  init %small : i64[1] = [4]
  init %big : i64[1] = [16]
  %e = Expand(%v, %big) @"expand_big"
  %s = Expand(%v, %small) @"expand_small"
  %y = Add(%x, %e) @"add"
  output %y
  output %s
})";
  auto r = fold(text, {{"max-elements", "8"}});
  EXPECT_FALSE(r.run.changed);  // expand_small writes a graph output: kept; expand_big is too big
  EXPECT_EQ(r.run.statistics["skipped-unbounded"], 1);
  EXPECT_EQ(check_lines(r.printed, "CHECK: Expand(%v, %big)\nCHECK: Expand(%v, %small)"), "");
  auto twin = fold(text, {{"max-elements", "16"}});
  EXPECT_TRUE(twin.run.changed);
  EXPECT_EQ(check_lines(twin.printed, "CHECK-NOT: Expand(%v, %big)\nCHECK: init %e : f32[16]"), "");
}

TEST(FoldConstants, RandomGraphOfFoldableArithmeticMatchesTheRuntime) {
  // Constant sub-expressions over awkward shapes feed a live computation.
  std::mt19937 rng(11);
  for (int trial = 0; trial < 5; ++trial) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 7);
    std::string values;
    for (int64_t i = 0; i < 3 * n; ++i) values += (i ? ", " : "") + std::to_string(static_cast<int>(rng() % 19) - 9);
    const std::string text = "graph \"t\" {\n  opset \"\" 17\n  input %x : f32[batch," + std::to_string(n) +
                             "]\n  init %w : f32[3," + std::to_string(n) + "] = [" + values + R"(]
  init %axes : i64[1] = [0]
  %m = ReduceMax(%w) {axes = ints[0], keepdims = 0} @"max"
  %t = Transpose(%w) @"transpose"
  %e = Exp(%m) @"exp"
  %mm = MatMul(%x, %t) @"live_matmul"
  %sum = ReduceSum(%t, %axes) @"sum"
  %z = Mul(%x, %e) @"live_mul"
  output %mm
  output %z
  output %sum
})";
    auto r = fold(text);
    EXPECT_TRUE(r.run.changed);
    EXPECT_EQ(check_lines(r.printed, "CHECK-NOT: Transpose(\nCHECK-NOT: Exp("), "");
    testing::expect_outputs_within(r, 0.0f, {1 + trial});
  }
}

}  // namespace
}  // namespace loka
