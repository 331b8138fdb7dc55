// ============================================================================
// tests/tools/loka_run_test.cc — the loka-run binary, end to end: help, usage
// and run-time errors (exit codes, one line), output layouts, --compare
// verdicts against references computed here, .npz inputs, --bench and --profile.
// ============================================================================
#include <gtest/gtest.h>

#include <fstream>

#include "model_builder.h"
#include "runtime/tensor_proto.h"
#include "runtime/test_data.h"
#include "test_support.h"

namespace loka {
namespace {

namespace fs = std::filesystem;
using testing::ModelBuilder;

/// `path` in single quotes for the shell (built with += : GCC 12 warns falsely on "'" + string).
std::string quoted(const fs::path& path) {
  std::string text = "'";
  text += path.string();
  text += "'";
  return text;
}

testing::CommandResult loka_run(const std::string& arguments) {
  return testing::run_command(quoted(testing::tools_dir() / "loka-run") + " " + arguments);
}

/// Exit code as expected and the whole output is one line "loka-run: ..." naming every needle.
void expect_one_line_failure(const testing::CommandResult& result, int exit_code, const std::vector<std::string>& needles) {
  EXPECT_EQ(result.exit_code, exit_code) << result.output;
  EXPECT_EQ(result.output.rfind("loka-run: ", 0), 0u) << result.output;
  ASSERT_FALSE(result.output.empty());
  EXPECT_EQ(result.output.find('\n'), result.output.size() - 1) << result.output;
  for (const std::string& needle : needles) EXPECT_NE(result.output.find(needle), std::string::npos) << needle << " not in: " << result.output;
}

/// The model under test: y = Relu(x W^T + b) and n = Neg(x), x of shape [batch, 4].
class LokaRun : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("loka-run-test");
    std::mt19937 rng(17);
    w_ = testing::random_tensor(rng, {3, 4});
    b_ = testing::random_tensor(rng, {3});
    ModelBuilder builder(17);
    builder.input("x", DType::kFloat32, {-1, 4})
        .initializer("w", w_)
        .initializer("b", b_)
        .node("Gemm", {"x", "w", "b"}, {"h"}, {{"transB", int64_t{1}}}, "gemm")
        .node("Relu", {"h"}, {"y"}, {}, "relu")
        .node("Neg", {"x"}, {"n"}, {}, "neg")
        .output("y", DType::kFloat32, {-1, 3})
        .output("n", DType::kFloat32, {-1, 4});
    model_ = dir_ / "model.onnx";
    std::ofstream(model_, std::ios::binary) << builder.serialize();
  }

  void TearDown() override { fs::remove_all(dir_); }

  /// The two outputs, computed with plain loops.
  std::vector<Tensor> reference(const Tensor& x) const {
    const int64_t batch = x.dim(0);
    Tensor y = Tensor::zeros(DType::kFloat32, {batch, 3});
    Tensor n = Tensor::zeros(DType::kFloat32, {batch, 4});
    for (int64_t i = 0; i < batch; ++i) {
      for (int j = 0; j < 3; ++j) {
        float acc = b_.data<float>()[j];
        for (int k = 0; k < 4; ++k) acc += x.data<float>()[i * 4 + k] * w_.data<float>()[j * 4 + k];
        y.data<float>()[i * 3 + j] = std::max(acc, 0.0f);
      }
      for (int k = 0; k < 4; ++k) n.data<float>()[i * 4 + k] = -x.data<float>()[i * 4 + k];
    }
    return {y, n};
  }

  /// test_data_set_<k> folders with random inputs of the given batch sizes; returns the inputs.
  std::vector<Tensor> make_numbered_sets(const fs::path& root, const std::vector<int64_t>& batches, bool with_references) {
    std::mt19937 rng(23);
    std::vector<Tensor> inputs;
    for (size_t k = 0; k < batches.size(); ++k) {
      const fs::path set = root / ("test_data_set_" + std::to_string(k));
      fs::create_directories(set);
      inputs.push_back(testing::random_tensor(rng, {batches[k], 4}));
      EXPECT_TRUE(write_tensor_file(set / "input_0.pb", "x", inputs.back()));
      if (with_references) {
        EXPECT_TRUE(write_outputs(set, {"y", "n"}, reference(inputs.back())));
      }
    }
    return inputs;
  }

