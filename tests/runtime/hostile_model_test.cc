// ============================================================================
// tests/runtime/hostile_model_test.cc — malformed, malicious and extreme models
// and run-time inputs must produce a one-line error naming the culprit, never a
// crash, an out-of-bounds read, an unbounded allocation or a stack overflow.
// ============================================================================
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include "loka/session.h"
#include "model_builder.h"
#include "runtime/tensor_proto.h"
#include "runtime/zoo_inputs_cases.h"
#include "test_support.h"

namespace loka {
namespace {

namespace fs = std::filesystem;
using testing::expect_one_line_error;
using testing::ModelBuilder;

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

Result<std::shared_ptr<const Engine>> load_string(const std::string& bytes, const std::string& source = "test.onnx") {
  return Engine::load_bytes(std::as_bytes(std::span(bytes.data(), bytes.size())), {}, {}, source);
}

/// x[2,4] -> Gemm(w[3,4]^T, b[3]) -> Relu -> y[2,3]: a small valid model to damage.
ModelBuilder gemm_relu_model() {
  std::mt19937 rng(11);
  ModelBuilder builder(17);
  builder.input("x", DType::kFloat32, {-1, 4})
      .initializer("w", testing::random_tensor(rng, {3, 4}))
      .initializer("b", testing::random_tensor(rng, {3}))
      .node("Gemm", {"x", "w", "b"}, {"h"}, {{"transB", int64_t{1}}}, "gemm")
      .node("Relu", {"h"}, {"y"}, {}, "relu")
      .output("y", DType::kFloat32, {-1, 3});
  return builder;
}

/// A model y = x + w where `w` is whatever TensorProto `make_w` fills in.
template <typename Fill>
Result<std::shared_ptr<const Engine>> load_with_initializer(Fill make_w, const fs::path& save_as = {}) {
  ModelBuilder builder(17);
  builder.input("x", DType::kFloat32, {4}).node("Add", {"x", "w"}, {"y"}, {}, "add").output("y", DType::kFloat32, {4});
  onnx::TensorProto* w = builder.proto().mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(static_cast<int32_t>(DType::kFloat32));
  make_w(*w);
  if (save_as.empty()) return builder.build_engine();
  write_bytes(save_as, builder.serialize());
  return Engine::load_file(save_as);
}

// --- whole-file damage -------------------------------------------------------

TEST(HostileModel, EmptyMissingAndDirectoryFilesAreOneLineErrors) {
  const fs::path dir = testing::make_temp_dir("loka-hostile-files");
  write_bytes(dir / "empty.onnx", "");
  expect_one_line_error(Engine::load_file(dir / "empty.onnx").status(), {"empty.onnx", "empty"});
  expect_one_line_error(Engine::load_file(dir / "absent.onnx").status(), {"absent.onnx"});
  expect_one_line_error(Engine::load_file(dir).status(), {dir.string(), "directory"});
}

TEST(HostileModel, EveryTruncationFailsCleanlyOrLoadsAValidPrefix) {
  const std::string bytes = gemm_relu_model().serialize();
  int errors = 0;
  for (size_t length = 1; length < bytes.size(); ++length) {
    auto engine = load_string(bytes.substr(0, length), "cut.onnx");
    if (engine) continue;  // protobuf prefixes ending on a field boundary can be valid models
    ++errors;
    expect_one_line_error(engine.status(), {"cut.onnx"});
  }
  EXPECT_GT(errors, static_cast<int>(bytes.size()) / 2);
  // A cut through the middle of the graph is never a model.
  const fs::path dir = testing::make_temp_dir("loka-hostile-truncated");
  write_bytes(dir / "half.onnx", bytes.substr(0, bytes.size() / 2));
  expect_one_line_error(Engine::load_file(dir / "half.onnx").status(), {"half.onnx"});
}

TEST(HostileModel, GarbageBytesAreRejected) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    std::string garbage(64 + trial * 97, '\0');
    for (char& c : garbage) c = static_cast<char>(rng());
    expect_one_line_error(load_string(garbage, "garbage.onnx").status(), {"garbage.onnx"});
  }
  expect_one_line_error(load_string("this is a text file, not a model\n", "notes.txt").status(), {"notes.txt"});
}

