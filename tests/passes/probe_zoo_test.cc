// ============================================================================
// tests/passes/probe_zoo_test.cc — the Probe's acceptance check on the model zoo.
//
// For every zoo model: every candidate site has a verdict and a finite
// interval, and the e4m3_tensor end-to-end estimate equals a brute-force
// reference on the batches the Probe measured the site on (it stops measuring
// a settled site), inside its interval on at least 95% of sites. The reference
// is computed here, independently of the Probe's observer: the site alone
// fake-quantized per the e4m3_tensor recipe (activations per tensor with the
// scale of their amax over all calibration batches, weights per output
// channel, embedding tables per tensor from the table's amax), each of those
// batches run, the mean of the per-batch relative L2 of the model outputs.
// ============================================================================
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <thread>
#include <unordered_map>

#include "kernels/cpu/fp8_quantize.h"
#include "loka/engine.h"
#include "loka/session.h"
#include "passes/onnx/onnx_export.h"
#include "passes/onnx/onnx_import.h"
#include "passes/pass_manager.h"
#include "passes/probe/annotations.h"
#include "runtime/test_data.h"
#include "test_support.h"

namespace loka {
namespace {

using cpu::Fp8Format;

/// What the brute force needs to know of one site, read from the graph (not the Probe's site list).
struct SiteLayout {
  std::string kind;            ///< the annotation's "site"
  bool weight_rows = false;    ///< Gemm transB=1: weight stored [N, K], one channel per row
};

/// Records, per node of interest, the amax of its first two inputs over every run.
class AmaxRecorder final : public Observer {
 public:
  explicit AmaxRecorder(const std::vector<std::string>& nodes) {
    for (const auto& name : nodes) amax_[name] = {0.0f, 0.0f};
  }
  void before_node(const NodeInfo& info, std::span<Tensor> inputs) override {
    auto it = amax_.find(std::string(info.name));
    if (it == amax_.end()) return;
    for (size_t i = 0; i < 2 && i < inputs.size(); ++i)
      if (inputs[i].defined() && inputs[i].dtype() == DType::kFloat32)
        it->second[i] = std::max(it->second[i], cpu::finite_amax(inputs[i].values<float>()));
  }
  float amax(const std::string& node, size_t input) const { return amax_.at(node)[input]; }

 private:
  std::unordered_map<std::string, std::array<float, 2>> amax_;
};

/// Fake-quantizes one site's inputs per the e4m3_tensor recipe.
class BruteForceQuantizer final : public Observer {
 public:
  BruteForceQuantizer(std::string node, SiteLayout layout, float scale_a, float scale_b)
      : node_(std::move(node)), layout_(std::move(layout)), scale_a_(scale_a), scale_b_(scale_b) {}

  void before_node(const NodeInfo& info, std::span<Tensor> inputs) override {
    if (info.name != node_ || inputs.size() < 2) return;
    if (layout_.kind == "embedding") {  // Gather(table, ids): the table per tensor, from its own amax
      if (!table_.defined()) {
        table_ = inputs[0].clone();
        const float scale = cpu::fp8_scale_for_amax(cpu::finite_amax(table_.values<float>()), Fp8Format::kE4M3FN);
        cpu::fake_quantize_per_tensor(table_.values<float>(), scale, Fp8Format::kE4M3FN);
      }
      inputs[0] = table_;
      return;
    }
    Tensor a = inputs[0].clone();
    cpu::fake_quantize_per_tensor(a.values<float>(), scale_a_, Fp8Format::kE4M3FN);
    Tensor b = inputs[1].clone();
    if (layout_.kind == "activation_matmul") {
      cpu::fake_quantize_per_tensor(b.values<float>(), scale_b_, Fp8Format::kE4M3FN);
    } else if (layout_.weight_rows) {  // [N, K]
      cpu::fake_quantize_per_row(b.values<float>(), b.dim(0), b.dim(1), Fp8Format::kE4M3FN);
    } else {  // [K, N]
      cpu::fake_quantize_per_column(b.values<float>(), b.dim(0), b.dim(1), Fp8Format::kE4M3FN);
    }
    inputs[0] = a;
    inputs[1] = b;
  }