  void expect_outputs_in(const fs::path& folder, const Tensor& x) {
    const std::vector<Tensor> expected = reference(x);
    for (size_t i = 0; i < 2; ++i) {
      auto actual = read_tensor_file(folder / ("output_" + std::to_string(i) + ".pb"));
      ASSERT_TRUE(actual) << actual.status().message();
      EXPECT_EQ(actual->first, i == 0 ? "y" : "n");
      ASSERT_EQ(actual->second.shape(), expected[i].shape());
      EXPECT_LE(testing::max_abs_difference(actual->second, expected[i]), 1e-5f);
    }
  }

  fs::path dir_, model_;
  Tensor w_, b_;
};

TEST_F(LokaRun, HelpListsEveryOption) {
  const auto result = loka_run("--help");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  for (const char* needle : {"usage: loka-run MODEL.onnx --inputs DATA", "--device cpu|cuda", "--outputs DIR",
                             "--compare DIR", "--tol ATOL", "--bench N", "--profile N"})
    EXPECT_NE(result.output.find(needle), std::string::npos) << needle;
}

TEST_F(LokaRun, UsageErrorsExitTwoWithOneLine) {
  const std::string data = quoted(dir_);
  const std::string model = quoted(model_);
  expect_one_line_failure(loka_run(""), 2, {"MODEL.onnx"});
  expect_one_line_failure(loka_run(model), 2, {"--inputs"});
  expect_one_line_failure(loka_run(model + " --inputs " + data + " --frobnicate"), 2, {"--frobnicate"});
  expect_one_line_failure(loka_run(model + " --inputs " + data + " --bench lots"), 2, {"--bench", "lots"});
  expect_one_line_failure(loka_run(model + " --inputs " + data + " --bench 0"), 2, {"--bench"});
  expect_one_line_failure(loka_run(model + " --inputs " + data + " --profile 0"), 2, {"--profile"});
  expect_one_line_failure(loka_run(model + " --inputs " + data + " --profile many"), 2, {"--profile", "many"});
  expect_one_line_failure(loka_run(model + " --inputs " + data + " --device gpu"), 2, {"--device", "gpu"});
  expect_one_line_failure(loka_run(model + " --inputs " + data + " --tol 1e-3"), 2, {"--tol", "--compare"});
  expect_one_line_failure(loka_run(model + " --inputs " + data + " --compare " + data + " --tol abc"), 2, {"--tol", "abc"});
  expect_one_line_failure(loka_run(model + " extra.onnx --inputs " + data), 2, {"extra.onnx"});
  expect_one_line_failure(loka_run(model + " --inputs"), 2, {"--inputs"});
}

