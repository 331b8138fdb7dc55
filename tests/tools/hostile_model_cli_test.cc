// ============================================================================
// tests/tools/hostile_model_cli_test.cc — hostile model files through every tool.
//
// tests/runtime/hostile_model_test.cc holds the runtime's side; here each
// damaged model goes through loka-run (the runtime), loka-opt (the compiler's
// import, shape inference and canonicalization) and loka-inspect, as a user
// would run them: exit 1, one line naming the file and the culprit, no crash.
// A 100 000-node chain must go through all three without exhausting the stack
// and in bounded time.
// ============================================================================
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>

#include "model_builder.h"
#include "runtime/tensor_proto.h"
#include "test_support.h"

namespace loka {
namespace {

namespace fs = std::filesystem;
using testing::ModelBuilder;

std::string tool(const char* name) { return (testing::tools_dir() / name).string(); }

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

/// One damaged model and the words each tool's one-line error must hold.
struct HostileCase {
  std::string name;
  std::vector<std::string> needles;
};

class HostileModelCli : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::make_temp_dir("loka-hostile-cli");
    fs::create_directories(root_ / "models");
    write_bytes(root_ / "secret.bin", std::string(64, 's'));
    write_bytes(root_ / "models" / "weights.bin", std::string(16, '\0'));
    // Inputs for loka-run: x[4].
    fs::create_directories(root_ / "data");
    ASSERT_TRUE(write_tensor_file(root_ / "data" / "input_0.pb", "x", Tensor::zeros(DType::kFloat32, {4})));
  }
  void TearDown() override { fs::remove_all(root_); }

  /// Writes models/<name>.onnx: y = Relu(x + w) with x[4], after `damage` edits the proto.
  template <typename Damage>
  void add(const std::string& name, std::vector<std::string> needles, Damage damage) {
    ModelBuilder builder(17);
    builder.input("x", DType::kFloat32, {4})
        .initializer("w", Tensor::from_floats({4}, std::vector<float>{1, 2, 3, 4}))
        .node("Add", {"x", "w"}, {"h"}, {}, "add")
        .node("Relu", {"h"}, {"y"}, {}, "relu")
        .output("y", DType::kFloat32, {4});
    damage(*builder.proto().mutable_graph());
    write_bytes(root_ / "models" / (name + ".onnx"), builder.serialize());
    cases_.push_back({name, std::move(needles)});
  }

  /// The three tools' command lines for model `path` (loka-opt's reproducer of a failed
  /// pipeline goes to TMPDIR: this test's folder).
  std::vector<std::string> commands(const fs::path& path) const {
    return {tool("loka-run") + " " + path.string() + " --inputs " + (root_ / "data").string(),
            "TMPDIR=" + root_.string() + " " + tool("loka-opt") + " " + path.string() + " -o " +
                (root_ / "out.onnx").string() + " --pipeline infer-shapes,canonicalize",
            tool("loka-inspect") + " " + path.string()};
  }

  fs::path root_;
  std::vector<HostileCase> cases_;
};

onnx::TensorProto& initializer_w(onnx::GraphProto& graph) { return *graph.mutable_initializer(0); }

void set_external(onnx::TensorProto& w, const std::string& location) {
  w.clear_float_data();
  w.clear_raw_data();
  w.set_data_location(onnx::TensorProto::EXTERNAL);
  auto* entry = w.add_external_data();
  entry->set_key("location");
  entry->set_value(location);
}

TEST_F(HostileModelCli, EveryToolRefusesEachDamagedModelInOneLine) {
  add("huge_dims", {"'w'"}, [](onnx::GraphProto& g) {
    initializer_w(g).clear_dims();
    initializer_w(g).add_dims(int64_t{1} << 40);
    initializer_w(g).add_dims(int64_t{1} << 40);
  });
  add("negative_dim", {"'w'"}, [](onnx::GraphProto& g) {
    initializer_w(g).clear_dims();
    initializer_w(g).add_dims(-4);
  });
  add("overflowing_dims", {"'w'"}, [](onnx::GraphProto& g) {
    initializer_w(g).clear_dims();
    for (int i = 0; i < 3; ++i) initializer_w(g).add_dims(int64_t{1} << 30);
  });
  add("input_dim_overflow", {"'x'"}, [](onnx::GraphProto& g) {
    auto* shape = g.mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->mutable_dim(0)->set_dim_value(INT64_MAX);
  });
  add("short_raw_data", {"'w'", "raw_data"}, [](onnx::GraphProto& g) {
    initializer_w(g).clear_float_data();
    initializer_w(g).set_raw_data(std::string(15, '\1'));
  });
  add("external_relative_escape", {"'w'", "../secret.bin"},
      [](onnx::GraphProto& g) { set_external(initializer_w(g), "../secret.bin"); });
  add("external_absolute", {"'w'", "absolute"}, [this](onnx::GraphProto& g) {
    set_external(initializer_w(g), (root_ / "models" / "weights.bin").string());
  });
  add("duplicate_node_names", {"'add'", "unique"}, [](onnx::GraphProto& g) { g.mutable_node(1)->set_name("add"); });
  add("duplicate_initializers", {"'w'", "twice"}, [](onnx::GraphProto& g) { *g.add_initializer() = g.initializer(0); });
  add("duplicate_producers", {"'h'", "relu"}, [](onnx::GraphProto& g) { g.mutable_node(1)->set_output(0, "h"); });
  add("cycle", {"cycle"}, [](onnx::GraphProto& g) {
    // add reads y, which relu (reading add's h) writes.
    g.mutable_node(0)->set_input(0, "y");
  });
  add("undefined_input", {"relu", "'ghost'"}, [](onnx::GraphProto& g) { g.mutable_node(1)->set_input(0, "ghost"); });

  for (const HostileCase& hostile : cases_) {
    const fs::path path = root_ / "models" / (hostile.name + ".onnx");
    for (const std::string& command : commands(path)) {
      SCOPED_TRACE(command);
      const auto result = testing::run_command(command);
      EXPECT_EQ(result.exit_code, 1) << result.output;
      EXPECT_EQ(result.output.find('\n'), result.output.size() - 1) << "one line: " << result.output;
      EXPECT_NE(result.output.find(path.string()), std::string::npos) << result.output;
      for (const std::string& needle : hostile.needles)
        EXPECT_NE(result.output.find(needle), std::string::npos) << "'" << needle << "' not in: " << result.output;
    }
  }
}

TEST_F(HostileModelCli, AHundredThousandNodeChainGoesThroughEveryTool) {
  const fs::path path = root_ / "models" / "deep.onnx";
  write_bytes(path, testing::chain_model(100000, {4}).serialize());
  for (const std::string& command : commands(path)) {
    SCOPED_TRACE(command);
    const auto start = std::chrono::steady_clock::now();
    const auto result = testing::run_command(command);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(result.exit_code, 0) << result.output;
    // Linear work is a second or two (more under the sanitizers); quadratic work would be hours.
    EXPECT_LT(seconds, 120.0);
  }
}

}  // namespace
}  // namespace loka
