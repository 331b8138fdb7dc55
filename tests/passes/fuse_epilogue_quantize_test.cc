// ============================================================================
// tests/passes/fuse_epilogue_quantize_test.cc — `fuse-epilogue-quantize`: golden
// IR (CHECK lines) with negative twins, the annotation entry, and the rewritten
// model on the CPU runtime and through --format qdq against the original:
// bit-identical outputs, saturating values included.
// ============================================================================
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <random>
#include <string>

#include "canonicalize_test_util.h"
#include "mods_test_util.h"
#include "passes/onnx/onnx_export.h"
#include "passes/onnx/onnx_import.h"
#include "passes/ir/text_format.h"
#include "passes/onnx/qdq_lowering.h"
#include "passes/probe/annotations.h"
#include "test_support.h"

namespace loka {
namespace {

/// Two DCN cross layers on x0 [batch, 16]: cross1 = x0 ⊙ (x0 W1) + x0, then cross2 reads
/// cross1's output y1 as its X (X_scale `s2`, with `cross2_attributes`) and its residual.
/// `extra` adds lines before the output.
std::string two_cross_layers(const std::string& s2 = "0.25", const std::string& cross2_attributes = "",
                             const std::string& extra = "") {
  return R"(graph "t" {
  opset "" 19
  opset "ai.loka" 1
  input %x0 : f32[batch,16]
  init %w1 : f8e4m3fn[16,16] = )" + testing::e4m3_codes_ir(256) + R"(
  init %ws1 : f32[16] = )" + testing::ones_ir(16) + R"(
  init %xs1 : f32[] = [0.5]
  init %w2 : f8e4m3fn[16,16] = )" + testing::e4m3_codes_ir(256) + R"(
  init %ws2 : f32[16] = )" + testing::ones_ir(16) + R"(
  init %xs2 : f32[] = [)" + s2 + R"(]
  %y1 = ai.loka::QuantizedGemm(%x0, %w1, %ws1, _, %xs1, %x0, %x0) : f32[batch,16] @"cross1"
  %y2 = ai.loka::QuantizedGemm(%y1, %w2, %ws2, _, %xs2, %x0, %y1))" + cross2_attributes + R"( : f32[batch,16] @"cross2"
)" + extra + R"(  output %y2
})";
}

using testing::Fusion;

Fusion fuse(const std::string& input) { return testing::apply_fusion(input, "fuse-epilogue-quantize"); }
void expect_unchanged(const std::string& input) { testing::expect_fusion_unchanged(input, "fuse-epilogue-quantize"); }

// ------------------------------------------------------------------ golden --

TEST(FuseEpilogueQuantize, ACrossLayerWritesTheCodesTheNextLayersGemmReads) {
  const Fusion result = fuse(two_cross_layers());
  EXPECT_TRUE(result.changed);
  EXPECT_EQ(result.statistics.at("epilogues-quantizing"), 1.0);
  EXPECT_EQ(result.statistics.at("quantizes-removed"), 1.0);
  // cross2 reads the codes as X and still reads y1 as its residual; its own output has no FP8
  // reader, so it is left as it was.
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK: init %y1_scale : f32[] = [0.25]
CHECK: %y1, %y1_fp8 = ai.loka::QuantizedGemm(%x0, %w1, %ws1, _, %xs1, %x0, %x0, %y1_scale) : f32[batch,16], f8e4m3fn[batch,16] @"cross1"
CHECK: %y2 = ai.loka::QuantizedGemm(%y1_fp8, %w2, %ws2, _, %xs2, %x0, %y1) : f32[batch,16] @"cross2"
)"),
            "")
      << result.printed;
  const auto& entry = result.annotations["nodes"]["cross1"];
  EXPECT_EQ(entry["y_scale"].get<double>(), 0.25);
  EXPECT_EQ(entry["feeds"], nlohmann::json::array({"cross2"}));
}

