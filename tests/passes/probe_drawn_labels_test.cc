// ============================================================================
// tests/passes/probe_drawn_labels_test.cc — labels drawn from the FP32 model
// (passes/probe/drawn_labels.h): the draw follows the probabilities (logits
// through a sigmoid) and repeats for a seed; only a Sigmoid output with one
// value per sample qualifies; a zoo model calibrated without labels.pb gets
// the logloss budget and stays within it on the real eval labels; its negative
// twin (no Sigmoid output) keeps the relative-L2 budget.
// ============================================================================
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "mods_test_util.h"
#include "passes/ir/text_format.h"
#include "passes/onnx/onnx_import.h"
#include "passes/probe/annotations.h"
#include "passes/probe/drawn_labels.h"
#include "test_support.h"

namespace loka {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

double mean(const std::vector<float>& values) {
  double sum = 0;
  for (float v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

TEST(DrawnLabels, FollowTheProbabilitiesAndRepeatForASeed) {
  constexpr int64_t kCount = 200000;
  const Tensor p = Tensor::from_floats({kCount, 1}, std::vector<float>(kCount, 0.3f));
  const std::vector<float> labels = probe::draw_labels(p, probe::drawn_label_seed(0));
  ASSERT_EQ(labels.size(), static_cast<size_t>(kCount));
  for (float y : labels) ASSERT_TRUE(y == 0.0f || y == 1.0f);
  EXPECT_NEAR(mean(labels), 0.3, 0.005);  // 5 standard errors of a 200 000-sample mean
  EXPECT_EQ(probe::draw_labels(p, probe::drawn_label_seed(0)), labels);
  EXPECT_NE(probe::draw_labels(p, probe::drawn_label_seed(1)), labels);
  // Values outside [0, 1] are logits: sigmoid(-1.0986) = 0.25.
  const Tensor logits = Tensor::from_floats({kCount}, std::vector<float>(kCount, -1.0986123f));
  EXPECT_NEAR(mean(probe::draw_labels(logits, 7)), 0.25, 0.005);
}

TEST(DrawnLabels, OnlyASigmoidWithOneValuePerSampleIsAProbability) {
  const auto qualifies = [](const std::string& output_line, const std::string& type) {
    auto graph = ir::parse_graph("graph \"t\" {\n  opset \"\" 17\n  input %x : f32[batch,4]\n  init %w : f32[4,2] = "
                                 "[1, 2, 3, 4, 5, 6, 7, 8]\n  %z = MatMul(%x, %w) : f32[batch,2]\n" + output_line +
                                 " : " + type + "\n  output %y\n}\n");
    EXPECT_TRUE(graph) << graph.status().message();
    return graph && probe::first_output_is_probability(**graph);
  };
  EXPECT_FALSE(qualifies("  %y = Sigmoid(%z)", "f32[batch,2]"));        // two values a sample
  EXPECT_FALSE(qualifies("  %y = Softmax(%z) {axis = 1}", "f32[batch,2]"));
  EXPECT_FALSE(qualifies("  %y = Relu(%z)", "f32[batch,2]"));
  auto one = ir::parse_graph(R"(graph "t" {
  opset "" 17
  input %x : f32[batch,4]
  init %w : f32[4,1] = [1, 2, 3, 4]
  %z = MatMul(%x, %w) : f32[batch,1]
  %y = Sigmoid(%z) : f32[batch,1]
  output %y
})");
  ASSERT_TRUE(one) << one.status().message();
  EXPECT_TRUE(probe::first_output_is_probability(**one));
}

/// A copy of a zoo model's calibration sets without their labels.pb.
fs::path calibration_without_labels(const fs::path& zoo) {
  const fs::path copy = testing::make_temp_dir("loka-unlabelled-calib");
  fs::copy(zoo / "calib", copy, fs::copy_options::recursive);
  for (const auto& entry : fs::recursive_directory_iterator(copy))
    if (entry.path().filename() == "labels.pb") fs::remove(entry.path());
  return copy;
}

TEST(DrawnLabels, AZooModelWithoutLabelsIsJudgedByLoglossAndStaysWithinIt) {
  const fs::path zoo = testing::source_dir() / "models" / "zoo" / "dlrm_dcnv2";
  auto reference = onnx_io::import_model_file(zoo / "model.onnx");
  ASSERT_TRUE(reference) << reference.status().message();
  auto graph = (*reference)->clone();
  CompileSettings settings;
  settings.calibration_data = calibration_without_labels(zoo);
  settings.budget = "auto";
  auto records = testing::run_pipeline(*graph, "infer-shapes,probe,pin-precision,insert-scales", settings);
  ASSERT_TRUE(records) << records.status().message();
  const json document = *read_annotations(*graph);
  EXPECT_EQ(document["model"]["probe"]["labels"], "drawn from the FP32 model's Sigmoid output");
  EXPECT_EQ(document["model"]["probe"]["budget"], "logloss=0.0002");
  EXPECT_GT(document["model"]["precision"]["fp8_sites"].get<int>(), 0);
  // Judged on the real eval labels, the drawn-label choice keeps the logloss budget.
  auto drift = testing::eval_logloss_drift(**reference, *graph, zoo / "eval");
  ASSERT_TRUE(drift) << drift.status().message();
  std::printf("[ dlrm_dcnv2, drawn labels ] %d FP8 sites, eval logloss %.6f -> %.6f, drift %.4f%% (budget 0.02%%)\n",
              document["model"]["precision"]["fp8_sites"].get<int>(), drift->fp32, drift->fp8,
              100 * drift->relative_drift);
  EXPECT_LE(drift->relative_drift, 0.0002);
}

TEST(DrawnLabels, NegativeTwinAnOutputThatIsNoProbabilityKeepsTheRelativeL2Budget) {
  // The same model's logit (the Sigmoid's input) as the output: nothing to draw labels from.
  const fs::path zoo = testing::source_dir() / "models" / "zoo" / "dlrm_dcnv2";
  auto graph = onnx_io::import_model_file(zoo / "model.onnx");
  ASSERT_TRUE(graph) << graph.status().message();
  ir::Value* probability = (*graph)->outputs()[0];
  ir::Node* sigmoid = probability->producer();
  ASSERT_TRUE(sigmoid && sigmoid->is("Sigmoid"));
  ir::Value* logit = sigmoid->input(0);
  (*graph)->replace_all_uses_with(probability, logit);
  (*graph)->erase_node(sigmoid);
  CompileSettings settings;
  settings.calibration_data = calibration_without_labels(zoo);
  settings.budget = "auto";
  auto records = testing::run_pipeline(**graph, "infer-shapes,probe", settings);
  ASSERT_TRUE(records) << records.status().message();
  const json document = *read_annotations(**graph);
  EXPECT_EQ(document["model"]["probe"]["labels"], "none");
  EXPECT_EQ(document["model"]["probe"]["budget"], "rel_l2=0.01");
}

}  // namespace
}  // namespace loka
