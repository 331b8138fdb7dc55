// ============================================================================
// tests/passes/insert_scales_test.cc — `insert-scales` (and the pipeline
// pin-precision feeds it): golden IR with FP8 codes, negative twins, and
// numerics on the CPU runtime, from a reference loop up to whole zoo models.
//
// Golden FP8 codes are worked by hand in the comments: with scale = amax/448,
// a channel's amax encodes as 0x7e (448) and e.g. amax/4 as 0x6e (112).
// ============================================================================
#include "passes/mods/insert_scales.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "loka/engine.h"
#include "loka/float8.h"
#include "loka/session.h"
#include "passes/infer_shapes_pass.h"
#include "passes/ir/text_format.h"
#include "passes/mods/pin_precision.h"
#include "passes/onnx/onnx_export.h"
#include "passes/onnx/onnx_import.h"
#include "passes/pass_manager.h"
#include "passes/probe/annotations.h"
#include "passes/probe/probe_pass.h"
#include "runtime/test_data.h"
#include "mods_test_util.h"
#include "test_support.h"

namespace loka {
namespace {

using nlohmann::json;

PassRegistry mods_registry() {
  PassRegistry registry;
  registry.add(infer_shapes_pass_info(), make_infer_shapes_pass);
  registry.add(probe_pass_info(), make_probe_pass);
  registry.add(pin_precision_pass_info(), make_pin_precision_pass);
  registry.add(insert_scales_pass_info(), make_insert_scales_pass);
  return registry;
}

struct Outcome {
  Status status = Status::ok();
  std::vector<PassRunRecord> records;
};

Outcome run_pipeline(ir::Graph& graph, const std::string& text, CompileSettings settings = {}) {
  const PassRegistry registry = mods_registry();
  auto pipeline = parse_pipeline(text, registry);
  EXPECT_TRUE(pipeline) << pipeline.status().message();
  PassManagerOptions options;
  options.reproducer_dir = testing::make_temp_dir("loka-insert-scales-repro");
  auto records = PassManager(registry, options).run(graph, *pipeline, settings);
  if (!records) return Outcome{records.status(), {}};
  return Outcome{Status::ok(), *records};
}

std::unique_ptr<ir::Graph> parse(const std::string& text) {
  auto graph = ir::parse_graph(text);
  EXPECT_TRUE(graph) << graph.status().message();
  return graph ? std::move(*graph) : nullptr;
}

/// The printed IR without metadata lines (annotations are checked as JSON).
std::string body(const ir::Graph& graph) {
  std::string out, line;
  for (char c : ir::print_graph(graph)) {
    line += c;
    if (c != '\n') continue;
    if (line.rfind("  meta ", 0) != 0) out += line;
    line.clear();
  }
  return out + line;
}

/// CHECK-style matching: every `checks` line occurs, in order, as a substring
/// of successive lines of `text`; no line of `text` contains a `forbidden` string.
void expect_checks(const std::string& text, const std::vector<std::string>& checks,
                   const std::vector<std::string>& forbidden = {}) {
  size_t at = 0;
  for (const std::string& check : checks) {
    const size_t found = text.find(check, at);
    ASSERT_NE(found, std::string::npos) << "CHECK: " << check << "\nnot found after offset " << at << " in\n" << text;
    at = text.find('\n', found);
  }
  for (const std::string& not_here : forbidden)
    EXPECT_EQ(text.find(not_here), std::string::npos) << "CHECK-NOT: " << not_here << "\nin\n" << text;
}

void annotate(ir::Graph& graph, json nodes) {
  write_annotations(graph, json{{"version", 1}, {"model", json::object()}, {"nodes", std::move(nodes)}});
}

json fp8(const char* recipe, double activation_scale = 0.0625) {
  return {
      {"precision", "fp8_e4m3"}, {"recipe", recipe}, {"stats", {{"activation", {{"scale_e4m3", activation_scale}}}}}};
}

constexpr const char* kGemmAndGather = R"(graph "t" {
  opset "" 17
  input %x : f32[batch,3]
  input %ids : i64[batch]
  init %w : f32[2,3] = [1, -2, 4, 0.5, 0.25, -0.125]
  init %b : f32[2] = [0.5, -1]
  init %table : f32[3,2] = [1, -0.5, 2, 8, -3, 0.75]
  %y = Gemm(%x, %w, %b) {transB = 1} : f32[batch,2] @"fc"
  %e = Gather(%table, %ids) : f32[batch,2] @"emb"
  output %y
  output %e
}
)";

