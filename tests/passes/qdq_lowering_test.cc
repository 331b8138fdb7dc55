// ============================================================================
// tests/passes/qdq_lowering_test.cc — `lower-qdq`: golden IR and numerics.
//
// Golden tests print the lowered IR and check it with CHECK-style lines (each
// must appear, in order); every rewrite has a negative twin. Numerical tests
// build small graphs with ai.loka ops on fresh random inputs and weights, run
// them on LoKA's CPU runtime (whose ai.loka kernels are the reference) before
// and after lowering, and require the same outputs within 1e-5 — FP8 and BF16
// outputs bit for bit. Each lowered graph also passes the verifier and shape inference
// over the types the lowering wrote.
// ============================================================================
#include "passes/onnx/qdq_lowering.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "loka/bfloat16.h"
#include "loka/engine.h"
#include "loka/float8.h"
#include "loka/session.h"
#include "passes/ir/shape_inference.h"
#include "passes/ir/text_format.h"
#include "passes/ir/verifier.h"
#include "passes/onnx/onnx_export.h"
#include "test_support.h"

namespace loka {
namespace {

using ir::Graph;

std::unique_ptr<Graph> parse(const std::string& text) {
  auto graph = ir::parse_graph(text);
  EXPECT_TRUE(graph) << graph.status().message();
  if (!graph) return nullptr;
  const Status inferred = ir::infer_shapes(**graph);
  EXPECT_TRUE(inferred) << inferred.message();
  return std::move(*graph);
}

/// A graph "g" at ai.onnx `opset` that imports ai.loka, with the given body lines.
std::string loka_graph(int opset, const std::string& body) {
  return "graph \"g\" {\n  opset \"\" " + std::to_string(opset) + "\n  opset \"ai.loka\" 1\n" + body + "}\n";
}

/// The [2,4] FP8 weight %w and its per-channel scale %ws most golden graphs use.
constexpr const char* kWeight =
    "  init %w : f8e4m3fn[2,4] = [0x38, 0x40, 0xb8, 0x00, 0x30, 0x44, 0x3c, 0xc0]\n  init %ws : f32[2] = [0.5, 2]\n";

/// Each of `checks` must occur in `text`, in this order (as FileCheck's CHECK lines).
void expect_checks(const std::string& text, const std::vector<std::string>& checks) {
  size_t at = 0;
  for (const std::string& check : checks) {
    const size_t found = text.find(check, at);
    ASSERT_NE(found, std::string::npos) << "CHECK not found after offset " << at << ": " << check << "\nin:\n" << text;
    at = found + check.size();
  }
}

/// The graph lowered, verified and re-inferred (inference checks the types the lowering wrote).
std::string lower_and_print(Graph& graph, QdqLoweringStats* stats = nullptr) {
  const Status status = lower_to_qdq(graph, stats);
  EXPECT_TRUE(status) << status.message();
  const Status verified = ir::verify_graph(graph);
  EXPECT_TRUE(verified) << verified.message();
  const Status inferred = ir::infer_shapes(graph);
  EXPECT_TRUE(inferred) << inferred.message();
  return ir::print_graph(graph);
}

// ------------------------------------------------------------------ golden --

TEST(LowerQdq, TensorRecipeGemmBecomesQuantizeDequantizeGemmRelu) {
  auto graph = parse(loka_graph(19, R"(  input %x : f32[batch,4]
)" + std::string(kWeight) + R"(  init %b : f32[2] = [1, -1]
  init %xs : f32[1] = [0.25]
  %y = ai.loka::QuantizedGemm(%x, %w, %ws, %b, %xs) {activation = "relu"} @"fc"
  output %y
)"));
  QdqLoweringStats stats;
  const std::string lowered = lower_and_print(*graph, &stats);
  EXPECT_EQ(stats.ops_lowered, 1u);
  EXPECT_TRUE(stats.changed);
  expect_checks(lowered, {
      "opset \"\" 19\n",
      "init %xs_scalar : f32[] = [0.25]",
      "init %qdq_fp8_zero_point : f8e4m3fn[] = [0x00]",
      "%fc/quantize_x = QuantizeLinear(%x, %xs_scalar, %qdq_fp8_zero_point) : f8e4m3fn[batch,4] @\"fc/quantize_x\"",
      "%fc/dequantize_x = DequantizeLinear(%fc/quantize_x, %xs_scalar) : f32[batch,4] @\"fc/dequantize_x\"",
      "%fc/dequantize_w = DequantizeLinear(%w, %ws) {axis = 0} : f32[2,4] @\"fc/dequantize_w\"",
      "%fc/gemm = Gemm(%fc/dequantize_x, %fc/dequantize_w, %b) {transB = 1} : f32[batch,2] @\"fc/gemm\"",
      "%y = Relu(%fc/gemm) : f32[batch,2] @\"fc\"",
      "output %y\n",
  });
  EXPECT_EQ(lowered.find("ai.loka"), std::string::npos) << lowered;
}

TEST(LowerQdq, RowRecipeUsesTheFiniteRowAmaxAndCastsToFp8) {
  auto graph = parse(loka_graph(19, R"(  input %x : f32[batch,3,4]
)" + std::string(kWeight) + R"(  %y = ai.loka::QuantizedGemm(%x, %w, %ws) {act_recipe = "row"} @"fc"
  output %y
)"));
  expect_checks(lower_and_print(*graph), {
      "%fc/abs = Abs(%x) : f32[batch,3,4]",
      "%fc/is_finite = Less(%fc/abs, %qdq_const) : bool[batch,3,4]",
      "%fc/finite_abs = Where(%fc/is_finite, %fc/abs, %qdq_const_1)",
      "%fc/row_amax = ReduceMax(%fc/finite_abs, %qdq_axes) {keepdims = 1} : f32[batch,3,1]",
      "%fc/amax_positive = Greater(%fc/row_amax, %qdq_const_1) : bool[batch,3,1]",
      "%fc/amax_over_448 = Div(%fc/row_amax, %qdq_const_2)",
      "%fc/row_scale = Where(%fc/amax_positive, %fc/amax_over_448, %qdq_const_3) : f32[batch,3,1]",
      "%fc/x_over_scale = Div(%x, %fc/row_scale) : f32[batch,3,4]",
      "%fc/x_fp8 = Cast(%fc/x_over_scale) {saturate = 1, to = 17} : f8e4m3fn[batch,3,4]",
      "%fc/x_decoded = Cast(%fc/x_fp8) {to = 1} : f32[batch,3,4]",
      "%fc/xq = Mul(%fc/x_decoded, %fc/row_scale)",
      // Rank 3: MatMul over the leading dims with the transposed dequantized weight.
      "%fc/transpose_w = Transpose(%fc/dequantize_w) {perm = ints[1, 0]} : f32[4,2]",
      "%y = MatMul(%fc/xq, %fc/transpose_w) : f32[batch,3,2] @\"fc\"",
  });
  const Graph& g = *graph;
  ASSERT_NE(g.find_value("qdq_const"), nullptr);
  EXPECT_TRUE(std::isinf(g.find_value("qdq_const")->initializer()->data<float>()[0]));
  EXPECT_EQ(g.find_value("qdq_const_2")->initializer()->data<float>()[0], 448.0f);
  EXPECT_EQ(g.find_value("qdq_axes")->initializer()->to_int64s(), std::vector<int64_t>{-1});
}

TEST(LowerQdq, LayerNormQuantFeedsAnFp8GemmThroughQuantizeDequantize) {
  auto graph = parse(loka_graph(20, R"(  input %x : f32[batch,4]
  init %gamma : f32[4] = [1, 2, 0.5, 1]
  init %beta : f32[4] = [0, 0.5, 0, -1]
  init %ys : f32[] = [0.01]
)" + std::string(kWeight) + R"(  %h = ai.loka::LayerNormQuant(%x, %gamma, %beta, %ys) {epsilon = 0.001f} @"ln"
  %y = ai.loka::QuantizedGemm(%h, %w, %ws, _, %ys) {activation = "gelu"} @"fc"
  output %y
)"));
  expect_checks(lower_and_print(*graph), {
      "opset \"\" 20\n",
      "%ln/layer_norm = LayerNormalization(%x, %gamma, %beta) {axis = -1, epsilon = 0.00100000005f, stash_type = 1} : f32[batch,4]",
      "%h = QuantizeLinear(%ln/layer_norm, %ys, %qdq_fp8_zero_point) : f8e4m3fn[batch,4] @\"ln\"",
      "%fc/dequantize_x = DequantizeLinear(%h, %ys) : f32[batch,4]",
      "%fc/gemm = Gemm(%fc/dequantize_x, %fc/dequantize_w) {transB = 1} : f32[batch,2]",
      // Opset 20 has Gelu as one op.
      "%y = Gelu(%fc/gemm) : f32[batch,2] @\"fc\"",
  });
}

TEST(LowerQdq, ReluBeforeAStaticQuantizeMovesAfterTheDequantize) {
  // onnxruntime deletes a Relu that feeds an FP8 QuantizeLinear (its ReluQuantRewrite assumes an
  // int8 zero point), so the lowering quantizes the Relu's input and applies the Relu afterwards.
  const std::string head = R"(graph "g" {
  opset "" 19
  opset "ai.loka" 1
  input %x : f32[batch,4]
)" + std::string(kWeight) + R"(  init %xs : f32[] = [0.25]
  %r = Relu(%x) @"relu"
  %y = ai.loka::QuantizedGemm(%r, %w, %ws, _, %xs) @"fc"
  output %y
)";
  auto graph = parse(head + "}\n");
  const std::string lowered = lower_and_print(*graph);
  expect_checks(lowered, {
      "%fc/quantize_x = QuantizeLinear(%x, %xs, %qdq_fp8_zero_point)",
      "%fc/dequantize_x = DequantizeLinear(%fc/quantize_x, %xs)",
      "%fc/relu_x = Relu(%fc/dequantize_x) : f32[batch,4]",
      "%y = Gemm(%fc/relu_x, %fc/dequantize_w) {transB = 1}",
  });
  EXPECT_EQ(graph->find_node("relu"), nullptr) << "the Relu had no other reader\n" << lowered;

  // Twin: the Relu's output is also a graph output, so the Relu stays for it.
  auto shared = parse(head + "  output %r\n}\n");
  const std::string kept = lower_and_print(*shared);
  expect_checks(kept, {"%r = Relu(%x) : f32[batch,4] @\"relu\"", "%fc/relu_x = Relu(%fc/dequantize_x)", "output %r"});
}

TEST(LowerQdq, YqOfAFinalReluQuantizesAWhereOnTheReluInput) {
  // Yq read from the lowering's final Relu would be a Relu feeding an FP8 QuantizeLinear, which
  // onnxruntime deletes: the codes read Where(v <= 0, 0, v) instead, Relu's values.
  auto graph = parse(loka_graph(19, R"(  input %x : f32[batch,4]
)" + std::string(kWeight) + R"(  init %xs : f32[] = [0.25]
  init %ys : f32[] = [0.5]
  %y, %yq = ai.loka::QuantizedGemm(%x, %w, %ws, _, %xs, _, _, %ys) {activation = "relu"} @"fc"
  output %y
  output %yq
)"));
  const std::string lowered = lower_and_print(*graph);
  expect_checks(lowered, {
      "%fc/gemm = Gemm(%fc/dequantize_x, %fc/dequantize_w) {transB = 1}",
      "%y = Relu(%fc/gemm)",
      "%fc/yq_not_positive = LessOrEqual(%fc/gemm, %qdq_const)",
      "%fc/yq_relu = Where(%fc/yq_not_positive, %qdq_const, %fc/gemm)",
      "%yq = QuantizeLinear(%fc/yq_relu, %ys, %qdq_fp8_zero_point)",
  });
  // The codes of every value Relu writes, NaN, -0 and saturation included.
  auto engine_graph = graph->clone();
  Tensor x = Tensor::from_floats({5, 4}, std::vector<float>{1, -1, 0.5f, 2, -0.0f, 0, 3, -3, 100, -100, 7, 0.1f,
                                                            std::numeric_limits<float>::quiet_NaN(), 1, 1, 1, 0, 0, 0, 0});
  auto bytes = onnx_io::export_model_bytes(*engine_graph);
  ASSERT_TRUE(bytes) << bytes.status().message();
  auto engine = Engine::load_bytes(std::as_bytes(std::span(bytes->data(), bytes->size())));
  ASSERT_TRUE(engine) << engine.status().message();
  const std::vector<Tensor> feeds{x};
  auto out = (*engine)->new_session()->run(feeds);
  ASSERT_TRUE(out) << out.status().message();
  const Tensor& y = (*out)[0];
  const Tensor& yq = (*out)[1];
  for (int64_t i = 0; i < y.element_count(); ++i)
    EXPECT_EQ(static_cast<const uint8_t*>(yq.raw())[i], float_to_fp8e4m3fn(y.data<float>()[i] / 0.5f)) << "element " << i;
}

TEST(LowerQdq, Bf16OperandsAreCastToFloatOnceAndABf16YIsCastLastAfterYq) {
  // A DCN cross layer on a BF16 stream: x0 is X, Multiplier and Residual, Y is stored as BF16 and
  // Yq quantizes the float32 Y, before the Cast that rounds it.
  auto graph = parse(loka_graph(19, R"(  input %x0 : bf16[batch,4]
  input %m : bf16[batch,2]
  input %r : bf16[batch,2]
)" + std::string(kWeight) + R"(  init %xs : f32[] = [0.25]
  init %ys : f32[] = [0.5]
  %y, %yq = ai.loka::QuantizedGemm(%x0, %w, %ws, _, %xs, %m, %r, %ys) {output_dtype = 16} @"fc"
  output %y
  output %yq
)"));
  const std::string lowered = lower_and_print(*graph);
  expect_checks(lowered, {
      "%fc/widen_x = Cast(%x0) {to = 1} : f32[batch,4] @\"fc/widen_x\"",
      "%fc/quantize_x = QuantizeLinear(%fc/widen_x, %xs, %qdq_fp8_zero_point)",
  });
  expect_checks(lowered, {"%fc/widen_multiplier = Cast(%m) {to = 1} : f32[batch,2]"});
  expect_checks(lowered, {"%fc/widen_residual = Cast(%r) {to = 1} : f32[batch,2]"});
  expect_checks(lowered, {
      "%fc/gemm = Gemm(%fc/dequantize_x, %fc/dequantize_w) {transB = 1} : f32[batch,2]",
      "%fc/multiply = Mul(%fc/gemm, %fc/widen_multiplier) : f32[batch,2]",
      "%y/fp32 = Add(%fc/multiply, %fc/widen_residual) : f32[batch,2] @\"fc\"",
  });
  expect_checks(lowered, {"%y = Cast(%y/fp32) {to = 16} : bf16[batch,2] @\"fc/round_bf16\""});
  expect_checks(lowered, {"%yq = QuantizeLinear(%y/fp32, %ys, %qdq_fp8_zero_point) : f8e4m3fn[batch,2]"});

  // Twin: the same layer reading x0 three times casts it once; float32 storage (output_dtype = 1)
  // writes Y with the Add itself, no Cast.
  auto shared = parse(loka_graph(19, R"(  input %x0 : bf16[batch,4]
)" + std::string(kWeight) + R"(  init %xs : f32[] = [0.25]
  init %w2 : f8e4m3fn[4,4] = [0x38, 0x40, 0xb8, 0x00, 0x30, 0x44, 0x3c, 0xc0, 0x38, 0x40, 0xb8, 0x00, 0x30, 0x44, 0x3c, 0xc0]
  init %ws2 : f32[4] = [0.5, 2, 1, 1]
  %y = ai.loka::QuantizedGemm(%x0, %w2, %ws2, _, %xs, %x0, %x0) {output_dtype = 1} @"cross"
  output %y
)"));
  const std::string once = lower_and_print(*shared);
  expect_checks(once, {"%cross/widen_x = Cast(%x0) {to = 1}", "%cross/multiply = Mul(%cross/gemm, %cross/widen_x)",
                       "%y = Add(%cross/multiply, %cross/widen_x) : f32[batch,4] @\"cross\""});
  EXPECT_EQ(once.find("Cast(%x0)"), once.rfind("Cast(%x0)")) << once;
  EXPECT_EQ(once.find("to = 16"), std::string::npos) << once;
}

TEST(LowerQdq, EmbeddingBagsWithABf16OutputCastsTheConcatenatedSums) {
  auto graph = parse(loka_graph(19, R"(  input %ids : i64[batch,3]
  init %t0 : f32[2,2] = [1, 2, 3, 4]
  init %t1 : bf16[3,2] = [0x3f80, 0x4000, 0x4040, 0x4080, 0x40a0, 0x40c0]
  %e = ai.loka::EmbeddingBags(%ids, %t0, _, %t1) {offsets = ints[0, 1, 3], output_dtype = 16} @"bags"
  output %e
)"));
  expect_checks(lower_and_print(*graph), {
      "%bags/bag1_widen = Cast(%bags/bag1_rows) {to = 1} : f32[batch,2,2]",
      "%e/fp32 = Concat(%bags/bag0_sum, %bags/bag1_sum) {axis = 1} : f32[batch,2,2] @\"bags\"",
      "%e = Cast(%e/fp32) {to = 16} : bf16[batch,2,2] @\"bags/round_bf16\"",
      "output %e\n",
  });
}

TEST(LowerQdq, GeluBelowOpset20IsTheErfFormula) {
  auto graph = parse(loka_graph(19, R"(  input %x : f32[3,4]
)" + std::string(kWeight) + R"(  init %xs : f32[] = [0.01]
  %y = ai.loka::QuantizedGemm(%x, %w, %ws, _, %xs) {activation = "gelu"} @"fc"
  output %y
)"));
  const std::string lowered = lower_and_print(*graph);
  expect_checks(lowered, {
      "%fc/gelu_half = Mul(%fc/gemm, %qdq_const)",
      "%fc/gelu_scaled = Mul(%fc/gemm, %qdq_const_1)",
      "%fc/gelu_erf = Erf(%fc/gelu_scaled)",
      "%fc/gelu_one_plus = Add(%fc/gelu_erf, %qdq_const_2)",
      "%y = Mul(%fc/gelu_half, %fc/gelu_one_plus) : f32[3,2] @\"fc\"",
  });
  EXPECT_EQ(lowered.find("Gelu("), std::string::npos);
}

TEST(LowerQdq, QuantizedGatherDequantizesPerRowThenGathers) {
  auto graph = parse(loka_graph(19, R"(  input %ids : i64[batch,2]
  init %table : f8e4m3fn[3,2] = [0x38, 0x40, 0xb8, 0x00, 0x30, 0x44]
  init %rows : f32[3] = [0.5, 2, 4]
  init %one : f32[1] = [0.125]
  %e = ai.loka::QuantizedGather(%table, %rows, %ids) @"emb"
  %f = ai.loka::QuantizedGather(%table, %one, %ids) @"emb_tensor"
  output %e
  output %f
)"));
  expect_checks(lower_and_print(*graph), {
      "%emb/dequantize_table = DequantizeLinear(%table, %rows) {axis = 0} : f32[3,2]",
      "%e = Gather(%emb/dequantize_table, %ids) {axis = 0} : f32[batch,2,2] @\"emb\"",
      "%emb_tensor/dequantize_table = DequantizeLinear(%table, %one_scalar) : f32[3,2]",
      "%f = Gather(%emb_tensor/dequantize_table, %ids) {axis = 0} : f32[batch,2,2] @\"emb_tensor\"",
  });
}

TEST(LowerQdq, DynamicOneElementScaleIsReshapedToAScalar) {
  auto graph = parse(loka_graph(19, R"(  input %x : f32[batch,4]
  input %xs : f32[1]
)" + std::string(kWeight) + R"(  %y = ai.loka::QuantizedGemm(%x, %w, %ws, _, %xs) @"fc"
  output %y
)"));
  expect_checks(lower_and_print(*graph), {
      "%fc/scale_scalar = Reshape(%xs, %qdq_axes) : f32[] @\"fc/scale_scalar\"",
      "%fc/quantize_x = QuantizeLinear(%x, %fc/scale_scalar, %qdq_fp8_zero_point)",
      "%y = Gemm(%fc/dequantize_x, %fc/dequantize_w) {transB = 1} : f32[batch,2] @\"fc\"",
  });
  EXPECT_EQ(graph->find_value("qdq_axes")->initializer()->element_count(), 0);
}

TEST(LowerQdq, GraphWithoutLokaOpsIsUnchanged) {
  // Negative twin of every rewrite: standard ops only (even ones the upgrade would touch).
  const std::string text = R"(graph "g" {
  opset "" 17
  input %x : f32[batch,4]
  init %w : f32[2,4] = [1, 2, 3, 4, 5, 6, 7, 8]
  %m = ReduceMean(%x) {axes = ints[-1], keepdims = 1} @"mean"
  %y = Gemm(%x, %w) {transB = 1} @"fc"
  %z = Add(%y, %m) @"add"
  output %z
})";
  auto graph = parse(text);
  const std::string before = ir::print_graph(*graph);
  QdqLoweringStats stats;
  ASSERT_TRUE(lower_to_qdq(*graph, &stats));
  EXPECT_FALSE(stats.changed);
  EXPECT_EQ(stats.ops_lowered, 0u);
  EXPECT_EQ(ir::print_graph(*graph), before);
}

TEST(LowerQdq, DanglingLokaImportIsDroppedAndNothingElse) {
  auto graph = parse(loka_graph(17, R"(  input %x : f32[4]
  %y = Relu(%x) @"relu"
  output %y
)"));
  QdqLoweringStats stats;
  ASSERT_TRUE(lower_to_qdq(*graph, &stats));
  EXPECT_TRUE(stats.changed);
  EXPECT_EQ(graph->opsets.count("ai.loka"), 0u);
  EXPECT_EQ(graph->opsets.at(""), 17);
}

TEST(LowerQdq, UpgradeFromOpset17MovesReduceAxesToAnInput) {
  auto graph = parse(loka_graph(17, R"(  input %x : f32[batch,4]
)" + std::string(kWeight) + R"(  init %xs : f32[] = [0.25]
  init %sum_axes : i64[1] = [1]
  %m = ReduceMean(%x) {axes = ints[1], keepdims = 1} @"mean"
  %s = ReduceSum(%x, %sum_axes) {keepdims = 0} @"sum"
  %y = ai.loka::QuantizedGemm(%x, %w, %ws, _, %xs) @"fc"
  %z = Add(%y, %m) @"add"
  output %z
  output %s
)"));
  ASSERT_TRUE(graph);
  QdqLoweringStats stats;
  expect_checks(lower_and_print(*graph, &stats), {
      "opset \"\" 19\n",
      "%m = ReduceMean(%x, %mean_axes) {keepdims = 1} : f32[batch,1] @\"mean\"",
      "%s = ReduceSum(%x, %sum_axes) {keepdims = 0}",
  });
  EXPECT_EQ(stats.ops_upgraded, 1u);
  EXPECT_EQ(graph->find_value("mean_axes")->initializer()->to_int64s(), std::vector<int64_t>{1});
}

TEST(LowerQdq, UpgradeFromOpset11ConvertsTheStandardOpsOnTheWay) {
  auto graph = parse(loka_graph(11, R"(  input %x : f32[2,3,4]
  input %ids : i64[5]
  init %table : f8e4m3fn[2,4] = [0x38, 0x40, 0xb8, 0x00, 0x30, 0x44, 0x3c, 0xc0]
  init %rows : f32[2] = [0.5, 2]
  %e = ai.loka::QuantizedGather(%table, %rows, %ids) @"emb"
  %u = Unsqueeze(%e) {axes = ints[0]} @"unsqueeze"
  %p = Softmax(%x) @"softmax"
  output %p
  output %u
)"));
  auto original = graph->clone();
  QdqLoweringStats stats;
  expect_checks(lower_and_print(*graph, &stats), {
      "opset \"\" 19\n",
      "Flatten(%x) {axis = 1}",  // opset-11 Softmax flattens from axis 1; opset 13 would not
      "%u = Unsqueeze(%e, %unsqueeze_axes)",
  });
  EXPECT_EQ(stats.ops_upgraded, 2u);
  EXPECT_EQ(stats.ops_lowered, 1u);
}

TEST(LowerQdq, RefusesWhatItCannotLowerNamingTheNode) {
  // Each refusal leaves the graph's nodes and opsets exactly as they were.
  const auto expect_refused = [](const std::string& text, const std::string& fragment) {
    auto parsed = ir::parse_graph(text);  // not inferred: the swish case fails inference already
    ASSERT_TRUE(parsed) << parsed.status().message();
    Graph* graph = parsed->get();
    (void)ir::infer_shapes(*graph);
    const std::string before = ir::print_graph(*graph);
    const Status status = lower_to_qdq(*graph);
    ASSERT_FALSE(status);
    EXPECT_NE(status.message().find(fragment), std::string::npos) << status.message();
    EXPECT_EQ(ir::print_graph(*graph), before);
  };
  expect_refused(R"(graph "g" {
  opset "" 19
  opset "ai.loka" 1
  input %x : f32[4]
  %y = ai.loka::Mystery(%x) : f32[4] @"odd"
  output %y
})", "node 'odd'");
  expect_refused(R"(graph "g" {
  opset "" 19
  opset "ai.loka" 1
  input %x : f32[3,4]
)" + std::string(kWeight) + R"(  %y = ai.loka::QuantizedGemm(%x, %w, %ws) {activation = "swish"} @"fc"
  output %y
})", "node 'fc'");
  expect_refused(R"(graph "g" {
  opset "" 19
  opset "ai.loka" 1
  input %x : f32[3,4]
)" + std::string(kWeight) + R"(  %y = ai.loka::QuantizedGemm(%x, %w, %ws) {act_recipe = "row", output_dtype = 10} @"fc"
  output %y
})", "node 'fc'");
  // The opset upgrade's own refusals: too old a source, an op it cannot carry to 19.
  const std::string gather = R"(
  opset "ai.loka" 1
  input %ids : i64[2]
  init %table : f8e4m3fn[1,2] = [0x38, 0x40]
  init %rows : f32[1] = [0.5]
  %e = ai.loka::QuantizedGather(%table, %rows, %ids) @"emb"
)";
  expect_refused("graph \"g\" {\n  opset \"\" 6" + gather + "  output %e\n}\n", "opset 6");
  expect_refused("graph \"g\" {\n  opset \"\" 17" + gather +
                     "  %s = Upsample(%e, %rows) : f32[*] @\"upsample\"\n  output %s\n}\n",
                 "node 'upsample'");
}

TEST(LowerQdq, PassReportsChangeExactlyWhenItLowers) {
  CompileSettings settings;
  PassContext context(settings, {});
  auto pass = make_lower_qdq_pass();
  EXPECT_EQ(lower_qdq_pass_info().name, "lower-qdq");
  auto loka = parse(loka_graph(19, R"(  input %ids : i64[2]
  init %table : f8e4m3fn[1,2] = [0x38, 0x40]
  init %rows : f32[1] = [0.5]
  %e = ai.loka::QuantizedGather(%table, %rows, %ids) @"emb"
  output %e
)"));
  auto changed = pass->run(*loka, context);
  ASSERT_TRUE(changed) << changed.status().message();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(context.statistics().at("ops-lowered"), 1.0);
  auto again = pass->run(*loka, context);
  ASSERT_TRUE(again);
  EXPECT_FALSE(*again) << "a lowered graph has nothing left to lower";
}

// --------------------------------------------------------------- numerical --

/// Fresh E4M3FN codes, NaN codes (0x7f, 0xff) excluded.
Tensor random_fp8(std::mt19937& rng, const Shape& shape) {
  Tensor tensor = Tensor::zeros(DType::kFloat8E4M3FN, shape);
  std::uniform_int_distribution<int> code(0, 255);
  for (uint8_t& c : tensor.values<uint8_t>()) {
    do c = static_cast<uint8_t>(code(rng));
    while ((c & 0x7f) == 0x7f);
  }
  return tensor;
}

/// Turns the graph input `name` into an initializer holding `tensor`.
void bind(Graph& graph, const std::string& name, Tensor tensor) {
  ir::Value* value = graph.find_value(name);
  ASSERT_NE(value, nullptr) << name;
  graph.remove_input(value);
  graph.set_initializer(value, std::move(tensor));
}

Result<std::vector<Tensor>> run_on_cpu(const Graph& graph, const std::vector<std::pair<std::string, Tensor>>& inputs) {
  LOKA_ASSIGN_OR_RETURN(const std::string bytes, onnx_io::export_model_bytes(graph));
  LOKA_ASSIGN_OR_RETURN(auto engine, Engine::load_bytes(std::as_bytes(std::span(bytes.data(), bytes.size()))));
  return engine->new_session()->run(inputs);
}

/// Runs `graph` before and after lowering on the same inputs; outputs must agree within 1e-5
/// (relative to magnitudes above 1), FP8 and BF16 outputs code for code.
void expect_lowering_matches(Graph& graph, const std::vector<std::pair<std::string, Tensor>>& inputs) {
  auto reference = run_on_cpu(graph, inputs);
  ASSERT_TRUE(reference) << reference.status().message();
  auto lowered_graph = graph.clone();
  ASSERT_TRUE(lower_to_qdq(*lowered_graph));
  ASSERT_TRUE(ir::verify_graph(*lowered_graph));
  for (const ir::Node* node : lowered_graph->nodes()) ASSERT_EQ(node->domain(), "") << node->name();
  auto lowered = run_on_cpu(*lowered_graph, inputs);
  ASSERT_TRUE(lowered) << lowered.status().message() << "\n" << ir::print_graph(*lowered_graph);
  ASSERT_EQ(reference->size(), lowered->size());
  for (size_t i = 0; i < reference->size(); ++i) {
    const Tensor& want = (*reference)[i];
    const Tensor& got = (*lowered)[i];
    ASSERT_EQ(want.dtype(), got.dtype());
    ASSERT_EQ(want.shape(), got.shape());
    if (want.dtype() == DType::kFloat8E4M3FN || want.dtype() == DType::kBFloat16) {
      EXPECT_EQ(std::memcmp(want.raw(), got.raw(), want.byte_size()), 0) << dtype_name(want.dtype()) << " output " << i << " differs";
      continue;
    }
    const std::vector<float> a = want.to_floats(), b = got.to_floats();
    double worst = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      ASSERT_EQ(std::isnan(a[k]), std::isnan(b[k])) << "output " << i << " element " << k;
      if (std::isnan(a[k])) continue;
      worst = std::max(worst, std::fabs(double(a[k]) - b[k]) / std::max(1.0, std::fabs(double(a[k]))));
    }
    EXPECT_LE(worst, 1e-5) << "output " << i;
  }
}

/// A QuantizedGemm graph: X f32[rows..., K] -> Y, weights and scales random.
struct GemmCase {
  std::string leading;     // e.g. "5" or "2,3"
  int64_t k, n;
  std::string recipe, activation;
  bool bias;
  int opset;
};

void run_gemm_case(const GemmCase& c, std::mt19937& rng) {
  SCOPED_TRACE("recipe " + c.recipe + ", activation " + c.activation + ", X [" + c.leading + "," + std::to_string(c.k) +
               "], opset " + std::to_string(c.opset));
  const std::string shape = c.leading + "," + std::to_string(c.k);
  auto graph = parse("graph \"g\" {\n  opset \"\" " + std::to_string(c.opset) + "\n  opset \"ai.loka\" 1\n" +
                     "  input %x : f32[" + shape + "]\n  input %w : f8e4m3fn[" + std::to_string(c.n) + "," +
                     std::to_string(c.k) + "]\n  input %ws : f32[" + std::to_string(c.n) + "]\n  input %b : f32[" +
                     std::to_string(c.n) + "]\n  input %xs : f32[1]\n" +
                     "  %y = ai.loka::QuantizedGemm(%x, %w, %ws, " + (c.bias ? "%b" : "_") + ", %xs) {act_recipe = \"" +
                     c.recipe + "\", activation = \"" + c.activation + "\"} @\"fc\"\n  output %y\n}\n");
  ASSERT_TRUE(graph);
  bind(*graph, "w", random_fp8(rng, {c.n, c.k}));
  bind(*graph, "ws", testing::random_tensor(rng, {c.n}, 0.001f, 0.05f));
  bind(*graph, "b", testing::random_tensor(rng, {c.n}, -1.0f, 1.0f));
  bind(*graph, "xs", Tensor::from_floats({1}, std::vector<float>{3.0f / 448.0f}));
  Shape x_shape;
  for (size_t at = 0; at < c.leading.size();) {
    const size_t comma = c.leading.find(',', at);
    x_shape.push_back(std::stoll(c.leading.substr(at, comma - at)));
    at = comma == std::string::npos ? c.leading.size() : comma + 1;
  }
  x_shape.push_back(c.k);
  // Values beyond the static scale's range (|x| up to 4 > 3) exercise saturation.
  Tensor x = testing::random_tensor(rng, x_shape, -4.0f, 4.0f);
  float* px = x.data<float>();
  if (c.recipe == "row" && x.element_count() >= 2 * c.k) {
    std::fill(px, px + c.k, 0.0f);  // an all-zero row: scale 1
    px[c.k] = std::numeric_limits<float>::infinity();  // a non-finite value does not count toward the amax
    px[c.k + 1] = -std::numeric_limits<float>::infinity();
  }
  expect_lowering_matches(*graph, {{"x", x}});
}

TEST(LowerQdqNumerics, QuantizedGemmMatchesTheReferenceKernel) {
  std::mt19937 rng(20261122);
  const std::vector<GemmCase> cases = {
      {"7", 16, 5, "tensor", "none", true, 19},   {"7", 16, 5, "tensor", "relu", true, 19},
      {"1", 3, 1, "tensor", "gelu", false, 19},   {"6", 33, 9, "tensor", "gelu", true, 20},
      {"2,3", 8, 4, "tensor", "relu", true, 19},  {"2,3", 8, 4, "tensor", "none", false, 21},
      {"9", 17, 6, "row", "none", true, 19},      {"4", 64, 3, "row", "relu", false, 19},
      {"2,5,2", 12, 7, "row", "gelu", true, 19},  {"3", 5, 2, "row", "gelu", true, 22},
  };
  for (const GemmCase& c : cases) run_gemm_case(c, rng);
}

TEST(LowerQdqNumerics, LayerNormQuantIntoFp8GemmMatchesCodeForCode) {
  std::mt19937 rng(7);
  for (const int opset : {17, 19}) {
    SCOPED_TRACE("opset " + std::to_string(opset));
    auto graph = parse("graph \"g\" {\n  opset \"\" " + std::to_string(opset) + R"(
  opset "ai.loka" 1
  input %x : f32[batch,2,24]
  input %gamma : f32[24]
  input %beta : f32[24]
  input %ys : f32[]
  input %w : f8e4m3fn[6,24]
  input %ws : f32[6]
  init %axes : i64[1] = [-1]
  %h = ai.loka::LayerNormQuant(%x, %gamma, %beta, %ys) {epsilon = 0.0001f} @"ln"
  )" + (opset < 18 ? R"(%m = ReduceMean(%x) {axes = ints[-1], keepdims = 1} @"mean")"
                   : R"(%m = ReduceMean(%x, %axes) {keepdims = 1} @"mean")") + R"(
  %y = ai.loka::QuantizedGemm(%h, %w, %ws, _, %ys) {activation = "relu"} @"fc"
  %z = Add(%y, %m) @"add"
  output %h
  output %z
})");
    ASSERT_TRUE(graph);
    bind(*graph, "gamma", testing::random_tensor(rng, {24}, 0.5f, 2.0f));
    bind(*graph, "beta", testing::random_tensor(rng, {24}, -0.5f, 0.5f));
    bind(*graph, "ys", Tensor::scalar_float(2.5f / 448.0f));  // small enough that some values saturate
    bind(*graph, "w", random_fp8(rng, {6, 24}));
    bind(*graph, "ws", testing::random_tensor(rng, {6}, 0.001f, 0.02f));
    expect_lowering_matches(*graph, {{"x", testing::random_tensor(rng, {3, 2, 24}, -5.0f, 5.0f)}});
  }
}

TEST(LowerQdqNumerics, QuantizedGatherMatchesForRowAndTensorScalesAndNegativeIds) {
  std::mt19937 rng(99);
  for (const char* index_type : {"i64", "i32"}) {
    SCOPED_TRACE(index_type);
    auto graph = parse(std::string(R"(graph "g" {
  opset "" 19
  opset "ai.loka" 1
  input %ids : )") + index_type + R"([batch,3]
  input %table : f8e4m3fn[11,5]
  input %rows : f32[11]
  input %one : f32[1]
  %e = ai.loka::QuantizedGather(%table, %rows, %ids) @"emb"
  %f = ai.loka::QuantizedGather(%table, %one, %ids) @"emb_tensor"
  output %e
  output %f
})");
    ASSERT_TRUE(graph);
    bind(*graph, "table", random_fp8(rng, {11, 5}));
    bind(*graph, "rows", testing::random_tensor(rng, {11}, 0.01f, 1.0f));
    bind(*graph, "one", Tensor::from_floats({1}, std::vector<float>{0.0625f}));
    std::uniform_int_distribution<int64_t> id(-11, 10);
    Tensor ids = Tensor::zeros(std::string(index_type) == "i64" ? DType::kInt64 : DType::kInt32, {4, 3});
    for (int64_t i = 0; i < 12; ++i) {
      if (ids.dtype() == DType::kInt64) ids.data<int64_t>()[i] = id(rng);
      else ids.data<int32_t>()[i] = static_cast<int32_t>(id(rng));
    }
    expect_lowering_matches(*graph, {{"ids", ids}});
  }
}

TEST(LowerQdqNumerics, Bf16StorageMatchesTheReferenceKernelsCodeForCode) {
  // A DCN stream stored as BF16 (a BF16 graph input, an EmbeddingBags and two cross layers with
  // output_dtype = 16, the second in the row recipe and writing Yq), read through the casts the
  // lowering inserts; the BF16 and FP8 outputs must match code for code.
  std::mt19937 rng(61);
  auto graph = parse(loka_graph(19, R"(  input %x0 : bf16[batch,3]
  input %ids : i64[batch,2]
  input %t : bf16[5,3]
  input %w1 : f8e4m3fn[9,9]
  input %w1s : f32[9]
  input %b1 : f32[9]
  input %w2 : f8e4m3fn[9,9]
  input %w2s : f32[9]
  init %xs : f32[] = [0.0178571437]
  init %ys : f32[1] = [0.125]
  %e = ai.loka::EmbeddingBags(%ids, %t, _, %t) {offsets = ints[0, 1, 2], output_dtype = 16} @"bags"
  %ef = Flatten(%e) {axis = 1} @"flatten"
  %h = Concat(%x0, %ef) {axis = 1} @"concat"
  %c1 = ai.loka::QuantizedGemm(%h, %w1, %w1s, %b1, %xs, %h, %h) {activation = "relu", output_dtype = 16} @"cross1"
  %c2, %c2q = ai.loka::QuantizedGemm(%c1, %w2, %w2s, _, _, %h, %c1, %ys) {act_recipe = "row", output_dtype = 16} @"cross2"
  output %c1
  output %c2
  output %c2q
)"));
  ASSERT_TRUE(graph);
  Tensor table = Tensor::zeros(DType::kBFloat16, {5, 3});
  for (uint16_t& code : table.values<uint16_t>()) code = float_to_bf16(std::uniform_real_distribution<float>(-2, 2)(rng));
  bind(*graph, "t", table);
  bind(*graph, "w1", random_fp8(rng, {9, 9}));
  bind(*graph, "w1s", testing::random_tensor(rng, {9}, 0.0005f, 0.002f));
  bind(*graph, "b1", testing::random_tensor(rng, {9}, -0.5f, 0.5f));
  bind(*graph, "w2", random_fp8(rng, {9, 9}));
  bind(*graph, "w2s", testing::random_tensor(rng, {9}, 0.0005f, 0.002f));
  Tensor x0 = Tensor::zeros(DType::kBFloat16, {6, 3});
  for (uint16_t& code : x0.values<uint16_t>()) code = float_to_bf16(std::uniform_real_distribution<float>(-4, 4)(rng));
  x0.data<uint16_t>()[4] = 0x7FC0;  // NaN travels through the casts and both layers
  std::uniform_int_distribution<int64_t> id(-5, 4);
  std::vector<int64_t> ids(12);
  for (int64_t& v : ids) v = id(rng);
  expect_lowering_matches(*graph, {{"x0", x0}, {"ids", Tensor::from_int64s({6, 2}, ids)}});
}

TEST(LowerQdqNumerics, UpgradedStandardOpsKeepTheirOldMeaning) {
  std::mt19937 rng(11);
  auto graph = parse(loka_graph(11, R"(  input %x : f32[2,3,4]
  input %ids : i64[5]
  input %table : f8e4m3fn[7,4]
  input %rows : f32[7]
  %e = ai.loka::QuantizedGather(%table, %rows, %ids) @"emb"
  %u = Unsqueeze(%e) {axes = ints[0]} @"unsqueeze"
  %p = Softmax(%x) @"softmax"
  %m = ReduceMax(%x) {axes = ints[1], keepdims = 0} @"max"
  output %p
  output %u
  output %m
)"));
  ASSERT_TRUE(graph);
  bind(*graph, "table", random_fp8(rng, {7, 4}));
  bind(*graph, "rows", testing::random_tensor(rng, {7}, 0.01f, 1.0f));
  expect_lowering_matches(*graph, {{"x", testing::random_tensor(rng, {2, 3, 4}, -3.0f, 3.0f)},
                                   {"ids", Tensor::from_int64s({5}, std::vector<int64_t>{0, 6, -1, -7, 3})}});
}

}  // namespace
}  // namespace loka
