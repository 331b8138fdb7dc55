// ============================================================================
// tests/passes/shape_inference_loka_test.cc — golden tests of the built-in
// inference rules for the ai.loka ops (QuantizedGemm, LayerNormQuant,
// ResidualLayerNorm, QuantizedGather, EmbeddingBags; docs/loka_ops.md).
//
// A valid graph checks the inferred dtypes and shapes (symbolic batch kept,
// unknown rank carried); every error case is a one-input variation of a
// valid graph and must name the node and what is wrong.
// ============================================================================
#include <gtest/gtest.h>

#include <string>

#include "passes/ir/shape_inference.h"
#include "passes/ir/text_format.h"

namespace loka::ir {
namespace {

/// "name : type" for every node output in topological order.
std::string output_types(const Graph& graph) {
  std::string out;
  for (const Node* node : graph.nodes())
    for (const Value* value : node->outputs()) out += value->name() + " : " + print_type(value->type()) + "\n";
  return out;
}

/// Parses `body` inside a graph importing ai.loka, infers, and returns the types or "error: <message>".
std::string infer(const std::string& body) {
  auto graph = parse_graph("graph \"t\" {\n  opset \"\" 21\n  opset \"ai.loka\" 1\n" + body + "}\n");
  if (!graph) return "parse error: " + graph.status().message();
  const Status status = infer_shapes(**graph);
  if (!status) return "error: " + status.message();
  return output_types(**graph);
}

/// `inputs` plus `extra` declarations, one node line writing %y, and %y as the output.
std::string infer_node(const std::string& inputs, const std::string& extra, const std::string& node_line) {
  return infer(inputs + extra + node_line + "\n  output %y\n");
}

void expect_error(const std::string& result, const std::string& node, const std::string& fragment) {
  EXPECT_EQ(result.rfind("error: ", 0), 0u) << result;
  EXPECT_NE(result.find("node '" + node + "'"), std::string::npos) << result;
  EXPECT_NE(result.find(fragment), std::string::npos) << result;
}

/// Declarations shared by the QuantizedGemm cases: X [batch,seq,37], W [16,37].
const std::string kGemmInputs = R"(
  input %x : f32[batch,seq,37]
  input %x8 : f8e4m3fn[batch,37]
  input %w : f8e4m3fn[16,37]
  input %ws : f32[16]
  input %b : f32[16]
  input %xs : f32[]
  input %xs1 : f32[1]
)";

TEST(ShapeInferenceLoka, InfersTypesAndKeepsTheBatchSymbol) {
  EXPECT_EQ(infer(kGemmInputs + R"(
  input %g : f32[37]
  input %beta : f32[37]
  input %table : f8e4m3fn[1000,8]
  input %ts : f32[1000]
  input %one : f32[1]
  input %ids : i64[batch,26]
  input %ids32 : i32[batch]
  input %anything : f32[*]
  %q = ai.loka::LayerNormQuant(%x, %g, %beta, %xs1) {epsilon = 0.001f} @"lnq"
  %y = ai.loka::QuantizedGemm(%q, %w, %ws, %b, %xs1) {activation = "relu"} @"gemm_fp8"
  %z = ai.loka::QuantizedGemm(%x, %w, %ws) {act_recipe = "row", activation = "gelu"} @"gemm_row"
  %t = ai.loka::QuantizedGemm(%x8, %w, %ws, _, %xs) @"gemm_tensor"
  %u = ai.loka::QuantizedGemm(%anything, %w, %ws, _, %xs) @"gemm_unranked"
  %e = ai.loka::QuantizedGather(%table, %ts, %ids) @"gather"
  %e2 = ai.loka::QuantizedGather(%table, %one, %ids32) @"gather32"
  %r = Relu(%y) @"relu"
  output %r
  output %z
  output %t
  output %u
  output %e
  output %e2
)"),
            "q : f8e4m3fn[batch,seq,37]\n"
            "y : f32[batch,seq,16]\n"
            "z : f32[batch,seq,16]\n"
            "t : f32[batch,16]\n"
            "u : f32[*]\n"
            "e : f32[batch,26,8]\n"
            "e2 : f32[batch,8]\n"
            "r : f32[batch,seq,16]\n");
}

TEST(ShapeInferenceLoka, QuantizedGemmMismatchesNameTheNode) {
  const auto gemm = [](const std::string& extra, const std::string& line) { return infer_node(kGemmInputs, extra, line); };
  // The valid twin.
  EXPECT_EQ(gemm("", R"(  %y = ai.loka::QuantizedGemm(%x, %w, %ws, %b, %xs) @"g")"), "y : f32[batch,seq,16]\n");
  expect_error(gemm("  input %w36 : f8e4m3fn[16,36]\n", R"(  %y = ai.loka::QuantizedGemm(%x, %w36, %ws, %b, %xs) @"g")"),
               "g", "K differs");
  expect_error(gemm("  input %wf : f32[16,37]\n", R"(  %y = ai.loka::QuantizedGemm(%x, %wf, %ws, %b, %xs) @"g")"), "g",
               "W must be f8e4m3fn");
  expect_error(gemm("  input %w3 : f8e4m3fn[2,16,37]\n", R"(  %y = ai.loka::QuantizedGemm(%x, %w3, %ws, %b, %xs) @"g")"),
               "g", "W must be 2-D");
  expect_error(gemm("  input %xh : f16[batch,37]\n", R"(  %y = ai.loka::QuantizedGemm(%xh, %w, %ws, %b, %xs) @"g")"), "g",
               "X must be f32 or bf16 or f8e4m3fn");
  expect_error(gemm("  input %xv : f32[37]\n", R"(  %y = ai.loka::QuantizedGemm(%xv, %w, %ws, %b, %xs) @"g")"), "g",
               "X must be of rank >= 2");
  expect_error(gemm("  input %ws8 : f32[8]\n", R"(  %y = ai.loka::QuantizedGemm(%x, %w, %ws8, %b, %xs) @"g")"), "g",
               "W_scale");
  expect_error(gemm("  input %b2 : f32[1,16]\n", R"(  %y = ai.loka::QuantizedGemm(%x, %w, %ws, %b2, %xs) @"g")"), "g",
               "B must be 1-D");
  expect_error(gemm("", R"(  %y = ai.loka::QuantizedGemm(%x, %w, %ws, %b) @"g")"), "g", "X_scale");
  expect_error(gemm("", R"(  %y = ai.loka::QuantizedGemm(%x8, %w, %ws) {act_recipe = "row"} @"g")"), "g",
               "X_scale) is required when X is f8e4m3fn");
  expect_error(gemm("  input %xs2 : f32[2]\n", R"(  %y = ai.loka::QuantizedGemm(%x, %w, %ws, %b, %xs2) @"g")"), "g",
               "X_scale must be of shape [] or [1]");
  expect_error(gemm("", R"(  %y = ai.loka::QuantizedGemm(%x, %w, %ws, %b, %xs) {act_recipe = "block"} @"g")"), "g",
               "act_recipe");
  expect_error(gemm("", R"(  %y = ai.loka::QuantizedGemm(%x, %w, %ws, %b, %xs) {activation = "tanh"} @"g")"), "g",
               "activation");
  expect_error(gemm("", R"(  %y = ai.loka::QuantizedGemm(%x, %w) @"g")"), "g", "input 2 is missing");
  // Output 1, Yq: FP8 of Y's shape, with its scale (input 7) and only with it.
  EXPECT_EQ(gemm("", R"(  %y, %yq = ai.loka::QuantizedGemm(%x, %w, %ws, %b, %xs, _, _, %xs) @"g")"),
            "y : f32[batch,seq,16]\nyq : f8e4m3fn[batch,seq,16]\n");
  expect_error(gemm("", R"(  %y, %yq = ai.loka::QuantizedGemm(%x, %w, %ws, %b, %xs) @"g")"), "g",
               "output 1 (Yq) needs input 7 (Y_scale)");
  expect_error(gemm("", R"(  %y = ai.loka::QuantizedGemm(%x, %w, %ws, %b, %xs, _, _, %xs) @"g")"), "g",
               "input 7 (Y_scale) is given without output 1 (Yq)");
  expect_error(gemm("  input %ys2 : f32[2]\n", R"(  %y, %yq = ai.loka::QuantizedGemm(%x, %w, %ws, %b, %xs, _, _, %ys2) @"g")"),
               "g", "Y_scale must be of shape [] or [1]");
  // A declared output type that contradicts the rule.
  expect_error(gemm("", R"(  %y = ai.loka::QuantizedGemm(%x, %w, %ws, %b, %xs) : f32[batch,seq,15] @"g")"), "g", "");
  expect_error(gemm("", R"(  %y = ai.loka::QuantizedGemm(%x, %w, %ws, %b, %xs) : bf16[batch,seq,16] @"g")"), "g", "");
}

TEST(ShapeInferenceLoka, QuantizedGemmTakesBf16OperandsAndTypesYByOutputDtype) {
  const std::string bf16_inputs = R"(
  input %xb : bf16[batch,seq,37]
  input %mb : bf16[batch,seq,16]
  input %rf : f32[batch,seq,16]
)";
  const auto gemm = [&](const std::string& extra, const std::string& line) {
    return infer_node(kGemmInputs + bf16_inputs, extra, line);
  };
  // BF16 X (either recipe), Multiplier and Residual widen; Y stays float32 unless output_dtype says BF16.
  EXPECT_EQ(gemm("", R"(  %y = ai.loka::QuantizedGemm(%xb, %w, %ws, %b, %xs, %mb, %mb) @"g")"), "y : f32[batch,seq,16]\n");
  EXPECT_EQ(gemm("", R"(  %y = ai.loka::QuantizedGemm(%xb, %w, %ws) {act_recipe = "row", output_dtype = 16} @"g")"),
            "y : bf16[batch,seq,16]\n");
  EXPECT_EQ(gemm("", R"(  %y = ai.loka::QuantizedGemm(%x, %w, %ws, %b, %xs, %rf, %mb) {output_dtype = 1} @"g")"),
            "y : f32[batch,seq,16]\n");
  // Yq stays FP8 codes beside a BF16 Y.
  EXPECT_EQ(gemm("", R"(  %y, %yq = ai.loka::QuantizedGemm(%xb, %w, %ws, %b, %xs, %mb, %rf, %xs) {output_dtype = 16} @"g")"),
            "y : bf16[batch,seq,16]\nyq : f8e4m3fn[batch,seq,16]\n");
  expect_error(gemm("", R"(  %y = ai.loka::QuantizedGemm(%x, %w, %ws, %b, %xs) {output_dtype = 10} @"g")"), "g",
               "attribute 'output_dtype' must be 1 (FLOAT) or 16 (BFLOAT16), got 10");
  expect_error(gemm("", R"(  %y = ai.loka::QuantizedGemm(%x, %w, %ws, %b, %xs) {output_dtype = "bf16"} @"g")"), "g",
               "output_dtype");
  expect_error(gemm("  input %mh : f16[batch,seq,16]\n", R"(  %y = ai.loka::QuantizedGemm(%x, %w, %ws, %b, %xs, %mh) @"g")"),
               "g", "Multiplier must be f32 or bf16");
  expect_error(gemm("  input %rb : bf16[batch,seq,1]\n", R"(  %y = ai.loka::QuantizedGemm(%x, %w, %ws, %b, %xs, _, %rb) @"g")"),
               "g", "Residual bf16[batch,seq,1] must have Y's shape");
  // A declared output type that contradicts output_dtype.
  expect_error(gemm("", R"(  %y = ai.loka::QuantizedGemm(%x, %w, %ws, %b, %xs) {output_dtype = 16} : f32[batch,seq,16] @"g")"),
               "g", "");
}

