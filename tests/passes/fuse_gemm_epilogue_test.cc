// ============================================================================
// tests/passes/fuse_gemm_epilogue_test.cc — `fuse-gemm-epilogue`: golden IR
// (CHECK lines) with a negative twin per rule (bias rows, ReLU/GELU, DCN
// cross, residual), annotations, bit-identical outputs on the CPU runtime,
// the DCN-v2 zoo model's cross layer and the attention ranker's FFN.
// ============================================================================
#include <gtest/gtest.h>

#include "canonicalize_test_util.h"
#include "mods_test_util.h"
#include "passes/ir/text_format.h"
#include "passes/mods/fuse_gemm_epilogue.h"
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

/// A QuantizedGemm without a bias on a 3-D activation (a MatMul site as insert-scales lowers it),
/// y = x·Wᵀ : [batch,3,2], followed by `tail`; `bias_type` is the constant %bias's type.
std::string matmul_site_then(const std::string& tail, const std::string& bias_type = "f32[2]",
                             const std::string& outputs = "  output %out\n", const std::string& opset = "20") {
  int64_t bias_count = 1;  // the product of the dims in "f32[d0,d1,...]"
  for (size_t at = bias_type.find('[') + 1; at < bias_type.size() && bias_type[at] != ']';) {
    size_t end = 0;
    bias_count *= std::stoll(bias_type.substr(at), &end);
    at += end + 1;
  }
  std::string values = "[";
  for (int64_t i = 0; i < bias_count; ++i) values += (i ? ", " : "") + std::to_string(0.25 - 0.5 * static_cast<double>(i));
  values += "]";
  return R"(graph "t" {
  opset "" )" + opset + R"(
  opset "ai.loka" 1
  input %x : f32[batch,3,2]
  input %r : f32[batch,3,2]
  init %w : f8e4m3fn[2,2] = [0x38, 0x40, 0xb8, 0x30]
  init %ws : f32[2] = [1, 0.5]
  init %bias : )" + bias_type + " = " + values + R"(
  init %xs : f32[] = [0.5]
  %y = ai.loka::QuantizedGemm(%x, %w, %ws, _, %xs) {act_recipe = "tensor", activation = "none"} : f32[batch,3,2] @"gemm"
)" + tail + outputs + "}";
}

TEST(FuseGemmEpilogue, MatMulSiteBiasGeluAndResidualBecomeOneGemm) {
  const Fusion result = fuse(matmul_site_then("  %yb = Add(%y, %bias) : f32[batch,3,2] @\"bias\"\n"
                                              "  %g = Gelu(%yb) : f32[batch,3,2] @\"gelu\"\n"
                                              "  %out = Add(%r, %g) : f32[batch,3,2] @\"residual\"\n"));
  EXPECT_TRUE(result.changed);
  EXPECT_EQ(result.statistics.at("biases-fused"), 1.0);
  EXPECT_EQ(result.statistics.at("gelus-fused"), 1.0);
  EXPECT_EQ(result.statistics.at("residuals-fused"), 1.0);
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK-NOT: Add(
CHECK-NOT: Gelu(
CHECK: %out = ai.loka::QuantizedGemm(%x, %w, %ws, %bias, %xs, _, %r) {act_recipe = "tensor", activation = "gelu"} : f32[batch,3,2] @"gemm"
CHECK-NEXT: output %out
)"),
            "")
      << result.printed;
  EXPECT_EQ(result.annotations["nodes"]["gemm"]["from"], nlohmann::json::array({"gemm", "bias", "gelu", "residual"}));
  expect_bit_identical(result);
}

