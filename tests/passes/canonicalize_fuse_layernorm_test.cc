// ============================================================================
// tests/passes/canonicalize_fuse_layernorm_test.cc —
// `fuse-decomposed-layernorm`: every exporter variant (Pow or Mul square, Div
// or Reciprocal·Mul, axes attribute or input, with/without and broadcast
// affine, two normalised dims) fuses to LayerNormalization at opset 17 and
// computes the same on random inputs; the twins do not fuse.
// ============================================================================
#include <gtest/gtest.h>

#include "canonicalize_test_util.h"
#include "passes/canonicalize/fuse_decomposed_layernorm.h"

namespace loka {
namespace {

using testing::check_lines;

struct Variant {
  std::string name;
  int opset = 13;
  bool mul_square = false;
  bool reciprocal = false;
  std::string axes = "-1";          ///< list for the attribute / the axes input
  std::string gamma_type = "f32[8]";  ///< empty: no Mul by gamma
  int64_t gamma_count = 8;
  std::string beta_type = "f32[8]";   ///< empty: no Add of beta
  int64_t beta_count = 8;
  std::string exponent = "2";
  std::string extra = {};            ///< more statements (e.g. a second reader)
};

std::string values(int64_t count, float start, float step) {
  std::string out = "[";
  for (int64_t i = 0; i < count; ++i) out += (i ? ", " : "") + std::to_string(start + step * static_cast<float>(i));
  return out + "]";
}

std::string decomposed(const Variant& v) {
  const bool axes_input = v.opset >= 18;
  const int64_t axes_count = std::count(v.axes.begin(), v.axes.end(), ',') + 1;
  std::string text = "graph \"t\" {\n  opset \"\" " + std::to_string(v.opset) + R"(
  input %x : f32[batch,3,8]
  init %two : f32[] = [)" + v.exponent + R"(]
  init %eps : f32[] = [9.99999975e-06]
  init %axes : i64[)" + std::to_string(axes_count) + "] = [" + v.axes + "]\n";
  if (!v.gamma_type.empty()) text += "  init %gamma : " + v.gamma_type + " = " + values(v.gamma_count, 0.5f, 0.25f) + "\n";
  if (!v.beta_type.empty()) text += "  init %beta : " + v.beta_type + " = " + values(v.beta_count, -1.0f, 0.125f) + "\n";
  const std::string reduce_args = axes_input ? ", %axes)" : ") {axes = ints[" + v.axes + "]}";
  text += "  %m = ReduceMean(%x" + reduce_args + " @\"mean\"\n";
  text += "  %d = Sub(%x, %m) @\"sub\"\n";
  text += v.mul_square ? "  %p = Mul(%d, %d) @\"square\"\n" : "  %p = Pow(%d, %two) @\"square\"\n";
  text += "  %v = ReduceMean(%p" + reduce_args + " @\"variance\"\n";
  text += "  %ve = Add(%eps, %v) @\"add_eps\"\n  %s = Sqrt(%ve) @\"sqrt\"\n";
  text += v.reciprocal ? "  %r = Reciprocal(%s) @\"reciprocal\"\n  %n = Mul(%r, %d) @\"normalize\"\n"
                       : "  %n = Div(%d, %s) @\"normalize\"\n";
  std::string last = "%n";
  if (!v.gamma_type.empty()) {
    text += "  %g = Mul(%gamma, %n) @\"scale\"\n";
    last = "%g";
  }
  if (!v.beta_type.empty()) {
    text += "  %b = Add(" + last + ", %beta) @\"shift\"\n";
    last = "%b";
  }
  text += "  %y = Relu(" + last + ") @\"relu\"\n" + v.extra + "  output %y\n}\n";
  return text;
}

testing::Rewrite fuse(const std::string& text) {
  return testing::apply_pass_or_fail(text, fuse_decomposed_layernorm_pass_info(), make_fuse_decomposed_layernorm_pass());
}

void expect_close(const testing::Rewrite& r) { testing::expect_outputs_within(r, 1e-5f, {1, 4}, 17); }

TEST(FuseDecomposedLayerNorm, TorchScriptPatternFusesAndRaisesTheOpset) {
  auto r = fuse(decomposed(Variant{}));
  EXPECT_TRUE(r.run.changed);
  EXPECT_EQ(r.run.statistics["layernorms-fused"], 1);
  EXPECT_EQ(r.run.statistics["opset-raised-to-17"], 1);
  EXPECT_EQ(check_lines(r.printed, R"(
    CHECK: opset "" 17
    CHECK: init %mean_scale : f32[8]
    CHECK: init %mean_bias : f32[8]
    CHECK: %b = LayerNormalization(%x, %mean_scale, %mean_bias) {axis = -1, epsilon = 9.99999975e-06f} : f32[batch,3,8] @"mean"
    CHECK-NEXT: %y = Relu(%b)
  )"), "");
  EXPECT_EQ(r.after->node_count(), 2u);
  expect_close(r);
}

TEST(FuseDecomposedLayerNorm, ExporterVariantsFuse) {
  std::vector<Variant> variants;
  variants.push_back({.name = "mul_square", .mul_square = true});
  variants.push_back({.name = "reciprocal", .reciprocal = true});
  variants.push_back({.name = "axes_input_op18", .opset = 18});
  variants.push_back({.name = "positive_axis", .axes = "2"});
  variants.push_back({.name = "no_affine", .gamma_type = "", .beta_type = ""});
  variants.push_back({.name = "beta_only", .gamma_type = ""});
  variants.push_back({.name = "broadcast_gamma", .gamma_type = "f32[1,1,8]", .beta_type = "f32[]", .beta_count = 1});
  variants.push_back({.name = "scalar_gamma", .gamma_type = "f32[1]", .gamma_count = 1});
  variants.push_back({.name = "two_dims", .axes = "-2, -1", .gamma_type = "f32[3,8]", .gamma_count = 24,
                      .beta_type = "f32[8]"});
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    auto r = fuse(decomposed(v));
    EXPECT_EQ(r.run.statistics["layernorms-fused"], 1);
    const std::string axis = v.name == "two_dims" ? "-2" : "-1";
    EXPECT_EQ(check_lines(r.printed, "CHECK: LayerNormalization(%x, %mean_scale" +
                                         std::string(v.beta_type.empty() ? ")" : ", %mean_bias)") + " {axis = " + axis),
              "");
    EXPECT_EQ(r.after->node_count(), 2u);
    expect_close(r);
  }
}

TEST(FuseDecomposedLayerNorm, NegativeTwinsDoNotFuse) {
  std::vector<Variant> twins;
  twins.push_back({.name = "centered_value_read_elsewhere", .extra = "  %leak = Relu(%d) @\"leak\"\n  output %leak\n"});
  twins.push_back({.name = "variance_read_elsewhere", .extra = "  output %v\n"});
  twins.push_back({.name = "middle_axis", .axes = "1", .gamma_type = "", .beta_type = ""});
  twins.push_back({.name = "cube", .exponent = "3"});
  for (const Variant& v : twins) {
    SCOPED_TRACE(v.name);
    auto r = fuse(decomposed(v));
    EXPECT_FALSE(r.run.changed);
    EXPECT_EQ(check_lines(r.printed, "CHECK: opset \"\" 13\nCHECK-NOT: LayerNormalization"), "");
  }
}

TEST(FuseDecomposedLayerNorm, PerRowScaleStaysOutsideTheFusion) {
  auto r = fuse(decomposed({.name = "per_row", .gamma_type = "f32[3,1]", .gamma_count = 3}));
  EXPECT_EQ(r.run.statistics["layernorms-fused"], 1);
  EXPECT_EQ(check_lines(r.printed, R"(
    CHECK: %n = LayerNormalization(%x, %mean_scale) {axis = -1
    CHECK-NEXT: %g = Mul(%gamma, %n)
  )"), "");
  expect_close(r);
}

TEST(FuseDecomposedLayerNorm, NegativeTwinAGraphThatCannotBeUpgradedIsLeftAlone) {
  Variant v;
  v.extra = "  %h = Hardmax(%x) @\"no_kernel\"\n  output %h\n";
  auto r = fuse(decomposed(v));
  EXPECT_FALSE(r.run.changed);
  EXPECT_EQ(r.run.statistics["skipped-opset-not-upgradable"], 1);
  EXPECT_EQ(check_lines(r.printed, "CHECK: opset \"\" 13\nCHECK: ReduceMean"), "");
}

}  // namespace
}  // namespace loka