// ------------------------------------------------------------- golden IR ---

TEST(InsertScales, GemmAndGatherBecomeQuantizedOpsWithFp8Codes) {
  auto graph = parse(kGemmAndGather);
  ASSERT_TRUE(graph);
  annotate(*graph, {{"fc", fp8("e4m3_tensor")}, {"emb", fp8("e4m3_row")}});
  const Outcome outcome = run_pipeline(*graph, "insert-scales");
  ASSERT_TRUE(outcome.status) << outcome.status.message();
  EXPECT_TRUE(outcome.records[0].changed);
  // W rows (output channels, transB=1): [1,-2,4] amax 4 -> x112 = 0x6e, -224 = 0xf6, 448 = 0x7e;
  // [0.5,0.25,-0.125] amax 0.5 -> 448 = 0x7e, 224 = 0x76, -112 = 0xee. Scales 4/448, 0.5/448.
  // Table rows: [1,-0.5] -> 0x7e, 0xf6; [2,8] -> 0x6e, 0x7e; [-3,0.75] -> 0xfe, 0x6e.
  expect_checks(body(*graph),
                {"opset \"ai.loka\" 1", "init %b : f32[2] = [0.5, -1]",
                 "init %w.fp8 : f8e4m3fn[2,3] = [0x6e, 0xf6, 0x7e, 0x7e, 0x76, 0xee]",
                 "init %w.scale : f32[2] = [0.00892857183, 0.00111607148]", "init %fc.x_scale : f32[] = [0.0625]",
                 "init %table.fp8 : f8e4m3fn[3,2] = [0x7e, 0xf6, 0x6e, 0x7e, 0xfe, 0x6e]",
                 "init %table.scale : f32[3] = [0.00223214296, 0.0178571437, 0.00669642864]",
                 "%y = ai.loka::QuantizedGemm(%x, %w.fp8, %w.scale, %b, %fc.x_scale) {act_recipe = \"tensor\", "
                 "activation = \"none\"} : f32[batch,2] @\"fc\"",
                 "%e = ai.loka::QuantizedGather(%table.fp8, %table.scale, %ids) : f32[batch,2] @\"emb\"", "output %y",
                 "output %e"},
                {"init %w :", "init %table :", "= Gemm(", "= Gather("});
  const json document = *read_annotations(*graph);
  EXPECT_EQ(document["nodes"]["fc"]["from"], json::array({"fc"}));
  EXPECT_EQ(document["nodes"]["emb"]["lowered_to"], "ai.loka::QuantizedGather");
  const auto& stats = outcome.records[0].statistics;
  EXPECT_EQ(stats.at("weight-bytes-before"), 4 * (6 + 2 + 6));
  EXPECT_EQ(stats.at("weight-bytes-after"), 6 + 4 * 2 + 4 * 2 + 4 + 6 + 4 * 3);
  // The rewritten IR prints and parses back to itself.
  auto again = ir::parse_graph(ir::print_graph(*graph));
  ASSERT_TRUE(again) << again.status().message();
  EXPECT_EQ(ir::print_graph(**again), ir::print_graph(*graph));
}

TEST(InsertScales, NegativeTwinFp32SitesAreUntouched) {
  auto graph = parse(kGemmAndGather);
  ASSERT_TRUE(graph);
  annotate(*graph, {{"fc", {{"precision", "fp32"}, {"recipe", "e4m3_tensor"}}}, {"emb", {{"precision", "bf16"}}}});
  const std::string before = ir::print_graph(*graph);
  const Outcome outcome = run_pipeline(*graph, "insert-scales");
  ASSERT_TRUE(outcome.status) << outcome.status.message();
  EXPECT_FALSE(outcome.records[0].changed);
  EXPECT_EQ(ir::print_graph(*graph), before);
}

