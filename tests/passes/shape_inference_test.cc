// ============================================================================
// tests/passes/shape_inference_test.cc — golden tests of shape/dtype inference.
//
// Each test writes a graph in the IR text form (node output types left out),
// runs infer_shapes and compares every node output's printed type with the
// expected text; error cases check the message names the node, and each has
// a valid twin that must not error.
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

/// Parses `body` inside a graph, infers, and returns the output types or "error: <message>".
std::string infer(const std::string& body, const InferenceOptions& options = {}) {
  auto graph = parse_graph("graph \"t\" {\n  opset \"\" 21\n" + body + "}\n");
  if (!graph) return "parse error: " + graph.status().message();
  const Status status = infer_shapes(**graph, options);
  if (!status) return "error: " + status.message();
  return output_types(**graph);
}

/// Expects an error that names `node` and contains `fragment`.
void expect_error(const std::string& result, const std::string& node, const std::string& fragment) {
  EXPECT_EQ(result.rfind("error: ", 0), 0u) << result;
  EXPECT_NE(result.find("node '" + node + "'"), std::string::npos) << result;
  EXPECT_NE(result.find(fragment), std::string::npos) << result;
}

// ------------------------------------------------------------- element-wise --

TEST(ShapeInference, UnaryAndBroadcastingOpsCarryTheBatchSymbol) {
  EXPECT_EQ(infer(R"(
  input %x : f32[batch,1,4]
  input %y : f32[3,1]
  input %i : i64[batch,1,1]
  %a = Relu(%x) @"relu"
  %b = Gelu(%a) {approximate = "tanh"} @"gelu"
  %c = Add(%b, %y) @"add"
  %d = Pow(%c, %i) @"pow"
  %e = Less(%c, %y) @"less"
  %f = Where(%e, %c, %y) @"where"
  %g = Max(%x, %y, %c) @"max"
  %h = Softmax(%g) {axis = -1} @"softmax"
  %k, %mask = Dropout(%h) @"drop"
  %l = Cast(%k) {to = 10} @"cast"
  %m = CastLike(%i, %l) @"castlike"
  %n = LeakyRelu(%m) @"leaky"
  output %n
)"),
            "a : f32[batch,1,4]\n"
            "b : f32[batch,1,4]\n"
            "c : f32[batch,3,4]\n"
            "d : f32[batch,3,4]\n"
            "e : bool[batch,3,4]\n"
            "f : f32[batch,3,4]\n"
            "g : f32[batch,3,4]\n"
            "h : f32[batch,3,4]\n"
            "k : f32[batch,3,4]\n"
            "mask : bool[batch,3,4]\n"
            "l : f16[batch,3,4]\n"
            "m : f16[batch,1,1]\n"
            "n : f16[batch,1,1]\n");
}

TEST(ShapeInference, BroadcastKeepsSharedSymbolsAndForgetsDifferentOnes) {
  EXPECT_EQ(infer(R"(
  input %a : f32[batch,seq]
  input %b : f32[batch,1]
  input %c : f32[other,seq]
  input %u : f32[*]
  %s = Mul(%a, %b) @"same"
  %d = Sub(%a, %c) @"different"
  %r = Div(%a, %u) @"unranked"
  output %s
)"),
            "s : f32[batch,seq]\n"
            "d : f32[?,seq]\n"
            "r : f32[*]\n");
}

TEST(ShapeInference, BroadcastFailureNamesTheNode) {
  const std::string graph = R"(
  input %x : f32[batch,3]
  input %y : f32[%s]
  %z = Add(%x, %y) @"add_bias"
  output %z
)";
  auto with = [&](const std::string& dim) {
    std::string text = graph;
    text.replace(text.find("%s"), 2, dim);
    return infer(text);
  };
  expect_error(with("4"), "add_bias", "cannot broadcast input shapes f32[batch,3], f32[4]");
  EXPECT_EQ(with("3"), "z : f32[batch,3]\n");
  EXPECT_EQ(with("1"), "z : f32[batch,3]\n");
}

TEST(ShapeInference, MixedInputDtypesAreAnError) {
  expect_error(infer(R"(
  input %x : f32[2]
  input %y : i64[2]
  %z = Mul(%x, %y) @"mixed"
  output %z
)"),
               "mixed", "input 0 is FLOAT but input 1 is INT64");
  EXPECT_EQ(infer(R"(
  input %x : f32[2]
  input %y : i64[2]
  %z = Pow(%x, %y) @"pow_mixed_ok"
  output %z
)"),
            "z : f32[2]\n");
}