TEST_F(LokaRun, RunTimeErrorsExitOneWithOneLineNamingTheCulprit) {
  const fs::path data = dir_ / "data";
  make_numbered_sets(data, {2}, false);
  expect_one_line_failure(loka_run(quoted(dir_ / "absent.onnx") + " --inputs " + quoted(data)), 1, {"absent.onnx"});
  std::ofstream(dir_ / "garbage.onnx") << "definitely not protobuf \xff\xff\xff\xff";
  expect_one_line_failure(loka_run(quoted(dir_ / "garbage.onnx") + " --inputs " + quoted(data)), 1, {"garbage.onnx"});
  expect_one_line_failure(loka_run(quoted(model_) + " --inputs " + quoted(dir_ / "nowhere")), 1, {"nowhere"});
  // Without a usable GPU, --device cuda is a one-line error naming CUDA (with one, it runs).
  if (loka_run(quoted(model_) + " --inputs " + quoted(data) + " --device cuda").exit_code != 0)
    expect_one_line_failure(loka_run(quoted(model_) + " --inputs " + quoted(data) + " --device cuda"), 1, {"CUDA"});
  // Asking to compare with folders that hold no references.
  expect_one_line_failure(loka_run(quoted(model_) + " --inputs " + quoted(data) + " --compare " + quoted(data)), 1,
                          {"test_data_set_0", "reference"});

  const fs::path corrupt = dir_ / "corrupt" / "test_data_set_0";
  fs::create_directories(corrupt);
  std::ofstream(corrupt / "input_0.pb") << "\xff\xff\xff\xff\xff\xff junk";
  expect_one_line_failure(loka_run(quoted(model_) + " --inputs " + quoted(dir_ / "corrupt")), 1, {"input_0.pb"});

  const fs::path wrong_type = dir_ / "wrong_type";
  fs::create_directories(wrong_type);
  ASSERT_TRUE(write_tensor_file(wrong_type / "input_0.pb", "x", Tensor::from_int64s({1, 4}, std::vector<int64_t>{1, 2, 3, 4})));
  expect_one_line_failure(loka_run(quoted(model_) + " --inputs " + quoted(wrong_type)), 1, {"'x'", "INT64"});

  const fs::path wrong_name = dir_ / "wrong_name";
  fs::create_directories(wrong_name);
  ASSERT_TRUE(write_tensor_file(wrong_name / "input_0.pb", "features", Tensor::zeros(DType::kFloat32, {1, 4})));
  expect_one_line_failure(loka_run(quoted(model_) + " --inputs " + quoted(wrong_name)), 1, {"'features'"});

  const fs::path two_sets = dir_ / "two_sets";
  make_numbered_sets(two_sets, {1, 1}, true);
  expect_one_line_failure(loka_run(quoted(model_) + " --inputs " + quoted(data) + " --compare " + quoted(two_sets)), 1,
                          {"2 data sets", "1"});
}

TEST_F(LokaRun, OutputsMirrorNumberedLayout) {
  const fs::path data = dir_ / "data";
  const std::vector<Tensor> inputs = make_numbered_sets(data, {1, 2, 5}, false);
  const fs::path out = dir_ / "out";
  const auto result = loka_run(quoted(model_) + " --inputs " + quoted(data) + " --outputs " + quoted(out));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  for (size_t k = 0; k < inputs.size(); ++k) expect_outputs_in(out / ("test_data_set_" + std::to_string(k)), inputs[k]);
  EXPECT_FALSE(fs::exists(out / "output_0.pb"));
}

TEST_F(LokaRun, OutputsMirrorFlatLayout) {
  std::mt19937 rng(29);
  const Tensor x = testing::random_tensor(rng, {3, 4});
  const fs::path data = dir_ / "flat";
  fs::create_directories(data);
  ASSERT_TRUE(write_tensor_file(data / "input_0.pb", "x", x));
  const fs::path out = dir_ / "flat_out";
  const auto result = loka_run(quoted(model_) + " --inputs " + quoted(data) + " --outputs " + quoted(out));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  expect_outputs_in(out, x);
  EXPECT_FALSE(fs::exists(out / "test_data_set_0"));
}