 private:
  std::string node_;
  SiteLayout layout_;
  float scale_a_, scale_b_;
  Tensor table_;
};

std::vector<double> float_outputs(const std::vector<Tensor>& outputs) {
  std::vector<double> all;
  for (const Tensor& t : outputs)
    if (dtype_is_float(t.dtype()))
      for (float v : t.to_floats()) all.push_back(v);
  return all;
}

double relative_l2(const std::vector<double>& reference, const std::vector<double>& test) {
  double num = 0, den = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    num += (test[i] - reference[i]) * (test[i] - reference[i]);
    den += reference[i] * reference[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

class ProbeZoo : public ::testing::TestWithParam<const char*> {};

TEST_P(ProbeZoo, EverySiteDecidedAndTensorEstimatesMatchBruteForce) {
  const auto model_dir = testing::source_dir() / "models" / "zoo" / GetParam();
  auto graph = onnx_io::import_model_file(model_dir / "model.onnx");
  ASSERT_TRUE(graph) << graph.status().message();
  auto reader = DataSetReader::open(model_dir / "calib");
  ASSERT_TRUE(reader) << reader.status().message();
  const size_t batches = reader->size();
  ASSERT_GE(batches, 2u);

  const std::string pipeline_text = "infer-shapes,probe{batches=" + std::to_string(batches) +
                                    ",amax_batches=" + std::to_string(batches) + ",early_stop=true}";
  auto pipeline = parse_pipeline(pipeline_text, PassRegistry::builtin());
  ASSERT_TRUE(pipeline) << pipeline.status().message();
  CompileSettings settings;
  settings.calibration_data = model_dir / "calib";
  auto records = PassManager(PassRegistry::builtin(), {}).run(**graph, *pipeline, settings);
  ASSERT_TRUE(records) << records.status().message();
  auto document = read_annotations(**graph);
  ASSERT_TRUE(document);

  // The sites, and their layouts from the graph itself.
  std::vector<std::string> sites;
  std::unordered_map<std::string, SiteLayout> layouts;
  for (const auto& [name, node] : (*document)["nodes"].items()) {
    ASSERT_TRUE(node.contains("verdict") && node["verdict"].is_string()) << name << " has no verdict";
    const std::string verdict = node["verdict"];
    EXPECT_TRUE(verdict == "safe" || verdict == "unsafe" || verdict == "undecided") << name << ": " << verdict;
    for (const char* field : {"error", "local_error"}) {
      const auto& ci = node[field]["rel_l2_ci95"];
      ASSERT_TRUE(ci.is_array() && ci.size() == 2 && ci[0].is_number() && ci[1].is_number()) << name << "." << field;
      EXPECT_TRUE(std::isfinite(ci[0].get<double>()) && std::isfinite(ci[1].get<double>()) &&
                  ci[0].get<double>() <= ci[1].get<double>())
          << name << "." << field << " " << ci.dump();
    }
    const ir::Node* ir_node = (*graph)->find_node(name);
    ASSERT_NE(ir_node, nullptr) << name;
    SiteLayout layout{node["site"].get<std::string>()};
    layout.weight_rows = ir_node->is("Gemm") && ir_node->attributes().get_int("transB", 0).value() != 0;
    layouts[name] = layout;
    sites.push_back(name);
  }
  ASSERT_GE(sites.size(), 5u);

  auto bytes = onnx_io::export_model_bytes(**graph);
  ASSERT_TRUE(bytes) << bytes.status().message();
  auto engine = Engine::load_bytes(std::as_bytes(std::span(bytes->data(), bytes->size())));
  ASSERT_TRUE(engine) << engine.status().message();
  std::vector<std::string> input_names;
  for (const TensorInfo& info : (*engine)->inputs()) input_names.push_back(info.name);
  std::vector<std::vector<Tensor>> inputs;
  for (size_t b = 0; b < batches; ++b) {
    auto data = reader->read(b);
    ASSERT_TRUE(data) << data.status().message();
    auto ordered = order_inputs(*data, input_names);
    ASSERT_TRUE(ordered) << ordered.status().message();
    inputs.push_back(std::move(*ordered));
  }

  // FP32 reference outputs and every site's input amax over all batches.
  auto session = (*engine)->new_session();
  AmaxRecorder recorder(sites);
  session->set_observer(&recorder);
  std::vector<std::vector<double>> reference;
  for (const auto& batch : inputs) {
    auto outputs = session->run(batch);
    ASSERT_TRUE(outputs) << outputs.status().message();
    reference.push_back(float_outputs(*outputs));
  }

  // Early stopping per site: a site measured on fewer batches than the pass used was settled
  // from then on; the skipped (site, batch) pairs add up to what the summary reports.
  const size_t batches_used = (*document)["model"]["probe"]["batches_used"].get<size_t>();
  std::vector<size_t> site_batches(sites.size());
  size_t skipped = 0;
  for (size_t s = 0; s < sites.size(); ++s) {
    site_batches[s] = (*document)["nodes"][sites[s]]["recipes"]["e4m3_tensor"]["error"]["batches"].get<size_t>();
    ASSERT_GE(site_batches[s], std::min<size_t>(3, batches_used)) << sites[s] << ": measured on fewer than min_batches";
    ASSERT_LE(site_batches[s], batches_used) << sites[s];
    skipped += batches_used - site_batches[s];
  }
  EXPECT_EQ((*document)["model"]["probe"]["site_batches_skipped"].get<size_t>(), skipped);

  // The brute force, one run per site and batch the Probe measured it on, spread over one
  // Session per core.
  std::vector<double> brute(sites.size(), NAN);
  std::vector<std::string> failures(sites.size());
  const size_t thread_count = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, sites.size());
  const auto measure = [&](size_t first) {
    auto worker = (*engine)->new_session();
    for (size_t s = first; s < sites.size(); s += thread_count) {
      const std::string& site = sites[s];
      BruteForceQuantizer quantizer(site, layouts.at(site), cpu::fp8_scale_for_amax(recorder.amax(site, 0), Fp8Format::kE4M3FN),
                                    cpu::fp8_scale_for_amax(recorder.amax(site, 1), Fp8Format::kE4M3FN));
      worker->set_observer(&quantizer);
      double sum = 0;
      for (size_t b = 0; b < site_batches[s] && failures[s].empty(); ++b) {
        auto outputs = worker->run(inputs[b]);
        if (!outputs) failures[s] = outputs.status().message();
        else sum += relative_l2(reference[b], float_outputs(*outputs));
      }
      brute[s] = sum / static_cast<double>(site_batches[s]);
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 1; t < thread_count; ++t) threads.emplace_back(measure, t);
  measure(0);
  for (std::thread& thread : threads) thread.join();

  size_t agree = 0;
  std::string disagreements;
  for (size_t s = 0; s < sites.size(); ++s) {
    const std::string& site = sites[s];
    ASSERT_TRUE(failures[s].empty()) << site << ": " << failures[s];
    const auto& node = (*document)["nodes"][site];
    // The Probe calibrated on the same batches (for a table: the table itself): the same static scale.
    EXPECT_FLOAT_EQ(node["stats"]["activation"]["scale_e4m3"].get<float>(),
                    cpu::fp8_scale_for_amax(recorder.amax(site, 0), Fp8Format::kE4M3FN))
        << site;
    const auto& error = node["recipes"]["e4m3_tensor"]["error"];
    const double lo = error["rel_l2_ci95"][0].get<double>(), hi = error["rel_l2_ci95"][1].get<double>();
    // The same batches, the same quantization computed independently: the same mean (all 205
    // sites of the five models to 12 digits, 2026-11-28).
    const double mean = error["rel_l2_mean"].get<double>();
    EXPECT_NEAR(brute[s], mean, 1e-9 * std::max(1.0, std::fabs(mean))) << site;
    const double slack = 1e-9 * std::max(1.0, std::fabs(hi));  // rounding of a degenerate (zero-width) interval
    if (brute[s] >= lo - slack && brute[s] <= hi + slack) {
      ++agree;
    } else {
      disagreements += "\n  " + site + " (" + layouts.at(site).kind + "): brute force " + std::to_string(brute[s]) +
                       " outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "] over " +
                       std::to_string(error["batches"].get<int>()) + " batches";
    }
  }
  EXPECT_GE(static_cast<double>(agree), 0.95 * static_cast<double>(sites.size()))
      << agree << " of " << sites.size() << " sites agree:" << disagreements;
  std::printf("%s: %zu of %zu sites inside their interval, %s batches%s\n", GetParam(), agree, sites.size(),
              (*document)["model"]["probe"]["batches_used"].dump().c_str(), disagreements.c_str());
}

INSTANTIATE_TEST_SUITE_P(Zoo, ProbeZoo, ::testing::Values("dlrm_dot", "dlrm_dcnv2", "dhen", "wukong", "attention_ranker"));

}  // namespace
}  // namespace loka