/// A cross layer's output y1 read by two GEMMs, top0 and top1, at scale 0.125. `quantized`: as
/// share-activation-quantize leaves it, through one QuantizeLinear (with `attributes`) whose codes
/// both read; otherwise directly. `extra` adds lines last.
std::string cross_output_read_by_two_gemms(bool quantized = true, const std::string& attributes = "",
                                           const std::string& extra = "") {
  const std::string readers =
      quantized ? R"(  %q = QuantizeLinear(%y1, %s, %zp))" + attributes + R"( : f8e4m3fn[batch,16] @"y1_quantize"
  %a = ai.loka::QuantizedGemm(%q, %w, %ws, _, %s) : f32[batch,16] @"top0"
  %b = ai.loka::QuantizedGemm(%q, %w, %ws, _, %s) : f32[batch,16] @"top1"
)"
                : R"(  %a = ai.loka::QuantizedGemm(%y1, %w, %ws, _, %s) : f32[batch,16] @"top0"
  %b = ai.loka::QuantizedGemm(%y1, %w, %ws, _, %s1) : f32[batch,16] @"top1"
)";
  return R"(graph "t" {
  opset "" 19
  opset "ai.loka" 1
  input %x0 : f32[batch,16]
  init %w : f8e4m3fn[16,16] = )" + testing::e4m3_codes_ir(256) + R"(
  init %ws : f32[16] = )" + testing::ones_ir(16) + R"(
  init %xs : f32[] = [0.5]
  init %s : f32[] = [0.125]
  init %s1 : f32[] = [0.125]
  init %zp : f8e4m3fn[] = [0x00]
  %y1 = ai.loka::QuantizedGemm(%x0, %w, %ws, _, %xs, %x0, %x0) : f32[batch,16] @"cross1"
)" + readers + R"(  output %a
  output %b
  output %y1
)" + extra + "}";
}

TEST(FuseEpilogueQuantize, TakesOverTheQuantizeLinearOfAnOutputSeveralGemmsShare) {
  const std::string input = cross_output_read_by_two_gemms();
  const Fusion result = fuse(input);
  EXPECT_EQ(result.statistics.at("quantizes-removed"), 1.0);
  EXPECT_EQ(result.printed.find("QuantizeLinear"), std::string::npos) << result.printed;
  EXPECT_EQ(result.printed.find("%zp"), std::string::npos) << "the unread zero point goes\n" << result.printed;
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK: %y1, %y1_fp8 = ai.loka::QuantizedGemm(%x0, %w, %ws, _, %xs, %x0, %x0, %y1_scale)
CHECK: %a = ai.loka::QuantizedGemm(%y1_fp8, %w, %ws, _, %s)
CHECK: %b = ai.loka::QuantizedGemm(%y1_fp8, %w, %ws, _, %s)
CHECK: output %y1
)"),
            "")
      << result.printed;
  EXPECT_EQ(result.annotations["nodes"]["cross1"]["feeds"], nlohmann::json::array({"top0", "top1"}));
}

// ---------------------------------------------------------- negative twins --

/// An FP8 MLP on x [batch, 16]: fc1 (bias, GELU) read by fc2 only, at fc2's X_scale 0.25.
/// `fc1_inputs` replaces fc1's argument list; `extra` adds lines before the output.
std::string two_gemm_mlp(const std::string& fc1_inputs = "%x, %w1, %ws1, %b1, %xs1", const std::string& extra = "") {
  return R"(graph "t" {
  opset "" 19
  opset "ai.loka" 1
  input %x : f32[batch,16]
  init %w1 : f8e4m3fn[16,16] = )" + testing::e4m3_codes_ir(256) + R"(
  init %ws1 : f32[16] = )" + testing::ones_ir(16) + R"(
  init %b1 : f32[16] = )" + testing::ones_ir(16) + R"(
  init %xs1 : f32[] = [0.5]
  init %w2 : f8e4m3fn[16,16] = )" + testing::e4m3_codes_ir(256) + R"(
  init %ws2 : f32[16] = )" + testing::ones_ir(16) + R"(
  init %xs2 : f32[] = [0.25]
  %h = ai.loka::QuantizedGemm()" + fc1_inputs + R"() {activation = "gelu"} : f32[batch,16] @"fc1"
  %y = ai.loka::QuantizedGemm(%h, %w2, %ws2, _, %xs2) : f32[batch,16] @"fc2"
)" + extra + R"(  output %y
})";
}

TEST(FuseEpilogueQuantize, AGemmOnlyQuantizingReadersReadWritesTheirCodesAndLeavesYUnread) {
  const Fusion result = fuse(two_gemm_mlp());
  EXPECT_TRUE(result.changed);
  EXPECT_EQ(result.statistics.at("epilogues-quantizing"), 1.0);
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK: %h, %h_fp8 = ai.loka::QuantizedGemm(%x, %w1, %ws1, %b1, %xs1, _, _, %h_scale) {activation = "gelu"} : f32[batch,16], f8e4m3fn[batch,16] @"fc1"
CHECK: %y = ai.loka::QuantizedGemm(%h_fp8, %w2, %ws2, _, %xs2) : f32[batch,16] @"fc2"
)"),
            "")
      << result.printed;
  EXPECT_EQ(result.annotations["nodes"]["fc1"]["feeds"], nlohmann::json::array({"fc2"}));
}

