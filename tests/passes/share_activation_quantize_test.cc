// ============================================================================
// tests/passes/share_activation_quantize_test.cc — `share-activation-quantize`:
// golden IR (CHECK lines) with negative twins, the annotation entry, and the
// rewritten model on the CPU runtime against the original: bit-identical
// outputs, saturating values, 3-D activations and transposed codes included.
// ============================================================================
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "canonicalize_test_util.h"
#include "mods_test_util.h"
#include "test_support.h"

namespace loka {
namespace {

/// x [batch, k] read by QuantizedGemms q0 and q1 (N = 16) with X_scales `s0` and `s1`
/// (q1 with `q1_attributes`), and by a Relu; `extra` adds lines before the outputs.
std::string shared_input(int64_t k = 16, const std::string& s0 = "0.5", const std::string& s1 = "0.5",
                         const std::string& q1_attributes = "", const std::string& extra = "") {
  const std::string kk = std::to_string(k);
  return R"(graph "t" {
  opset "" 17
  opset "ai.loka" 1
  input %x : f32[batch,)" + kk + R"(]
  init %w0 : f8e4m3fn[16,)" + kk + "] = " + testing::e4m3_codes_ir(16 * k) + R"(
  init %ws0 : f32[16] = )" + testing::ones_ir(16) + R"(
  init %xs0 : f32[] = [)" + s0 + R"(]
  init %w1 : f8e4m3fn[16,)" + kk + "] = " + testing::e4m3_codes_ir(16 * k) + R"(
  init %ws1 : f32[16] = )" + testing::ones_ir(16) + R"(
  init %xs1 : f32[] = [)" + s1 + R"(]
  %a = ai.loka::QuantizedGemm(%x, %w0, %ws0, _, %xs0) : f32[batch,16] @"q0"
  %b = ai.loka::QuantizedGemm(%x, %w1, %ws1, _, %xs1))" + q1_attributes + R"( : f32[batch,16] @"q1"
  %r = Relu(%x) : f32[batch,)" + kk + R"(] @"relu"
)" + extra + R"(  output %a
  output %b
  output %r
})";
}

using testing::Fusion;

Fusion share(const std::string& input) { return testing::apply_fusion(input, "share-activation-quantize"); }
void expect_unchanged(const std::string& input) {
  testing::expect_fusion_unchanged(input, "share-activation-quantize");
}

// ------------------------------------------------------------------ golden --

TEST(ShareActivationQuantize, GemmsWithOneScaleReadOneQuantizeLinear) {
  const Fusion result = share(shared_input());
  EXPECT_TRUE(result.changed);
  EXPECT_EQ(result.statistics.at("quantizes-shared"), 1.0);
  EXPECT_EQ(result.statistics.at("gemms-fed"), 2.0);
  EXPECT_EQ(result.statistics.at("opset-raised-to-19"), 1.0);
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK: opset "" 19
CHECK-NOT: %xs0
CHECK-NOT: %xs1
CHECK: init %x_scale : f32[] = [0.5]
CHECK: init %x_zero_point : f8e4m3fn[] = [0x00]
CHECK: %r = Relu(%x)
CHECK-NEXT: %x_fp8 = QuantizeLinear(%x, %x_scale, %x_zero_point) : f8e4m3fn[batch,16] @"x_quantize"
CHECK: %a = ai.loka::QuantizedGemm(%x_fp8, %w0, %ws0, _, %x_scale) : f32[batch,16] @"q0"
CHECK-NEXT: %b = ai.loka::QuantizedGemm(%x_fp8, %w1, %ws1, _, %x_scale) : f32[batch,16] @"q1"
)"),
            "")
      << result.printed;
  const auto& entry = result.annotations["nodes"]["x_quantize"];
  EXPECT_EQ(entry["op"], "QuantizeLinear");
  EXPECT_EQ(entry["precision"], "fp8_e4m3");
  EXPECT_EQ(entry["y_scale"].get<double>(), 0.5);
  EXPECT_EQ(entry["feeds"], nlohmann::json::array({"q0", "q1"}));
}