TEST(ShapeInference, QuantizeAndDequantizeTypes) {
  EXPECT_EQ(infer(R"(
  input %x : f32[batch,8]
  init %s : f32[] = [0.5]
  init %zp : f8e4m3fn[] = [0x00]
  init %bs : bf16[8] = [0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80]
  %q = QuantizeLinear(%x, %s, %zp) @"q_zp"
  %q2 = QuantizeLinear(%x, %s) {output_dtype = 19} @"q_attr"
  %q3 = QuantizeLinear(%x, %s) @"q_default"
  %d = DequantizeLinear(%q, %s, %zp) @"dq"
  %d2 = DequantizeLinear(%q, %bs) {axis = 1} @"dq_bf16"
  output %d
)"),
            "q : f8e4m3fn[batch,8]\n"
            "q2 : f8e5m2[batch,8]\n"
            "q3 : u8[batch,8]\n"
            "d : f32[batch,8]\n"
            "d2 : bf16[batch,8]\n");
}

// ------------------------------------------------------------------ linalg --

TEST(ShapeInference, GemmMatMulAndLayerNorm) {
  EXPECT_EQ(infer(R"(
  input %x : f32[batch,4]
  input %w : f32[3,4]
  input %b : f32[3]
  input %t : f32[batch,1,16,8]
  input %u : f32[5,8,2]
  input %v : f32[8]
  input %s : f32[8]
  %g = Gemm(%x, %w, %b) {transB = 1} @"gemm"
  %gt = Gemm(%w, %g) {transA = 1, transB = 1} @"gemm_t"
  %m = MatMul(%t, %u) @"batched"
  %mv = MatMul(%t, %v) @"matrix_vector"
  %vm = MatMul(%v, %u) @"vector_matrix"
  %vv = MatMul(%v, %v) @"dot"
  %y, %mean, %inv = LayerNormalization(%t, %s, %s) {axis = -1} @"ln"
  %y2 = LayerNormalization(%t, %s) {axis = 2} @"ln_axis2"
  output %y
)"),
            "g : f32[batch,3]\n"
            "gt : f32[4,batch]\n"
            "m : f32[batch,5,16,2]\n"
            "mv : f32[batch,1,16]\n"
            "vm : f32[5,2]\n"
            "vv : f32[]\n"
            "y : f32[batch,1,16,8]\n"
            "mean : f32[batch,1,16,1]\n"
            "inv : f32[batch,1,16,1]\n"
            "y2 : f32[batch,1,16,8]\n");
}

TEST(ShapeInference, GemmInnerDimMismatchNamesTheNode) {
  expect_error(infer(R"(
  input %x : f32[batch,4]
  input %w : f32[3,5]
  %g = Gemm(%x, %w) {transB = 1} @"fc1"
  output %g
)"),
               "fc1", "inner dims differ");
  EXPECT_EQ(infer(R"(
  input %x : f32[batch,5]
  input %w : f32[3,5]
  %g = Gemm(%x, %w) {transB = 1} @"fc1"
  output %g
)"),
            "g : f32[batch,3]\n");
}

TEST(ShapeInference, GemmBiasAndRankErrors) {
  expect_error(infer(R"(
  input %x : f32[batch,4]
  input %w : f32[4,3]
  input %b : f32[4]
  %g = Gemm(%x, %w, %b) @"fc_bias"
  output %g
)"),
               "fc_bias", "does not broadcast");
  EXPECT_EQ(infer(R"(
  input %x : f32[batch,4]
  input %w : f32[4,3]
  input %b : f32[1,3]
  %g = Gemm(%x, %w, %b) @"fc_bias"
  output %g
)"),
            "g : f32[batch,3]\n");
  expect_error(infer(R"(
  input %x : f32[batch,2,4]
  input %w : f32[4,3]
  %g = Gemm(%x, %w) @"fc_rank"
  output %g
)"),
               "fc_rank", "A must be 2-D");
}