TEST(FuseEpilogueQuantize, NoCodesFromAGemmWithoutAMultiplierWhenTheOptionSaysSo) {
  testing::expect_fusion_unchanged(two_gemm_mlp(), "fuse-epilogue-quantize{unread_y=false}");
}

TEST(FuseEpilogueQuantize, NoCodesFromAGemmWithoutAMultiplierWhoseOutputIsAGraphOutput) {
  // Y is written anyway: cuBLASLt's epilogue writes it fastest, and the codes would need a pass.
  expect_unchanged(two_gemm_mlp("%x, %w1, %ws1, %b1, %xs1", "  output %h\n"));
}

TEST(FuseEpilogueQuantize, NoCodesFromAGemmWithoutAMultiplierOffTheFp8TensorCores) {
  // fc1 reads x [batch, 24] (K = 24): no FP8 tensor-core GEMM, so no BF16 sums to encode from.
  std::string input = two_gemm_mlp();
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"input %x : f32[batch,16]", "input %x : f32[batch,24]"},
           {"init %w1 : f8e4m3fn[16,16] = " + testing::e4m3_codes_ir(256), "init %w1 : f8e4m3fn[16,24] = " + testing::e4m3_codes_ir(384)}})
    input.replace(input.find(from), from.size(), to);
  expect_unchanged(input);
}

TEST(FuseEpilogueQuantize, NoCodesFromAGemmWithoutAMultiplierThatAnFp32ReaderReads) {
  // cuBLASLt runs this one's epilogue in the GEMM: encoding Y would need a pass of its own.
  std::string input = two_cross_layers();
  const std::string cross = "QuantizedGemm(%x0, %w1, %ws1, _, %xs1, %x0, %x0)";
  input.replace(input.find(cross), cross.size(), "QuantizedGemm(%x0, %w1, %ws1, _, %xs1, _, %x0)");
  expect_unchanged(input);
}

TEST(FuseEpilogueQuantize, NoCodesForAReaderThatQuantizesPerRow) {
  expect_unchanged(two_cross_layers("0.25", " {act_recipe = \"row\"}"));
}

TEST(FuseEpilogueQuantize, NoCodesForAReaderOffTheFp8TensorCores) {
  // Width 24: cross2 runs emulated or in BF16, which reads float X as cheaply.
  const std::string twin = R"(graph "t" {
  opset "" 19
  opset "ai.loka" 1
  input %x0 : f32[batch,24]
  init %w1 : f8e4m3fn[24,24] = )" + testing::e4m3_codes_ir(576) + R"(
  init %ws1 : f32[24] = )" + testing::ones_ir(24) + R"(
  init %xs1 : f32[] = [0.5]
  init %xs2 : f32[] = [0.25]
  %y1 = ai.loka::QuantizedGemm(%x0, %w1, %ws1, _, %xs1, %x0, %x0) : f32[batch,24] @"cross1"
  %y2 = ai.loka::QuantizedGemm(%y1, %w1, %ws1, _, %xs2, %x0, %y1) : f32[batch,24] @"cross2"
  output %y2
})";
  expect_unchanged(twin);
}

TEST(FuseEpilogueQuantize, NoCodesWhenTwoReadersUseDifferentScales) {
  const std::string third = R"(  init %xs3 : f32[] = [0.5]
  %y3 = ai.loka::QuantizedGemm(%y1, %w2, %ws2, _, %xs3) : f32[batch,16] @"top"
  output %y3
)";
  expect_unchanged(two_cross_layers("0.25", "", third));
  // The same reader at cross2's scale: both take the codes.
  const Fusion result = fuse(two_cross_layers("0.25", "", R"(  init %xs3 : f32[] = [0.25]
  %y3 = ai.loka::QuantizedGemm(%y1, %w2, %ws2, _, %xs3) : f32[batch,16] @"top"
  output %y3
)"));
  EXPECT_EQ(result.statistics.at("quantizes-removed"), 2.0);
}

TEST(FuseEpilogueQuantize, NoCodesForAQuantizeLinearThatDoesNotSaturate) {
  expect_unchanged(cross_output_read_by_two_gemms(true, " {saturate = 0}"));
}

TEST(FuseEpilogueQuantize, NoCodesForAQuantizeLinearWhoseCodesAreAGraphOutput) {
  // Taking it over would rename the model's output to the producer's codes.
  expect_unchanged(cross_output_read_by_two_gemms(true, "", "  output %q\n"));
}