TEST(FuseGemmEpilogue, BiasRowsOfEveryBroadcastFormBecomeB) {
  for (const std::string bias_type : {"f32[2]", "f32[1,2]", "f32[1,1,2]", "f32[]", "f32[1]"}) {
    SCOPED_TRACE(bias_type);
    // Either operand order.
    const Fusion result = fuse(matmul_site_then("  %out = Add(%bias, %y) : f32[batch,3,2] @\"bias\"\n", bias_type));
    EXPECT_EQ(result.statistics.at("biases-fused"), 1.0);
    const std::string stored = bias_type == "f32[2]" ? "%bias" : "%bias.row";
    EXPECT_EQ(testing::check_lines(result.printed, "CHECK: %out = ai.loka::QuantizedGemm(%x, %w, %ws, " + stored +
                                                       ", %xs) {act_recipe = \"tensor\", activation = \"none\"}"),
              "")
        << result.printed;
    if (stored != "%bias") EXPECT_EQ(testing::check_lines(result.printed, "CHECK: init %bias.row : f32[2]\nCHECK-NOT: init %bias :"), "");
    expect_bit_identical(result);
  }
}

TEST(FuseGemmEpilogue, ReluAndGeluBecomeTheActivation) {
  const Fusion relu = fuse(gemm_then("  %out = Relu(%y) : f32[batch,2] @\"relu\"\n"));
  EXPECT_EQ(relu.statistics.at("relus-fused"), 1.0);
  EXPECT_EQ(testing::check_lines(relu.printed, "CHECK: %out = ai.loka::QuantizedGemm(%x, %w, %ws, %b, %xs) {activation = \"relu\"}"), "")
      << relu.printed;
  expect_bit_identical(relu);
  const Fusion gelu = fuse(matmul_site_then("  %yb = Add(%y, %bias) : f32[batch,3,2] @\"bias\"\n"
                                            "  %out = Gelu(%yb) {approximate = \"none\"} : f32[batch,3,2] @\"gelu\"\n"));
  EXPECT_EQ(gelu.statistics.at("gelus-fused"), 1.0);
  EXPECT_EQ(testing::check_lines(gelu.printed, "CHECK: %out = ai.loka::QuantizedGemm(%x, %w, %ws, %bias, %xs) {act_recipe = \"tensor\", activation = \"gelu\"}"), "")
      << gelu.printed;
  expect_bit_identical(gelu);
}

TEST(FuseGemmEpilogue, TheBiasFusesWhenItsSumHasAnotherReader) {
  // The GEMM's own output has one reader, so the bias fuses; the sum is read twice, so the Gelu stays.
  const Fusion result = fuse(matmul_site_then("  %yb = Add(%y, %bias) : f32[batch,3,2] @\"bias\"\n"
                                              "  %out = Gelu(%yb) : f32[batch,3,2] @\"gelu\"\n",
                                              "f32[2]", "  output %out\n  output %yb\n"));
  EXPECT_EQ(result.statistics.at("biases-fused"), 1.0);
  EXPECT_EQ(result.statistics.count("gelus-fused"), 0u);
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK: %yb = ai.loka::QuantizedGemm(%x, %w, %ws, %bias, %xs) {act_recipe = "tensor", activation = "none"}
CHECK-NEXT: %out = Gelu(%yb)
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

TEST(FuseGemmEpilogue, NoBiasFusionOfANonConstantPerRowOrSecondBias) {
  // Not a constant: a graph input of N values.
  expect_unchanged(R"(graph "t" {
  opset "" 20
  opset "ai.loka" 1
  input %x : f32[batch,3,2]
  input %bias : f32[2]
  init %w : f8e4m3fn[2,2] = [0x38, 0x40, 0xb8, 0x30]
  init %ws : f32[2] = [1, 0.5]
  init %xs : f32[] = [0.5]
  %y = ai.loka::QuantizedGemm(%x, %w, %ws, _, %xs) : f32[batch,3,2] @"gemm"
  %out = Add(%y, %bias) : f32[batch,3,2] @"bias"
  output %out
})");
  // Per row (varies over T) or per element: not a bias.
  expect_unchanged(matmul_site_then("  %out = Add(%y, %bias) : f32[batch,3,2] @\"bias\"\n", "f32[3,1]"));
  expect_unchanged(matmul_site_then("  %out = Add(%y, %bias) : f32[batch,3,2] @\"bias\"\n", "f32[3,2]"));
  // The GEMM already has B: a second bias would round differently, and it is no full-shape residual.
  expect_unchanged(gemm_then("  %out = Add(%y, %b) : f32[batch,2] @\"second_bias\"\n"));
}

