// ============================================================================
// tests/passes/probe_calibration_test.cc — the Probe's amax calibration (phase
// 1, a tapped run: passes/probe/tapped_run.h) gives, on the CPU, exactly the
// statistics of the site operands as the runtime's nodes read them.
//
// The reference is computed here, with an Observer on the CPU runtime, from
// the rules the Probe documents: an activation every batch, a weight or an
// embedding table once, float32 operands only (a table read as floats). Amax,
// value and zero counts are also counted directly, without ValueStatistics.
// Every figure of every site's stats must be equal, not close; the negative
// twin calibrates on one batch and must then differ on every activation and
// on no weight or table.
// ============================================================================
#include <gtest/gtest.h>

#include <cmath>
#include <unordered_map>

#include "kernels/cpu/fp8_quantize.h"
#include "loka/engine.h"
#include "loka/session.h"
#include "mods_test_util.h"
#include "passes/onnx/onnx_export.h"
#include "passes/probe/annotations.h"
#include "passes/probe/statistics.h"
#include "runtime/test_data.h"
#include "test_support.h"

namespace loka {
namespace {

namespace fs = std::filesystem;
using probe::ValueStatistics;

/// One operand's values over the calibration run: the Probe's estimator, and the plain counts.
struct OperandReference {
  ValueStatistics statistics;
  float amax = 0;
  uint64_t values = 0, zeros = 0;

  void add(std::span<const float> batch) {
    statistics.add(batch);
    for (float v : batch) {
      if (!std::isfinite(v)) continue;
      ++values;
      amax = std::max(amax, std::fabs(v));
      zeros += std::fabs(v) < std::ldexp(1.0f, ValueStatistics::kMinExponent);
    }
  }
};

struct SiteReference {
  std::string kind;             ///< the annotation's "site"
  OperandReference operands[2];  ///< activation (or table), then weight or second activation
  bool seen = false;
};

/// Folds every site's operands in as its node reads them: Gather(table, ids) the table once,
/// a weight GEMM's input 0 every batch and its weight once, an activation MatMul both every batch.
class OperandRecorder final : public Observer {
 public:
  explicit OperandRecorder(std::unordered_map<std::string, SiteReference>& sites) : sites_(sites) {}
  void before_node(const NodeInfo& node, std::span<Tensor> inputs) override {
    auto it = sites_.find(std::string(node.name));
    if (it == sites_.end()) return;
    SiteReference& site = it->second;
    const bool first = !site.seen;
    site.seen = true;
    if (site.kind == "embedding") {
      if (first) site.operands[0].add(inputs[0].to_floats());
      return;
    }
    if (inputs[0].dtype() == DType::kFloat32) site.operands[0].add(inputs[0].values<float>());
    if ((first || site.kind == "activation_matmul") && inputs[1].dtype() == DType::kFloat32)
      site.operands[1].add(inputs[1].values<float>());
  }