TEST(HostileModel, DeeplyNestedSubgraphsHitTheRecursionLimit) {
  // Each level is node -> attribute -> graph; 100 levels is far past the parser's limit of 64,
  // so parsing stops instead of recursing until the stack runs out.
  ModelBuilder builder(17);
  builder.input("x", DType::kFloat32, {2}).node("If", {"x"}, {"y"}, {}, "outer").output("y", DType::kFloat32, {2});
  onnx::NodeProto* node = builder.proto().mutable_graph()->mutable_node(0);
  for (int depth = 0; depth < 100; ++depth) {
    onnx::AttributeProto* attribute = node->add_attribute();
    attribute->set_name("then_branch");
    attribute->set_type(onnx::AttributeProto::GRAPH);
    node = attribute->mutable_g()->add_node();
    node->set_op_type("If");
  }
  expect_one_line_error(load_string(builder.serialize(), "nested.onnx").status(), {"nested.onnx"});
}

// --- graph structure -----------------------------------------------------------

TEST(HostileModel, NodeReadingAnUndefinedValue) {
  ModelBuilder builder;
  builder.input("x", DType::kFloat32, {2}).node("Relu", {"ghost"}, {"y"}, {}, "reader").output("y", DType::kFloat32, {2});
  expect_one_line_error(builder.build_engine().status(), {"reader", "'ghost'"});
}

TEST(HostileModel, NamesWithControlCharactersAreEscapedOntoOneLine) {
  ModelBuilder builder;
  builder.input("x", DType::kFloat32, {2}).node("Relu", {"gh\nost\x01"}, {"y"}, {}, "read\ner").output("y", DType::kFloat32, {2});
  expect_one_line_error(builder.build_engine().status(), {"read\\ner", "gh\\nost\\x01"});
  auto engine = gemm_relu_model().build_engine();
  ASSERT_TRUE(engine) << engine.status().message();
  expect_one_line_error((*engine)->new_session()->run({{std::string("x\ny"), Tensor()}}).status(), {"x\\ny"});
}

TEST(HostileModel, Cycle) {
  ModelBuilder builder;
  builder.input("x", DType::kFloat32, {2})
      .node("Add", {"x", "b"}, {"a"}, {}, "n1")
      .node("Relu", {"a"}, {"b"}, {}, "n2")
      .output("b", DType::kFloat32, {2});
  expect_one_line_error(builder.build_engine().status(), {"cycle"});
  ModelBuilder self_loop;
  self_loop.input("x", DType::kFloat32, {2}).node("Add", {"x", "s"}, {"s"}, {}, "selfie").output("s", DType::kFloat32, {2});
  expect_one_line_error(self_loop.build_engine().status(), {"cycle", "selfie"});
}

TEST(HostileModel, TwoNodesWritingOneValue) {
  ModelBuilder builder;
  builder.input("x", DType::kFloat32, {2})
      .node("Relu", {"x"}, {"y"}, {}, "first")
      .node("Neg", {"x"}, {"y"}, {}, "second")
      .output("y", DType::kFloat32, {2});
  expect_one_line_error(builder.build_engine().status(), {"'y'", "first", "second"});
  ModelBuilder over_input;
  over_input.input("x", DType::kFloat32, {2}).node("Relu", {"x"}, {"x"}, {}, "clobber").output("x", DType::kFloat32, {2});
  expect_one_line_error(over_input.build_engine().status(), {"'x'", "clobber"});
}