TEST(ShapeInference, MatMulMismatchesNameTheNode) {
  expect_error(infer(R"(
  input %a : f32[batch,4,8]
  input %b : f32[7,2]
  %m = MatMul(%a, %b) @"mm_inner"
  output %m
)"),
               "mm_inner", "inner dims differ");
  expect_error(infer(R"(
  input %a : f32[2,4,8]
  input %b : f32[3,8,2]
  %m = MatMul(%a, %b) @"mm_batch"
  output %m
)"),
               "mm_batch", "batch dims do not broadcast");
  EXPECT_EQ(infer(R"(
  input %a : f32[2,4,8]
  input %b : f32[1,8,2]
  %m = MatMul(%a, %b) @"mm_batch"
  output %m
)"),
            "m : f32[2,4,2]\n");
}

TEST(ShapeInference, LayerNormScaleMustMatchNormalizedDims) {
  expect_error(infer(R"(
  input %x : f32[batch,16]
  input %s : f32[8]
  %y = LayerNormalization(%x, %s) @"ln_bad"
  output %y
)"),
               "ln_bad", "does not match X");
  EXPECT_EQ(infer(R"(
  input %x : f32[batch,16]
  input %s : f32[16]
  %y = LayerNormalization(%x, %s) {stash_type = 1} @"ln_ok"
  output %y
)"),
            "y : f32[batch,16]\n");
}

// -------------------------------------------------------------- reductions --

TEST(ShapeInference, ReductionsWithAxesAsAttributeOrInput) {
  EXPECT_EQ(infer(R"(
  input %x : f32[batch,4,6]
  input %dyn : i64[1]
  init %axes : i64[1] = [-1]
  init %none : i64[0] = []
  %s = ReduceSum(%x, %axes) {keepdims = 0} @"sum_input"
  %m = ReduceMean(%x) {axes = ints[1]} @"mean_attr"
  %a = ReduceMax(%x) {keepdims = 0} @"max_all"
  %n = ReduceSum(%x, %none) {noop_with_empty_axes = 1} @"noop"
  %u = ReduceL2(%x, %dyn) @"unknown_axes_keep"
  %v = ReduceSumSquare(%x, %dyn) {keepdims = 0} @"unknown_axes_drop"
  %i = ArgMax(%x) {axis = 1, keepdims = 0} @"argmax"
  output %s
)"),
            "s : f32[batch,4]\n"
            "m : f32[batch,1,6]\n"
            "a : f32[]\n"
            "n : f32[batch,4,6]\n"
            "u : f32[?,?,?]\n"
            "v : f32[*]\n"
            "i : i64[batch,6]\n");
}

TEST(ShapeInference, ReductionAxisOutOfRangeNamesTheNode) {
  const std::string graph = R"(
  input %x : f32[batch,4]
  %s = ReduceProd(%x) {axes = ints[AXIS]} @"prod"
  output %s
)";
  std::string bad = graph, good = graph;
  bad.replace(bad.find("AXIS"), 4, "2");
  good.replace(good.find("AXIS"), 4, "-2");
  expect_error(infer(bad), "prod", "axes 2 is out of range for rank 2");
  EXPECT_EQ(infer(good), "s : f32[1,4]\n");
}

// --------------------------------------------------------------- shape ops --

TEST(ShapeInference, ReshapeFromConstantsWithZeroAndMinusOne) {
  EXPECT_EQ(infer(R"(
  input %x : f32[batch,16,8]
  init %copy : i64[2] = [0, -1]
  init %flat : i64[2] = [-1, 128]
  init %split : i64[4] = [0, 4, 4, -1]
  input %empty : f32[0,4]
  init %keep_zero : i64[2] = [3, 0]
  %a = Reshape(%x, %copy) @"copy_batch"
  %b = Reshape(%x, %flat) @"infer_batch"
  %c = Reshape(%x, %split) @"split_dim"
  %k = Constant() {value = tensor<i64[3]>[-1, 4, 32]} @"k"
  %d = Reshape(%x, %k) @"from_constant_node"
  %e = Reshape(%empty, %keep_zero) {allowzero = 1} @"allowzero"
  output %a
)"),
            "a : f32[batch,128]\n"
            "b : f32[batch,128]\n"
            "c : f32[batch,4,4,8]\n"
            "k : i64[3]\n"
            "d : f32[batch,4,32]\n"
            "e : f32[3,0]\n");
}