TEST(InsertScales, MatMulWithRank3ActivationAndPerTensorTable) {
  auto graph = parse(R"(graph "t" {
  opset "" 17
  input %x : f32[batch,4,3]
  input %ids : i32[batch,2]
  init %w : f32[3,2] = [1, 0.5, -2, 0.25, 4, -0.125]
  init %table : f32[3,2] = [1, -0.5, 2, 8, -3, 0.75]
  %y = MatMul(%x, %w) : f32[batch,4,2] @"proj"
  %r = Relu(%y) : f32[batch,4,2] @"relu"
  %e = Gather(%table, %ids) : f32[batch,2,2] @"emb"
  output %r
  output %e
}
)");
  ASSERT_TRUE(graph);
  annotate(*graph, {{"proj", fp8("e4m3_row")}, {"emb", fp8("e4m3_tensor")}});
  const Outcome outcome = run_pipeline(*graph, "insert-scales");
  ASSERT_TRUE(outcome.status) << outcome.status.message();
  // W [K=3, N=2] is stored [N, K]: columns [1,-2,4] and [0.5,0.25,-0.125] (codes as above).
  // Table, one scale 8/448: x56 -> 56 = 0x66, -28 = 0xde, 112 = 0x6e, 448 = 0x7e,
  // -168 (1.3125 * 128 rounds to even 1.25 * 128) = 0xf2, 42 (-> 40) = 0x62.
  expect_checks(body(*graph),
                {"init %w.fp8 : f8e4m3fn[2,3] = [0x6e, 0xf6, 0x7e, 0x7e, 0x76, 0xee]",
                 "init %w.scale : f32[2] = [0.00892857183, 0.00111607148]",
                 "init %table.fp8 : f8e4m3fn[3,2] = [0x66, 0xde, 0x6e, 0x7e, 0xf2, 0x62]",
                 "init %table.scale : f32[1] = [0.0178571437]",
                 "%y = ai.loka::QuantizedGemm(%x, %w.fp8, %w.scale) {act_recipe = \"row\", activation = \"none\"} : "
                 "f32[batch,4,2] @\"proj\"",
                 "%r = Relu(%y)", "%e = ai.loka::QuantizedGather(%table.fp8, %table.scale, %ids) : f32[batch,2,2]"},
                {"x_scale", "init %w :", "MatMul("});
}

TEST(InsertScales, SharedWeightIsQuantizedOnceAndGemmAlphaBetaFold) {
  auto graph = parse(R"(graph "t" {
  opset "" 17
  input %x : f32[batch,3]
  init %w : f32[3,2] = [1, 0.5, -2, 0.25, 4, -0.125]
  init %c : f32[1] = [2]
  %y = Gemm(%x, %w, %c) {alpha = 2f, beta = 0.5f} : f32[batch,2] @"g1"
  %z = Gemm(%y, %w, _) : f32[batch,2] @"g2"
  %k = MatMul(%x, %w) : f32[batch,2] @"kept"
  output %z
  output %k
}
)");
  ASSERT_TRUE(graph);
  annotate(*graph, {{"g1", fp8("e4m3_row")}, {"g2", fp8("e4m3_row")}, {"kept", {{"precision", "fp32"}}}});
  const Outcome outcome = run_pipeline(*graph, "insert-scales");
  ASSERT_TRUE(outcome.status) << outcome.status.message();
  // g1 folds alpha=2 into its own scales; g2 (alpha 1) gets the plain ones;
  // the float W stays because the fp32 MatMul still reads it; C -> 0.5 * 2 per channel.
  expect_checks(body(*graph),
                {"init %w : f32[3,2]", "init %w.fp8 : f8e4m3fn[2,3]",
                 "init %w.scale : f32[2] = [0.0178571437, 0.00223214296]", "init %c.folded : f32[2] = [1, 1]",
                 "init %w.fp8_1 : f8e4m3fn[2,3]", "init %w.scale_1 : f32[2] = [0.00892857183, 0.00111607148]",
                 "%k = MatMul(%x, %w)", "ai.loka::QuantizedGemm(%x, %w.fp8, %w.scale, %c.folded)",
                 "ai.loka::QuantizedGemm(%y, %w.fp8_1, %w.scale_1) {act_recipe = \"row\""},
                {"init %c :"});
}

TEST(InsertScales, SitesThatCannotBeLoweredAreErrorsNamingTheNode) {
  auto graph = parse(R"(graph "t" {
  opset "" 17
  input %x : f32[batch,4,8]
  %xt = Transpose(%x) {perm = ints[0, 2, 1]} : f32[batch,8,4] @"xt"
  %y = MatMul(%x, %xt) : f32[batch,4,4] @"interact"
  output %y
}
)");
  ASSERT_TRUE(graph);
  annotate(*graph, {{"interact", fp8("e4m3_row")}});
  Outcome outcome = run_pipeline(*graph, "insert-scales");
  ASSERT_FALSE(outcome.status);
  EXPECT_NE(outcome.status.message().find("node 'interact'"), std::string::npos) << outcome.status.message();

  auto missing_scale = parse(kGemmAndGather);
  annotate(*missing_scale, {{"fc", {{"precision", "fp8_e4m3"}, {"recipe", "e4m3_tensor"}}}});
  outcome = run_pipeline(*missing_scale, "insert-scales");
  ASSERT_FALSE(outcome.status);
  EXPECT_NE(outcome.status.message().find("node 'fc'"), std::string::npos) << outcome.status.message();
  EXPECT_NE(outcome.status.message().find("scale_e4m3"), std::string::npos) << outcome.status.message();
}