TEST(ShareActivationQuantize, OnlyReadersWithTheSameScaleShare) {
  const std::string third = R"(  init %w2 : f8e4m3fn[16,16] = )" + testing::e4m3_codes_ir(256) + R"(
  init %ws2 : f32[16] = )" + testing::ones_ir(16) + R"(
  init %xs2 : f32[] = [0.25]
  %c = ai.loka::QuantizedGemm(%x, %w2, %ws2, _, %xs2) : f32[batch,16] @"q2"
  output %c
)";
  const Fusion result = share(shared_input(16, "0.5", "0.5", "", third));
  EXPECT_EQ(result.statistics.at("gemms-fed"), 2.0);
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK: %c = ai.loka::QuantizedGemm(%x, %w2, %ws2, _, %xs2)
CHECK: %a = ai.loka::QuantizedGemm(%x_fp8,
CHECK: %b = ai.loka::QuantizedGemm(%x_fp8,
)"),
            "")
      << result.printed;
}

/// x [batch, 16, 8] transposed to [batch, 8, 16] and read by QuantizedGemms (N = 16) with
/// X_scales `s0` and `s1`; `extra` adds lines before the outputs.
std::string transposed_input(const std::string& s0 = "0.5", const std::string& s1 = "0.5", const std::string& extra = "") {
  return R"(graph "t" {
  opset "" 17
  opset "ai.loka" 1
  input %x : f32[batch,16,8]
  init %w0 : f8e4m3fn[16,16] = )" + testing::e4m3_codes_ir(256) + R"(
  init %ws0 : f32[16] = )" + testing::ones_ir(16) + R"(
  init %xs0 : f32[] = [)" + s0 + R"(]
  init %w1 : f8e4m3fn[16,16] = )" + testing::e4m3_codes_ir(256) + R"(
  init %ws1 : f32[16] = )" + testing::ones_ir(16) + R"(
  init %xs1 : f32[] = [)" + s1 + R"(]
  %t = Transpose(%x) {perm = ints[0, 2, 1]} : f32[batch,8,16] @"transpose"
  %a = ai.loka::QuantizedGemm(%t, %w0, %ws0, _, %xs0) : f32[batch,8,16] @"q0"
  %b = ai.loka::QuantizedGemm(%t, %w1, %ws1, _, %xs1) : f32[batch,8,16] @"q1"
)" + extra + R"(  output %a
  output %b
})";
}

TEST(ShareActivationQuantize, ATransposeReadOnlyByTheGemmsMovesCodes) {
  const Fusion result = share(transposed_input());
  EXPECT_TRUE(result.changed);
  EXPECT_EQ(result.statistics.at("transposes-of-codes"), 1.0);
  EXPECT_EQ(result.statistics.at("opset-raised-to-21"), 1.0);
  EXPECT_EQ(result.statistics.count("quantizes-shared"), 0u);
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK: opset "" 21
CHECK: %x_fp8 = QuantizeLinear(%x, %x_scale, %x_zero_point) : f8e4m3fn[batch,16,8] @"x_quantize"
CHECK-NEXT: %t_fp8 = Transpose(%x_fp8) {perm = ints[0, 2, 1]} : f8e4m3fn[batch,8,16] @"transpose"
CHECK-NEXT: %a = ai.loka::QuantizedGemm(%t_fp8, %w0, %ws0, _, %x_scale) : f32[batch,8,16] @"q0"
CHECK-NEXT: %b = ai.loka::QuantizedGemm(%t_fp8, %w1, %ws1, _, %x_scale) : f32[batch,8,16] @"q1"
)"),
            "")
      << result.printed;
  EXPECT_EQ(result.annotations["nodes"]["transpose"]["op"], "Transpose");
  EXPECT_EQ(result.annotations["nodes"]["transpose"]["feeds"], nlohmann::json::array({"q0", "q1"}));
}

