// ============================================================================
// tests/passes/fuse_gemm_epilogue_test.cc — `fuse-gemm-epilogue`: golden IR
// (CHECK lines) with a negative twin per rule, annotations, bit-identical
// outputs on the CPU runtime, and the DCN-v2 zoo model's cross layer.
// ============================================================================
#include <gtest/gtest.h>

#include "canonicalize_test_util.h"
#include "mods_test_util.h"
#include "passes/ir/text_format.h"
#include "passes/probe/annotations.h"
#include "test_support.h"

namespace loka {
namespace {

/// A QuantizedGemm y = x·Wᵀ followed by `tail` (lines using %y, %x0, %x); `outputs` lists the graph outputs.
std::string gemm_then(const std::string& tail, const std::string& outputs = "  output %out\n",
                      const std::string& x0_type = "f32[batch,2]") {
  return R"(graph "t" {
  opset "" 17
  opset "ai.loka" 1
  input %x : f32[batch,2]
  input %x0 : )" + x0_type + R"(
  init %w : f8e4m3fn[2,2] = [0x38, 0x40, 0xb8, 0x30]
  init %ws : f32[2] = [1, 0.5]
  init %b : f32[2] = [0.25, -1]
  init %xs : f32[] = [0.5]
  %y = ai.loka::QuantizedGemm(%x, %w, %ws, %b, %xs) : f32[batch,2] @"gemm"
)" + tail + outputs + "}";
}

using testing::Fusion;

Fusion fuse(const std::string& input) { return testing::apply_fusion(input, "fuse-gemm-epilogue"); }

void expect_unchanged(const std::string& input) { testing::expect_fusion_unchanged(input, "fuse-gemm-epilogue"); }

void expect_bit_identical(const Fusion& result) {
  ASSERT_TRUE(result.before && result.after);
  for (int64_t batch : {1, 5}) {
    auto difference = testing::max_output_difference(*result.before, *result.after, batch, /*seed=*/7);
    ASSERT_TRUE(difference) << difference.status().message();
    EXPECT_EQ(*difference, 0.0f) << "batch " << batch;
  }
}

// ------------------------------------------------------------------ golden --

TEST(FuseGemmEpilogue, DcnCrossLayerBecomesOneGemm) {
  const Fusion result = fuse(gemm_then("  %z = Mul(%x0, %y) : f32[batch,2] @\"cross_mul\"\n"
                                       "  %out = Add(%z, %x) : f32[batch,2] @\"cross_add\"\n"));
  EXPECT_TRUE(result.changed);
  EXPECT_EQ(result.statistics.at("cross-layers-fused"), 1.0);
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK-NOT: Mul(
CHECK-NOT: Add(
CHECK: %out = ai.loka::QuantizedGemm(%x, %w, %ws, %b, %xs, %x0, %x) : f32[batch,2] @"gemm"
CHECK-NEXT: output %out
)"),
            "")
      << result.printed;
  EXPECT_EQ(result.annotations["nodes"]["gemm"]["from"], nlohmann::json::array({"gemm", "cross_mul", "cross_add"}));
  expect_bit_identical(result);
}

TEST(FuseGemmEpilogue, ResidualAloneAndMultiplyAloneFuse) {
  const Fusion residual = fuse(gemm_then("  %out = Add(%y, %x) : f32[batch,2] @\"residual\"\n"));
  EXPECT_EQ(residual.statistics.at("residuals-fused"), 1.0);
  EXPECT_EQ(testing::check_lines(residual.printed,
                                 "CHECK: %out = ai.loka::QuantizedGemm(%x, %w, %ws, %b, %xs, _, %x) : f32[batch,2] @\"gemm\"\n"),
            "")
      << residual.printed;
  expect_bit_identical(residual);
  const Fusion multiply = fuse(gemm_then("  %out = Mul(%y, %x0) : f32[batch,2] @\"gate\"\n"));
  EXPECT_EQ(multiply.statistics.at("multiplies-fused"), 1.0);
  EXPECT_EQ(testing::check_lines(multiply.printed,
                                 "CHECK: %out = ai.loka::QuantizedGemm(%x, %w, %ws, %b, %xs, %x0) : f32[batch,2] @\"gemm\"\n"),
            "")
      << multiply.printed;
  expect_bit_identical(multiply);
}