// ------------------------------------------------ with pin-precision first ---

/// The Probe's view of kGemmAndGather: `fc` with the given verdict, `emb` safe.
void annotate_probed(ir::Graph& graph, const char* fc_verdict) {
  const auto site = [](const char* verdict, double error) {
    const json e = {{"rel_l2_mean", error}, {"max_abs", error}};
    return json{
        {"verdict", verdict},
        {"recipe", "e4m3_tensor"},
        {"precision", "fp32"},
        {"error", e},
        {"recipes",
         {{"e4m3_tensor", {{"error", e}, {"verdict", verdict}}}, {"e4m3_row", {{"error", e}, {"verdict", verdict}}}}},
        {"stats", {{"activation", {{"scale_e4m3", 0.0625}}}}}};
  };
  write_annotations(graph, json{{"version", 1},
                                {"model", {{"probe", {{"budget", "rel_l2=0.01"}}}}},
                                {"nodes", {{"fc", site(fc_verdict, 0.001)}, {"emb", site("safe", 0.001)}}}});
}

TEST(InsertScales, PinnedRuleOverridesTheUnsafeVerdict) {
  auto graph = parse(kGemmAndGather);
  annotate_probed(*graph, "unsafe");
  CompileSettings settings;
  settings.pin_rules = {"^fc$=fp8"};
  const Outcome outcome = run_pipeline(*graph, "infer-shapes,pin-precision,insert-scales", settings);
  ASSERT_TRUE(outcome.status) << outcome.status.message();
  expect_checks(body(*graph),
                {"ai.loka::QuantizedGemm(%x, %w.fp8, %w.scale, %b, %fc.x_scale) {act_recipe = \"tensor\""});
  EXPECT_EQ((*read_annotations(*graph))["nodes"]["fc"]["pinned_by"], "^fc$=fp8");
}

TEST(InsertScales, NegativeTwinUnpinnedUnsafeSiteStaysFloat) {
  auto graph = parse(kGemmAndGather);
  annotate_probed(*graph, "unsafe");
  const Outcome outcome = run_pipeline(*graph, "infer-shapes,pin-precision,insert-scales");
  ASSERT_TRUE(outcome.status) << outcome.status.message();
  expect_checks(
      body(*graph),
      {"init %w : f32[2,3]", "%y = Gemm(%x, %w, %b) {transB = 1}", "%e = ai.loka::QuantizedGather(%table.fp8"},
      {"QuantizedGemm", "%w.fp8"});
}

TEST(InsertScales, NegativeTwinBudgetTooSmallPutsNothingInFp8) {
  auto graph = parse(kGemmAndGather);
  annotate_probed(*graph, "safe");
  CompileSettings settings;
  settings.budget = "rel_l2=0.0001";
  const Outcome outcome = run_pipeline(*graph, "infer-shapes,pin-precision,insert-scales", settings);
  ASSERT_TRUE(outcome.status) << outcome.status.message();
  EXPECT_FALSE(outcome.records[2].changed);
  expect_checks(body(*graph), {"%y = Gemm(%x, %w, %b)", "%e = Gather(%table, %ids)"}, {"ai.loka", "f8e4m3fn"});
}

// -------------------------------------------------------------- numerics ---

bool loka_ops_available() {
  auto graph = ir::parse_graph(kGemmAndGather);
  if (!graph) return false;
  annotate(**graph, {{"fc", fp8("e4m3_row")}});
  if (!run_pipeline(**graph, "insert-scales").status) return false;
  auto bytes = onnx_io::export_model_bytes(**graph);
  return bytes && Engine::load_bytes(std::as_bytes(std::span(bytes->data(), bytes->size()))).is_ok();
}

float fake_quantize(float value, float scale) { return fp8e4m3fn_to_float(float_to_fp8e4m3fn(value / scale)) * scale; }
float scale_for(float amax) { return amax > 0 && std::isfinite(amax) ? amax / 448.0f : 1.0f; }