TEST(FuseGemmEpilogue, NoActivationFusionOfTanhGeluASecondActivationOrAReadProduct) {
  expect_unchanged(gemm_then("  %out = Gelu(%y) {approximate = \"tanh\"} : f32[batch,2] @\"gelu_tanh\"\n", "  output %out\n"));
  expect_unchanged(gemm_then("  %out = Sigmoid(%y) : f32[batch,2] @\"sigmoid\"\n"));
  expect_unchanged(gemm_then("  %out = Relu(%y) : f32[batch,2] @\"relu\"\n", "  output %out\n  output %y\n"));
  // The GEMM already applies an activation: a second one stays a node.
  expect_unchanged(R"(graph "t" {
  opset "" 17
  opset "ai.loka" 1
  input %x : f32[batch,2]
  init %w : f8e4m3fn[2,2] = [0x38, 0x40, 0xb8, 0x30]
  init %ws : f32[2] = [1, 0.5]
  init %xs : f32[] = [0.5]
  %y = ai.loka::QuantizedGemm(%x, %w, %ws, _, %xs) {activation = "relu"} : f32[batch,2] @"gemm"
  %out = Relu(%y) : f32[batch,2] @"relu"
  output %out
})");
}

TEST(FuseGemmEpilogue, NoBiasFusionAfterTheActivation) {
  // Relu then a constant Add: the op adds B before act, so only the Relu fuses.
  const Fusion result = fuse(matmul_site_then("  %a = Relu(%y) : f32[batch,3,2] @\"relu\"\n"
                                              "  %out = Add(%a, %bias) : f32[batch,3,2] @\"late_bias\"\n"));
  EXPECT_EQ(result.statistics.count("biases-fused"), 0u);
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK: %a = ai.loka::QuantizedGemm(%x, %w, %ws, _, %xs) {act_recipe = "tensor", activation = "relu"}
CHECK-NEXT: %out = Add(%a, %bias)
)"),
            "")
      << result.printed;
  expect_bit_identical(result);
}

// ------------------------------------------------------------------ FP32 --

/// An FP32 MatMul site on a 3-D activation, y = x·W : [batch,3,2] (W a constant [K,N]), then `tail`.
std::string float_matmul_then(const std::string& tail, const std::string& outputs = "  output %out\n") {
  return R"(graph "t" {
  opset "" 20
  opset "ai.loka" 1
  input %x : f32[batch,3,2]
  init %w : f32[2,2] = [0.5, -1.25, 2, 0.75]
  init %bias : f32[2] = [0.25, -0.5]
  %y = MatMul(%x, %w) : f32[batch,3,2] @"gemm"
)" + tail + outputs + "}";
}

/// An FP32 Gemm y = x·Wᵀ + C (`attributes` on it; C [1,2]) on a 2-D activation, then `tail`.
std::string float_gemm_then(const std::string& tail, const std::string& attributes = "{transB = 1}",
                            const std::string& outputs = "  output %out\n") {
  return R"(graph "t" {
  opset "" 20
  opset "ai.loka" 1
  input %x : f32[batch,2]
  init %w : f32[2,2] = [0.5, -1.25, 2, 0.75]
  init %c : f32[1,2] = [0.25, -0.5]
  %y = Gemm(%x, %w, %c) )" + attributes + R"( : f32[batch,2] @"gemm"
)" + tail + outputs + "}";
}

