// ============================================================================
// tests/passes/mods_test_util.cc — shared helpers of the Mods tests.
// ============================================================================
#include "mods_test_util.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "loka/engine.h"
#include "loka/float8.h"
#include "loka/session.h"
#include "passes/canonicalize/canonicalize.h"
#include "passes/ir/text_format.h"
#include "passes/mods/center_norm_weights.h"
#include "passes/mods/fuse_layernorm_quant.h"
#include "passes/mods/migrate_outliers.h"
#include "passes/onnx/onnx_export.h"
#include "passes/onnx/onnx_import.h"
#include "passes/onnx/qdq_lowering.h"
#include "passes/probe/annotations.h"
#include "passes/probe/metrics.h"
#include "runtime/tensor_proto.h"
#include "runtime/test_data.h"
#include "test_support.h"

namespace loka::testing {

namespace fs = std::filesystem;

std::string canonical_ir(const std::string& text) {
  auto graph = ir::parse_graph(text);
  return graph ? ir::print_graph(**graph) : "parse error: " + graph.status().message();
}

const PassRegistry& mods_registry() {
  static const PassRegistry registry = [] {
    PassRegistry all = PassRegistry::builtin();
    const auto add = [&all](PassInfo info, PassFactory factory) {
      if (all.find(info.name) == nullptr) all.add(std::move(info), std::move(factory));
    };
    add(canonicalize_pass_info(), make_canonicalize_pass);
    add(center_norm_weights_pass_info(), make_center_norm_weights_pass);
    add(migrate_outliers_pass_info(), make_migrate_outliers_pass);
    add(fuse_layernorm_quant_pass_info(), make_fuse_layernorm_quant_pass);
    return all;
  }();
  return registry;
}

Result<std::vector<PassRunRecord>> run_pipeline(ir::Graph& graph, const std::string& pipeline,
                                                const CompileSettings& settings) {
  LOKA_ASSIGN_OR_RETURN(const Pipeline parsed, parse_pipeline(pipeline, mods_registry()));
  PassManagerOptions options;
  options.reproducer_dir = make_temp_dir("loka-mods-repro");
  return PassManager(mods_registry(), options).run(graph, parsed, settings);
}

namespace {

Result<std::shared_ptr<const Engine>> load(const ir::Graph& graph) {
  LOKA_ASSIGN_OR_RETURN(const std::string bytes, onnx_io::export_model_bytes(graph));
  return Engine::load_bytes(std::as_bytes(std::span(bytes.data(), bytes.size())), {}, {}, graph.name);
}

}  // namespace

Result<std::vector<Tensor>> run_graph(const ir::Graph& graph, const std::vector<Tensor>& inputs) {
  LOKA_ASSIGN_OR_RETURN(auto engine, load(graph));
  return engine->new_session()->run(inputs);
}

void expect_qdq_lowering_computes_the_same(const ir::Graph& fused, const fs::path& data) {
  auto lowered = fused.clone();
  ASSERT_TRUE(lower_to_qdq(*lowered).is_ok());
  for (const ir::Node* node : lowered->nodes()) EXPECT_NE(node->domain(), "ai.loka") << node->name();
  auto difference = max_output_difference_on_data(fused, *lowered, data, 1);
  ASSERT_TRUE(difference) << difference.status().message();
  EXPECT_LE(*difference, 1e-5f);
}

Result<float> max_output_difference_on_data(const ir::Graph& a, const ir::Graph& b, const fs::path& data, size_t max_sets) {
  LOKA_ASSIGN_OR_RETURN(auto engine_a, load(a));
  LOKA_ASSIGN_OR_RETURN(auto engine_b, load(b));
  LOKA_ASSIGN_OR_RETURN(const DataSetReader reader, DataSetReader::open(data));
  if (reader.size() == 0) return Status::error("no data sets in " + data.string());
  std::vector<std::string> names;
  for (const TensorInfo& info : engine_a->inputs()) names.push_back(info.name);
  auto session_a = engine_a->new_session();
  auto session_b = engine_b->new_session();
  float worst = 0.0f;
  for (size_t i = 0; i < std::min(max_sets, reader.size()); ++i) {
    LOKA_ASSIGN_OR_RETURN(const DataSet set, reader.read(i));
    LOKA_ASSIGN_OR_RETURN(const std::vector<Tensor> inputs, order_inputs(set, names));
    LOKA_ASSIGN_OR_RETURN(const std::vector<Tensor> out_a, session_a->run(inputs));
    LOKA_ASSIGN_OR_RETURN(const std::vector<Tensor> out_b, session_b->run(inputs));
    if (out_a.size() != out_b.size()) return Status::error("the graphs have different output counts");
    for (size_t o = 0; o < out_a.size(); ++o) worst = std::max(worst, max_abs_difference(out_a[o], out_b[o]));
  }
  return worst;
}

std::string e4m3_codes_ir(int64_t count) {
  static const char* kCodes[] = {"0x38", "0x40", "0xb8", "0x30", "0x28", "0xc0"};
  std::string out = "[";
  for (int64_t i = 0; i < count; ++i) out += std::string(i ? ", " : "") + kCodes[i % 6];
  return out + "]";
}

std::string ones_ir(int64_t count) {
  std::string out = "[";
  for (int64_t i = 0; i < count; ++i) out += i ? ", 1" : "1";
  return out + "]";
}

Tensor random_e4m3_weight(std::mt19937& rng, int64_t n, int64_t k) {
  Tensor w = Tensor::zeros(DType::kFloat8E4M3FN, {n, k});
  const Tensor values = random_tensor(rng, {n, k}, -3.0f, 3.0f);
  for (int64_t i = 0; i < w.element_count(); ++i)
    static_cast<uint8_t*>(w.raw())[i] = float_to_fp8e4m3fn(values.data<float>()[i]);
  return w;
}

Fusion apply_fusion(const std::string& input, const std::string& pass) {
  Fusion result;
  auto graph = ir::parse_graph(input);
  EXPECT_TRUE(graph) << graph.status().message();
  if (!graph) return result;
  result.before = (*graph)->clone();
  auto records = run_pipeline(**graph, pass + ",infer-shapes");
  EXPECT_TRUE(records) << records.status().message();
  if (!records) return result;
  result.changed = records->at(0).changed;
  result.statistics = records->at(0).statistics;
  auto document = read_annotations(**graph);
  EXPECT_TRUE(document);
  if (document) result.annotations = *document;
  result.after = (*graph)->clone();
  (*graph)->metadata.erase(kAnnotationsKey);
  result.printed = ir::print_graph(**graph);
  return result;
}

void expect_fusion_unchanged(const std::string& input, const std::string& pass) {
  const Fusion result = apply_fusion(input, pass);
  EXPECT_FALSE(result.changed) << result.printed;
  EXPECT_EQ(result.printed, canonical_ir(input));
}

Result<nlohmann::json> probe_graph(ir::Graph& graph, const fs::path& calib, const std::string& options,
                                   const std::string& budget) {
  CompileSettings settings;
  settings.calibration_data = calib;
  settings.budget = budget;
  LOKA_RETURN_IF_ERROR(run_pipeline(graph, "infer-shapes,probe{" + options + "}", settings).status());
  return read_annotations(graph);
}

std::vector<std::string> zoo_model_names() {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(source_dir() / "models" / "zoo", error))
    if (fs::exists(entry.path() / "model.onnx") && fs::exists(entry.path() / "calib") && fs::exists(entry.path() / "eval"))
      names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

ChainBuilder::ChainBuilder(int64_t features) : graph_(std::make_unique<ir::Graph>()) {
  graph_->opsets[""] = 17;
  last_ = graph_->add_value("x", {DType::kFloat32, std::vector<ir::Dim>{ir::Dim::named("batch"), ir::Dim::known(features)}});
  graph_->add_input(last_);
}

ChainBuilder& ChainBuilder::gemm(const std::string& name, const Tensor& w, const Tensor& bias) {
  std::vector<ir::Value*> inputs = {last_, graph_->add_initializer(name + "_w", w)};
  if (bias.defined()) inputs.push_back(graph_->add_initializer(name + "_b", bias));
  last_ = graph_->add_node("Gemm", inputs, 1, name)->output(0);
  return *this;
}

ChainBuilder& ChainBuilder::layer_norm(const std::string& name, const Tensor& gamma, const Tensor& beta) {
  ir::Node* norm = graph_->add_node(
      "LayerNormalization",
      {last_, graph_->add_initializer(name + "_gamma", gamma), graph_->add_initializer(name + "_beta", beta)}, 1, name);
  norm->mutable_attributes().set("axis", int64_t{-1});
  last_ = norm->output(0);
  return *this;
}

std::unique_ptr<ir::Graph> ChainBuilder::finish() {
  graph_->add_output(last_);
  return std::move(graph_);
}

Result<std::unique_ptr<ir::Graph>> load_zoo_model(const std::string& name) {
  LOKA_ASSIGN_OR_RETURN(auto graph, onnx_io::import_model_file(source_dir() / "models" / "zoo" / name / "model.onnx"));
  LOKA_RETURN_IF_ERROR(run_pipeline(*graph, "canonicalize,infer-shapes").status());
  return graph;
}

fs::path write_random_inputs(std::mt19937& rng, const std::string& name, const Shape& batch_shape, int batches) {
  const fs::path dir = make_temp_dir("loka-mods-data");
  for (int b = 0; b < batches; ++b) {
    const fs::path set = dir / ("test_data_set_" + std::to_string(b));
    fs::create_directories(set);
    if (!write_tensor_file(set / "input_0.pb", name, random_tensor(rng, batch_shape))) return {};
  }
  return dir;
}

std::pair<Tensor, Tensor> planted_gemm_weights(std::mt19937& rng, bool common_mode) {
  Tensor w1 = testing::random_tensor(rng, {16, 32}, -0.3f, 0.3f);
  Tensor b1 = testing::random_tensor(rng, {32}, -0.1f, 0.1f);
  if (common_mode) {
    std::uniform_real_distribution<float> offset(20.0f, 40.0f);
    for (int k = 0; k < 16; ++k) {
      const float a = offset(rng);
      for (int n = 0; n < 32; ++n) w1.data<float>()[k * 32 + n] += a;
    }
    for (float& v : b1.values<float>()) v += 25.0f;
  }
  return {w1, b1};
}

Result<double> eval_logloss(const ir::Graph& graph, const std::filesystem::path& eval) {
  LOKA_ASSIGN_OR_RETURN(const std::string bytes, onnx_io::export_model_bytes(graph));
  LOKA_ASSIGN_OR_RETURN(auto engine, Engine::load_bytes(std::as_bytes(std::span(bytes.data(), bytes.size()))));
  LOKA_ASSIGN_OR_RETURN(const DataSetReader reader, DataSetReader::open(eval));
  std::vector<std::string> names;
  for (const TensorInfo& info : engine->inputs()) names.push_back(info.name);
  auto session = engine->new_session();
  double total = 0;
  size_t count = 0;
  for (size_t b = 0; b < reader.size(); ++b) {
    LOKA_ASSIGN_OR_RETURN(const DataSet data, reader.read(b));
    if (!data.labels) return Status::error(data.location.string() + ": no labels.pb");
    LOKA_ASSIGN_OR_RETURN(const std::vector<Tensor> inputs, order_inputs(data, names));
    LOKA_ASSIGN_OR_RETURN(const std::vector<Tensor> outputs, session->run(inputs));
    size_t n = 0;
    total += probe::logloss_sum(outputs[0], data.labels->to_floats(), n);
    count += n;
  }
  if (count == 0) return Status::error(eval.string() + ": no labelled samples");
  return total / static_cast<double>(count);
}

Result<LoglossDrift> eval_logloss_drift(const ir::Graph& reference, const ir::Graph& graph,
                                        const std::filesystem::path& eval) {
  LoglossDrift drift;
  LOKA_ASSIGN_OR_RETURN(drift.fp32, eval_logloss(reference, eval));
  LOKA_ASSIGN_OR_RETURN(drift.fp8, eval_logloss(graph, eval));
  drift.relative_drift = std::fabs(drift.fp8 - drift.fp32) / drift.fp32;
  return drift;
}

}  // namespace loka::testing