Result<std::vector<Tensor>> run_graph(const ir::Graph& graph, const std::vector<Tensor>& inputs) {
  LOKA_ASSIGN_OR_RETURN(const std::string bytes, onnx_io::export_model_bytes(graph));
  LOKA_ASSIGN_OR_RETURN(auto engine, Engine::load_bytes(std::as_bytes(std::span(bytes.data(), bytes.size()))));
  return engine->new_session()->run(inputs);
}

/// A Gemm (transB=1, bias, tensor recipe) then a rank-3 MatMul (row recipe) and
/// a Gather (row recipe), on awkward sizes, against loops written here.
TEST(InsertScales, RewrittenGraphMatchesAReferenceLoop) {
  if (!loka_ops_available()) GTEST_SKIP() << "ai.loka CPU kernels not registered yet";
  std::mt19937 rng(11);
  constexpr int64_t kBatch = 5, kK = 13, kN = 7, kRows = 3, kV = 9, kD = 6;
  const Tensor w1 = testing::random_tensor(rng, {kN, kK}), b1 = testing::random_tensor(rng, {kN});
  const Tensor w2 = testing::random_tensor(rng, {kN, kN}, -2.0f, 2.0f),
               table = testing::random_tensor(rng, {kV, kD}, -3, 3);
  auto graph = std::make_unique<ir::Graph>();
  graph->opsets[""] = 17;
  ir::Value* x = graph->add_value("x", ir::TensorType::of(DType::kFloat32, {kBatch, kRows, kK}));
  ir::Value* ids = graph->add_value("ids", ir::TensorType::of(DType::kInt64, {kBatch, 2}));
  graph->add_input(x);
  graph->add_input(ids);
  ir::Value* flat =
      graph
          ->add_node(
              "Reshape",
              {x, graph->add_initializer("shape", Tensor::from_int64s({2}, std::vector<int64_t>{kBatch * kRows, kK}))},
              1, "flat")
          ->output(0);
  ir::Node* fc =
      graph->add_node("Gemm", {flat, graph->add_initializer("w1", w1), graph->add_initializer("b1", b1)}, 1, "fc");
  fc->mutable_attributes().set("transB", int64_t{1});
  ir::Value* back =
      graph
          ->add_node("Reshape",
                     {fc->output(0), graph->add_initializer(
                                         "shape3", Tensor::from_int64s({3}, std::vector<int64_t>{kBatch, kRows, kN}))},
                     1, "back")
          ->output(0);
  ir::Value* y = graph->add_node("MatMul", {back, graph->add_initializer("w2", w2)}, 1, "proj")->output(0);
  ir::Value* e = graph->add_node("Gather", {graph->add_initializer("table", table), ids}, 1, "emb")->output(0);
  graph->add_output(y);
  graph->add_output(e);
  const Tensor input = testing::random_tensor(rng, {kBatch, kRows, kK}, -4, 4);
  std::vector<int64_t> id_values(kBatch * 2);
  for (auto& id : id_values) id = std::uniform_int_distribution<int64_t>(-kV, kV - 1)(rng);
  const Tensor id_tensor = Tensor::from_int64s({kBatch, 2}, id_values);
  const float x_scale = scale_for(4.0f);
  ASSERT_TRUE(run_pipeline(*graph, "infer-shapes").status);
  annotate(*graph, {{"fc", fp8("e4m3_tensor", x_scale)}, {"proj", fp8("e4m3_row")}, {"emb", fp8("e4m3_row")}});
  ASSERT_TRUE(run_pipeline(*graph, "insert-scales").status);
  auto outputs = run_graph(*graph, {input, id_tensor});
  ASSERT_TRUE(outputs) << outputs.status().message();

  // Reference: per-output-channel weight scales, static / per-row activation scales.
  const auto quantize_rows_of = [](const float* w, int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
    std::vector<float> q(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
      float amax = 0;
      for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(w[r * row_stride + c * col_stride]));
      for (int64_t c = 0; c < cols; ++c)
        q[r * cols + c] = fake_quantize(w[r * row_stride + c * col_stride], scale_for(amax));
    }
    return q;
  };
  const std::vector<float> w1q = quantize_rows_of(w1.data<float>(), kN, kK, kK, 1);
  const std::vector<float> w2q = quantize_rows_of(w2.data<float>(), kN, kN, 1, kN);  // W2 [K,N]: channel n is column n
  const std::vector<float> xq = [&] {
    std::vector<float> q(input.values<float>().begin(), input.values<float>().end());
    for (float& v : q) v = fake_quantize(v, x_scale);
    return q;
  }();
  std::vector<float> h(static_cast<size_t>(kBatch * kRows * kN));
  for (int64_t r = 0; r < kBatch * kRows; ++r)
    for (int64_t n = 0; n < kN; ++n) {
      double sum = b1.data<float>()[n];
      for (int64_t k = 0; k < kK; ++k) sum += static_cast<double>(xq[r * kK + k]) * w1q[n * kK + k];
      h[r * kN + n] = static_cast<float>(sum);
    }
  const std::vector<float> hq = quantize_rows_of(h.data(), kBatch * kRows, kN, kN, 1);
  const std::vector<float> y_values = (*outputs)[0].to_floats();
  ASSERT_EQ(y_values.size(), static_cast<size_t>(kBatch * kRows * kN));
  for (int64_t r = 0; r < kBatch * kRows; ++r)
    for (int64_t n = 0; n < kN; ++n) {
      double sum = 0;
      for (int64_t k = 0; k < kN; ++k) sum += static_cast<double>(hq[r * kN + k]) * w2q[n * kN + k];
      EXPECT_NEAR(y_values[r * kN + n], sum, 1e-4 * (1 + std::fabs(sum))) << "row " << r << " col " << n;
    }
  const std::vector<float> tq = quantize_rows_of(table.data<float>(), kV, kD, kD, 1);
  const std::vector<float> e_values = (*outputs)[1].to_floats();
  ASSERT_EQ(e_values.size(), static_cast<size_t>(kBatch * 2 * kD));
  for (size_t i = 0; i < id_values.size(); ++i) {
    const int64_t row = id_values[i] < 0 ? id_values[i] + kV : id_values[i];
    for (int64_t d = 0; d < kD; ++d) EXPECT_EQ(e_values[i * kD + d], tq[row * kD + d]) << "id " << id_values[i];
  }
}