TEST(HostileModel, DuplicateNames) {
  // Two nodes with one given name: refused (as onnxruntime does), naming both nodes' ops.
  ModelBuilder nodes;
  nodes.input("x", DType::kFloat32, {2})
      .node("Relu", {"x"}, {"a"}, {}, "twin")
      .node("Neg", {"a"}, {"y"}, {}, "twin")
      .output("y", DType::kFloat32, {2});
  expect_one_line_error(nodes.build_engine().status(), {"'twin'", "Relu", "Neg", "unique"});

  const Tensor two = Tensor::from_floats({2}, std::vector<float>{1, 2});
  ModelBuilder initializers;
  initializers.input("x", DType::kFloat32, {2})
      .initializer("w", two)
      .initializer("w", two)
      .node("Add", {"x", "w"}, {"y"}, {}, "add")
      .output("y", DType::kFloat32, {2});
  expect_one_line_error(initializers.build_engine().status(), {"'w'", "twice"});

  ModelBuilder inputs;
  inputs.input("x", DType::kFloat32, {2})
      .input("x", DType::kFloat32, {2})
      .node("Relu", {"x"}, {"y"}, {}, "r")
      .output("y", DType::kFloat32, {2});
  expect_one_line_error(inputs.build_engine().status(), {"'x'", "twice"});

  ModelBuilder node_over_initializer;
  node_over_initializer.input("x", DType::kFloat32, {2})
      .initializer("w", two)
      .node("Relu", {"x"}, {"w"}, {}, "shadow")
      .output("w", DType::kFloat32, {2});
  expect_one_line_error(node_over_initializer.build_engine().status(), {"'w'", "shadow", "initializer"});

  // Positive twins: unnamed nodes (exporters often leave names empty), and an initializer
  // also listed as a graph input (IR < 4).
  ModelBuilder unnamed;
  unnamed.input("x", DType::kFloat32, {2})
      .node("Relu", {"x"}, {"a"})
      .node("Neg", {"a"}, {"y"})
      .output("y", DType::kFloat32, {2});
  for (auto& node : *unnamed.proto().mutable_graph()->mutable_node()) node.clear_name();
  auto engine = unnamed.build_engine();
  ASSERT_TRUE(engine) << engine.status().message();
  ModelBuilder listed;
  listed.input("x", DType::kFloat32, {2})
      .input("w", DType::kFloat32, {2})
      .initializer("w", two)
      .node("Add", {"x", "w"}, {"y"}, {}, "add")
      .output("y", DType::kFloat32, {2});
  listed.proto().set_ir_version(3);
  engine = listed.build_engine();
  ASSERT_TRUE(engine) << engine.status().message();
  EXPECT_EQ((*engine)->inputs().size(), 1u);
}

TEST(HostileModel, UnsupportedOpMissingOpsetAndUnproducedOutput) {
  ModelBuilder builder(17);
  builder.input("x", DType::kFloat32, {2}).node("NoSuchOp", {"x"}, {"y"}, {}, "strange").output("y", DType::kFloat32, {2});
  expect_one_line_error(builder.build_engine().status(), {"strange", "NoSuchOp"});

  ModelBuilder custom(17);
  custom.input("x", DType::kFloat32, {2}).node("Relu", {"x"}, {"y"}, {}, "custom", "com.example").output("y", DType::kFloat32, {2});
  expect_one_line_error(custom.build_engine().status(), {"custom", "com.example"});

  ModelBuilder dangling(17);
  dangling.input("x", DType::kFloat32, {2}).node("Relu", {"x"}, {"y"}, {}, "r").output("z", DType::kFloat32, {2});
  expect_one_line_error(dangling.build_engine().status(), {"'z'"});
}

// --- declared sizes --------------------------------------------------------------

TEST(HostileModel, InitializerDimsHugeNegativeOrOverflowing) {
  const std::vector<std::vector<int64_t>> bad_dims = {
      {int64_t{1} << 40, int64_t{1} << 40},  // 2^80 elements
      {-3, 2},                               // negative
      {int64_t{1} << 62, 4},                 // overflows int64
      {INT64_MAX},                           // one absurd dim
      {int64_t{1} << 21, int64_t{1} << 21},  // 2^42: past the limit without overflowing
  };
  for (const auto& dims : bad_dims) {
    for (const bool with_raw : {false, true}) {
      auto engine = load_with_initializer([&](onnx::TensorProto& w) {
        for (int64_t dim : dims) w.add_dims(dim);
        if (with_raw) w.set_raw_data(std::string(16, '\0'));
      });
      expect_one_line_error(engine.status(), {"'w'"});
    }
  }
}

TEST(HostileModel, GraphInputDimsHugeNegativeOrOverflowing) {
  const std::vector<std::vector<int64_t>> bad_dims = {
      {-5, 4}, {int64_t{1} << 50}, {int64_t{1} << 30, int64_t{1} << 30, int64_t{1} << 30}, {INT64_MAX, 2}};
  for (const auto& dims : bad_dims) {
    ModelBuilder builder(17);
    builder.input("x", DType::kFloat32, {1}).node("Relu", {"x"}, {"y"}, {}, "r").output_unshaped("y", DType::kFloat32);
    auto* shape = builder.proto().mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->clear_dim();
    for (int64_t dim : dims) shape->add_dim()->set_dim_value(dim);
    expect_one_line_error(builder.build_engine().status(), {"'x'"});
  }
  // Symbolic dims next to static ones stay fine.
  ModelBuilder fine(17);
  fine.input("x", DType::kFloat32, {-1, int64_t{1} << 20}).node("Relu", {"x"}, {"y"}, {}, "r").output("y", DType::kFloat32, {-1, int64_t{1} << 20});
  EXPECT_TRUE(fine.build_engine()) << fine.build_engine().status().message();
}

