// ============================================================================
// tests/passes/probe_test.cc — the Probe: verdicts, ranking, early stopping,
// agreement with a brute-force reference.
// ============================================================================
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu/fp8_quantize.h"
#include "loka/engine.h"
#include "loka/session.h"
#include "passes/ir/text_format.h"
#include "passes/onnx/onnx_export.h"
#include "passes/onnx/onnx_import.h"
#include "passes/pass_manager.h"
#include "passes/probe/annotations.h"
#include "runtime/tensor_proto.h"
#include "mods_test_util.h"
#include "test_support.h"

namespace loka {
namespace {

/// x[batch,16] -> Gemm(W1 16x32) -> LayerNorm -> Gemm(W2 32x8) -> y.
/// With `common_mode`, W1 row k gets +a_k on every output and b1 gets +c:
/// LayerNorm removes it exactly in FP32, but FP8 error scales with it.
std::unique_ptr<ir::Graph> planted_model(bool common_mode, std::mt19937& rng) {
  auto [w1, b1] = testing::planted_gemm_weights(rng, common_mode);
  auto graph = std::make_unique<ir::Graph>();
  graph->opsets[""] = 17;
  ir::Value* x = graph->add_value("x", {DType::kFloat32, std::vector<ir::Dim>{ir::Dim::named("batch"), ir::Dim::known(16)}});
  graph->add_input(x);
  ir::Value* h = graph->add_node("Gemm", {x, graph->add_initializer("w1", w1), graph->add_initializer("b1", b1)}, 1, "planted")->output(0);
  ir::Value* n = graph->add_node("LayerNormalization", {h, graph->add_initializer("gamma", Tensor::from_floats({32}, std::vector<float>(32, 1.0f))),
                                                        graph->add_initializer("beta", Tensor::from_floats({32}, std::vector<float>(32, 0.0f)))},
                                 1, "norm")->output(0);
  n->producer()->mutable_attributes().set("axis", int64_t{-1});
  ir::Value* y = graph->add_node("Gemm", {n, graph->add_initializer("w2", testing::random_tensor(rng, {32, 8}, -0.3f, 0.3f))}, 1, "head")->output(0);
  graph->add_output(y);
  return graph;
}

std::filesystem::path write_calibration(std::mt19937& rng, int batches, int batch_size) {
  const auto dir = testing::make_temp_dir("loka-probe-calib");
  for (int b = 0; b < batches; ++b) {
    const auto set = dir / ("test_data_set_" + std::to_string(b));
    std::filesystem::create_directories(set);
    EXPECT_TRUE(write_tensor_file(set / "input_0.pb", "x", testing::random_tensor(rng, {batch_size, 16})));
  }
  return dir;
}

nlohmann::json probe(ir::Graph& graph, const std::filesystem::path& calib, const std::string& options,
                     const std::string& budget) {
  auto pipeline = parse_pipeline("infer-shapes,probe{" + options + "}", PassRegistry::builtin());
  EXPECT_TRUE(pipeline) << pipeline.status().message();
  CompileSettings settings;
  settings.calibration_data = calib;
  settings.budget = budget;
  PassManager manager(PassRegistry::builtin(), {});
  auto records = manager.run(graph, *pipeline, settings);
  EXPECT_TRUE(records) << records.status().message();
  auto document = read_annotations(graph);
  EXPECT_TRUE(document);
  return *document;
}

TEST(Probe, PlantedCommonModeSiteIsUnsafeAndRankedFirst) {
  std::mt19937 rng(5);
  auto graph = planted_model(/*common_mode=*/true, rng);
  const auto calib = write_calibration(rng, 6, 64);
  const nlohmann::json document = probe(*graph, calib, "batches=6", "rel_l2=0.01");
  const auto& nodes = document["nodes"];
  ASSERT_TRUE(nodes.contains("planted") && nodes.contains("head"));
  EXPECT_EQ(nodes["planted"]["verdict"], "unsafe") << nodes["planted"].dump();
  EXPECT_GT(nodes["planted"]["error"]["rel_l2_mean"].get<double>(), nodes["head"]["error"]["rel_l2_mean"].get<double>());
  // The local error hides it; the end-to-end figure shows it.
  EXPECT_GT(nodes["planted"]["error"]["rel_l2_mean"].get<double>(),
            5 * nodes["planted"]["local_error"]["rel_l2_mean"].get<double>());
  // Every site has both recipes with intervals.
  for (const char* name : {"planted", "head"})
    for (const char* recipe : {"e4m3_tensor", "e4m3_row"}) {
      const auto& error = nodes[name]["recipes"][recipe]["error"];
      EXPECT_TRUE(error["rel_l2_ci95"][0].is_number() && error["rel_l2_ci95"][1].is_number()) << error.dump();
    }
}

TEST(Probe, NegativeTwinWithoutCommonModeIsSafe) {
  std::mt19937 rng(5);
  auto graph = planted_model(/*common_mode=*/false, rng);
  const auto calib = write_calibration(rng, 6, 64);
  const nlohmann::json document = probe(*graph, calib, "batches=6", "rel_l2=0.1");
  EXPECT_EQ(document["nodes"]["planted"]["verdict"], "safe") << document["nodes"]["planted"].dump();
}

TEST(Probe, EarlyStoppingSavesBatchesAndSaysSo) {
  std::mt19937 rng(9);
  auto graph = planted_model(/*common_mode=*/false, rng);
  const auto calib = write_calibration(rng, 12, 32);
  const nlohmann::json document = probe(*graph, calib, "batches=12,min_batches=3", "rel_l2=0.5");
  const auto& summary = document["model"]["probe"];
  EXPECT_TRUE(summary["early_stopped"].get<bool>());
  EXPECT_LT(summary["batches_used"].get<int>(), 12);
  EXPECT_EQ(summary["batches_saved"].get<int>(), 12 - summary["batches_used"].get<int>());
  // Every site here settles by min_batches, so each was measured on every batch used.
  EXPECT_EQ(document["nodes"]["planted"]["error"]["batches"], summary["batches_used"]);
  EXPECT_EQ(summary["site_batches_skipped"].get<int>(), 0);
}

/// Brute force: every calibration batch, the site alone quantized with the
/// final static scales, computed here independently of the Probe's observer.
class BruteForceQuantizer final : public Observer {
 public:
  BruteForceQuantizer(std::string node, float activation_scale) : node_(std::move(node)), scale_(activation_scale) {}
  void before_node(const NodeInfo& info, std::span<Tensor> inputs) override {
    if (info.name != node_) return;
    Tensor x = inputs[0].clone();
    cpu::fake_quantize_per_tensor(x.values<float>(), scale_, cpu::Fp8Format::kE4M3FN);
    Tensor w = inputs[1].clone();  // [K, N], per output column
    cpu::fake_quantize_per_column(w.values<float>(), w.dim(0), w.dim(1), cpu::Fp8Format::kE4M3FN);
    inputs[0] = x;
    inputs[1] = w;
  }