TEST(FuseEpilogueQuantize, AfterShareActivationQuantizeTheQuantizeLinearAndItsEntryGo) {
  // The default pipeline's order: share-activation-quantize gives y1's two GEMM readers one
  // QuantizeLinear (with an annotation entry); this pass then makes the codes in cross1.
  const std::string input = cross_output_read_by_two_gemms(/*quantized=*/false);
  const Fusion shared = testing::apply_fusion(input, "share-activation-quantize");
  ASSERT_TRUE(shared.after != nullptr);
  ASSERT_TRUE(shared.annotations["nodes"].contains("y1_quantize")) << shared.annotations.dump();
  auto graph = shared.after->clone();
  auto records = testing::run_pipeline(*graph, "fuse-epilogue-quantize,infer-shapes");
  ASSERT_TRUE(records) << records.status().message();
  EXPECT_EQ(records->at(0).statistics.at("quantizes-removed"), 1.0);
  const std::string printed = ir::print_graph(*graph);
  EXPECT_EQ(printed.find("QuantizeLinear"), std::string::npos) << printed;
  auto document = read_annotations(*graph);
  ASSERT_TRUE(document) << document.status().message();
  EXPECT_FALSE((*document)["nodes"].contains("y1_quantize")) << document->dump();
  EXPECT_EQ((*document)["nodes"]["cross1"]["feeds"], nlohmann::json::array({"top0", "top1"}));
}

// --------------------------------------------------------------- numerics --

/// Three cross layers on x0 [batch, 32] (random FP8 weights, biases) with a top QuantizedGemm
/// reading the last one; X_scales small enough that part of every layer's input saturates.
std::unique_ptr<ir::Graph> cross_network(std::mt19937& rng) {
  auto graph = std::make_unique<ir::Graph>();
  graph->opsets[""] = 19;
  graph->opsets["ai.loka"] = 1;
  ir::Value* x0 = graph->add_value("x0", {DType::kFloat32, std::vector<ir::Dim>{ir::Dim::named("batch"), ir::Dim::known(32)}});
  graph->add_input(x0);
  ir::Value* x = x0;
  for (int layer = 0; layer < 4; ++layer) {
    const std::string id = std::to_string(layer);
    const bool top = layer == 3;
    std::vector<ir::Value*> inputs{x, graph->add_initializer("w" + id, testing::random_e4m3_weight(rng, 32, 32)),
                                   graph->add_initializer("ws" + id, testing::random_tensor(rng, {32}, 0.01f, 0.1f)),
                                   graph->add_initializer("b" + id, testing::random_tensor(rng, {32})),
                                   graph->add_initializer("xs" + id, Tensor::scalar_float(3.0f / 448.0f))};
    if (!top) {
      inputs.push_back(x0);
      inputs.push_back(x);
    }
    ir::Node* gemm = graph->add_node("QuantizedGemm", inputs, 1, (top ? "top" : "cross") + id, "ai.loka");
    x = gemm->output(0);
  }
  graph->add_output(x);
  auto prepared = testing::run_pipeline(*graph, "infer-shapes");
  EXPECT_TRUE(prepared) << prepared.status().message();
  return graph;
}

TEST(FuseEpilogueQuantize, OutputsAreBitIdenticalOnTheCpuRuntime) {
  std::mt19937 rng(71);
  auto graph = cross_network(rng);
  auto fused = graph->clone();
  auto records = testing::run_pipeline(*fused, "fuse-epilogue-quantize,infer-shapes");
  ASSERT_TRUE(records) << records.status().message();
  ASSERT_EQ(records->at(0).statistics.at("epilogues-quantizing"), 3.0);
  for (const int64_t batch : {1, 7}) {
    const Tensor input = testing::random_tensor(rng, {batch, 32}, -4.0f, 4.0f);
    auto before = testing::run_graph(*graph, {input});
    auto after = testing::run_graph(*fused, {input});
    ASSERT_TRUE(before && after) << (before ? after.status() : before.status()).message();
    EXPECT_EQ(testing::max_abs_difference((*before)[0], (*after)[0]), 0.0f);
  }
}