TEST(HostileModel, RawDataShorterOrLongerThanDims) {
  for (const size_t bytes : {size_t{8}, size_t{15}, size_t{17}, size_t{0}}) {
    auto engine = load_with_initializer([&](onnx::TensorProto& w) {
      w.add_dims(4);
      w.set_raw_data(std::string(bytes, '\x01'));
    });
    expect_one_line_error(engine.status(), {"'w'", "raw_data"});
  }
}

TEST(HostileModel, TypedDataShorterThanDimsOrInTheWrongField) {
  expect_one_line_error(load_with_initializer([](onnx::TensorProto& w) {
                          w.add_dims(4);
                          for (float v : {1.0f, 2.0f, 3.0f}) w.add_float_data(v);
                        }).status(),
                        {"'w'", "3 values"});
  expect_one_line_error(load_with_initializer([](onnx::TensorProto& w) { w.add_dims(4); }).status(), {"'w'", "0 values"});
  // Float tensor whose values sit in int64_data: right count, wrong field.
  expect_one_line_error(load_with_initializer([](onnx::TensorProto& w) {
                          w.add_dims(4);
                          for (int64_t v = 0; v < 4; ++v) w.add_int64_data(v);
                        }).status(),
                        {"'w'"});
  // A huge declared shape with a handful of typed values must not allocate the shape.
  expect_one_line_error(load_with_initializer([](onnx::TensorProto& w) {
                          w.add_dims(int64_t{1} << 39);
                          w.add_float_data(1.0f);
                        }).status(),
                        {"'w'"});
  // The positive twin: four floats load and add.
  auto engine = load_with_initializer([](onnx::TensorProto& w) {
    w.add_dims(4);
    for (float v : {1.0f, 2.0f, 3.0f, 4.0f}) w.add_float_data(v);
  });
  ASSERT_TRUE(engine) << engine.status().message();
  auto out = testing::run_once(**engine, {Tensor::from_floats({4}, std::vector<float>{1, 1, 1, 1})});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].to_floats(), (std::vector<float>{2, 3, 4, 5}));
}

// --- external data ---------------------------------------------------------------

class ExternalData : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::make_temp_dir("loka-hostile-external");
    model_dir_ = root_ / "model";
    fs::create_directories(model_dir_);
    const std::vector<float> weights = {10, 20, 30, 40};
    write_bytes(model_dir_ / "weights.bin", std::string(reinterpret_cast<const char*>(weights.data()), 16));
    write_bytes(root_ / "secret.bin", std::string(64, 's'));
  }
  void TearDown() override { fs::remove_all(root_); }

  /// Loads model/model.onnx whose initializer `w` (4 floats) has these external_data entries.
  Result<std::shared_ptr<const Engine>> load_entries(const std::vector<std::pair<std::string, std::string>>& entries) {
    return load_with_initializer(
        [&](onnx::TensorProto& w) {
          w.add_dims(4);
          w.set_data_location(onnx::TensorProto::EXTERNAL);
          for (const auto& [key, value] : entries) {
            auto* entry = w.add_external_data();
            entry->set_key(key);
            entry->set_value(value);
          }
        },
        model_dir_ / "model.onnx");
  }
  Result<std::shared_ptr<const Engine>> load(const std::string& location, int64_t offset = 0, int64_t length = -1) {
    std::vector<std::pair<std::string, std::string>> entries = {{"location", location}};
    if (offset) entries.emplace_back("offset", std::to_string(offset));
    if (length >= 0) entries.emplace_back("length", std::to_string(length));
    return load_entries(entries);
  }
  fs::path root_, model_dir_;
};

TEST_F(ExternalData, InsideTheFolderLoadsAndRuns) {
  auto engine = load("weights.bin");
  ASSERT_TRUE(engine) << engine.status().message();
  auto out = testing::run_once(**engine, {Tensor::from_floats({4}, std::vector<float>{1, 2, 3, 4})});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].to_floats(), (std::vector<float>{11, 22, 33, 44}));
}