 private:
  std::string node_;
  float scale_;
};

TEST(Probe, TensorRecipeEstimatesAgreeWithBruteForce) {
  std::mt19937 rng(21);
  auto graph = planted_model(/*common_mode=*/false, rng);
  constexpr int kBatches = 16;
  const auto calib = write_calibration(rng, kBatches, 48);
  const nlohmann::json document = probe(*graph, calib, "batches=16,min_batches=4,amax_batches=16", "rel_l2=0.5");
  auto bytes = onnx_io::export_model_bytes(*graph);
  ASSERT_TRUE(bytes);
  auto engine = Engine::load_bytes(std::as_bytes(std::span(bytes->data(), bytes->size())));
  ASSERT_TRUE(engine);
  int agree = 0, sites = 0;
  for (const char* site : {"planted", "head"}) {
    const auto& annotated = document["nodes"][site];
    const float scale = annotated["stats"]["activation"]["scale_e4m3"].get<float>();
    BruteForceQuantizer quantizer(site, scale);
    double sum = 0;
    for (int b = 0; b < kBatches; ++b) {
      auto input = read_tensor_file(calib / ("test_data_set_" + std::to_string(b)) / "input_0.pb");
      ASSERT_TRUE(input);
      auto session = (*engine)->new_session();
      auto reference = session->run(std::vector<Tensor>{input->second});
      session->set_observer(&quantizer);
      auto quantized = session->run(std::vector<Tensor>{input->second});
      ASSERT_TRUE(reference && quantized);
      const auto r = (*reference)[0].to_floats();
      const auto q = (*quantized)[0].to_floats();
      double num = 0, den = 0;
      for (size_t i = 0; i < r.size(); ++i) {
        num += (q[i] - r[i]) * (q[i] - r[i]);
        den += r[i] * r[i];
      }
      sum += std::sqrt(num / den);
    }
    const double brute = sum / kBatches;
    const auto& error = annotated["recipes"]["e4m3_tensor"]["error"];
    const double lo = error["rel_l2_ci95"][0].get<double>(), hi = error["rel_l2_ci95"][1].get<double>();
    ++sites;
    agree += (brute >= lo && brute <= hi);
    EXPECT_TRUE(brute >= lo && brute <= hi) << site << ": brute force " << brute << " outside [" << lo << ", " << hi << "]";
  }
  EXPECT_EQ(agree, sites);
}

TEST(Probe, RefusesNaNInCalibrationData) {
  std::mt19937 rng(3);
  auto graph = planted_model(false, rng);
  const auto dir = testing::make_temp_dir("loka-probe-nan");
  std::filesystem::create_directories(dir / "test_data_set_0");
  Tensor x = testing::random_tensor(rng, {4, 16});
  x.data<float>()[5] = NAN;
  ASSERT_TRUE(write_tensor_file(dir / "test_data_set_0" / "input_0.pb", "x", x));
  auto pipeline = parse_pipeline("infer-shapes,probe", PassRegistry::builtin());
  CompileSettings settings;
  settings.calibration_data = dir;
  PassManagerOptions options;
  options.reproducer_dir = testing::make_temp_dir("loka-probe-repro");
  auto records = PassManager(PassRegistry::builtin(), options).run(*graph, *pipeline, settings);
  ASSERT_FALSE(records);
  EXPECT_NE(records.status().message().find("'x' contains NaN"), std::string::npos) << records.status().message();
}

}  // namespace
}  // namespace loka