 private:
  std::unordered_map<std::string, SiteReference>& sites_;
};

/// What differs between an annotation's stats entry and the reference (empty: nothing).
std::vector<std::string> mismatches(const nlohmann::json& stats, const OperandReference& reference) {
  std::vector<std::string> found;
  const auto same = [&](const char* field, const nlohmann::json& expected) {
    if (!stats.contains(field) || stats[field] != expected)
      found.push_back(std::string(field) + " " + (stats.contains(field) ? stats[field].dump() : "missing") +
                      ", reference " + expected.dump());
  };
  const ValueStatistics& s = reference.statistics;
  same("amax", reference.amax);
  same("values", reference.values);
  same("zeros", reference.zeros);
  same("mean", s.mean());
  same("std", s.stddev());
  same("kurtosis", s.kurtosis());
  same("p50", s.magnitude_percentile(0.5));
  same("p99", s.magnitude_percentile(0.99));
  same("p999", s.magnitude_percentile(0.999));
  same("dynamic_range_log2", s.dynamic_range_log2());
  same("amax_drift_cv", s.batch_amax_drift());
  same("scale_e4m3", cpu::fp8_scale_for_amax(reference.amax, cpu::Fp8Format::kE4M3FN));
  same("subnormal_fraction_e4m3",
       s.subnormal_fraction(cpu::fp8_scale_for_amax(reference.amax, cpu::Fp8Format::kE4M3FN), cpu::Fp8Format::kE4M3FN));
  nlohmann::json histogram = nlohmann::json::array();
  for (const auto& [exponent, count] : s.octave_histogram()) histogram.push_back({exponent, count});
  same("log2_histogram", histogram);
  return found;
}

struct Calibrated {
  std::unique_ptr<ir::Graph> graph;  ///< canonicalized, shape-inferred, annotated
  nlohmann::json document;
  std::unordered_map<std::string, SiteReference> reference;  ///< over every calibration set
};

/// The Probe on models/zoo/MODEL with `amax_batches`, and the reference over every calibration set.
Calibrated calibrate(const std::string& model, size_t amax_batches) {
  Calibrated result;
  const fs::path dir = testing::source_dir() / "models" / "zoo" / model;
  auto graph = testing::load_zoo_model(model);  // canonicalized and shape-inferred
  EXPECT_TRUE(graph) << graph.status().message();
  if (!graph) return result;
  CompileSettings settings;
  settings.calibration_data = dir / "calib";
  auto records = testing::run_pipeline(
      **graph, "probe{device=cpu,batches=2,min_batches=2,amax_batches=" + std::to_string(amax_batches) + "}", settings);
  EXPECT_TRUE(records) << records.status().message();
  auto document = read_annotations(**graph);
  EXPECT_TRUE(document) << document.status().message();
  if (!records || !document) return result;
  EXPECT_GE(records->back().statistics.at("calibration-seconds"), 0.0);
  result.document = *document;
  for (const auto& [name, node] : result.document["nodes"].items())
    if (node.contains("site")) result.reference[name].kind = node["site"].get<std::string>();

  auto bytes = onnx_io::export_model_bytes(**graph);
  EXPECT_TRUE(bytes) << bytes.status().message();
  auto engine = Engine::load_bytes(std::as_bytes(std::span(bytes->data(), bytes->size())));
  EXPECT_TRUE(engine) << engine.status().message();
  auto reader = DataSetReader::open(settings.calibration_data);
  EXPECT_TRUE(reader) << reader.status().message();
  if (!engine || !reader) return result;
  std::vector<std::string> input_names;
  for (const TensorInfo& info : (*engine)->inputs()) input_names.push_back(info.name);
  auto session = (*engine)->new_session();
  OperandRecorder recorder(result.reference);
  session->set_observer(&recorder);
  for (size_t b = 0; b < reader->size(); ++b) {
    auto data = reader->read(b);
    EXPECT_TRUE(data) << data.status().message();
    if (!data) return result;
    auto inputs = order_inputs(*data, input_names);
    EXPECT_TRUE(inputs) << inputs.status().message();
    if (!inputs) return result;
    auto outputs = session->run(*inputs);
    EXPECT_TRUE(outputs) << outputs.status().message();
  }
  result.graph = std::move(graph).value();
  return result;
}

/// The stats entry of operand `index` of a site, as the Probe names it.
const nlohmann::json& operand_stats(const nlohmann::json& node, size_t index) {
  if (index == 0) return node["stats"]["activation"];
  return node["stats"][node["site"] == "activation_matmul" ? "activation_b" : "weight"];
}

class ProbeCalibrationZoo : public ::testing::TestWithParam<const char*> {};

TEST_P(ProbeCalibrationZoo, SiteStatisticsEqualTheOperandsTheNodesRead) {
  auto reader = DataSetReader::open(testing::source_dir() / "models" / "zoo" / GetParam() / "calib");
  ASSERT_TRUE(reader) << reader.status().message();
  ASSERT_GE(reader->size(), 2u) << "calibration over several batches is what this checks";
  const Calibrated calibrated = calibrate(GetParam(), reader->size());
  ASSERT_TRUE(calibrated.graph);
  ASSERT_GE(calibrated.reference.size(), 5u);
  std::map<std::string, size_t> kinds;
  for (const auto& [name, reference] : calibrated.reference) {
    ASSERT_TRUE(reference.seen) << name << ": the reference run never reached the site";
    const nlohmann::json& node = calibrated.document["nodes"][name];
    ++kinds[reference.kind];
    for (size_t operand = 0; operand < (reference.kind == "embedding" ? 1u : 2u); ++operand) {
      EXPECT_GT(reference.operands[operand].values, 0u) << name << " operand " << operand;
      for (const std::string& mismatch : mismatches(operand_stats(node, operand), reference.operands[operand]))
        ADD_FAILURE() << name << " (" << reference.kind << ") operand " << operand << ": " << mismatch;
    }
  }
  std::string seen;
  for (const auto& [kind, count] : kinds) seen += " " + kind + "=" + std::to_string(count);
  std::printf("%s: sites%s\n", GetParam(), seen.c_str());
}

TEST_P(ProbeCalibrationZoo, NegativeTwinOneBatchDiffersOnActivationsOnly) {
  const Calibrated calibrated = calibrate(GetParam(), 1);
  ASSERT_TRUE(calibrated.graph);
  size_t activations = 0, constants = 0;
  for (const auto& [name, reference] : calibrated.reference) {
    const nlohmann::json& node = calibrated.document["nodes"][name];
    for (size_t operand = 0; operand < (reference.kind == "embedding" ? 1u : 2u); ++operand) {
      const bool once = reference.kind == "embedding" || (reference.kind == "weight_gemm" && operand == 1);
      const std::vector<std::string> found = mismatches(operand_stats(node, operand), reference.operands[operand]);
      if (once) {
        ++constants;
        EXPECT_TRUE(found.empty()) << name << " operand " << operand << ": a constant is the same whatever the batches";
      } else {
        ++activations;
        EXPECT_FALSE(found.empty()) << name << " operand " << operand << ": one batch of several matched all of them";
      }
    }
  }
  EXPECT_GT(activations, 0u);
  EXPECT_GT(constants, 0u);
}

// dlrm_dot has all three kinds of site (tables, weight GEMMs, the interaction's activation
// MatMul); the attention ranker's attention is activation MatMuls through reshapes; wukong's
// factorization machines are activation MatMuls on LayerNorm outputs.
INSTANTIATE_TEST_SUITE_P(Zoo, ProbeCalibrationZoo, ::testing::Values("dlrm_dot", "attention_ranker", "wukong"));

}  // namespace
}  // namespace loka
