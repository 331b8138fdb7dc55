// ============================================================================
// tests/runtime/concat_placement_test.cc — which Concat inputs their
// producers may write in place (runtime/concat_placement.h).
//
// DHEN's shape (GEMM outputs of [B,T,D] joined along D), Wukong's (a GEMM's
// [B,T*D] reshaped to [B,T,D], joined along T) and DLRM's (the bottom MLP's
// token and EmbeddingBags' [B,T,D] joined along T) are placed with the right
// offsets and pitch; each condition has a negative twin: a value read twice,
// a graph output, a graph input, a view on the chain read twice or returned,
// a slice that is not the producer's rows, a misaligned slice, the same value
// twice in one Concat, a placement that would raise the peak of live bytes. And
// which ConcatQuant inputs are encoded right after the step that makes them,
// with the same negative twins and peak rule.
// ============================================================================
#include "runtime/concat_placement.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model_builder.h"
#include "test_support.h"

namespace loka {
namespace {

Tensor weights(int64_t k, int64_t n) { return Tensor::zeros(DType::kFloat32, {k, n}); }

/// A 1-D int64 constant (a Reshape's target).
Tensor ints(std::vector<int64_t> values) {
  return Tensor::from_int64s({static_cast<int64_t>(values.size())}, values);
}

/// Each value's placement, by name, at batch 4 (from the traced shapes).
struct Placed {
  std::shared_ptr<const Engine> engine;
  std::vector<std::optional<ConcatPlacement>> placements;
  std::optional<ConcatPlacement> of(const std::string& name) const {
    const auto& values = engine->plan().values();
    for (size_t v = 0; v < values.size(); ++v)
      if (values[v].name == name) return placements[v];
    ADD_FAILURE() << "no value " << name;
    return std::nullopt;
  }
  std::string name_of(int value) const { return engine->plan().values()[static_cast<size_t>(value)].name; }
};

/// An engine and its shapes at batch 4; nothing (a test failure said why) when loading or
/// tracing fails.
struct AtBatchFour {
  std::shared_ptr<const Engine> engine;
  BucketShapes shapes;
};
std::optional<AtBatchFour> at_batch_four(const Result<std::shared_ptr<const Engine>>& engine) {
  EXPECT_TRUE(engine) << engine.status().message();
  if (!engine) return std::nullopt;
  auto shapes = BatchShapeModel::trace(**engine);
  EXPECT_TRUE(shapes) << shapes.status().message();
  if (!shapes) return std::nullopt;
  auto at = shapes->at(4);
  EXPECT_TRUE(at) << at.status().message();
  if (!at) return std::nullopt;
  return AtBatchFour{*engine, std::move(*at)};
}
std::optional<AtBatchFour> at_batch_four(const testing::ModelBuilder& b) { return at_batch_four(b.build_engine()); }

/// As the CUDA backend's ops (their PitchedRowRules, runtime/cuda/device_op.h): MatMul and Gemm
/// write rows of their last dim with a pitch, a MatMul with a matrix on the left also whole
/// samples [M, N], EmbeddingBags a sample's [T, D], a Relu packed rows only.
std::vector<int64_t> cuda_like_row_widths(const PlanStep& step, const BucketShapes& shapes) {
  const Shape& out = shapes.shapes[static_cast<size_t>(step.outputs[0])];
  const bool left_matrix =
      step.op_type == "MatMul" && shapes.shapes[static_cast<size_t>(step.inputs[0])].size() == 2 && out.size() == 3;
  if (left_matrix) return {out[1] * out[2], out[2]};
  if (step.op_type == "MatMul" || step.op_type == "Gemm") return {out.back()};
  if (step.op_type == "EmbeddingBags") return {out[1] * out[2]};
  return {};
}

Placed place(const std::optional<AtBatchFour>& traced) {
  if (!traced) return {};
  return Placed{traced->engine, plan_concat_placements(traced->engine->plan(), traced->shapes, cuda_like_row_widths)};
}
Placed place(const testing::ModelBuilder& b) { return place(at_batch_four(b)); }

TEST(ConcatPlacement, GemmOutputsJoinedAlongTheirRowsGoInPlace) {
  // DHEN: [B,6,32] MatMul outputs and a Relu's (copied: it writes packed rows), joined along the
  // last axis into [B,6,96].
  testing::ModelBuilder b(17);
  b.input("x", DType::kFloat32, {-1, 6, 32});
  b.initializer("w1", weights(32, 32)).initializer("w2", weights(32, 32));
  b.node("MatMul", {"x", "w1"}, {"a"});
  b.node("Relu", {"x"}, {"r"});
  b.node("MatMul", {"x", "w2"}, {"c"});
  b.node("Concat", {"a", "r", "c"}, {"y"}, {{"axis", int64_t{-1}}});
  b.output("y", DType::kFloat32, {-1, 6, 96});
  const Placed placed = place(b);
  EXPECT_FALSE(placed.of("r"));
  for (const auto& [name, offset] : {std::pair{"a", 0}, std::pair{"c", 64}}) {
    const auto p = placed.of(name);
    ASSERT_TRUE(p) << name;
    EXPECT_EQ(p->offset, offset) << name;
    EXPECT_EQ(p->row_pitch, 96) << name;
    EXPECT_EQ(placed.name_of(p->concat_output), "y");
  }
  EXPECT_EQ(placed.of("a")->input, 0);
  EXPECT_EQ(placed.of("c")->input, 2);
}

TEST(ConcatPlacement, AProducerOfTwoRowWidthsWritesTheOneItsSliceIs) {
  // A matrix on the left of every sample ([6,4] · [B,4,16]) writes samples [6,16] or rows of 16:
  // joined along the tokens its slice is a sample (row width 96), along the features a row (16).
  for (const int64_t axis : {1, 2}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    testing::ModelBuilder b(17);
    b.input("x", DType::kFloat32, {-1, 4, 16});
    b.input("z", DType::kFloat32, {-1, 6, 16});
    b.initializer("mix", weights(6, 4)).initializer("w", weights(16, 16));
    b.node("MatMul", {"mix", "x"}, {"lc"});
    b.node("MatMul", {"z", "w"}, {"zw"});
    b.node("Concat", {"lc", "zw"}, {"y"}, {{"axis", axis}});
    b.output("y", DType::kFloat32, axis == 1 ? Shape{-1, 12, 16} : Shape{-1, 6, 32});
    const Placed placed = place(b);
    const auto lc = placed.of("lc");
    ASSERT_TRUE(lc);
    EXPECT_EQ(lc->offset, 0);
    EXPECT_EQ(lc->row_width, axis == 1 ? 96 : 16);
    EXPECT_EQ(lc->row_pitch, axis == 1 ? 192 : 32);
    // zw writes rows of 16 only: in place along the features, copied along the tokens.
    EXPECT_EQ(placed.of("zw").has_value(), axis == 2);
  }
}

TEST(ConcatPlacement, AReshapedGemmOutputJoinedAlongTokensGoesInPlaceThroughTheView) {
  // Wukong: a Gemm's [B,64] reshaped to [B,4,16], joined with [B,4,16] along tokens into [B,8,16].
  testing::ModelBuilder b(17);
  b.input("x", DType::kFloat32, {-1, 16});
  b.input("z", DType::kFloat32, {-1, 4, 16});
  b.initializer("w", weights(16, 64)).initializer("w_tokens", weights(16, 16));
  b.initializer("shape", Tensor::from_int64s({3}, std::vector<int64_t>{-1, 4, 16}));
  b.node("Gemm", {"x", "w"}, {"g"});
  b.node("Reshape", {"g", "shape"}, {"tokens"});
  b.node("MatMul", {"z", "w_tokens"}, {"zr"});
  b.node("Concat", {"zr", "tokens"}, {"y"}, {{"axis", int64_t{1}}});
  b.output("y", DType::kFloat32, {-1, 8, 16});
  const Placed placed = place(b);
  const auto g = placed.of("g");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->offset, 64);
  EXPECT_EQ(g->row_pitch, 128);
  EXPECT_FALSE(placed.of("tokens")) << "placements name the producer's output, not the view's";
  // The MatMul writes rows of 16; its slice is rows of 4 x 16 (the tokens of one sample).
  EXPECT_FALSE(placed.of("zr"));
}

/// DLRM-DCNv2: the bottom MLP's [B,16] as token 0, then EmbeddingBags' [B,2,16] (two tables, bags
/// of 1 and 2), joined along tokens into [B,3,16]; or (`along_d`) the bags joined along D with a
/// graph input [B,2,8] into [B,2,24].
testing::ModelBuilder dlrm_like(bool along_d) {
  testing::ModelBuilder b(17);
  b.opset("ai.loka", 1);
  b.input("x", DType::kFloat32, {-1, 16});
  b.input("ids", DType::kInt64, {-1, 3});
  b.input("side", DType::kFloat32, {-1, 2, 8});
  b.initializer("w", weights(16, 16)).initializer("t0", weights(10, 16)).initializer("t1", weights(10, 16));
  b.initializer("axis1", Tensor::from_int64s({1}, std::vector<int64_t>{1}));
  b.node("Gemm", {"x", "w"}, {"bottom"});
  b.node("Unsqueeze", {"bottom", "axis1"}, {"token0"});
  b.node("EmbeddingBags", {"ids", "t0", "", "t1"}, {"bags"}, {{"offsets", std::vector<int64_t>{0, 1, 3}}}, "bags",
         "ai.loka");
  if (along_d) {
    b.node("Concat", {"bags", "side"}, {"y"}, {{"axis", int64_t{2}}});
    b.output("y", DType::kFloat32, {-1, 2, 24});
    b.output("token0", DType::kFloat32, {-1, 1, 16});
  } else {
    b.node("Concat", {"token0", "bags"}, {"y"}, {{"axis", int64_t{1}}});
    b.output("y", DType::kFloat32, {-1, 3, 16});
  }
  return b;
}

TEST(ConcatPlacement, EmbeddingBagsJoinedAlongTokensWriteEachSampleInPlace) {
  const Placed placed = place(dlrm_like(false));
  const auto bags = placed.of("bags");
  ASSERT_TRUE(bags);
  EXPECT_EQ(bags->offset, 16);
  EXPECT_EQ(bags->row_pitch, 48);
  EXPECT_EQ(placed.name_of(bags->concat_output), "y");
  const auto bottom = placed.of("bottom");
  ASSERT_TRUE(bottom) << "the Gemm's rows through the Unsqueeze";
  EXPECT_EQ(bottom->offset, 0);
  EXPECT_EQ(bottom->row_pitch, 48);
}

TEST(ConcatPlacement, NegativeTwinEmbeddingBagsJoinedAlongDStayCopied) {
  // A sample's slice of [B,2,24] is two rows of 16, not one row of 2 x 16.
  EXPECT_FALSE(place(dlrm_like(true)).of("bags"));
}

TEST(ConcatPlacement, AViewOnTheChainThatIsReadTwiceOrAGraphOutputKeepsItsProducerCopied) {
  testing::ModelBuilder b(17);
  b.input("x", DType::kFloat32, {-1, 16});
  b.initializer("w", weights(16, 64));
  b.initializer("shape", Tensor::from_int64s({3}, std::vector<int64_t>{-1, 4, 16}));
  b.node("Gemm", {"x", "w"}, {"g1"});
  b.node("Reshape", {"g1", "shape"}, {"read_twice"});
  b.node("Relu", {"read_twice"}, {"also"});
  b.node("Gemm", {"x", "w"}, {"g2"});
  b.node("Reshape", {"g2", "shape"}, {"kept"});
  b.node("Gemm", {"x", "w"}, {"g3"});
  b.node("Reshape", {"g3", "shape"}, {"lone"});
  b.node("Concat", {"read_twice", "kept", "lone"}, {"y"}, {{"axis", int64_t{1}}});
  b.output("y", DType::kFloat32, {-1, 12, 16});
  b.output("also", DType::kFloat32, {-1, 4, 16});
  b.output("kept", DType::kFloat32, {-1, 4, 16});
  const Placed placed = place(b);
  EXPECT_FALSE(placed.of("g1")) << "its view is read by the Relu too";
  EXPECT_FALSE(placed.of("g2")) << "its view is a graph output";
  const auto g3 = placed.of("g3");
  ASSERT_TRUE(g3) << "the twin: a view read only by the Concat";
  EXPECT_EQ(g3->offset, 128);
  EXPECT_EQ(g3->row_pitch, 192);
}

TEST(ConcatPlacement, NegativeTwinsStayCopied) {
  testing::ModelBuilder b(17);
  b.input("x", DType::kFloat32, {-1, 6, 32});
  b.input("lone", DType::kFloat32, {-1, 6, 32});
  b.input("three", DType::kFloat32, {-1, 6, 3});
  b.initializer("w", weights(32, 32));
  b.node("MatMul", {"x", "w"}, {"read_twice"});
  b.node("Relu", {"read_twice"}, {"also_read"});
  b.node("MatMul", {"x", "w"}, {"kept"});
  b.node("MatMul", {"x", "w"}, {"twice_in_one"});
  b.node("Concat", {"read_twice", "kept", "lone", "twice_in_one", "twice_in_one"}, {"y"}, {{"axis", int64_t{2}}});
  // Along tokens, a [B,6,32] GEMM output is not rows of its last dim in [B,12,32].
  b.node("MatMul", {"x", "w"}, {"tokens"});
  b.node("Concat", {"tokens", "x"}, {"by_tokens"}, {{"axis", int64_t{1}}});
  // Rows of 35 floats (140 bytes) are no 16-byte pitch.
  b.node("MatMul", {"x", "w"}, {"odd_pitch"});
  b.node("Concat", {"odd_pitch", "three"}, {"v"}, {{"axis", int64_t{2}}});
  b.output("y", DType::kFloat32, {-1, 6, 160});
  b.output("kept", DType::kFloat32, {-1, 6, 32});
  b.output("also_read", DType::kFloat32, {-1, 6, 32});
  b.output("by_tokens", DType::kFloat32, {-1, 12, 32});
  b.output("v", DType::kFloat32, {-1, 6, 35});
  const Placed placed = place(b);
  EXPECT_FALSE(placed.of("read_twice")) << "read by the Relu too";
  EXPECT_FALSE(placed.of("kept")) << "a graph output";
  EXPECT_FALSE(placed.of("lone")) << "a graph input";
  EXPECT_FALSE(placed.of("twice_in_one")) << "read twice by one Concat";
  EXPECT_FALSE(placed.of("tokens")) << "not rows of its last dim";
  EXPECT_FALSE(placed.of("odd_pitch")) << "a row pitch of 140 bytes";
}

TEST(ConcatPlacement, ASliceStartingOffSixteenBytesStaysCopied) {
  // Rows of 16 floats: the first slice starts each row (placed), the second 12 bytes into it.
  testing::ModelBuilder b(17);
  b.input("x", DType::kFloat32, {-1, 6, 1});
  b.initializer("w3", weights(1, 3)).initializer("w13", weights(1, 13));
  b.node("MatMul", {"x", "w3"}, {"at_row_start"});
  b.node("MatMul", {"x", "w13"}, {"twelve_bytes_in"});
  b.node("Concat", {"at_row_start", "twelve_bytes_in"}, {"z"}, {{"axis", int64_t{2}}});
  b.output("z", DType::kFloat32, {-1, 6, 16});
  const Placed placed = place(b);
  EXPECT_TRUE(placed.of("at_row_start"));
  EXPECT_FALSE(placed.of("twelve_bytes_in")) << "starts 12 bytes into a row";
}

/// x -> g (32 wide) and, when `big_between`, x -> 1024 wide -> s (32 wide); out = Concat(g, s).
testing::ModelBuilder gemm_then_concat(bool big_between) {
  testing::ModelBuilder b(17);
  b.input("x", DType::kFloat32, {-1, 32});
  b.initializer("w", weights(32, 32)).initializer("wide", weights(32, 1024)).initializer("back", weights(1024, 32));
  b.node("MatMul", {"x", "w"}, {"g"});
  if (big_between) {
    b.node("MatMul", {"x", "wide"}, {"big"});
    b.node("MatMul", {"big", "back"}, {"s"});
  } else {
    b.node("MatMul", {"x", "w"}, {"s"});
  }
  b.node("Concat", {"g", "s"}, {"out"}, {{"axis", int64_t{1}}});
  b.output("out", DType::kFloat32, {-1, 64});
  return b;
}

TEST(ConcatPlacement, APlacementThatWouldRaiseThePeakOfLiveBytesIsDropped) {
  // Placing g makes out (64 wide) alive beside the 1024-wide temporary, where g's 32 were: the
  // peak grows by 32 floats a sample, so g stays copied; so does s, made beside it.
  const Placed raised = place(gemm_then_concat(true));
  EXPECT_FALSE(raised.of("g"));
  EXPECT_FALSE(raised.of("s"));
  // Negative twin: nothing large in between, and both go in place.
  const Placed kept = place(gemm_then_concat(false));
  EXPECT_TRUE(kept.of("g"));
  EXPECT_TRUE(kept.of("s"));
}

TEST(ConcatPlacement, ZooDhensLinearModulesAreWrittenIntoTheirFeatureJoins) {
  // The bundled DHEN: each layer's linear module (one MatMul with the mixing matrix on the left of
  // the layer input) is first in the file. Run where the file puts it, its output was alive
  // through the other four modules, and placing it would have kept the join alive through them
  // too: refused. The plan now runs it after the layer input's last other reader, next to the
  // join (runtime/node_schedule.h), where it goes in place (DHEN's arena at batch 4096 714 ->
  // 578 MB on an H200, 2026-11-28).
  const Placed placed =
      place(at_batch_four(Engine::load_file(testing::source_dir() / "models" / "zoo" / "dhen" / "model.onnx")));
  ASSERT_TRUE(placed.engine);
  for (const auto& [linear, join] : {std::pair<std::string, std::string>{"matmul_4", "cat_1"}, {"matmul_9", "cat_2"}}) {
    const std::optional<ConcatPlacement> p = placed.of(linear);
    ASSERT_TRUE(p) << linear << " is copied into " << join;
    EXPECT_EQ(placed.name_of(p->concat_output), join);
    EXPECT_EQ(p->row_width, 8);   // rows of the module's 8 features ...
    EXPECT_EQ(p->row_pitch, 40);  // ... in the five modules' 40
  }
}

// ---------------------------------------------------- ConcatQuant inputs encoded early --

/// The early encodes planned for `b` at batch 4, as (input name, name of the node it follows).
std::vector<std::pair<std::string, std::string>> early_encodes(const testing::ModelBuilder& b) {
  const std::optional<AtBatchFour> traced = at_batch_four(b);
  if (!traced) return {};
  const ExecutionPlan& plan = traced->engine->plan();
  const std::vector<std::optional<ConcatPlacement>> none(plan.values().size());
  std::vector<std::pair<std::string, std::string>> out;
  for (const EarlyEncode& e : plan_early_encodes(plan, traced->shapes, none)) {
    const PlanStep& concat = plan.steps()[static_cast<size_t>(e.concat_quant_step)];
    EXPECT_EQ(concat.op_type, "ConcatQuant");
    const int input = concat.inputs[static_cast<size_t>(e.input)];
    out.emplace_back(plan.values()[static_cast<size_t>(input)].name, plan.steps()[static_cast<size_t>(e.after_step)].name);
  }
  return out;
}

/// x [B,6,32] and a ConcatQuant of `inputs` along the last axis into q.
testing::ModelBuilder concat_quant_model(const std::vector<std::string>& inputs, int64_t width) {
  testing::ModelBuilder b(17);
  b.opset("ai.loka", 1);
  b.input("x", DType::kFloat32, {-1, 6, 32});
  b.initializer("scale", Tensor::scalar_float(0.05f));
  std::vector<std::string> names = {"scale"};
  names.insert(names.end(), inputs.begin(), inputs.end());
  b.node("ConcatQuant", names, {"q"}, {{"axis", int64_t{-1}}}, "join", "ai.loka");
  b.output("q", DType::kFloat8E4M3FN, {-1, 6, width});
  return b;
}

TEST(EarlyEncode, DhenLikeModuleOutputsAreEncodedRightAfterTheStepsThatMakeThem) {
  // Three module outputs (a GEMM, a Relu through a Reshape pair, a GEMM): each is encoded after
  // its own step (the Reshape's, for the view), and no FP32 input lives until the ConcatQuant.
  // module_a, first in the file, runs last (runtime/node_schedule.h: x is alive until module_c
  // anyway), right before the ConcatQuant, which encodes it itself.
  testing::ModelBuilder b = concat_quant_model({"a", "r", "c"}, 96);
  b.initializer("w1", weights(32, 32)).initializer("w2", weights(32, 32));
  b.initializer("flat", ints({-1, 32})).initializer("back", ints({-1, 6, 32}));
  b.node("MatMul", {"x", "w1"}, {"a"}, {}, "module_a");
  b.node("Relu", {"x"}, {"relu"}, {}, "module_r");
  b.node("Reshape", {"relu", "flat"}, {"relu_flat"}, {}, "flatten");
  b.node("Reshape", {"relu_flat", "back"}, {"r"}, {}, "unflatten");
  b.node("MatMul", {"x", "w2"}, {"c"}, {}, "module_c");
  const auto encodes = early_encodes(b);
  EXPECT_EQ(encodes, (std::vector<std::pair<std::string, std::string>>{{"r", "unflatten"}, {"c", "module_c"}}));
  const std::optional<AtBatchFour> traced = at_batch_four(b);
  ASSERT_TRUE(traced);
  const auto& steps = traced->engine->plan().steps();
  ASSERT_GE(steps.size(), 2u);
  EXPECT_EQ(steps[steps.size() - 2].name, "module_a");
}

TEST(EarlyEncode, NegativeTwinsInputsSomethingElseKeepsAreEncodedAtTheConcatQuant) {
  // a is also read by a Relu; g is a graph output; x is a graph input; d is joined twice; the
  // view chain of v is read twice on the way.
  testing::ModelBuilder b = concat_quant_model({"a", "g", "x", "d", "d", "v"}, 192);
  b.initializer("w", weights(32, 32)).initializer("shape", ints({-1, 6, 32}));
  b.node("MatMul", {"x", "w"}, {"a"});
  b.node("Relu", {"a"}, {"a_too"});
  b.node("MatMul", {"x", "w"}, {"g"});
  b.node("MatMul", {"x", "w"}, {"d"});
  b.node("MatMul", {"x", "w"}, {"m"});
  b.node("Reshape", {"m", "shape"}, {"v"});
  b.node("Relu", {"m"}, {"m_too"});
  b.output("a_too", DType::kFloat32, {-1, 6, 32}).output("g", DType::kFloat32, {-1, 6, 32});
  b.output("m_too", DType::kFloat32, {-1, 6, 32});
  EXPECT_TRUE(early_encodes(b).empty());
}

TEST(EarlyEncode, AnEncodeThatWouldRaiseThePeakOfLiveBytesIsLeftToTheConcatQuant) {
  // s (8 wide) is made before a 512-wide temporary, b1 and b2 (128 wide) beside it. Encoding s
  // early keeps the codes of all three (264 bytes a token) alive across the temporary where s's
  // 32 bytes were: the peak grows, so s waits for the ConcatQuant. b1 and b2, encoded early,
  // shrink the peak, and are. (s is made from y, which nothing else reads, so the plan cannot
  // move it past the temporary: runtime/node_schedule.h.)
  testing::ModelBuilder b = concat_quant_model({"s", "b1", "b2"}, 264);
  b.input("y", DType::kFloat32, {-1, 6, 32});
  b.initializer("ws", weights(32, 8)).initializer("wh", weights(32, 512)).initializer("wb", weights(32, 128));
  b.node("MatMul", {"y", "ws"}, {"s"}, {}, "small");
  b.node("MatMul", {"x", "wh"}, {"h"}, {}, "temporary");
  b.node("MatMul", {"x", "wb"}, {"b1"}, {}, "big_1");
  b.node("MatMul", {"x", "wb"}, {"b2"}, {}, "big_2");
  b.node("ReduceMean", {"h"}, {"g"}, {{"axes", std::vector<int64_t>{-1}}}, "reduce");
  b.output("g", DType::kFloat32, {-1, 6, 1});
  EXPECT_EQ(early_encodes(b), (std::vector<std::pair<std::string, std::string>>{{"b1", "big_1"}, {"b2", "big_2"}}));
}

}  // namespace
}  // namespace loka