TEST(ShapeInferenceLoka, FusedGemmInfersRowsAndMismatchesNameTheNode) {
  const std::string inputs = R"(
  input %x : f32[batch,seq,37]
  input %w : f32[37,16]
  input %wt : f32[16,37]
  input %b : f32[16]
)";
  const auto gemm = [&](const std::string& extra, const std::string& line) { return infer_node(inputs, extra, line); };
  EXPECT_EQ(gemm("", R"(  %y = ai.loka::FusedGemm(%x, %w, %b) {activation = "relu"} @"g")"), "y : f32[batch,seq,16]\n");
  EXPECT_EQ(gemm("", R"(  %y = ai.loka::FusedGemm(%x, %wt) {transB = 1} @"g")"), "y : f32[batch,seq,16]\n");
  expect_error(gemm("", R"(  %y = ai.loka::FusedGemm(%x, %wt) @"g")"), "g", "K differs");
  expect_error(gemm("", R"(  %y = ai.loka::FusedGemm(%x, %w) {transB = 1} @"g")"), "g", "K differs");
  expect_error(gemm("  input %w8 : f8e4m3fn[37,16]\n", R"(  %y = ai.loka::FusedGemm(%x, %w8) @"g")"), "g", "W must be f32");
  expect_error(gemm("  input %xv : f32[37]\n", R"(  %y = ai.loka::FusedGemm(%xv, %w) @"g")"), "g", "X must be of rank >= 2");
  expect_error(gemm("  input %b8 : f32[8]\n", R"(  %y = ai.loka::FusedGemm(%x, %w, %b8) @"g")"), "g", "B");
  expect_error(gemm("", R"(  %y = ai.loka::FusedGemm(%x, %w) {activation = "tanh"} @"g")"), "g", "activation");
  expect_error(gemm("", R"(  %y = ai.loka::FusedGemm(%x, %w) {transB = 2} @"g")"), "g", "transB");
  expect_error(gemm("", R"(  %y = ai.loka::FusedGemm(%x) @"g")"), "g", "input 1 is missing");
  EXPECT_EQ(gemm("  input %r : f32[batch,seq,16]\n", R"(  %y = ai.loka::FusedGemm(%x, %w, _, %r) @"g")"), "y : f32[batch,seq,16]\n");
  expect_error(gemm("  input %r1 : f32[batch,seq,1]\n", R"(  %y = ai.loka::FusedGemm(%x, %w, _, %r1) @"g")"), "g",
               "Residual");
}

