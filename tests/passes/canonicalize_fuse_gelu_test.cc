// ============================================================================
// tests/passes/canonicalize_fuse_gelu_test.cc — `fuse-decomposed-gelu`: the
// exporters' erf GELU chains (TorchScript, dynamo, half first, Mul by 1/√2,
// Div by 2, constants in either operand order) become one Gelu at opset 20
// and compute the same on random inputs; the twins (other constants, a read
// intermediate, the tanh form's shape, no upgrade possible) do not fuse.
// ============================================================================
#include <gtest/gtest.h>

#include "canonicalize_test_util.h"
#include "passes/canonicalize/fuse_decomposed_gelu.h"

namespace loka {
namespace {

using testing::check_lines;

enum class Form { kTorchScript, kDynamo, kHalfFirst, kDivByTwo };

struct Variant {
  std::string name;
  int opset = 13;
  Form form = Form::kTorchScript;
  bool multiply_by_inverse = false;  ///< Mul(x, 1/√2) instead of Div(x, √2)
  bool constants_first = false;      ///< constants as the first operand of Add/Mul
  std::string sqrt2 = "1.41421354";
  std::string inverse = "0.707106769";
  std::string one = "1";
  std::string half = "0.5";
  std::string half_type = "f32[]";
  std::string extra = {};  ///< more statements (e.g. a second reader)
};

std::string binary(const std::string& op, const std::string& value, const std::string& constant, bool constant_first) {
  return op + "(" + (constant_first ? constant + ", " + value : value + ", " + constant) + ")";
}

std::string decomposed(const Variant& v) {
  const bool c = v.constants_first;
  std::string text = "graph \"t\" {\n  opset \"\" " + std::to_string(v.opset) + R"(
  input %in : f32[batch,3,8]
  init %sqrt2 : f32[] = [)" + v.sqrt2 + R"(]
  init %inverse : f32[] = [)" + v.inverse + R"(]
  init %one : f32[] = [)" + v.one + R"(]
  init %half : )" + v.half_type + " = [" + v.half + R"(]
  init %two : f32[] = [2]
  %x = Relu(%in) @"producer"
)";
  text += v.multiply_by_inverse ? "  %s = " + binary("Mul", "%x", "%inverse", c) + " @\"scale\"\n"
                                : "  %s = Div(%x, %sqrt2) @\"scale\"\n";
  text += "  %e = Erf(%s) @\"erf\"\n";
  text += "  %p = " + binary("Add", "%e", "%one", c) + " @\"add_one\"\n";
  switch (v.form) {
    case Form::kTorchScript:
      text += "  %m = Mul(%x, %p) @\"mul_x\"\n  %g = " + binary("Mul", "%m", "%half", c) + " @\"mul_half\"\n";
      break;
    case Form::kDynamo:
      text += "  %m = " + binary("Mul", "%p", "%half", c) + " @\"mul_half\"\n  %g = Mul(%x, %m) @\"mul_x\"\n";
      break;
    case Form::kHalfFirst:
      text += "  %m = " + binary("Mul", "%x", "%half", c) + " @\"mul_half\"\n  %g = Mul(%m, %p) @\"mul_p\"\n";
      break;
    case Form::kDivByTwo:
      text += "  %m = Mul(%p, %x) @\"mul_x\"\n  %g = Div(%m, %two) @\"div_two\"\n";
      break;
  }
  text += "  %y = Sigmoid(%g) @\"consumer\"\n" + v.extra + "  output %y\n}\n";
  return text;
}

testing::Rewrite fuse(const std::string& text) {
  return testing::apply_pass_or_fail(text, fuse_decomposed_gelu_pass_info(), make_fuse_decomposed_gelu_pass());
}

void expect_close(const testing::Rewrite& r) { testing::expect_outputs_within(r, 1e-5f, {1, 4}, 23); }

TEST(FuseDecomposedGelu, TorchScriptPatternFusesAndRaisesTheOpset) {
  auto r = fuse(decomposed(Variant{}));
  EXPECT_TRUE(r.run.changed);
  EXPECT_EQ(r.run.statistics["gelus-fused"], 1);
  EXPECT_EQ(r.run.statistics["opset-raised-to-20"], 1);
  EXPECT_EQ(check_lines(r.printed, R"(
    CHECK: opset "" 20
    CHECK: %x = Relu(%in)
    CHECK-NEXT: %g = Gelu(%x) {approximate = "none"} : f32[batch,3,8] @"erf"
    CHECK-NEXT: %y = Sigmoid(%g)
    CHECK-NOT: Erf
  )"), "");
  EXPECT_EQ(r.after->node_count(), 3u);
  expect_close(r);
}

TEST(FuseDecomposedGelu, ExporterVariantsFuse) {
  std::vector<Variant> variants;
  variants.push_back({.name = "dynamo_op18", .opset = 18, .form = Form::kDynamo});
  variants.push_back({.name = "half_first", .form = Form::kHalfFirst});
  variants.push_back({.name = "div_by_two", .form = Form::kDivByTwo});
  variants.push_back({.name = "mul_by_inverse", .multiply_by_inverse = true});
  variants.push_back({.name = "constants_first", .form = Form::kDynamo, .multiply_by_inverse = true, .constants_first = true});
  variants.push_back({.name = "constants_first_half_first", .form = Form::kHalfFirst, .constants_first = true});
  variants.push_back({.name = "double_rounded_sqrt2", .sqrt2 = "1.41421356237"});
  variants.push_back({.name = "rank1_half", .half_type = "f32[1]"});
  variants.push_back({.name = "already_opset_20", .opset = 20});
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    auto r = fuse(decomposed(v));
    EXPECT_EQ(r.run.statistics["gelus-fused"], 1);
    EXPECT_EQ(check_lines(r.printed, "CHECK: opset \"\" 20\nCHECK: %g = Gelu(%x) {approximate = \"none\"}\nCHECK-NOT: Erf"),
              "");
    EXPECT_EQ(r.after->node_count(), 3u);
    expect_close(r);
  }
}

TEST(FuseDecomposedGelu, NegativeTwinsDoNotFuse) {
  std::vector<Variant> twins;
  twins.push_back({.name = "other_sqrt2", .sqrt2 = "1.5"});
  twins.push_back({.name = "sqrt2_off_by_more_than_rounding", .sqrt2 = "1.41421"});
  twins.push_back({.name = "inverse_is_not_one_over_sqrt2", .multiply_by_inverse = true, .inverse = "0.7"});
  twins.push_back({.name = "other_one", .one = "2"});
  twins.push_back({.name = "other_half", .form = Form::kDynamo, .half = "0.25"});
  twins.push_back({.name = "half_first_other_half", .form = Form::kHalfFirst, .half = "0.75"});
  twins.push_back({.name = "half_grows_the_rank", .half_type = "f32[1,1,1,1]"});
  twins.push_back({.name = "erf_read_elsewhere", .extra = "  %leak = Relu(%e) @\"leak\"\n  output %leak\n"});
  twins.push_back({.name = "sum_read_elsewhere", .extra = "  output %p\n"});
  twins.push_back({.name = "product_read_elsewhere", .extra = "  %leak = Neg(%m) @\"leak\"\n  output %leak\n"});
  for (const Variant& v : twins) {
    SCOPED_TRACE(v.name);
    auto r = fuse(decomposed(v));
    EXPECT_FALSE(r.run.changed);
    EXPECT_EQ(check_lines(r.printed, "CHECK: opset \"\" 13\nCHECK: Erf\nCHECK-NOT: Gelu"), "");
  }
}

TEST(FuseDecomposedGelu, NegativeTwinAnotherTensorInsteadOfX) {
  // x · (1 + erf(z / √2)) · 0.5 with z ≠ x is not a GELU.
  auto r = fuse(R"(graph "t" {
  opset "" 20
  input %x : f32[batch,8]
  input %z : f32[batch,8]
  init %sqrt2 : f32[] = [1.41421354]
  init %one : f32[] = [1]
  init %half : f32[] = [0.5]
  %s = Div(%z, %sqrt2) @"scale"
  %e = Erf(%s) @"erf"
  %p = Add(%e, %one) @"add_one"
  %m = Mul(%x, %p) @"mul_x"
  %y = Mul(%m, %half) @"mul_half"
  output %y
})");
  EXPECT_FALSE(r.run.changed);
}

TEST(FuseDecomposedGelu, XWithOtherReadersStillFuses) {
  Variant v;
  v.extra = "  %other = Neg(%x) @\"other_reader\"\n  output %other\n";
  auto r = fuse(decomposed(v));
  EXPECT_EQ(r.run.statistics["gelus-fused"], 1);
  EXPECT_EQ(check_lines(r.printed, "CHECK: %other = Neg(%x)\nCHECK: %g = Gelu(%x)"), "");
  expect_close(r);
}

TEST(FuseDecomposedGelu, NegativeTwinAGraphThatCannotBeUpgradedIsLeftAlone) {
  Variant v;
  v.extra = "  %h = Hardmax(%in) @\"no_kernel\"\n  output %h\n";
  auto r = fuse(decomposed(v));
  EXPECT_FALSE(r.run.changed);
  EXPECT_EQ(r.run.statistics["skipped-opset-not-upgradable"], 1);
  EXPECT_EQ(check_lines(r.printed, "CHECK: opset \"\" 13\nCHECK: Erf"), "");
}

}  // namespace
}  // namespace loka