TEST_F(ExternalData, RelativePathLeavingTheFolder) {
  expect_one_line_error(load("../secret.bin").status(), {"'w'", "../secret.bin"});
  expect_one_line_error(load("sub/../../secret.bin").status(), {"'w'"});
}

TEST_F(ExternalData, AbsolutePath) {
  expect_one_line_error(load((root_ / "secret.bin").string()).status(), {"'w'", "absolute"});
  expect_one_line_error(load((model_dir_ / "weights.bin").string()).status(), {"'w'", "absolute"});
}

TEST_F(ExternalData, SymlinkPointingOutside) {
  fs::create_symlink(root_ / "secret.bin", model_dir_ / "link.bin");
  expect_one_line_error(load("link.bin").status(), {"'w'", "link.bin", "outside"});
  fs::create_directory_symlink(root_, model_dir_ / "up");
  expect_one_line_error(load("up/secret.bin").status(), {"'w'", "outside"});
}

TEST_F(ExternalData, OffsetOrLengthPastTheEnd) {
  expect_one_line_error(load("weights.bin", 4).status(), {"'w'", "past the end"});
  expect_one_line_error(load("weights.bin", int64_t{1} << 62).status(), {"'w'", "past the end"});
  expect_one_line_error(load("weights.bin", 0, 32).status(), {"'w'"});
  expect_one_line_error(load("weights.bin", -8).status(), {"'w'", "negative"});
  expect_one_line_error(load("missing.bin").status(), {"'w'", "missing.bin"});
}

TEST_F(ExternalData, MalformedEntries) {
  expect_one_line_error(load_entries({{"location", "weights.bin"}, {"offset", "4abc"}}).status(), {"'w'", "4abc"});
  expect_one_line_error(load_entries({{"location", "weights.bin"}, {"length", ""}}).status(), {"'w'", "length"});
  expect_one_line_error(load_entries({{"location", "weights.bin"}, {"offset", "99999999999999999999"}}).status(), {"'w'"});
  expect_one_line_error(load_entries({{"offset", "0"}}).status(), {"'w'", "location"});
  expect_one_line_error(load_entries({{"location", "."}}).status(), {"'w'"});  // the folder itself
  EXPECT_TRUE(load_entries({{"location", "./weights.bin"}, {"offset", "0"}, {"length", "16"}}));
}

TEST_F(ExternalData, RefusedWithoutAModelFolder) {
  ModelBuilder builder(17);
  builder.input("x", DType::kFloat32, {4}).node("Add", {"x", "w"}, {"y"}, {}, "add").output("y", DType::kFloat32, {4});
  onnx::TensorProto* w = builder.proto().mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(static_cast<int32_t>(DType::kFloat32));
  w->add_dims(4);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* entry = w->add_external_data();
  entry->set_key("location");
  entry->set_value("weights.bin");
  expect_one_line_error(builder.build_engine().status(), {"'w'", "weights.bin"});
}

// --- run-time inputs ---------------------------------------------------------------

TEST(HostileInputs, WrongDtypeShapeCountOrMissing) {
  auto engine = gemm_relu_model().build_engine();
  ASSERT_TRUE(engine) << engine.status().message();
  auto session = (*engine)->new_session();
  const std::vector<int64_t> ids = {1, 2, 3, 4, 5, 6, 7, 8};
  expect_one_line_error(session->run(std::vector<Tensor>{Tensor::from_int64s({2, 4}, ids)}).status(), {"'x'", "FLOAT", "INT64"});
  expect_one_line_error(session->run(std::vector<Tensor>{Tensor::zeros(DType::kFloat32, {8})}).status(), {"'x'", "rank"});
  expect_one_line_error(session->run(std::vector<Tensor>{Tensor::zeros(DType::kFloat32, {2, 5})}).status(), {"'x'", "dim 1"});
  expect_one_line_error(session->run(std::vector<Tensor>{Tensor()}).status(), {"'x'", "missing"});
  expect_one_line_error(session->run(std::vector<Tensor>{}).status(), {"1 inputs"});
  expect_one_line_error(session->run({{std::string("nope"), Tensor::zeros(DType::kFloat32, {2, 4})}}).status(), {"'nope'"});
  // After all that, the session still works.
  auto out = session->run(std::vector<Tensor>{Tensor::zeros(DType::kFloat32, {2, 4})});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 3}));
}