TEST(ShapeInferenceLoka, BatchedFusedGemmInfersTheProductOfEachMatrix) {
  const std::string inputs = R"(
  input %x : f32[batch,5,8]
  input %u_nk : f32[batch,6,8]
  input %u_kn : f32[batch,8,6]
  input %b : f32[6]
)";
  const auto gemm = [&](const std::string& extra, const std::string& line) { return infer_node(inputs, extra, line); };
  EXPECT_EQ(gemm("", R"(  %y = ai.loka::FusedGemm(%x, %u_nk) {transB = 1} @"g")"), "y : f32[batch,5,6]\n");
  EXPECT_EQ(gemm("", R"(  %y = ai.loka::FusedGemm(%x, %u_kn) @"g")"), "y : f32[batch,5,6]\n");
  EXPECT_EQ(gemm("", R"(  %y = ai.loka::FusedGemm(%x, %x) {transB = 1} @"g")"), "y : f32[batch,5,5]\n");
  expect_error(gemm("", R"(  %y = ai.loka::FusedGemm(%x, %u_kn) {transB = 1} @"g")"), "g", "K differs");
  expect_error(gemm("  input %w3 : f32[2,batch,6,8]\n", R"(  %y = ai.loka::FusedGemm(%x, %w3) {transB = 1} @"g")"), "g",
               "X's rank");
  expect_error(gemm("  input %x3 : f32[3,5,8]\n  input %w4 : f32[4,6,8]\n", R"(  %y = ai.loka::FusedGemm(%x3, %w4) {transB = 1} @"g")"),
               "g", "batch dim 0 differs");
  expect_error(gemm("", R"(  %y = ai.loka::FusedGemm(%x, %u_nk, %b) {transB = 1} @"g")"), "g", "no B or Residual");
}