TEST(ShareActivationQuantize, TransposesAndDirectReadersOfOneValueShareOneQuantizeLinear) {
  // x [batch, 16, 16] read by two Transposes (each read by a GEMM) and by one GEMM directly, all
  // at scale 0.5: one QuantizeLinear, whose codes the transposes move and the third GEMM reads.
  const Fusion result = share(R"(graph "t" {
  opset "" 17
  opset "ai.loka" 1
  input %x : f32[batch,16,16]
  init %w : f8e4m3fn[16,16] = )" + testing::e4m3_codes_ir(256) + R"(
  init %ws : f32[16] = )" + testing::ones_ir(16) + R"(
  init %xs0 : f32[] = [0.5]
  init %xs1 : f32[] = [0.5]
  init %xs2 : f32[] = [0.5]
  %t0 = Transpose(%x) {perm = ints[0, 2, 1]} : f32[batch,16,16] @"transpose0"
  %t1 = Transpose(%x) {perm = ints[0, 2, 1]} : f32[batch,16,16] @"transpose1"
  %a = ai.loka::QuantizedGemm(%t0, %w, %ws, _, %xs0) : f32[batch,16,16] @"q0"
  %b = ai.loka::QuantizedGemm(%t1, %w, %ws, _, %xs1) : f32[batch,16,16] @"q1"
  %c = ai.loka::QuantizedGemm(%x, %w, %ws, _, %xs2) : f32[batch,16,16] @"q2"
  output %a
  output %b
  output %c
})");
  EXPECT_EQ(result.statistics.at("transposes-of-codes"), 2.0);
  EXPECT_EQ(result.statistics.count("quantizes-shared"), 0u);
  size_t quantizes = 0;
  for (size_t at = result.printed.find("QuantizeLinear("); at != std::string::npos;
       at = result.printed.find("QuantizeLinear(", at + 1))
    ++quantizes;
  EXPECT_EQ(quantizes, 1u) << result.printed;
  EXPECT_NE(result.printed.find("%c = ai.loka::QuantizedGemm(%x_fp8, %w, %ws, _, %x_scale)"), std::string::npos)
      << result.printed;
  EXPECT_EQ(result.annotations["nodes"]["x_quantize"]["feeds"], nlohmann::json::array({"q0", "q1", "q2"}));
}

TEST(ShareActivationQuantize, NoCodesTransposedWhenAReaderIsNotSuchAGemmOrTheScalesDiffer) {
  const std::string relu = "  %r = Relu(%t) : f32[batch,8,16] @\"relu\"\n  output %r\n";
  // Neither rewrite applies: the transpose's readers disagree, and each scale has one GEMM.
  expect_unchanged(transposed_input("0.5", "0.25"));
  // With a float reader the transpose stays; its two GEMMs still share one quantize of its output.
  const Fusion result = share(transposed_input("0.5", "0.5", relu));
  EXPECT_EQ(result.statistics.count("transposes-of-codes"), 0u);
  EXPECT_EQ(result.statistics.at("quantizes-shared"), 1.0);
  EXPECT_NE(result.printed.find("%t = Transpose(%x)"), std::string::npos) << result.printed;
}

// ---------------------------------------------------------- negative twins --

TEST(ShareActivationQuantize, NoSharingWhenTheScalesDiffer) { expect_unchanged(shared_input(16, "0.5", "0.25")); }

TEST(ShareActivationQuantize, NoSharingWhenTheOtherReaderQuantizesPerRow) {
  expect_unchanged(shared_input(16, "0.5", "0.5", " {act_recipe = \"row\"}"));
}

TEST(ShareActivationQuantize, NoSharingWhenKIsNotAMultipleOf16) { expect_unchanged(shared_input(24)); }

TEST(ShareActivationQuantize, NoSharingWhenAScaleIsNotConstant) {
  std::string input = shared_input();
  const std::string constant = "  init %xs1 : f32[] = [0.5]";
  input.replace(input.find(constant), constant.size(), "  input %xs1 : f32[]");
  expect_unchanged(input);
}

// --------------------------------------------------------------- numerics --