TEST(FuseGemmEpilogue, TheChainsLastValueKeepsItsReaders) {
  const Fusion result = fuse(gemm_then("  %z = Mul(%x0, %y) : f32[batch,2] @\"cross_mul\"\n"
                                       "  %s = Add(%z, %x) : f32[batch,2] @\"cross_add\"\n"
                                       "  %out = Relu(%s) : f32[batch,2] @\"after\"\n"));
  EXPECT_TRUE(result.changed);
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK: %s = ai.loka::QuantizedGemm(%x, %w, %ws, %b, %xs, %x0, %x) : f32[batch,2] @"gemm"
CHECK-NEXT: %out = Relu(%s)
)"),
            "")
      << result.printed;
  expect_bit_identical(result);
}

// ---------------------------------------------------------- negative twins --

TEST(FuseGemmEpilogue, NoFusionWhenTheGemmOutputHasTwoReaders) {
  expect_unchanged(gemm_then("  %out = Add(%y, %x) : f32[batch,2] @\"residual\"\n", "  output %out\n  output %y\n"));
  expect_unchanged(gemm_then("  %out = Add(%y, %x) : f32[batch,2] @\"residual\"\n"
                             "  %r = Relu(%y) : f32[batch,2] @\"other\"\n",
                             "  output %out\n  output %r\n"));
}

TEST(FuseGemmEpilogue, NoFusionWhenTheOtherOperandBroadcasts) {
  expect_unchanged(gemm_then("  %out = Mul(%y, %x0) : f32[batch,2] @\"gate\"\n", "  output %out\n", "f32[1,2]"));
  expect_unchanged(gemm_then("  %out = Add(%y, %x0) : f32[batch,2] @\"residual\"\n", "  output %out\n", "f32[2]"));
}

TEST(FuseGemmEpilogue, NoFusionOfAMultiplyAfterTheAddOrOfTheOutputWithItself) {
  // Add then Mul: the op's order is multiply first, so only the Add fuses.
  const Fusion result = fuse(gemm_then("  %s = Add(%y, %x) : f32[batch,2] @\"residual\"\n"
                                       "  %out = Mul(%s, %x0) : f32[batch,2] @\"gate\"\n"));
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK: %s = ai.loka::QuantizedGemm(%x, %w, %ws, %b, %xs, _, %x) : f32[batch,2] @"gemm"
CHECK-NEXT: %out = Mul(%s, %x0)
)"),
            "")
      << result.printed;
  expect_unchanged(gemm_then("  %out = Mul(%y, %y) : f32[batch,2] @\"square\"\n"));
}

// --------------------------------------------------------------- the zoo --

TEST(FuseGemmEpilogue, DcnV2CrossLayersFuseAndTheModelComputesTheSame) {
  auto graph = testing::load_zoo_model("dlrm_dcnv2");
  ASSERT_TRUE(graph) << graph.status().message();
  // Every cross layer in FP8 (pinned), so every one is a candidate.
  const auto calib = testing::source_dir() / "models" / "zoo" / "dlrm_dcnv2" / "calib";
  CompileSettings settings;
  settings.calibration_data = calib.string();
  settings.pin_rules = {"node_linear_(4|6|8)=fp8"};  // the cross_up Gemms
  auto records = testing::run_pipeline(
      **graph, "canonicalize,infer-shapes,probe{batches=4},pin-precision,insert-scales,infer-shapes", settings);
  ASSERT_TRUE(records) << records.status().message();
  auto fused = (*graph)->clone();
  auto fusion = testing::run_pipeline(*fused, "fuse-gemm-epilogue,infer-shapes");
  ASSERT_TRUE(fusion) << fusion.status().message();
  EXPECT_EQ(fusion->at(0).statistics.at("cross-layers-fused"), 3.0);
  auto difference = testing::max_output_difference_on_data(**graph, *fused,
                                                           testing::source_dir() / "models" / "zoo" / "dlrm_dcnv2" / "eval", 2);
  ASSERT_TRUE(difference) << difference.status().message();
  EXPECT_EQ(*difference, 0.0f);
}

}  // namespace
}  // namespace loka