TEST(FuseGemmEpilogue, FloatMatMulBiasAndReluBecomeOneFusedGemm) {
  const Fusion result = fuse(float_matmul_then("  %yb = Add(%bias, %y) : f32[batch,3,2] @\"bias\"\n"
                                               "  %out = Relu(%yb) : f32[batch,3,2] @\"relu\"\n"));
  EXPECT_TRUE(result.changed);
  EXPECT_EQ(result.statistics.at("float-gemms-fused"), 1.0);
  EXPECT_EQ(result.statistics.at("biases-fused"), 1.0);
  EXPECT_EQ(result.statistics.at("relus-fused"), 1.0);
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK-NOT: MatMul(
CHECK-NOT: Relu(
CHECK: %out = ai.loka::FusedGemm(%x, %w, %bias) {activation = "relu"} : f32[batch,3,2] @"gemm"
CHECK-NEXT: output %out
)"),
            "")
      << result.printed;
  EXPECT_EQ(result.annotations["nodes"]["gemm"]["from"], nlohmann::json::array({"gemm", "bias", "relu"}));
  expect_bit_identical(result);
  // The bias alone, or the activation alone, fuses too.
  const Fusion bias_only = fuse(float_matmul_then("  %out = Add(%y, %bias) : f32[batch,3,2] @\"bias\"\n"));
  EXPECT_EQ(testing::check_lines(bias_only.printed, "CHECK: %out = ai.loka::FusedGemm(%x, %w, %bias) : f32[batch,3,2]"), "")
      << bias_only.printed;
  expect_bit_identical(bias_only);
  const Fusion gelu_only = fuse(float_matmul_then("  %out = Gelu(%y) : f32[batch,3,2] @\"gelu\"\n"));
  EXPECT_EQ(testing::check_lines(gelu_only.printed, "CHECK: %out = ai.loka::FusedGemm(%x, %w) {activation = \"gelu\"}"), "")
      << gelu_only.printed;
  expect_bit_identical(gelu_only);
}

TEST(FuseGemmEpilogue, TheFirstFusedGemmOfAModelWithNoFp8SiteImportsTheLokaDomain) {
  // A model where no site went FP8 reaches this pass importing only the default domain (found
  // by an MMoE written by hand: loka-opt failed in dispatch, "imports no opset for domain
  // 'ai.loka'"; 2026-11-27). Its first FusedGemm brings the import.
  // A MatMul and its ReLU, importing the default domain only; `outputs` lists the graph outputs.
  const auto only_default = [](const std::string& outputs) {
    return R"(graph "t" {
  opset "" 20
  input %x : f32[batch,3,2]
  init %w : f32[2,2] = [0.5, -1.25, 2, 0.75]
  %y = MatMul(%x, %w) : f32[batch,3,2] @"gemm"
  %out = Relu(%y) : f32[batch,3,2] @"relu"
)" + outputs + "}";
  };
  const Fusion result = fuse(only_default("  output %out\n"));
  EXPECT_TRUE(result.changed);
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK: opset "ai.loka" 1
CHECK: ai.loka::FusedGemm(%x, %w) {activation = "relu"}
)"),
            "")
      << result.printed;
  expect_bit_identical(result);
  // The twin: nothing to fuse (the MatMul's output is read twice), no import added.
  const Fusion unchanged = fuse(only_default("  output %out\n  output %y\n"));
  EXPECT_FALSE(unchanged.changed);
  EXPECT_EQ(unchanged.printed.find("ai.loka"), std::string::npos) << unchanged.printed;
}

TEST(FuseGemmEpilogue, FloatGemmWithABiasRowAndGeluBecomesOneFusedGemm) {
  const Fusion result = fuse(float_gemm_then("  %out = Gelu(%y) {approximate = \"none\"} : f32[batch,2] @\"gelu\"\n"));
  EXPECT_EQ(result.statistics.at("float-gemms-fused"), 1.0);
  EXPECT_EQ(result.statistics.at("gelus-fused"), 1.0);
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK: init %c.row : f32[2]
CHECK-NOT: init %c :
CHECK: %out = ai.loka::FusedGemm(%x, %w, %c.row) {activation = "gelu", transB = 1} : f32[batch,2] @"gemm"
)"),
            "")
      << result.printed;
  expect_bit_identical(result);
  const Fusion plain = fuse(float_gemm_then("  %out = Relu(%y) : f32[batch,2] @\"relu\"\n", ""));
  EXPECT_EQ(testing::check_lines(plain.printed, "CHECK: %out = ai.loka::FusedGemm(%x, %w, %c.row) {activation = \"relu\"}"), "")
      << plain.printed;
  expect_bit_identical(plain);
}