namespace loka {
namespace {

TEST(Probe, ActivationMatMulsAlsoGetTheE5M2RecipeWeightSitesDoNot) {
  std::mt19937 rng(13);
  auto graph = ir::parse_graph(R"(graph "interaction" {
  opset "" 17
  input %x : f32[batch,16]
  init %w : f32[16,32] = [)" + [&] {
    std::string values;
    std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
    for (int i = 0; i < 16 * 32; ++i) values += (i ? ", " : "") + std::to_string(dist(rng));
    return values;
  }() + R"(]
  init %shape : i64[3] = [-1, 4, 8]
  %h = Gemm(%x, %w) @"embed"
  %r = Reshape(%h, %shape) @"tokens"
  %t = Transpose(%r) {perm = ints[0, 2, 1]} @"transpose"
  %s = MatMul(%r, %t) @"interaction"
  output %s
})");
  ASSERT_TRUE(graph) << graph.status().message();
  const auto calib = write_calibration(rng, 4, 32);
  const nlohmann::json document = probe(**graph, calib, "batches=4", "rel_l2=0.1");
  const auto& nodes = document["nodes"];
  ASSERT_TRUE(nodes.contains("interaction") && nodes.contains("embed"));
  EXPECT_EQ(nodes["interaction"]["site"], "activation_matmul");
  ASSERT_TRUE(nodes["interaction"]["recipes"].contains("e5m2_tensor")) << nodes["interaction"]["recipes"].dump();
  const auto& e5m2 = nodes["interaction"]["recipes"]["e5m2_tensor"]["error"];
  // A site's recipes are measured on the same batches (all of them, or until it settles).
  EXPECT_EQ(e5m2["batches"], nodes["interaction"]["recipes"]["e4m3_tensor"]["error"]["batches"]);
  // E5M2 keeps 2 mantissa bits against E4M3's 3: on well-scaled data its error is larger.
  EXPECT_GT(e5m2["rel_l2_mean"].get<double>(),
            nodes["interaction"]["recipes"]["e4m3_tensor"]["error"]["rel_l2_mean"].get<double>());
  EXPECT_FALSE(nodes["embed"]["recipes"].contains("e5m2_tensor"));
}

}  // namespace
}  // namespace loka
