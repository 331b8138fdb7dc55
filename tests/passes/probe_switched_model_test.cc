// ============================================================================
// tests/passes/probe_switched_model_test.cc — the Probe's two methods agree.
//
// method=switches (ProbeFakeQuant on every candidate operand, one run per site
// and recipe with a Mode input: the GPU's way) and method=hooks (observer
// substitution with prefix replay: the CPU's way) must give the same
// annotations bit for bit when both run on the CPU runtime: same operands
// quantized, same scales, same FP32 arithmetic. On the GPU the switched model
// is checked against the CPU in tests/cuda/probe_gpu_test.cc.
// ============================================================================
#include <gtest/gtest.h>

#include "passes/ir/shape_inference.h"
#include "passes/onnx/onnx_import.h"
#include "passes/probe/probe_model.h"
#include "probe_test_util.h"
#include "test_support.h"

namespace loka {
namespace {

class SwitchedProbeZoo : public ::testing::TestWithParam<const char*> {};

TEST_P(SwitchedProbeZoo, SwitchesGiveTheHooksAnnotationsBitForBit) {
  const nlohmann::json hooks = testing::probe_zoo_annotations(GetParam(), "device=cpu,method=hooks");
  const nlohmann::json switches = testing::probe_zoo_annotations(GetParam(), "device=cpu,method=switches");
  ASSERT_TRUE(hooks.contains("nodes") && switches.contains("nodes"));
  EXPECT_EQ(hooks["model"]["probe"]["method"], "hooks");
  EXPECT_EQ(switches["model"]["probe"]["method"], "switches");
  ASSERT_EQ(hooks["nodes"].size(), switches["nodes"].size());
  size_t sites = 0;
  for (const auto& [name, node] : hooks["nodes"].items()) {
    ASSERT_TRUE(switches["nodes"].contains(name)) << name;
    const nlohmann::json& other = switches["nodes"][name];
    if (!node.contains("verdict")) continue;
    ++sites;
    for (const char* field : {"verdict", "recipe", "error", "local_error", "recipes", "stats"})
      EXPECT_EQ(node[field], other[field]) << name << "." << field;
  }
  EXPECT_GE(sites, 5u);
}

INSTANTIATE_TEST_SUITE_P(Zoo, SwitchedProbeZoo,
                         ::testing::Values("dlrm_dot", "dlrm_dcnv2", "wukong", "dhen", "attention_ranker"));

TEST(ProbeModel, PlantsOneSwitchPerOperandAndTapsEachSite) {
  auto graph = onnx_io::import_model_file(testing::source_dir() / "models" / "zoo" / "dlrm_dot" / "model.onnx");
  ASSERT_TRUE(graph) << graph.status().message();
  ASSERT_TRUE(ir::infer_shapes(**graph).is_ok());  // taps need the site output's dtype
  const ir::Node* gemm = nullptr;
  for (const ir::Node* node : (*graph)->nodes())
    if (node->is("Gemm")) gemm = node;
  ASSERT_NE(gemm, nullptr);
  probe::SiteSwitches site{gemm->name(), {}};
  site.operands.push_back({0, {FakeQuantRecipe{FakeQuantForm::kTensor, false, 0.5f}, {}, {}}});
  site.operands.push_back({1, {FakeQuantRecipe{FakeQuantForm::kRows, false, 1.0f}, {}, {}}});
  const size_t outputs_before = (*graph)->outputs().size();
  auto model = probe::build_probe_model(**graph, {site});
  ASSERT_TRUE(model) << model.status().message();
  EXPECT_EQ(model->model_outputs, outputs_before);
  EXPECT_EQ(model->mode_input, (*graph)->inputs().size());
  ASSERT_EQ(model->site_output.size(), 1u);
  EXPECT_EQ(model->site_output[0], static_cast<long>(outputs_before));
  EXPECT_EQ((*graph)->outputs().size(), outputs_before) << "the input graph is left untouched";

  auto unknown = probe::build_probe_model(**graph, {probe::SiteSwitches{"no such node", {}}});
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.status().message().find("no such node"), std::string::npos);
}

}  // namespace
}  // namespace loka