TEST(ShapeInference, ReshapeOfAShapeChainKeepsTheBatch) {
  // The TorchScript pattern: x.view(x.size(0), 128) and x.view(x.size(0), x.size(1) * x.size(2)).
  EXPECT_EQ(infer(R"(
  input %x : f32[batch,16,8]
  init %zero : i64[] = [0]
  init %c128 : i64[1] = [128]
  %shape = Shape(%x) @"shape"
  %b = Gather(%shape, %zero) {axis = 0} @"gather_batch"
  %b1 = Unsqueeze(%b) {axes = ints[0]} @"unsqueeze_batch"
  %target = Concat(%b1, %c128) {axis = 0} @"concat"
  %y = Reshape(%x, %target) @"reshape"
  %tail = Slice(%shape, %one, %three) @"slice_tail"
  %d1 = Gather(%shape, %one_scalar) @"gather_1"
  %d2 = Gather(%shape, %two_scalar) @"gather_2"
  %prod = Mul(%d1, %d2) @"mul"
  %prod1 = Unsqueeze(%prod, %axes0) @"unsqueeze_prod"
  %cast = Cast(%prod1) {to = 7} @"cast"
  %target2 = Concat(%b1, %cast) {axis = 0} @"concat2"
  %z = Reshape(%x, %target2) @"reshape2"
  %w = ConstantOfShape(%tail) @"fill_tail"
  init %one : i64[1] = [1]
  init %three : i64[1] = [3]
  init %one_scalar : i64[] = [1]
  init %two_scalar : i64[] = [2]
  init %axes0 : i64[1] = [0]
  output %y
)"),
            "shape : i64[3]\n"
            "b : i64[]\n"
            "b1 : i64[1]\n"
            "target : i64[2]\n"
            "y : f32[batch,128]\n"
            "tail : i64[2]\n"
            "d1 : i64[]\n"
            "d2 : i64[]\n"
            "prod : i64[]\n"
            "prod1 : i64[1]\n"
            "cast : i64[1]\n"
            "target2 : i64[2]\n"
            "z : f32[batch,128]\n"
            "w : f32[16,8]\n");
}

TEST(ShapeInference, ReshapeWithUnknownTargetKeepsOnlyTheRank) {
  EXPECT_EQ(infer(R"(
  input %x : f32[batch,16,8]
  input %s : i64[3]
  %y = Reshape(%x, %s) @"dynamic"
  output %y
)"),
            "y : f32[?,?,?]\n");
}

TEST(ShapeInference, ReshapeElementCountMismatchNamesTheNode) {
  const std::string graph = R"(
  input %x : f32[2,3]
  init %s : i64[2] = [DIMS]
  %y = Reshape(%x, %s) @"bad_view"
  output %y
)";
  std::string bad = graph, good = graph;
  bad.replace(bad.find("DIMS"), 4, "4, 2");
  good.replace(good.find("DIMS"), 4, "3, 2");
  expect_error(infer(bad), "bad_view", "cannot reshape f32[2,3] to f32[4,2]");
  EXPECT_EQ(infer(good), "y : f32[3,2]\n");
  std::string indivisible = graph;
  indivisible.replace(indivisible.find("DIMS"), 4, "4, -1");
  expect_error(infer(indivisible), "bad_view", "with -1 at dim 1");
  std::string two_holes = graph;
  two_holes.replace(two_holes.find("DIMS"), 4, "-1, -1");
  expect_error(infer(two_holes), "bad_view", "more than one -1");
}

TEST(ShapeInference, LayoutOps) {
  EXPECT_EQ(infer(R"(
  input %x : f32[batch,4,1,6]
  init %axes : i64[2] = [0, -1]
  init %rep : i64[4] = [1, 2, 3, 1]
  %f = Flatten(%x) {axis = 1} @"flatten"
  %f0 = Flatten(%x) {axis = 0} @"flatten0"
  %t = Transpose(%x) {perm = ints[0, 3, 1, 2]} @"transpose"
  %tr = Transpose(%x) @"reverse"
  %u = Unsqueeze(%x, %axes) @"unsqueeze"
  %s = Squeeze(%x) {axes = ints[2]} @"squeeze"
  %s2 = Squeeze(%u, %axes) @"squeeze_input"
  %r = Tile(%x, %rep) @"tile"
  output %f
)"),
            "f : f32[batch,24]\n"
            "f0 : f32[1,?]\n"
            "t : f32[batch,6,4,1]\n"
            "tr : f32[6,1,4,batch]\n"
            "u : f32[1,batch,4,1,6,1]\n"
            "s : f32[batch,4,6]\n"
            "s2 : f32[batch,4,1,6]\n"
            "r : f32[batch,8,3,6]\n");
}