TEST(ShapeInferenceLoka, LayerNormQuantMismatchesNameTheNode) {
  const std::string inputs = R"(
  input %x : f32[batch,12]
  input %g : f32[12]
  input %s : f32[]
)";
  const auto lnq = [&](const std::string& extra, const std::string& line) { return infer_node(inputs, extra, line); };
  EXPECT_EQ(lnq("", R"(  %y = ai.loka::LayerNormQuant(%x, %g, _, %s) @"n")"), "y : f8e4m3fn[batch,12]\n");
  expect_error(lnq("  input %g5 : f32[5]\n", R"(  %y = ai.loka::LayerNormQuant(%x, %g5, _, %s) @"n")"), "n",
               "Scale f32[5] does not have length C = 12");
  expect_error(lnq("  input %b2 : f32[13]\n", R"(  %y = ai.loka::LayerNormQuant(%x, %g, %b2, %s) @"n")"), "n",
               "B f32[13]");
  expect_error(lnq("", R"(  %y = ai.loka::LayerNormQuant(%x, %g) @"n")"), "n", "Y_scale) is required");
  expect_error(lnq("  input %xi : i64[batch,12]\n", R"(  %y = ai.loka::LayerNormQuant(%xi, %g, _, %s) @"n")"), "n",
               "X must be f32");
  expect_error(lnq("  input %s3 : f32[3]\n", R"(  %y = ai.loka::LayerNormQuant(%x, %g, _, %s3) @"n")"), "n",
               "Y_scale must be of shape");
  expect_error(lnq("", R"(  %y = ai.loka::LayerNormQuant(%x, %g, _, %s) : f32[batch,12] @"n")"), "n", "");
}

