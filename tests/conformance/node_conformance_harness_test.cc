// ============================================================================
// tests/conformance/node_conformance_harness_test.cc — the conformance harness
// itself: it must classify, compare and fail where it should, or a green
// conformance run would prove nothing.
// ============================================================================
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>

#include "conformance/node_conformance.h"
#include "model_builder.h"
#include "runtime/tensor_proto.h"
#include "test_support.h"

namespace loka::conformance {
namespace {

namespace fs = std::filesystem;
using testing::ModelBuilder;

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

/// A node-test folder for z = x + y on random [3,5] inputs, with the expected output
/// from a reference loop; returns the folder.
fs::path make_add_case(const fs::path& root, const std::string& name, std::mt19937& rng) {
  const fs::path folder = root / name;
  fs::create_directories(folder / "test_data_set_0");
  ModelBuilder builder(17);
  builder.input("x", DType::kFloat32, {3, 5}).input("y", DType::kFloat32, {3, 5});
  builder.node("Add", {"x", "y"}, {"z"}).output("z", DType::kFloat32, {3, 5});
  write_file(folder / "model.onnx", builder.serialize());
  const Tensor x = testing::random_tensor(rng, {3, 5}), y = testing::random_tensor(rng, {3, 5});
  Tensor z = Tensor::zeros(DType::kFloat32, {3, 5});
  for (int64_t i = 0; i < 15; ++i) z.data<float>()[i] = x.data<float>()[i] + y.data<float>()[i];
  EXPECT_TRUE(write_tensor_file(folder / "test_data_set_0" / "input_0.pb", "x", x).is_ok());
  EXPECT_TRUE(write_tensor_file(folder / "test_data_set_0" / "input_1.pb", "y", y).is_ok());
  EXPECT_TRUE(write_tensor_file(folder / "test_data_set_0" / "output_0.pb", "z", z).is_ok());
  return folder;
}

TEST(ConformanceHarness, ComparesFloatsWithBackendTolerancesAndNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> want = {1.0f, 100.0f, 0.0f, nan, inf, -2.0f};
  const Tensor expected = Tensor::from_floats({6}, want);
  // |got - want| <= 1e-5 + 1e-3 |want| everywhere: a match.
  const std::vector<float> close = {1.0009f, 100.09f, 0.000009f, nan, inf, -2.0019f};
  EXPECT_EQ(compare_output("y", Tensor::from_floats({6}, close), expected), "");
  // Just past the bound at [1], NaN against a number at [3], a finite value against inf at [4].
  const std::vector<float> far = {1.0f, 100.2f, 0.0f, 1.0f, 3.4e38f, -2.0f};
  const std::string message = compare_output("y", Tensor::from_floats({6}, far), expected);
  EXPECT_NE(message.find("3 of 6 elements differ"), std::string::npos) << message;
  EXPECT_NE(message.find("[1]"), std::string::npos) << message;
  EXPECT_NE(message.find("'y'"), std::string::npos) << message;
}

TEST(ConformanceHarness, ComparesDtypeShapeIntegersAndFp8CodesExactly) {
  const Tensor ints = Tensor::from_int64s({3}, std::vector<int64_t>{1, 2, 3});
  EXPECT_EQ(compare_output("i", ints, ints.clone()), "");
  EXPECT_NE(compare_output("i", Tensor::from_int64s({3}, std::vector<int64_t>{1, 2, 4}), ints), "");
  EXPECT_NE(compare_output("i", Tensor::from_int64s({1, 3}, std::vector<int64_t>{1, 2, 3}), ints).find("shape"),
            std::string::npos);
  EXPECT_NE(compare_output("i", Tensor::from_floats({3}, std::vector<float>{1, 2, 3}), ints).find("dtype"),
            std::string::npos);

  // FP8: codes one ulp apart differ even though a float tolerance would accept them;
  // the two E4M3FN NaN codes (0x7f, 0xff) match each other.
  Tensor want = Tensor::zeros(DType::kFloat8E4M3FN, {3});
  Tensor got = Tensor::zeros(DType::kFloat8E4M3FN, {3});
  const uint8_t want_codes[3] = {0x40, 0x7f, 0x38}, got_codes[3] = {0x40, 0xff, 0x38};
  std::copy(want_codes, want_codes + 3, want.data<uint8_t>());
  std::copy(got_codes, got_codes + 3, got.data<uint8_t>());
  EXPECT_EQ(compare_output("q", got, want), "");
  got.data<uint8_t>()[2] = 0x39;
  EXPECT_NE(compare_output("q", got, want).find("0x39"), std::string::npos) << compare_output("q", got, want);
}

TEST(ConformanceHarness, RunCasePassesOnTrueDataAndFailsOnCorruptedOutput) {
  std::mt19937 rng(11);
  const fs::path root = testing::make_temp_dir("loka_conformance_harness");
  const fs::path folder = make_add_case(root, "test_add_random", rng);
  NodeCase node_case{"test_add_random", "unit", folder, CaseKind::kApplicable};
  EXPECT_EQ(run_case(node_case), "");

  auto expected = read_tensor_file(folder / "test_data_set_0" / "output_0.pb");
  ASSERT_TRUE(expected) << expected.status().message();
  Tensor corrupted = expected->second.clone();
  corrupted.data<float>()[7] += 0.01f;
  ASSERT_TRUE(write_tensor_file(folder / "test_data_set_0" / "output_0.pb", "z", corrupted).is_ok());
  const std::string failure = run_case(node_case);
  EXPECT_NE(failure.find("test_data_set_0"), std::string::npos) << failure;
  EXPECT_NE(failure.find("[7]"), std::string::npos) << failure;

  fs::remove(folder / "test_data_set_0" / "output_0.pb");
  EXPECT_NE(run_case(node_case), "") << "a data set without its expected output must not pass";
  fs::remove_all(root);
}

TEST(ConformanceHarness, ClassifiesUnsupportedOpsTypesAndExclusions) {
  std::mt19937 rng(12);
  const fs::path root = testing::make_temp_dir("loka_conformance_discover");
  make_add_case(root, "test_add_listed", rng);
  make_add_case(root, "test_add_plain", rng);
  {
    fs::create_directories(root / "test_fancy");
    ModelBuilder builder(17);
    builder.input("x", DType::kFloat32, {2}).node("FancyOp", {"x"}, {"y"}).output("y", DType::kFloat32, {2});
    write_file(root / "test_fancy" / "model.onnx", builder.serialize());
  }
  {
    fs::create_directories(root / "test_gemm_old");
    ModelBuilder builder(7);  // Gemm is registered from opset 11
    builder.input("a", DType::kFloat32, {2, 2}).input("b", DType::kFloat32, {2, 2});
    builder.node("Gemm", {"a", "b"}, {"y"}).output("y", DType::kFloat32, {2, 2});
    write_file(root / "test_gemm_old" / "model.onnx", builder.serialize());
  }
  {
    fs::create_directories(root / "test_identity_string");
    ModelBuilder builder(17);
    builder.input("x", DType::kString, {2}).node("Identity", {"x"}, {"y"}).output("y", DType::kString, {2});
    write_file(root / "test_identity_string" / "model.onnx", builder.serialize());
  }
  ExclusionList exclusions;
  exclusions.reasons["test_add_listed"] = "a reason";
  auto cases = discover_cases(root, "unit", exclusions);
  ASSERT_TRUE(cases) << cases.status().message();
  ASSERT_EQ(cases->size(), 5u);
  std::map<std::string, const NodeCase*> by_name;
  for (const NodeCase& node_case : *cases) by_name[node_case.name] = &node_case;
  EXPECT_EQ(by_name["test_add_listed"]->kind, CaseKind::kExcluded);
  EXPECT_EQ(by_name["test_add_listed"]->reason, "a reason");
  EXPECT_EQ(by_name["test_add_plain"]->kind, CaseKind::kApplicable);
  EXPECT_EQ(by_name["test_fancy"]->kind, CaseKind::kUnsupportedOp);
  EXPECT_EQ(by_name["test_fancy"]->missing_ops, std::vector<std::string>{"FancyOp"});
  EXPECT_EQ(by_name["test_gemm_old"]->kind, CaseKind::kUnsupportedOp);
  EXPECT_EQ(by_name["test_gemm_old"]->missing_ops, std::vector<std::string>{"Gemm@7"});
  EXPECT_EQ(by_name["test_identity_string"]->kind, CaseKind::kUnsupportedType);
  EXPECT_EQ(by_name["test_identity_string"]->missing_types, std::vector<std::string>{"STRING"});
  fs::remove_all(root);
}

TEST(ConformanceHarness, ExclusionFileNeedsAReasonPerNameAndNoRepeats) {
  const fs::path root = testing::make_temp_dir("loka_conformance_exclusions");
  write_file(root / "ok.txt", "# comment\n\ntest_a  first reason  # trailing\ntest_b\tsecond reason\n");
  auto list = read_exclusions(root / "ok.txt");
  ASSERT_TRUE(list) << list.status().message();
  EXPECT_EQ(list->reasons.size(), 2u);
  EXPECT_EQ(list->reasons["test_a"], "first reason");
  EXPECT_EQ(list->reasons["test_b"], "second reason");

  write_file(root / "bare.txt", "test_a\n");
  auto bare = read_exclusions(root / "bare.txt");
  ASSERT_FALSE(bare);
  EXPECT_NE(bare.status().message().find("bare.txt:1"), std::string::npos) << bare.status().message();
  write_file(root / "twice.txt", "test_a one\ntest_a two\n");
  auto twice = read_exclusions(root / "twice.txt");
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.status().message().find("twice"), std::string::npos) << twice.status().message();
  EXPECT_FALSE(read_exclusions(root / "missing.txt"));
  fs::remove_all(root);
}

}  // namespace
}  // namespace loka::conformance