TEST(ShapeInference, SqueezeOfANonUnitDimNamesTheNode) {
  expect_error(infer(R"(
  input %x : f32[batch,4,1]
  %s = Squeeze(%x) {axes = ints[1]} @"squeeze_bad"
  output %s
)"),
               "squeeze_bad", "cannot squeeze axis 1 of size 4");
  EXPECT_EQ(infer(R"(
  input %x : f32[batch,4,1]
  %s = Squeeze(%x) {axes = ints[2]} @"squeeze_bad"
  output %s
)"),
            "s : f32[batch,4]\n");
  // Without axes a symbolic dim might be 1: the rank is not knowable.
  EXPECT_EQ(infer(R"(
  input %x : f32[batch,4,1]
  %s = Squeeze(%x) @"squeeze_all"
  output %s
)"),
            "s : f32[*]\n");
}

TEST(ShapeInference, MakersOfSmallTensors) {
  EXPECT_EQ(infer(R"(
  input %x : f32[batch,4]
  init %start : i64[] = [2]
  init %limit : i64[] = [11]
  init %delta : i64[] = [3]
  init %fstart : f32[] = [0]
  init %flimit : f32[] = [1]
  init %fdelta : f32[] = [0.25]
  %shape = Shape(%x) @"shape"
  %tail = Shape(%x) {start = -1} @"shape_tail"
  %n = Size(%x) @"size"
  %r = Range(%start, %limit, %delta) @"range"
  %fr = Range(%fstart, %flimit, %fdelta) @"range_float"
  %z = ConstantOfShape(%shape) {value = tensor<i32[1]>[7]} @"fill"
  %ones = ConstantOfShape(%r) @"fill_range"
  %e = Expand(%x, %shape3) @"expand"
  %c = Constant() {value_floats = floats[1f, 2f]} @"floats"
  %ci = Constant() {value_int = 5} @"int"
  init %shape3 : i64[3] = [2, 1, 4]
  output %z
)"),
            "shape : i64[2]\n"
            "tail : i64[1]\n"
            "n : i64[]\n"
            "r : i64[3]\n"
            "fr : f32[4]\n"
            "z : i32[batch,4]\n"
            "ones : f32[2,5,8]\n"
            "e : f32[2,batch,4]\n"
            "c : f32[2]\n"
            "ci : i64[]\n");
}

TEST(ShapeInference, ExpandWithATorchScriptShapeChain) {
  // x.expand(-1, 4, -1) exports as Where(Equal(shape, -1), ones, shape) feeding Expand.
  EXPECT_EQ(infer(R"(
  input %x : f32[batch,1,8]
  init %target : i64[3] = [-1, 4, -1]
  init %minus : i64[] = [-1]
  init %len : i64[1] = [3]
  %ones = ConstantOfShape(%len) {value = tensor<i64[1]>[1]} @"ones"
  %eq = Equal(%target, %minus) @"eq"
  %shape = Where(%eq, %ones, %target) @"where"
  %y = Expand(%x, %shape) @"expand"
  output %y
)"),
            "ones : i64[3]\n"
            "eq : bool[3]\n"
            "shape : i64[3]\n"
            "y : f32[batch,4,8]\n");
  expect_error(infer(R"(
  input %x : f32[batch,3,8]
  init %shape : i64[3] = [1, 4, 8]
  %y = Expand(%x, %shape) @"expand_bad"
  output %y
)"),
               "expand_bad", "does not broadcast to shape");
}

// ----------------------------------------------------------- data movement --

TEST(ShapeInference, GatherConcatSliceSplitPad) {
  EXPECT_EQ(infer(R"(
  input %table : f32[1000,64]
  input %ids : i64[batch,26]
  input %x : f32[batch,10,4]
  input %idx : i64[batch,3,4]
  init %starts : i64[2] = [1, 0]
  init %ends : i64[2] = [9223372036854775807, -1]
  init %axes : i64[2] = [1, 2]
  init %steps : i64[2] = [2, 1]
  init %sizes : i64[2] = [3, 7]
  init %pads : i64[6] = [0, 1, 0, 0, 2, -1]
  %emb = Gather(%table, %ids) @"embedding"
  %ge = GatherElements(%x, %idx) {axis = 1} @"gather_elements"
  %cat = Concat(%x, %ge, %x) {axis = 1} @"concat"
  %sl = Slice(%x, %starts, %ends, %axes, %steps) @"slice"
  %rev = Slice(%x, %m1, %min, %z1, %m1) @"reverse_batch"
  %a, %b = Split(%x, %sizes) {axis = 1} @"split_sizes"
  %c, %d = Split(%x) {axis = -1} @"split_even"
  %e, %f, %g = Split(%x) {axis = 1, num_outputs = 3} @"split_chunks"
  %p = Pad(%x, %pads) @"pad"
  init %m1 : i64[1] = [-1]
  init %min : i64[1] = [-9223372036854775807]
  init %z1 : i64[1] = [0]
  output %emb
)"),
            "emb : f32[batch,26,64]\n"
            "ge : f32[batch,3,4]\n"
            "cat : f32[batch,23,4]\n"
            "sl : f32[batch,5,3]\n"
            "rev : f32[batch,10,4]\n"
            "a : f32[batch,3,4]\n"
            "b : f32[batch,7,4]\n"
            "c : f32[batch,10,2]\n"
            "d : f32[batch,10,2]\n"
            "e : f32[batch,4,4]\n"
            "f : f32[batch,4,4]\n"
            "g : f32[batch,2,4]\n"
            "p : f32[batch,13,3]\n");
}

