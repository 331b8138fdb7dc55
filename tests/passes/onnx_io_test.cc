// ============================================================================
// tests/passes/onnx_io_test.cc — ONNX import/export: round trips, equivalence, errors; model
// files with large tables, whose bytes bypass protobuf both ways, read and write the same.
// ============================================================================
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "loka/engine.h"
#include "loka/session.h"
#include "model_builder.h"
#include "passes/ir/text_format.h"
#include "passes/ir/verifier.h"
#include "passes/onnx/onnx_export.h"
#include "passes/onnx/onnx_import.h"
#include "test_support.h"

namespace loka {
namespace {

using testing::ModelBuilder;

ModelBuilder small_mlp(std::mt19937& rng) {
  ModelBuilder builder(17);
  builder.input("x", DType::kFloat32, {-1, 4})
      .initializer("w", testing::random_tensor(rng, {3, 4}))
      .initializer("b", testing::random_tensor(rng, {3}))
      .node("Gemm", {"x", "w", "b"}, {"h"}, {{"transB", int64_t{1}}, {"alpha", 1.0f}}, "gemm")
      .node("Relu", {"h"}, {"r"}, {}, "relu")
      .node("Dropout", {"r"}, {"y", ""}, {}, "drop")
      .output("y", DType::kFloat32, {-1, 3});
  builder.proto().add_metadata_props()->set_key("loka.note");
  builder.proto().mutable_metadata_props(0)->set_value("kept");
  return builder;
}

TEST(OnnxIo, ImportExportImportGivesTheSameIr) {
  std::mt19937 rng(1);
  ModelBuilder builder = small_mlp(rng);
  auto graph = onnx_io::import_model(builder.proto(), {}, "mlp");
  ASSERT_TRUE(graph) << graph.status().message();
  ASSERT_TRUE(ir::verify_graph(**graph));
  EXPECT_EQ((*graph)->metadata.at("loka.note"), "kept");
  auto bytes = onnx_io::export_model_bytes(**graph);
  ASSERT_TRUE(bytes);
  onnx::ModelProto exported;
  ASSERT_TRUE(exported.ParseFromString(*bytes));
  auto again = onnx_io::import_model(exported, {}, "mlp-exported");
  ASSERT_TRUE(again) << again.status().message();
  EXPECT_EQ(ir::print_graph(**again), ir::print_graph(**graph));
}

TEST(OnnxIo, ExportedModelComputesTheSameOutputs) {
  std::mt19937 rng(2);
  ModelBuilder builder = small_mlp(rng);
  auto graph = onnx_io::import_model(builder.proto(), {}, "mlp");
  ASSERT_TRUE(graph);
  auto bytes = onnx_io::export_model_bytes(**graph);
  ASSERT_TRUE(bytes);
  auto original = builder.build_engine();
  auto exported = Engine::load_bytes(std::as_bytes(std::span(bytes->data(), bytes->size())));
  ASSERT_TRUE(original && exported) << exported.status().message();
  const std::vector<Tensor> inputs = {testing::random_tensor(rng, {7, 4})};
  auto a = testing::run_once(**original, inputs);
  auto b = testing::run_once(**exported, inputs);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(testing::max_abs_difference((*a)[0], (*b)[0]), 0.0f);
}

TEST(OnnxIo, ReadsTypedFieldsAndExternalData) {
  const auto dir = testing::make_temp_dir("loka-onnx-io");
  const std::vector<float> weights = {1, 2, 3, 4, 5, 6};
  {
    std::ofstream out(dir / "weights.bin", std::ios::binary);
    out.write("padding!", 8);
    out.write(reinterpret_cast<const char*>(weights.data()), sizeof(float) * weights.size());
  }
  ModelBuilder builder(17);
  builder.input("x", DType::kFloat32, {-1, 2}).node("MatMul", {"x", "w"}, {"y"}).node("Add", {"y", "b"}, {"z"});
  builder.output("z", DType::kFloat32, {-1, 3});
  auto* w = builder.proto().mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(1);
  w->add_dims(2);
  w->add_dims(3);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  for (auto [key, value] : {std::pair{"location", "weights.bin"}, std::pair{"offset", "8"}, std::pair{"length", "24"}}) {
    auto* entry = w->add_external_data();
    entry->set_key(key);
    entry->set_value(value);
  }
  auto* b = builder.proto().mutable_graph()->add_initializer();
  b->set_name("b");
  b->set_data_type(1);
  b->add_dims(3);
  for (float v : {0.5f, -0.5f, 1.5f}) b->add_float_data(v);
  {
    std::ofstream out(dir / "model.onnx", std::ios::binary);
    builder.proto().SerializeToOstream(&out);
  }
  auto graph = onnx_io::import_model_file(dir / "model.onnx");
  ASSERT_TRUE(graph) << graph.status().message();
  const ir::Value* imported = (*graph)->find_value("w");
  ASSERT_TRUE(imported && imported->is_initializer());
  EXPECT_EQ(imported->initializer()->to_floats(), weights);
  EXPECT_EQ((*graph)->find_value("b")->initializer()->to_floats(), (std::vector<float>{0.5f, -0.5f, 1.5f}));
  // Exported models carry everything inline and still compute the same.
  ASSERT_TRUE(onnx_io::write_model_file(**graph, dir / "inline.onnx"));
  auto engine = Engine::load_file(dir / "inline.onnx");
  ASSERT_TRUE(engine) << engine.status().message();
  auto out = testing::run_once(**engine, {Tensor::from_floats({1, 2}, std::vector<float>{1, 1})});
  ASSERT_TRUE(out);
  EXPECT_EQ((*out)[0].to_floats(), (std::vector<float>{5.5f, 6.5f, 10.5f}));
}

TEST(OnnxIo, StructuralDefectsAreOneLineErrors) {
  {
    ModelBuilder builder;
    builder.input("x", DType::kFloat32, {2}).node("Relu", {"missing"}, {"y"}, {}, "reader").output("y", DType::kFloat32, {2});
    auto graph = onnx_io::import_model(builder.proto(), {}, "m.onnx");
    ASSERT_FALSE(graph);
    EXPECT_NE(graph.status().message().find("missing"), std::string::npos);
    EXPECT_EQ(graph.status().message().find('\n'), std::string::npos);
  }
  {
    ModelBuilder builder;
    builder.input("x", DType::kFloat32, {2}).node("Relu", {"x"}, {"y"}).node("Neg", {"x"}, {"y"}).output("y", DType::kFloat32, {2});
    auto graph = onnx_io::import_model(builder.proto(), {}, "m.onnx");
    ASSERT_FALSE(graph);
    EXPECT_NE(graph.status().message().find("'y'"), std::string::npos);
  }
  {
    ModelBuilder builder;
    builder.input("x", DType::kFloat32, {-5}).node("Relu", {"x"}, {"y"}).output("y", DType::kFloat32, {2});
    builder.proto().mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_value(-5);
    auto graph = onnx_io::import_model(builder.proto(), {}, "m.onnx");
    ASSERT_FALSE(graph);
    EXPECT_NE(graph.status().message().find("-5"), std::string::npos);
  }
  {
    const auto dir = testing::make_temp_dir("loka-onnx-io-bad");
    std::ofstream(dir / "garbage.onnx") << "this is not a protobuf at all \x01\x02\xff";
    auto graph = onnx_io::import_model_file(dir / "garbage.onnx");
    ASSERT_FALSE(graph);
    EXPECT_NE(graph.status().message().find("garbage.onnx"), std::string::npos);
  }
}

ModelBuilder model_with_tables(std::mt19937& rng) {
  ModelBuilder builder(17);
  builder.input("ids", DType::kInt64, {-1})
      .initializer("table", testing::random_tensor(rng, {40000, 8}))  // 1.28 MB: streamed
      .initializer("small", testing::random_tensor(rng, {4, 8}))      // stays in protobuf
      .initializer("table2", testing::random_tensor(rng, {30000, 8}))
      .node("Gather", {"table", "ids"}, {"a"}, {}, "gather")
      .node("Gather", {"small", "ids"}, {"b"}, {}, "gather_small")
      .node("Gather", {"table2", "ids"}, {"c"}, {}, "gather2")
      .node("Sum", {"a", "b", "c"}, {"y"}, {}, "sum")
      .output("y", DType::kFloat32, {-1, 8});
  builder.proto().add_metadata_props()->set_key("loka.note");
  builder.proto().mutable_metadata_props(0)->set_value("kept");
  return builder;
}

std::string file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(OnnxIo, LargeTablesAreWrittenAsTheSerializedModelBytes) {
  std::mt19937 rng(5);
  auto graph = onnx_io::import_model(model_with_tables(rng).proto(), {}, "tables");
  ASSERT_TRUE(graph) << graph.status().message();
  const auto dir = testing::make_temp_dir("loka-onnx-io");
  ASSERT_TRUE(onnx_io::write_model_file(**graph, dir / "tables.onnx"));
  auto serialized = onnx_io::export_model_bytes(**graph);
  ASSERT_TRUE(serialized);
  EXPECT_EQ(file_bytes(dir / "tables.onnx"), *serialized);
}

TEST(OnnxIo, AModelFileWithLargeTablesImportsAsItsParsedProto) {
  std::mt19937 rng(6);
  ModelBuilder builder = model_with_tables(rng);
  const auto dir = testing::make_temp_dir("loka-onnx-io");
  std::ofstream(dir / "tables.onnx", std::ios::binary) << builder.serialize();
  auto from_file = onnx_io::import_model_file(dir / "tables.onnx");
  auto from_proto = onnx_io::import_model(builder.proto(), {}, "tables");
  ASSERT_TRUE(from_file) << from_file.status().message();
  ASSERT_TRUE(from_proto) << from_proto.status().message();
  EXPECT_EQ(ir::print_graph(**from_file), ir::print_graph(**from_proto));  // values included
  for (const char* name : {"table", "small", "table2"}) {
    const Tensor& a = *(*from_file)->find_value(name)->initializer();
    const Tensor& b = *(*from_proto)->find_value(name)->initializer();
    ASSERT_EQ(a.byte_size(), b.byte_size()) << name;
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.byte_size()), 0) << name;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.raw()) % 64, 0u) << name << ": tensors keep their aligned storage";
  }
  // A table whose dims disagree with its bytes is refused as before, naming it.
  onnx::ModelProto broken = builder.proto();
  broken.mutable_graph()->mutable_initializer(0)->set_dims(0, 40001);
  std::ofstream(dir / "broken.onnx", std::ios::binary) << broken.SerializeAsString();
  auto refused = onnx_io::import_model_file(dir / "broken.onnx");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.status().message().find("'table'"), std::string::npos) << refused.status().message();
  EXPECT_NE(refused.status().message().find("raw_data has 1280000 bytes"), std::string::npos)
      << refused.status().message();
  // A truncated file is the parse error it always was.
  const std::string whole = builder.serialize();
  std::ofstream(dir / "truncated.onnx", std::ios::binary) << whole.substr(0, whole.size() - 100);
  auto truncated = onnx_io::import_model_file(dir / "truncated.onnx");
  ASSERT_FALSE(truncated);
  EXPECT_NE(truncated.status().message().find("protobuf parse failed"), std::string::npos)
      << truncated.status().message();
}

}  // namespace
}  // namespace loka
