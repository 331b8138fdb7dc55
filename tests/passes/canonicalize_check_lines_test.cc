// ============================================================================
// tests/passes/canonicalize_check_lines_test.cc — the CHECK-style matcher the
// canonicalization golden tests rely on fails when it should.
// ============================================================================
#include <gtest/gtest.h>

#include "canonicalize_test_util.h"

namespace loka {
namespace {

using testing::check_lines;

constexpr const char* kText = "a = Relu(x)\nb = Gemm(a, w)\nc = Add(b, b)\n";

TEST(CanonicalizeCheckLines, MatchesInOrder) {
  EXPECT_EQ(check_lines(kText, "CHECK: Relu\nCHECK-NEXT: Gemm(a\nCHECK: Add"), "");
  EXPECT_EQ(check_lines(kText, "CHECK: Relu\nCHECK-NOT: Softmax\nCHECK: Add"), "");
}

TEST(CanonicalizeCheckLines, FailsOnMissingOutOfOrderOrForbiddenLines) {
  EXPECT_NE(check_lines(kText, "CHECK: Softmax"), "");
  EXPECT_NE(check_lines(kText, "CHECK: Add\nCHECK: Relu"), "");
  EXPECT_NE(check_lines(kText, "CHECK: Relu\nCHECK-NEXT: Add"), "");
  EXPECT_NE(check_lines(kText, "CHECK: Relu\nCHECK-NOT: Gemm\nCHECK: Add"), "");
  EXPECT_NE(check_lines(kText, "CHECK: Gemm\nCHECK-NOT: Add"), "");
  EXPECT_NE(check_lines(kText, "CHEKC: Relu"), "");
}

}  // namespace
}  // namespace loka