TEST(HostileInputs, ShapesTheKernelCannotBroadcastNameTheNode) {
  ModelBuilder builder(17);
  builder.input("x", DType::kFloat32, {-1, 4})
      .initializer("b", Tensor::from_floats({3}, std::vector<float>{1, 2, 3}))
      .node("Add", {"x", "b"}, {"y"}, {}, "bias_add")
      .output("y", DType::kFloat32, {-1, 3});
  auto engine = builder.build_engine();
  ASSERT_TRUE(engine) << engine.status().message();
  expect_one_line_error(testing::run_once(**engine, {Tensor::zeros(DType::kFloat32, {2, 4})}).status(), {"bias_add"});
}

TEST(HostileInputs, MissingOrCorruptTensorFiles) {
  const fs::path dir = testing::make_temp_dir("loka-hostile-pb");
  expect_one_line_error(read_tensor_file(dir / "input_0.pb").status(), {"input_0.pb"});
  expect_one_line_error(read_tensor_file(dir).status(), {dir.string()});
  write_bytes(dir / "garbage.pb", std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff garbage", 18));
  expect_one_line_error(read_tensor_file(dir / "garbage.pb").status(), {"garbage.pb"});

  const Tensor valid = Tensor::from_floats({2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  ASSERT_TRUE(write_tensor_file(dir / "valid.pb", "x", valid));
  auto back = read_tensor_file(dir / "valid.pb");
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(back->first, "x");
  EXPECT_EQ(back->second.to_floats(), valid.to_floats());

  std::ifstream in(dir / "valid.pb", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (size_t length = 1; length < bytes.size(); ++length) {
    write_bytes(dir / "cut.pb", bytes.substr(0, length));
    auto result = read_tensor_file(dir / "cut.pb");
    if (!result) expect_one_line_error(result.status(), {"cut.pb"});
    else EXPECT_LE(result->second.byte_size(), bytes.size());  // a valid prefix: whatever it holds is checked
  }

  onnx::TensorProto lying;
  lying.set_name("x");
  lying.set_data_type(static_cast<int32_t>(DType::kFloat32));
  lying.add_dims(1000);
  lying.set_raw_data(std::string(8, '\0'));
  write_bytes(dir / "lying.pb", lying.SerializeAsString());
  expect_one_line_error(read_tensor_file(dir / "lying.pb").status(), {"lying.pb", "raw_data"});
}

// The zoo model's run-time inputs (wrong dtype/shape, batch above the maximum, empty batch,
// out-of-range ids, NaN/Inf) live in zoo_inputs_cases_util.cc, shared with the CUDA suite.
// This binary checks the CPU runtime; tests/cuda instantiates the same cases on the GPU.
INSTANTIATE_TEST_SUITE_P(Cpu, ZooInputs, ::testing::Values(Device::kCpu), testing::device_name);

// --- scale -------------------------------------------------------------------------

TEST(HostileModel, TwoHundredThousandChainedNodesLoadAndRunQuickly) {
  constexpr int kNodes = 200000;
  const ModelBuilder builder = testing::chain_model(kNodes, {8});
  const std::string bytes = builder.serialize();

  const auto start = std::chrono::steady_clock::now();
  auto engine = load_string(bytes, "deep.onnx");
  ASSERT_TRUE(engine) << engine.status().message();
  ASSERT_EQ((*engine)->node_count(), static_cast<size_t>(kNodes));
  std::mt19937 rng(5);
  const Tensor x = testing::random_tensor(rng, {8});
  auto out = testing::run_once(**engine, {x});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(out) << out.status().message();

  std::vector<float> expected = x.to_floats();
  for (int n = 0; n < kNodes; ++n)
    for (float& v : expected) v = n % 3 == 2 ? -v : std::max(v, 0.0f);
  EXPECT_EQ((*out)[0].to_floats(), expected);
  // Linear work takes well under a second; anything quadratic in the node count would take minutes.
  EXPECT_LT(seconds, 20.0);
}

}  // namespace
}  // namespace loka

namespace loka::testing {
std::string device_unavailable_reason(Device device) {
  return device == Device::kCpu ? "" : "the runtime test binary checks the CPU only (tests/cuda checks the GPU)";
}
}  // namespace loka::testing