TEST(ShapeInference, ConcatDimMismatchNamesTheNode) {
  expect_error(infer(R"(
  input %a : f32[batch,4,8]
  input %b : f32[batch,5,9]
  %c = Concat(%a, %b) {axis = 1} @"cat_bad"
  output %c
)"),
               "cat_bad", "inputs differ in dim 2");
  EXPECT_EQ(infer(R"(
  input %a : f32[batch,4,8]
  input %b : f32[?,5,8]
  %c = Concat(%a, %b) {axis = 1} @"cat_bad"
  output %c
)"),
            "c : f32[batch,9,8]\n");
  expect_error(infer(R"(
  input %a : f32[batch,4]
  input %b : f32[batch,5,9]
  %c = Concat(%a, %b) {axis = 1} @"cat_rank"
  output %c
)"),
               "cat_rank", "inputs differ in rank");
}

TEST(ShapeInference, SplitAndGatherErrorsNameTheNode) {
  expect_error(infer(R"(
  input %x : f32[batch,10]
  init %sizes : i64[2] = [3, 6]
  %a, %b = Split(%x, %sizes) {axis = 1} @"split_bad"
  output %a
)"),
               "split_bad", "split sizes sum to 9");
  expect_error(infer(R"(
  input %x : f32[batch,10]
  %a, %b, %c = Split(%x) {axis = 1} @"split_uneven"
  output %a
)"),
               "split_uneven", "does not split evenly");
  EXPECT_EQ(infer(R"(
  input %x : f32[batch,9]
  %a, %b, %c = Split(%x) {axis = 1} @"split_uneven"
  output %a
)"),
            "a : f32[batch,3]\nb : f32[batch,3]\nc : f32[batch,3]\n");
  expect_error(infer(R"(
  input %x : f32[4,8]
  init %i : i64[] = [4]
  %y = Gather(%x, %i) @"gather_oob"
  output %y
)"),
               "gather_oob", "index 4 is out of range");
  EXPECT_EQ(infer(R"(
  input %x : f32[4,8]
  init %i : i64[] = [-4]
  %y = Gather(%x, %i) @"gather_oob"
  output %y
)"),
            "y : f32[8]\n");
}

// ------------------------------------------------------- declared types --

TEST(ShapeInference, DeclaredTypesMergeKnownBeatsUnknown) {
  EXPECT_EQ(infer(R"(
  input %x : f32[?,4]
  input %w : f32[4,3]
  %a = MatMul(%x, %w) : f32[batch,?] @"declared_partial"
  %b = Relu(%a) : undefined[*] @"declared_unknown"
  %c = Relu(%b) : f32[batch,3] @"declared_full"
  output %c
)"),
            "a : f32[batch,3]\n"
            "b : f32[batch,3]\n"
            "c : f32[batch,3]\n");
}

TEST(ShapeInference, DeclaredTypeConflictsNameTheNode) {
  const std::string graph = R"(
  input %x : f32[batch,4]
  input %w : f32[4,3]
  %a = MatMul(%x, %w) : DECLARED @"mm"
  output %a
)";
  const auto with = [&](const std::string& declared) {
    std::string text = graph;
    text.replace(text.find("DECLARED"), 8, declared);
    return infer(text);
  };
  expect_error(with("f16[batch,3]"), "mm", "dtype FLOAT differs from declared FLOAT16");
  expect_error(with("f32[batch,3,1]"), "mm", "rank 2 differs from declared rank 3");
  expect_error(with("f32[batch,4]"), "mm", "dim 1 is 3 but declared 4");
  EXPECT_EQ(with("f32[n,3]"), "a : f32[batch,3]\n");
  EXPECT_EQ(with("f32[8,3]"), "a : f32[8,3]\n");
}