TEST(FuseGemmEpilogue, FloatResidualAddsFuseAfterTheActivationOrAlone) {
  const Fusion result = fuse(float_matmul_then("  %yb = Add(%y, %bias) : f32[batch,3,2] @\"bias\"\n"
                                               "  %a = Relu(%yb) : f32[batch,3,2] @\"relu\"\n"
                                               "  %out = Add(%x, %a) : f32[batch,3,2] @\"residual\"\n"));
  EXPECT_EQ(result.statistics.at("residuals-fused"), 1.0);
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK-NOT: Add(
CHECK: %out = ai.loka::FusedGemm(%x, %w, %bias, %x) {activation = "relu"} : f32[batch,3,2] @"gemm"
)"),
            "")
      << result.printed;
  EXPECT_EQ(result.annotations["nodes"]["gemm"]["from"], nlohmann::json::array({"gemm", "bias", "relu", "residual"}));
  expect_bit_identical(result);
  const Fusion alone = fuse(float_matmul_then("  %out = Add(%y, %x) : f32[batch,3,2] @\"residual\"\n"));
  EXPECT_EQ(testing::check_lines(alone.printed, "CHECK: %out = ai.loka::FusedGemm(%x, %w, _, %x) : f32[batch,3,2]"), "")
      << alone.printed;
  expect_bit_identical(alone);
}

TEST(FuseGemmEpilogue, NoFloatFusionOfScaledGemmsComputedWeightsLoneGemmsOrReadProducts) {
  // alpha != 1 or beta != 1: the op has no such scaling.
  expect_unchanged(float_gemm_then("  %out = Relu(%y) : f32[batch,2] @\"relu\"\n", "{alpha = 2.0f}"));
  expect_unchanged(float_gemm_then("  %out = Relu(%y) : f32[batch,2] @\"relu\"\n", "{beta = 0.5f}"));
  // A Gemm with nothing after it: its bias is already in the GEMM.
  expect_unchanged(float_gemm_then("  %out = Sigmoid(%y) : f32[batch,2] @\"sigmoid\"\n"));
  // The product is read twice.
  expect_unchanged(float_gemm_then("  %out = Relu(%y) : f32[batch,2] @\"relu\"\n", "{transB = 1}", "  output %out\n  output %y\n"));
  // An activation x activation MatMul (no weight), and a per-row addend (not a bias).
  expect_unchanged(R"(graph "t" {
  opset "" 20
  input %x : f32[batch,3,2]
  input %v : f32[batch,2,2]
  %y = MatMul(%x, %v) : f32[batch,3,2] @"scores"
  %out = Relu(%y) : f32[batch,3,2] @"relu"
  output %out
})");
  // A per-row addend broadcasts: no residual.
  expect_unchanged(R"(graph "t" {
  opset "" 20
  input %x : f32[batch,3,2]
  input %r : f32[batch,3,1]
  init %w : f32[2,2] = [0.5, -1.25, 2, 0.75]
  %y = MatMul(%x, %w) : f32[batch,3,2] @"gemm"
  %out = Add(%y, %r) : f32[batch,3,2] @"residual"
  output %out
})");
  // tanh GELU is another function.
  expect_unchanged(float_matmul_then("  %out = Gelu(%y) {approximate = \"tanh\"} : f32[batch,3,2] @\"gelu\"\n"));
}