TEST(ShareActivationQuantize, OutputsAreBitIdenticalOnTheCpuRuntime) {
  std::mt19937 rng(61);
  for (const bool three_d : {false, true}) {
    SCOPED_TRACE(three_d ? "x [batch, 5, 32]" : "x [batch, 32]");
    auto graph = std::make_unique<ir::Graph>();
    graph->opsets[""] = 17;
    graph->opsets["ai.loka"] = 1;
    std::vector<ir::Dim> dims = {ir::Dim::named("batch")};
    if (three_d) dims.push_back(ir::Dim::known(5));
    dims.push_back(ir::Dim::known(32));
    ir::Value* x = graph->add_value("x", {DType::kFloat32, dims});
    graph->add_input(x);
    // A scale that clips part of the inputs: saturation must match too.
    ir::Value* scale = graph->add_initializer("xs", Tensor::scalar_float(2.0f / 448.0f));
    for (int g = 0; g < 3; ++g) {
      const Tensor w = testing::random_e4m3_weight(rng, 48, 32);
      const std::string id = std::to_string(g);
      ir::Node* gemm = graph->add_node("QuantizedGemm",
                                       {x, graph->add_initializer("w" + id, w),
                                        graph->add_initializer("ws" + id, testing::random_tensor(rng, {48}, 0.01f, 0.1f)),
                                        graph->add_initializer("b" + id, testing::random_tensor(rng, {48})), scale},
                                       1, "gemm" + id, "ai.loka");
      graph->add_output(gemm->output(0));
    }
    auto shared = graph->clone();
    auto records = testing::run_pipeline(*shared, "share-activation-quantize,infer-shapes");
    ASSERT_TRUE(records) << records.status().message();
    ASSERT_TRUE(records->at(0).changed);
    const Shape shape = three_d ? Shape{6, 5, 32} : Shape{6, 32};
    const Tensor input = testing::random_tensor(rng, shape, -4.0f, 4.0f);
    auto before = testing::run_graph(*graph, {input});
    auto after = testing::run_graph(*shared, {input});
    ASSERT_TRUE(before && after) << (before ? after.status() : before.status()).message();
    for (size_t o = 0; o < before->size(); ++o) EXPECT_EQ(testing::max_abs_difference((*before)[o], (*after)[o]), 0.0f);
  }
}

TEST(ShareActivationQuantize, TransposedCodesGiveBitIdenticalOutputsOnTheCpuRuntime) {
  std::mt19937 rng(67);
  auto graph = std::make_unique<ir::Graph>();
  graph->opsets[""] = 17;
  graph->opsets["ai.loka"] = 1;
  ir::Value* x = graph->add_value("x", {DType::kFloat32, std::vector<ir::Dim>{ir::Dim::named("batch"), ir::Dim::known(32),
                                                                              ir::Dim::known(48)}});
  graph->add_input(x);
  ir::Node* transpose = graph->add_node("Transpose", {x}, 1, "transpose");
  transpose->mutable_attributes().set("perm", std::vector<int64_t>{0, 2, 1});
  const Tensor w = testing::random_e4m3_weight(rng, 16, 32);
  ir::Node* gemm = graph->add_node("QuantizedGemm",
                                   {transpose->output(0), graph->add_initializer("w", w),
                                    graph->add_initializer("ws", testing::random_tensor(rng, {16}, 0.01f, 0.1f)),
                                    graph->add_initializer("b", testing::random_tensor(rng, {16})),
                                    graph->add_initializer("xs", Tensor::scalar_float(2.0f / 448.0f))},
                                   1, "gemm", "ai.loka");
  graph->add_output(gemm->output(0));
  auto prepared = testing::run_pipeline(*graph, "infer-shapes");
  ASSERT_TRUE(prepared) << prepared.status().message();
  auto shared = graph->clone();
  auto records = testing::run_pipeline(*shared, "share-activation-quantize,infer-shapes");
  ASSERT_TRUE(records) << records.status().message();
  ASSERT_EQ(records->at(0).statistics.at("transposes-of-codes"), 1.0);
  const Tensor input = testing::random_tensor(rng, {5, 32, 48}, -4.0f, 4.0f);
  auto before = testing::run_graph(*graph, {input});
  auto after = testing::run_graph(*shared, {input});
  ASSERT_TRUE(before && after) << (before ? after.status() : before.status()).message();
  EXPECT_EQ(testing::max_abs_difference((*before)[0], (*after)[0]), 0.0f);
}

}  // namespace
}  // namespace loka