TEST(ShapeInference, DiscardExistingReplacesStaleTypes) {
  InferenceOptions options;
  options.discard_existing = true;
  EXPECT_EQ(infer(R"(
  input %x : f32[batch,4]
  %a = Relu(%x) : f16[2] @"stale"
  output %a
)",
                  options),
            "a : f32[batch,4]\n");
}

// ------------------------------------------------------ unknown ops, registry --

TEST(ShapeInference, UnknownOpsKeepTheirTypesAndRegisteredRulesRun) {
  const std::string graph = R"(
  input %x : f32[batch,4]
  %q = ai.loka::Unregistered(%x) @"lnq"
  %kept = ai.loka::Declared(%x) : f8e4m3fn[batch,4] @"declared"
  %r = Relu(%q) @"relu"
  output %r
)";
  EXPECT_EQ(infer(graph),
            "q : undefined[*]\n"
            "kept : f8e4m3fn[batch,4]\n"
            "r : undefined[*]\n");
  ShapeInferenceRegistry registry = ShapeInferenceRegistry::with_builtins();
  registry.add("ai.loka", "Unregistered", [](InferenceContext& ctx) -> Result<std::vector<TensorType>> {
    TensorType out = ctx.input_type(0);
    out.dtype = DType::kFloat8E4M3FN;
    return std::vector<TensorType>{out};
  });
  InferenceOptions options;
  options.registry = &registry;
  EXPECT_EQ(infer(graph, options),
            "q : f8e4m3fn[batch,4]\n"
            "kept : f8e4m3fn[batch,4]\n"
            "r : f8e4m3fn[batch,4]\n");
}

TEST(ShapeInference, RuleReturningTheWrongCountIsAnError) {
  ShapeInferenceRegistry registry;
  registry.add("ai.loka", "Broken", [](InferenceContext&) -> Result<std::vector<TensorType>> {
    return std::vector<TensorType>{};
  });
  InferenceOptions options;
  options.registry = &registry;
  expect_error(infer(R"(
  input %x : f32[2]
  %y = ai.loka::Broken(%x) @"broken"
  output %y
)",
                     options),
               "broken", "produced 0 types for 1 outputs");
}

// ------------------------------------------------------------ per node --

TEST(ShapeInference, InferNodeTypesTracesShapeChainsThroughProducers) {
  auto graph = parse_graph(R"(graph "t" {
  input %x : f32[batch,16,8]
  init %zero : i64[1] = [0]
  init %c128 : i64[1] = [128]
  %shape = Shape(%x) @"shape"
  %b = Slice(%shape, %zero, %one) @"slice"
  %target = Concat(%b, %c128) {axis = 0} @"concat"
  %y = Reshape(%x, %target) @"reshape"
  init %one : i64[1] = [1]
  output %y
})");
  ASSERT_TRUE(graph) << graph.status().message();
  // Nothing inferred yet: the tracer must walk Concat <- Slice <- Shape on its own.
  const Node* reshape = (*graph)->find_node("reshape");
  auto types = infer_node_types(*reshape);
  ASSERT_TRUE(types) << types.status().message();
  ASSERT_EQ(types->size(), 1u);
  EXPECT_EQ(print_type((*types)[0]), "f32[batch,128]");
  // Explicit input types override the graph's (e.g. after a rewrite changed the producer).
  const TensorType wider = TensorType{DType::kBFloat16, std::vector<Dim>{Dim::named("batch"), Dim::known(256)}};
  auto retyped = infer_node_types(*reshape, {&wider, nullptr});
  ASSERT_TRUE(retyped);
  EXPECT_EQ(print_type((*retyped)[0]), "bf16[batch,128]");
  // An op without a rule gives unknown types, not an error.
  auto unknown = infer_node_types(*(*graph)->add_node("Mystery", {(*graph)->find_value("x")}, 2, "mystery", "ai.loka"));
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->size(), 2u);
  EXPECT_EQ(print_type((*unknown)[1]), "undefined[*]");
}