TEST(FuseGemmEpilogue, ABareFloatGemmBecomesAFusedGemmOnRequestComputingTheSameBits) {
  // What store-activations-bf16 asks of a float GEMM site that reads a BF16 activation: the pass
  // leaves a lone Gemm alone (its bias is already in it), become_fused_gemm rewrites it.
  for (const std::string& input :
       {float_gemm_then("  %out = Sigmoid(%y) : f32[batch,2] @\"sigmoid\"\n"),
        float_matmul_then("  %out = Sigmoid(%y) : f32[batch,3,2] @\"sigmoid\"\n")}) {
    auto graph = ir::parse_graph(input);
    ASSERT_TRUE(graph) << graph.status().message();
    auto before = (*graph)->clone();
    ir::Node* gemm = (*graph)->find_node("gemm");
    ASSERT_NE(gemm, nullptr);
    ASSERT_TRUE(can_become_fused_gemm(*gemm));
    nlohmann::json annotations = nlohmann::json::object();
    ASSERT_TRUE(become_fused_gemm(**graph, *gemm, annotations).is_ok());
    EXPECT_FALSE(annotations.contains("nodes")) << "nothing absorbed, nothing recorded: " << annotations.dump();
    const ir::Node* fused = (*graph)->find_node("gemm");
    ASSERT_NE(fused, nullptr);
    EXPECT_TRUE(fused->is("FusedGemm", "ai.loka")) << ir::print_graph(**graph);
    EXPECT_EQ(fused->output(0)->name(), "y") << "the GEMM's value keeps its name and readers";
    for (int64_t batch : {1, 5}) {
      auto difference = testing::max_output_difference(*before, **graph, batch, /*seed=*/7);
      ASSERT_TRUE(difference) << difference.status().message();
      EXPECT_EQ(*difference, 0.0f) << "batch " << batch;
    }
  }
  // Negative twins: a scaled Gemm and an activation x activation MatMul have no FusedGemm form.
  for (const std::string& input :
       {float_gemm_then("  %out = Sigmoid(%y) : f32[batch,2] @\"sigmoid\"\n", "{alpha = 2.0f}"),
        std::string(R"(graph "t" {
  opset "" 20
  input %x : f32[batch,3,2]
  input %v : f32[batch,2,2]
  %out = MatMul(%x, %v) : f32[batch,3,2] @"gemm"
  output %out
})")}) {
    auto graph = ir::parse_graph(input);
    ASSERT_TRUE(graph) << graph.status().message();
    ir::Node* gemm = (*graph)->find_node("gemm");
    ASSERT_NE(gemm, nullptr);
    EXPECT_FALSE(can_become_fused_gemm(*gemm));
    nlohmann::json annotations = nlohmann::json::object();
    const Status refused = become_fused_gemm(**graph, *gemm, annotations);
    EXPECT_FALSE(refused.is_ok());
    EXPECT_NE(refused.message().find("'gemm'"), std::string::npos) << refused.message();
  }
}