// ----------------------------------------------------------- zoo models ---


class ZooFp8 : public ::testing::TestWithParam<const char*> {};

TEST_P(ZooFp8, EvalLoglossDriftStaysWithinTheBudget) {
  if (!loka_ops_available()) GTEST_SKIP() << "ai.loka CPU kernels not registered yet";
  const auto zoo = testing::source_dir() / "models" / "zoo" / GetParam();
  auto reference = onnx_io::import_model_file(zoo / "model.onnx");
  ASSERT_TRUE(reference) << reference.status().message();
  auto graph = (*reference)->clone();
  constexpr double kBudget = 0.0002;  // 0.02% relative logloss
  CompileSettings settings;
  settings.calibration_data = zoo / "calib";
  settings.budget = "logloss=0.0002";
  const Outcome outcome = run_pipeline(*graph, "infer-shapes,probe,pin-precision,insert-scales", settings);
  ASSERT_TRUE(outcome.status) << outcome.status.message();
  const json precision = (*read_annotations(*graph))["model"]["precision"];
  const auto& scales = outcome.records[3].statistics;

  auto logloss = testing::eval_logloss_drift(**reference, *graph, zoo / "eval");
  ASSERT_TRUE(logloss) << logloss.status().message();
  const double fp32 = logloss->fp32, fp8 = logloss->fp8, drift = logloss->relative_drift;
  std::printf(
      "[ %s ] FP8 FLOP share %.1f%% (%d of %d sites, predicted drift %.3g%%), eval logloss %.6f -> %.6f, "
      "drift %.4f%% (budget %.2f%%), weights %.0f -> %.0f bytes\n",
      GetParam(), 100 * precision["fp8_flop_share"].get<double>(), precision["fp8_sites"].get<int>(),
      precision["sites"].get<int>(), 100 * precision["predicted_error"].get<double>(), fp32, fp8, 100 * drift,
      100 * kBudget, scales.at("weight-bytes-before"), scales.at("weight-bytes-after"));
  EXPECT_LE(std::fabs(drift), kBudget);
  EXPECT_TRUE(precision["within_budget"].get<bool>()) << precision.dump();
  EXPECT_GT(precision["fp8_sites"].get<int>(), 0) << "the budget admits some FP8 on this model";
  EXPECT_GT(scales.at("gemms-quantized") + scales.at("gathers-quantized"), 0);
  EXPECT_LT(scales.at("weight-bytes-after"), scales.at("weight-bytes-before"));
}

INSTANTIATE_TEST_SUITE_P(Models, ZooFp8,
                         ::testing::Values("dlrm_dot", "dlrm_dcnv2", "wukong", "dhen", "attention_ranker"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace loka
