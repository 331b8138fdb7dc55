// ============================================================================
// tests/models/roundtrip_test.cc — every zoo model through the compiler's IR:
// import, shape inference, export, re-import gives the same IR, and the
// exported model computes the same outputs on the CPU runtime.
// (onnxruntime loading the exported models is tests/python/ort_interop.py.)
// ============================================================================
#include <gtest/gtest.h>

#include <filesystem>

#include "loka/engine.h"
#include "loka/session.h"
#include "passes/ir/shape_inference.h"
#include "passes/ir/text_format.h"
#include "passes/ir/verifier.h"
#include "passes/onnx/onnx_export.h"
#include "passes/onnx/onnx_import.h"
#include "runtime/test_data.h"
#include "test_support.h"

namespace loka {
namespace {

namespace fs = std::filesystem;


class ZooRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooRoundTrip, ExportReimportIsIdenticalAndComputesTheSame) {
  const fs::path dir = testing::source_dir() / "models" / "zoo" / GetParam();
  auto graph = onnx_io::import_model_file(dir / "model.onnx");
  ASSERT_TRUE(graph) << graph.status().message();
  ASSERT_TRUE(ir::verify_graph(**graph));
  ASSERT_TRUE(ir::infer_shapes(**graph)) << ir::infer_shapes(**graph).message();
  // Every value of a float model gets a dtype; the batch stays symbolic on the outputs.
  for (const ir::Value* value : (*graph)->values()) EXPECT_NE(value->type().dtype, DType::kUndefined) << value->name();
  const ir::TensorType& output_type = (*graph)->outputs()[0]->type();
  ASSERT_TRUE(output_type.has_rank());
  EXPECT_FALSE((*output_type.shape)[0].is_known()) << ir::print_type(output_type);

  auto bytes = onnx_io::export_model_bytes(**graph);
  ASSERT_TRUE(bytes);
  const auto out_dir = testing::make_temp_dir("loka-zoo-roundtrip");
  ASSERT_TRUE(onnx_io::write_model_file(**graph, out_dir / "model.onnx"));
  auto again = onnx_io::import_model_file(out_dir / "model.onnx");
  ASSERT_TRUE(again) << again.status().message();
  ASSERT_TRUE(ir::infer_shapes(**again));
  EXPECT_EQ(ir::print_graph(**again), ir::print_graph(**graph));

  auto original = Engine::load_file(dir / "model.onnx");
  auto exported = Engine::load_file(out_dir / "model.onnx");
  ASSERT_TRUE(original && exported) << exported.status().message();
  auto reader = DataSetReader::open(dir / "eval");
  ASSERT_TRUE(reader && reader->size() > 0);
  auto data = reader->read(0);
  ASSERT_TRUE(data);
  std::vector<std::string> names;
  for (const auto& info : (*original)->inputs()) names.push_back(info.name);
  auto inputs = order_inputs(*data, names);
  ASSERT_TRUE(inputs) << inputs.status().message();
  auto a = (*original)->new_session()->run(*inputs);
  auto b = (*exported)->new_session()->run(*inputs);
  ASSERT_TRUE(a && b);
  for (size_t i = 0; i < a->size(); ++i) EXPECT_EQ(testing::max_abs_difference((*a)[i], (*b)[i]), 0.0f);
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooRoundTrip, ::testing::ValuesIn(testing::zoo_model_dirs()),
                         [](const auto& info) { return testing::zoo_test_name(info.param); });

}  // namespace
}  // namespace loka