TEST(FuseGemmEpilogue, AGemmBecomingAFusedGemmWithItsEpilogueRecordsWhatItAbsorbed) {
  // In a pipeline without fuse-gemm-epilogue, the ReLU after the GEMM is still there when
  // store-activations-bf16 makes the GEMM a FusedGemm: it is absorbed, and "from" says so, as the
  // pass would have recorded it.
  auto graph = ir::parse_graph(float_gemm_then("  %out = Relu(%y) : f32[batch,2] @\"relu\"\n"));
  ASSERT_TRUE(graph) << graph.status().message();
  auto before = (*graph)->clone();
  ir::Node* gemm = (*graph)->find_node("gemm");
  ASSERT_NE(gemm, nullptr);
  nlohmann::json annotations = nlohmann::json::object();
  ASSERT_TRUE(become_fused_gemm(**graph, *gemm, annotations).is_ok());
  EXPECT_EQ(annotations["nodes"]["gemm"]["from"], nlohmann::json::array({"gemm", "relu"})) << annotations.dump();
  EXPECT_EQ((*graph)->find_node("relu"), nullptr) << ir::print_graph(**graph);
  auto difference = testing::max_output_difference(*before, **graph, 3, /*seed=*/7);
  ASSERT_TRUE(difference) << difference.status().message();
  EXPECT_EQ(*difference, 0.0f);
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

TEST(FuseGemmEpilogue, AttentionRankerBiasesGelusAndResidualsFuseAndTheModelComputesTheSame) {
  auto graph = testing::load_zoo_model("attention_ranker");
  ASSERT_TRUE(graph) << graph.status().message();
  // Every weight MatMul of the two blocks in FP8 (pinned): QKV, attention output, both FFN layers.
  const auto zoo = testing::source_dir() / "models" / "zoo" / "attention_ranker";
  CompileSettings settings;
  settings.calibration_data = (zoo / "calib").string();
  settings.pin_rules = {"/blocks\\.[01]/(attn/(qkv|out)|ffn/ffn\\.[02])/MatMul=fp8"};
  auto records = testing::run_pipeline(
      **graph, "canonicalize,infer-shapes,probe{batches=3,min_batches=3,amax_batches=3},pin-precision,insert-scales,infer-shapes",
      settings);
  ASSERT_TRUE(records) << records.status().message();
  auto fused = (*graph)->clone();
  auto fusion = testing::run_pipeline(*fused, "fuse-gemm-epilogue,infer-shapes");
  ASSERT_TRUE(fusion) << fusion.status().message();
  const auto& statistics = fusion->at(0).statistics;
  EXPECT_EQ(statistics.at("biases-fused"), 8.0);     // every MatMul site's bias
  EXPECT_EQ(statistics.at("gelus-fused"), 2.0);      // FFN.0 of each block
  EXPECT_EQ(statistics.at("residuals-fused"), 4.0);  // attention output and FFN.2 of each block
  size_t adds = 0, gelus = 0;
  for (const ir::Node* node : fused->nodes()) {
    adds += node->is("Add");
    gelus += node->is("Gelu");
  }
  EXPECT_EQ(adds, 1u);  // the dense features' scale-and-shift embedding (an elementwise Mul + Add), no GEMM's
  EXPECT_EQ(gelus, 0u);
  auto difference = testing::max_output_difference_on_data(**graph, *fused, zoo / "eval", 2);
  ASSERT_TRUE(difference) << difference.status().message();
  EXPECT_EQ(*difference, 0.0f);
}

TEST(FuseGemmEpilogue, FloatSitesOfTheZooFuseComputeTheSameAndLowerToQdq) {
  for (const std::string name : {"dhen", "wukong"}) {
    SCOPED_TRACE(name);
    auto graph = testing::load_zoo_model(name);
    ASSERT_TRUE(graph) << graph.status().message();
    const auto zoo = testing::source_dir() / "models" / "zoo" / name;
    CompileSettings settings;
    settings.calibration_data = (zoo / "calib").string();
    auto records = testing::run_pipeline(
        **graph, "canonicalize,infer-shapes,probe{batches=3,min_batches=3,amax_batches=3},pin-precision,insert-scales,infer-shapes",
        settings);
    ASSERT_TRUE(records) << records.status().message();
    auto fused = (*graph)->clone();
    auto fusion = testing::run_pipeline(*fused, "fuse-gemm-epilogue,infer-shapes");
    ASSERT_TRUE(fusion) << fusion.status().message();
    EXPECT_GE(fusion->at(0).statistics.at("float-gemms-fused"), 1.0);
    size_t relus = 0;
    for (const ir::Node* node : fused->nodes()) relus += node->is("Relu");
    EXPECT_EQ(relus, 0u) << "every Relu follows a GEMM in these models";
    auto difference = testing::max_output_difference_on_data(**graph, *fused, zoo / "eval", 2);
    ASSERT_TRUE(difference) << difference.status().message();
    EXPECT_EQ(*difference, 0.0f);
    testing::expect_qdq_lowering_computes_the_same(*fused, zoo / "eval");
  }
}

}  // namespace
}  // namespace loka