/// fc0 (GELU) → fc1 (ReLU) → fc2 on x [batch, 32], random FP8 weights and biases, X_scales that
/// saturate part of each input: fc0's and fc1's outputs only the next GEMM reads.
std::unique_ptr<ir::Graph> mlp_network(std::mt19937& rng) {
  auto graph = std::make_unique<ir::Graph>();
  graph->opsets[""] = 19;
  graph->opsets["ai.loka"] = 1;
  ir::Value* x = graph->add_value("x", {DType::kFloat32, std::vector<ir::Dim>{ir::Dim::named("batch"), ir::Dim::known(32)}});
  graph->add_input(x);
  for (int layer = 0; layer < 3; ++layer) {
    const std::string id = std::to_string(layer);
    std::vector<ir::Value*> inputs{x, graph->add_initializer("w" + id, testing::random_e4m3_weight(rng, 32, 32)),
                                   graph->add_initializer("ws" + id, testing::random_tensor(rng, {32}, 0.01f, 0.1f)),
                                   graph->add_initializer("b" + id, testing::random_tensor(rng, {32})),
                                   graph->add_initializer("xs" + id, Tensor::scalar_float(2.0f / 448.0f))};
    ir::Node* gemm = graph->add_node("QuantizedGemm", inputs, 1, "fc" + id, "ai.loka");
    if (layer < 2) gemm->mutable_attributes().set("activation", std::string(layer == 0 ? "gelu" : "relu"));
    x = gemm->output(0);
  }
  graph->add_output(x);
  auto prepared = testing::run_pipeline(*graph, "infer-shapes");
  EXPECT_TRUE(prepared) << prepared.status().message();
  return graph;
}

TEST(FuseEpilogueQuantize, AnMlpsUnreadOutputsAreLeftOutOfTheModelAndItComputesTheSame) {
  std::mt19937 rng(79);
  auto graph = mlp_network(rng);
  auto fused = graph->clone();
  auto records = testing::run_pipeline(*fused, "fuse-epilogue-quantize,infer-shapes");
  ASSERT_TRUE(records) << records.status().message();
  ASSERT_EQ(records->at(0).statistics.at("epilogues-quantizing"), 2.0);
  // The export names no output 0 for fc0 and fc1: nothing reads their Y.
  onnx::ModelProto model;
  ASSERT_TRUE(onnx_io::export_model(*fused, model).is_ok());
  int omitted = 0;
  for (const onnx::NodeProto& node : model.graph().node()) {
    if (node.op_type() != "QuantizedGemm") continue;
    const bool writes_codes = node.output_size() == 2;
    EXPECT_EQ(node.output(0).empty(), writes_codes) << node.name();
    omitted += node.output(0).empty() ? 1 : 0;
  }
  EXPECT_EQ(omitted, 2);
  // The CPU runtime runs the model with Y left out, bit for bit as before.
  for (const int64_t batch : {1, 7}) {
    const Tensor input = testing::random_tensor(rng, {batch, 32}, -4.0f, 4.0f);
    auto before = testing::run_graph(*graph, {input});
    auto after = testing::run_graph(*fused, {input});
    ASSERT_TRUE(before && after) << (before ? after.status() : before.status()).message();
    EXPECT_EQ(testing::max_abs_difference((*before)[0], (*after)[0]), 0.0f);
  }
  // Exported and imported again, the model still has the codes and exports Y left out again.
  auto reimported = onnx_io::import_model(model, {}, "the exported MLP");
  ASSERT_TRUE(reimported) << reimported.status().message();
  onnx::ModelProto again;
  ASSERT_TRUE(onnx_io::export_model(**reimported, again).is_ok());
  int omitted_again = 0;
  for (const onnx::NodeProto& node : again.graph().node()) omitted_again += node.output_size() == 2 && node.output(0).empty();
  EXPECT_EQ(omitted_again, 2);
}

TEST(FuseEpilogueQuantize, TheQdqFormComputesTheSame) {
  std::mt19937 rng(73);
  auto graph = cross_network(rng);
  auto fused = graph->clone();
  auto records = testing::run_pipeline(*fused, "fuse-epilogue-quantize,infer-shapes");
  ASSERT_TRUE(records) << records.status().message();
  auto lowered = fused->clone();
  QdqLoweringStats stats;
  const Status status = lower_to_qdq(*lowered, &stats);
  ASSERT_TRUE(status.is_ok()) << status.message();
  for (const ir::Node* node : lowered->nodes()) EXPECT_NE(node->domain(), "ai.loka") << node->name();
  const Tensor input = testing::random_tensor(rng, {5, 32}, -4.0f, 4.0f);
  auto loka = testing::run_graph(*fused, {input});
  auto qdq = testing::run_graph(*lowered, {input});
  ASSERT_TRUE(loka && qdq) << (loka ? qdq.status() : loka.status()).message();
  EXPECT_EQ(testing::max_abs_difference((*loka)[0], (*qdq)[0]), 0.0f);
}

}  // namespace
}  // namespace loka
