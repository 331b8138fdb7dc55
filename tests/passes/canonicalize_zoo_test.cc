// ============================================================================
// tests/passes/canonicalize_zoo_test.cc — `canonicalize` on every zoo model
// and export: outputs on the eval data stay within 1e-5 of the original
// model's, a second run reports "unchanged" (fixpoint), the TorchScript
// opset-13 exports lose their decomposed LayerNorms and shape chains, and every
// model its erf GELU chains. The per-model statistics are printed (and
// recorded as test properties).
// ============================================================================
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>

#include "canonicalize_test_util.h"
#include "loka/engine.h"
#include "loka/session.h"
#include "passes/canonicalize/canonicalize.h"
#include "passes/ir/shape_inference.h"
#include "passes/ir/verifier.h"
#include "passes/onnx/onnx_export.h"
#include "passes/onnx/onnx_import.h"
#include "runtime/test_data.h"
#include "test_support.h"

namespace loka {
namespace {

namespace fs = std::filesystem;


size_t count_ops(const ir::Graph& graph, const char* op) {
  size_t n = 0;
  for (const ir::Node* node : graph.nodes()) n += node->is(op);
  return n;
}

/// Reshapes whose target is computed (not an initializer).
size_t computed_reshape_targets(const ir::Graph& graph) {
  size_t n = 0;
  for (const ir::Node* node : graph.nodes())
    n += node->is("Reshape") && node->input(1) && !node->input(1)->is_initializer();
  return n;
}

class ZooCanonicalize : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooCanonicalize, SameOutputsFixpointAndFusions) {
  const fs::path dir = testing::source_dir() / "models" / "zoo" / GetParam();
  auto imported = onnx_io::import_model_file(dir / "model.onnx");
  ASSERT_TRUE(imported) << imported.status().message();
  ir::Graph& graph = **imported;
  ASSERT_TRUE(ir::infer_shapes(graph));
  const std::unique_ptr<ir::Graph> original = graph.clone();

  auto run = testing::run_pass(canonicalize_pass_info(), *make_canonicalize_pass(), graph);
  ASSERT_TRUE(run) << run.status().message();
  ASSERT_TRUE(ir::verify_graph(graph)) << ir::verify_graph(graph).message();
  EXPECT_EQ(run->statistics.count("iteration-bound-reached"), 0u);
  std::cout << "[ canonicalize ] " << GetParam() << ": nodes " << original->node_count() << " -> " << graph.node_count()
            << ", Shape " << count_ops(*original, "Shape") << " -> " << count_ops(graph, "Shape")
            << ", computed Reshape targets " << computed_reshape_targets(*original) << " -> "
            << computed_reshape_targets(graph) << "\n";
  for (const auto& [name, amount] : run->statistics) {
    std::cout << "    " << name << " = " << amount << "\n";
    RecordProperty(name, std::to_string(amount));
  }

  // Fixpoint: a second run changes nothing.
  auto again = testing::run_pass(canonicalize_pass_info(), *make_canonicalize_pass(), graph);
  ASSERT_TRUE(again) << again.status().message();
  EXPECT_FALSE(again->changed);

  // Decomposed LayerNorms (one Sqrt each in these exporters' graphs) all became LayerNormalization.
  const size_t decomposed = count_ops(*original, "Sqrt");
  EXPECT_EQ(count_ops(graph, "LayerNormalization"), count_ops(*original, "LayerNormalization") + decomposed);
  EXPECT_EQ(count_ops(graph, "Sqrt") + count_ops(graph, "Pow") + count_ops(graph, "ReduceMean"), 0u);
  if (decomposed > 0) {
    EXPECT_GE(graph.opsets.at(""), 17);
  }
  // Erf GELU chains (one Erf each) all became Gelu (opset 20).
  const size_t erf_gelus = count_ops(*original, "Erf");
  EXPECT_EQ(count_ops(graph, "Gelu"), count_ops(*original, "Gelu") + erf_gelus);
  EXPECT_EQ(count_ops(graph, "Erf"), 0u);
  if (erf_gelus > 0) {
    EXPECT_GE(graph.opsets.at(""), 20);
  }
  EXPECT_EQ(count_ops(graph, "Constant") + count_ops(graph, "Identity"), 0u);
  EXPECT_LE(count_ops(graph, "Shape"), count_ops(*original, "Shape"));

  // The same outputs on the eval data, through export and the CPU runtime.
  auto bytes = onnx_io::export_model_bytes(graph);
  ASSERT_TRUE(bytes) << bytes.status().message();
  auto rewritten = Engine::load_bytes(std::as_bytes(std::span(bytes->data(), bytes->size())));
  ASSERT_TRUE(rewritten) << rewritten.status().message();
  auto reference = Engine::load_file(dir / "model.onnx");
  ASSERT_TRUE(reference) << reference.status().message();
  auto reader = DataSetReader::open(dir / "eval");
  ASSERT_TRUE(reader && reader->size() > 0);
  for (size_t set = 0; set < reader->size(); ++set) {
    auto data = reader->read(set);
    ASSERT_TRUE(data) << data.status().message();
    std::vector<std::string> names;
    for (const auto& info : (*reference)->inputs()) names.push_back(info.name);
    auto inputs = order_inputs(*data, names);
    ASSERT_TRUE(inputs) << inputs.status().message();
    auto expected = (*reference)->new_session()->run(*inputs);
    auto actual = (*rewritten)->new_session()->run(*inputs);
    ASSERT_TRUE(expected && actual) << (expected ? actual.status().message() : expected.status().message());
    ASSERT_EQ(expected->size(), actual->size());
    for (size_t i = 0; i < expected->size(); ++i) {
      ASSERT_EQ((*expected)[i].shape(), (*actual)[i].shape());
      EXPECT_LE(testing::max_abs_difference((*expected)[i], (*actual)[i]), 1e-5f) << "output " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooCanonicalize, ::testing::ValuesIn(testing::zoo_model_dirs()), [](const auto& info) { return testing::zoo_test_name(info.param); });

}  // namespace
}  // namespace loka