TEST_F(LokaRun, ComparePassesAndFailsOnTolerance) {
  const fs::path data = dir_ / "data";
  const std::vector<Tensor> inputs = make_numbered_sets(data, {2, 3}, true);
  auto result = loka_run(quoted(model_) + " --inputs " + quoted(data) + " --compare " + quoted(data));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("PASS"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("max_abs"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("rel_l2"), std::string::npos) << result.output;

  // Outputs written by one run are a valid reference folder for the next.
  const fs::path out = dir_ / "out";
  ASSERT_EQ(loka_run(quoted(model_) + " --inputs " + quoted(data) + " --outputs " + quoted(out)).exit_code, 0);
  result = loka_run(quoted(model_) + " --inputs " + quoted(data) + " --compare " + quoted(out) + " --tol 0");
  EXPECT_EQ(result.exit_code, 0) << result.output;

  // Move one element of one reference by 1e-3: fails at the default tolerance, passes at 1e-2.
  std::vector<Tensor> shifted = reference(inputs[1]);
  shifted[1] = shifted[1].clone();
  shifted[1].data<float>()[5] += 1e-3f;
  ASSERT_TRUE(write_outputs(data / "test_data_set_1", {"y", "n"}, shifted));
  result = loka_run(quoted(model_) + " --inputs " + quoted(data) + " --compare " + quoted(data));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("FAIL"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("output 'n' of test_data_set_1"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("PASS"), std::string::npos) << result.output;
  result = loka_run(quoted(model_) + " --inputs " + quoted(data) + " --compare " + quoted(data) + " --tol 1e-2");
  EXPECT_EQ(result.exit_code, 0) << result.output;

  // A reference of another shape fails as well.
  ASSERT_TRUE(write_outputs(data / "test_data_set_0", {"y", "n"}, {reference(inputs[0])[0], Tensor::zeros(DType::kFloat32, {2, 5})}));
  result = loka_run(quoted(model_) + " --inputs " + quoted(data) + " --compare " + quoted(data) + " --tol 1");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("[2,5]"), std::string::npos) << result.output;
}

TEST_F(LokaRun, NpzInputsAndReferences) {
  std::mt19937 rng(31);
  const Tensor x = testing::random_tensor(rng, {4, 4});
  const std::vector<Tensor> expected = reference(x);
  const fs::path npz = dir_ / "batch.npz";
  ASSERT_TRUE(write_npz(npz, {{"x", x}, {"output_0", expected[0]}, {"output_1", expected[1]}}, true));
  auto result = loka_run(quoted(model_) + " --inputs " + quoted(npz) + " --compare " + quoted(npz));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("PASS"), std::string::npos) << result.output;

  const fs::path out = dir_ / "npz_out";
  result = loka_run(quoted(model_) + " --inputs " + quoted(npz) + " --outputs " + quoted(out));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  expect_outputs_in(out, x);

  // A folder of archives: one data set each, outputs in a folder per archive.
  const fs::path many = dir_ / "many";
  fs::create_directories(many);
  const Tensor x2 = testing::random_tensor(rng, {2, 4});
  ASSERT_TRUE(write_npz(many / "first.npz", {{"x", x}}, false));
  ASSERT_TRUE(write_npz(many / "second.npz", {{"x", x2}}, true));
  const fs::path many_out = dir_ / "many_out";
  result = loka_run(quoted(model_) + " --inputs " + quoted(many) + " --outputs " + quoted(many_out));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  expect_outputs_in(many_out / "first", x);
  expect_outputs_in(many_out / "second", x2);

  std::ofstream(dir_ / "broken.npz") << "PK\x03\x04 this archive is broken";
  expect_one_line_failure(loka_run(quoted(model_) + " --inputs " + quoted(dir_ / "broken.npz")), 1, {"broken.npz"});
}

TEST_F(LokaRun, BenchReportsLatencyAndThroughput) {
  const fs::path data = dir_ / "data";
  make_numbered_sets(data, {8, 8}, true);
  const auto result = loka_run(quoted(model_) + " --inputs " + quoted(data) + " --compare " + quoted(data) + " --bench 20");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  for (const char* needle : {"bench: 20 runs", "median", "p90", "runs/s", "samples/s", "PASS"})
    EXPECT_NE(result.output.find(needle), std::string::npos) << needle << " not in: " << result.output;
}

TEST_F(LokaRun, ProfileListsEveryNodeSlowestFirstWithItsShare) {
  const fs::path data = dir_ / "data";
  make_numbered_sets(data, {8, 8}, true);
  const auto result = loka_run(quoted(model_) + " --inputs " + quoted(data) + " --profile 9");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  for (const char* needle : {"profile: 3 nodes, 9 runs, medians summed", "host clock per node", "share", "cumul"})
    EXPECT_NE(result.output.find(needle), std::string::npos) << needle << " not in: " << result.output;
  // One line per node (3 of them, fewer than the listed maximum), each naming its op and node.
  for (const char* line_end : {"Gemm                             gemm\n", "Relu                             relu\n",
                               "Neg                              neg\n"})
    EXPECT_NE(result.output.find(line_end), std::string::npos) << line_end << " not in: " << result.output;
  EXPECT_EQ(result.output.find("more nodes"), std::string::npos) << result.output;
  // The shares add up: the last listed node's running share is the whole.
  EXPECT_NE(result.output.find("100.0%"), std::string::npos) << result.output;
}

}  // namespace
}  // namespace loka