TEST(ShapeInference, SecondRunIsAFixpoint) {
  std::string weights = "[0";
  for (int i = 1; i < 256; ++i) weights += ", " + std::to_string(i % 7);
  std::string text = R"(graph "t" {
  input %x : f32[batch,16,8]
  %shape = Shape(%x) @"shape"
  %s = Slice(%shape, %zero, %one) @"slice"
  %t = Concat(%s, %c) {axis = 0} @"concat"
  %y = Reshape(%x, %t) @"reshape"
  %z = Gemm(%y, %w) {transB = 1} @"gemm"
  init %zero : i64[1] = [0]
  init %one : i64[1] = [1]
  init %c : i64[1] = [-1]
  init %w : f32[2,128] = WEIGHTS
  output %z
})";
  text.replace(text.find("WEIGHTS"), 7, weights + "]");
  auto graph = parse_graph(text);
  ASSERT_TRUE(graph) << graph.status().message();
  const Status status = infer_shapes(**graph);
  ASSERT_TRUE(status) << status.message();
  const std::string first = print_graph(**graph);
  EXPECT_NE(first.find("%z = Gemm(%y, %w) {transB = 1} : f32[batch,2]"), std::string::npos) << first;
  ASSERT_TRUE(infer_shapes(**graph));
  EXPECT_EQ(print_graph(**graph), first);
}

TEST(ShapeInference, DynamicArgumentsKeepWhatIsKnowable) {
  EXPECT_EQ(infer(R"(
  input %x : f32[batch,4,6]
  input %dyn1 : i64[1]
  input %dyn3 : i64[3]
  input %dyn6 : i64[6]
  init %axis2 : i64[1] = [2]
  %s = Slice(%x, %dyn1, %dyn1, %axis2) @"slice_dynamic"
  %u = Unsqueeze(%x, %dyn1) @"unsqueeze_dynamic"
  %e = Expand(%x, %dyn3) @"expand_dynamic"
  %t = Tile(%x, %dyn3) @"tile_dynamic"
  %p = Pad(%x, %dyn6) @"pad_dynamic"
  %c = ConstantOfShape(%dyn3) @"fill_dynamic"
  %g = Gather(%x, %dyn1) {axis = 1} @"gather_dynamic"
  output %s
)"),
            "s : f32[batch,4,?]\n"
            "u : f32[?,?,?,?]\n"
            "e : f32[?,4,6]\n"
            "t : f32[?,?,?]\n"
            "p : f32[?,?,?]\n"
            "c : f32[?,?,?]\n"
            "g : f32[batch,1,6]\n");
}

TEST(ShapeInference, HugeDimsAreErrorsOrUnknownNeverOverflow) {
  expect_error(infer(R"(
  input %x : f32[2,3]
  init %s : i64[2] = [1099511627776, 1099511627776]
  %y = Reshape(%x, %s) @"reshape_huge"
  output %y
)"),
               "reshape_huge", "is too large");
  EXPECT_EQ(infer(R"(
  input %x : f32[4611686018427387904,2]
  init %r : i64[2] = [4, 4]
  %t = Tile(%x, %r) @"tile_huge"
  %c = Concat(%x, %x, %x) {axis = 0} @"concat_huge"
  output %t
)"),
            "t : f32[?,8]\n"
            "c : f32[?,2]\n");
}

TEST(ShapeInference, MissingInputsAndBadAttributesAreErrorsNotCrashes) {
  expect_error(infer(R"(
  input %x : f32[2]
  %y = Gemm(%x) @"gemm_one_input"
  output %y
)"),
               "gemm_one_input", "input 1 is missing");
  expect_error(infer(R"(
  input %x : f32[2,3]
  %y = Transpose(%x) {perm = ints[0, 0]} @"perm_repeat"
  output %y
)"),
               "perm_repeat", "repeat axis");
  expect_error(infer(R"(
  input %x : f32[2,3]
  %y = Cast(%x) {to = 99} @"cast_bad"
  output %y
)"),
               "cast_bad", "not a supported data type");
  expect_error(infer(R"(
  input %x : f32[2,3]
  %y = Concat(%x, %x) @"concat_no_axis"
  output %y
)"),
               "concat_no_axis", "needs attribute 'axis'");
  expect_error(infer(R"(
  input %x : f32[2,3]
  init %z : i64[1] = [0]
  %y = Slice(%x, %z, %z, %z, %z) @"slice_step0"
  output %y
)"),
               "slice_step0", "steps must not be 0");
}

}  // namespace
}  // namespace loka::ir