TEST(ShapeInferenceLoka, ResidualLayerNormMismatchesNameTheNode) {
  const std::string inputs = R"(
  input %x : f32[batch,12]
  input %r : f32[batch,12]
  input %g : f32[12]
)";
  const auto rln = [&](const std::string& extra, const std::string& line) { return infer_node(inputs, extra, line); };
  EXPECT_EQ(rln("", R"(  %y = ai.loka::ResidualLayerNorm(%x, %r, %g) @"n")"), "y : f32[batch,12]\n");
  expect_error(rln("  input %r1 : f32[batch,1]\n", R"(  %y = ai.loka::ResidualLayerNorm(%x, %r1, %g) @"n")"), "n",
               "Residual f32[batch,1] must have Y's shape");
  expect_error(rln("  input %g5 : f32[5]\n", R"(  %y = ai.loka::ResidualLayerNorm(%x, %r, %g5) @"n")"), "n",
               "Scale f32[5] does not have length C = 12");
  expect_error(rln("", R"(  %y = ai.loka::ResidualLayerNorm(%x, %r) @"n")"), "n", "");
  expect_error(rln("  input %ri : i64[batch,12]\n", R"(  %y = ai.loka::ResidualLayerNorm(%x, %ri, %g) @"n")"), "n",
               "Residual must be f32");
}

TEST(ShapeInferenceLoka, QuantizedGatherMismatchesNameTheNode) {
  const std::string inputs = R"(
  input %t : f8e4m3fn[50,4]
  input %s : f32[50]
  input %ids : i32[batch,3]
)";
  const auto gather = [&](const std::string& extra, const std::string& line) { return infer_node(inputs, extra, line); };
  EXPECT_EQ(gather("", R"(  %y = ai.loka::QuantizedGather(%t, %s, %ids) @"e")"), "y : f32[batch,3,4]\n");
  expect_error(gather("  input %s7 : f32[7]\n", R"(  %y = ai.loka::QuantizedGather(%t, %s7, %ids) @"e")"), "e",
               "Row_scale f32[7] is neither [V] = [50] nor [1]");
  expect_error(gather("  input %tf : f32[50,4]\n", R"(  %y = ai.loka::QuantizedGather(%tf, %s, %ids) @"e")"), "e",
               "Table must be f8e4m3fn");
  expect_error(gather("  input %t3 : f8e4m3fn[50,4,2]\n", R"(  %y = ai.loka::QuantizedGather(%t3, %s, %ids) @"e")"), "e",
               "Table must be 2-D");
  expect_error(gather("  input %fi : f32[batch]\n", R"(  %y = ai.loka::QuantizedGather(%t, %s, %fi) @"e")"), "e",
               "Indices must be i32 or i64");
  expect_error(gather("", R"(  %y = ai.loka::QuantizedGather(%t, %s) @"e")"), "e", "input 2 is missing");
}

TEST(ShapeInferenceLoka, EmbeddingBagsMismatchesNameTheNode) {
  const std::string inputs = R"(
  input %t : f8e4m3fn[50,4]
  input %s : f32[50]
  input %f : f32[9,4]
  input %ids : i64[batch,6]
)";
  const auto bags = [&](const std::string& extra, const std::string& line) { return infer_node(inputs, extra, line); };
  EXPECT_EQ(bags("", R"(  %y = ai.loka::EmbeddingBags(%ids, %f, _, %t, %s) {offsets = ints[0, 2, 6]} @"e")"),
            "y : f32[batch,2,4]\n");
  expect_error(bags("", R"(  %y = ai.loka::EmbeddingBags(%ids, %f, _, %t, %s) {offsets = ints[0, 2, 7]} @"e")"), "e",
               "beyond Indices");
  expect_error(bags("", R"(  %y = ai.loka::EmbeddingBags(%ids, %f, _, %t, %s) {offsets = ints[0, 2, 2]} @"e")"), "e",
               "strictly increasing");
  expect_error(bags("", R"(  %y = ai.loka::EmbeddingBags(%ids, %f) {offsets = ints[0, 2, 6]} @"e")"), "e",
               "must have 2 entries for 1 tables");
  expect_error(bags("", R"(  %y = ai.loka::EmbeddingBags(%ids, %t) {offsets = ints[0, 6]} @"e")"), "e",
               "Row_scale_0 is missing for the FP8 Table_0");
  expect_error(bags("", R"(  %y = ai.loka::EmbeddingBags(%ids, %f, %s) {offsets = ints[0, 6]} @"e")"), "e",
               "Row_scale_0 is given for a float32 Table_0");
  expect_error(bags("  input %w : f32[9,5]\n", R"(  %y = ai.loka::EmbeddingBags(%ids, %f, _, %w) {offsets = ints[0, 2, 6]} @"e")"),
               "e", "Table_1 f32[9,5] has another D");
  expect_error(bags("  input %fi : f32[batch,6]\n", R"(  %y = ai.loka::EmbeddingBags(%fi, %f) {offsets = ints[0, 6]} @"e")"),
               "e", "Indices must be i32 or i64");
  expect_error(bags("", R"(  %y = ai.loka::EmbeddingBags(%ids, %f) @"e")"), "e", "offsets");
}

TEST(ShapeInferenceLoka, EmbeddingBagsTakesBf16TablesWithoutAScale) {
  const std::string inputs = R"(
  input %t : f8e4m3fn[50,5]
  input %s : f32[1]
  input %f : f32[9,5]
  input %b : bf16[7,5]
  input %ids : i32[batch,6]
)";
  const auto bags = [&](const std::string& extra, const std::string& line) { return infer_node(inputs, extra, line); };
  // A BF16 table mixed with the other formats, last with its scale omitted; the output is f32 all the same.
  EXPECT_EQ(bags("", R"(  %y = ai.loka::EmbeddingBags(%ids, %f, _, %t, %s, %b) {offsets = ints[0, 1, 3, 6]} @"e")"),
            "y : f32[batch,3,5]\n");
  EXPECT_EQ(bags("", R"(  %y = ai.loka::EmbeddingBags(%ids, %b, _) {offsets = ints[0, 6]} @"e")"), "y : f32[batch,1,5]\n");
  expect_error(bags("", R"(  %y = ai.loka::EmbeddingBags(%ids, %b, %s) {offsets = ints[0, 6]} @"e")"), "e",
               "Row_scale_0 is given for a bf16 Table_0");
  expect_error(bags("  input %w : bf16[9,4]\n", R"(  %y = ai.loka::EmbeddingBags(%ids, %f, _, %w) {offsets = ints[0, 2, 6]} @"e")"),
               "e", "Table_1 bf16[9,4] has another D");
  // output_dtype types Y: float32 by default, BF16 with 16, nothing else.
  EXPECT_EQ(bags("", R"(  %y = ai.loka::EmbeddingBags(%ids, %f, _, %b) {offsets = ints[0, 2, 6], output_dtype = 16} @"e")"),
            "y : bf16[batch,2,5]\n");
  EXPECT_EQ(bags("", R"(  %y = ai.loka::EmbeddingBags(%ids, %b) {offsets = ints[0, 6], output_dtype = 1} @"e")"),
            "y : f32[batch,1,5]\n");
  expect_error(bags("", R"(  %y = ai.loka::EmbeddingBags(%ids, %b) {offsets = ints[0, 6], output_dtype = 10} @"e")"), "e",
               "attribute 'output_dtype' must be 1 (FLOAT) or 16 (BFLOAT16), got 10");
  expect_error(bags("", R"(  %y = ai.loka::EmbeddingBags(%ids, %b) {offsets = ints[0, 6], output_dtype = 16} : f32[batch,1,5] @"e")"),
               "e", "");
  // FP16 is not a table format: only FLOAT, BFLOAT16 and FLOAT8E4M3FN are.
  expect_error(bags("  input %h : f16[9,5]\n", R"(  %y = ai.loka::EmbeddingBags(%ids, %f, _, %h) {offsets = ints[0, 2, 6]} @"e")"),
               "e", "Table_1 must be f32 or bf16 or f8e4m3fn");
}

}  // namespace
}  // namespace loka::ir
