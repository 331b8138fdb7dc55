// ============================================================================
// tests/passes/store_tables_bf16_test.cc — `store-tables-bf16`: which tables
// go to BF16, their measured cost against a brute-force one, the headroom and
// the user's pins, a negative twin per rule, outputs on the CPU runtime equal
// to the FP32 model run on the BF16-rounded tables, dispatch's headroom, and
// the bundled DLRM and DHEN within a logloss budget.
// ============================================================================
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <tuple>

#include "canonicalize_test_util.h"
#include "loka/bfloat16.h"
#include "mods_test_util.h"
#include "passes/dispatch/budget_use.h"
#include "passes/ir/text_format.h"
#include "passes/onnx/onnx_import.h"
#include "passes/probe/annotations.h"
#include "runtime/tensor_proto.h"
#include "test_support.h"

namespace loka {
namespace {

using nlohmann::json;

/// Values N(0, 1) as an IR list, and the same values as floats.
std::string random_values_ir(std::mt19937& rng, int64_t count, std::vector<float>& values) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::string out = "[";
  for (int64_t i = 0; i < count; ++i) {
    values.push_back(normal(rng));
    char text[32];
    std::snprintf(text, sizeof text, "%s%.9g", i ? ", " : "", values.back());
    out += text;
  }
  return out + "]";
}

/// Three tables pooled by one EmbeddingBags "stack": %t0 [40,6] and %t1 [20,6] float32, %q2 FP8.
/// `extra` adds nodes (another reader of a table).
struct Model {
  std::string text;
  std::vector<float> t0, t1;
};

Model three_table_model(const std::string& extra = "", const std::string& outputs = "  output %out\n") {
  std::mt19937 rng(5);
  Model m;
  m.text = R"(graph "t" {
  opset "" 17
  opset "ai.loka" 1
  input %ids : i64[batch,4]
  init %t0 : f32[40,6] = )" +
           random_values_ir(rng, 240, m.t0) + "\n  init %t1 : f32[20,6] = " + random_values_ir(rng, 120, m.t1) +
           "\n  init %q2 : f8e4m3fn[3,6] = " + testing::e4m3_codes_ir(18) + R"(
  init %s2 : f32[3] = [0.5, 0.25, 2]
  %out = ai.loka::EmbeddingBags(%ids, %t0, _, %t1, _, %q2, %s2) {offsets = ints[0, 2, 3, 4]} : f32[batch,3,6] @"stack"
)" + extra + outputs + "}";
  return m;
}

/// A lookup site pin-precision left fp32, with its recipes' FP8 model errors (rel_l2).
json fp32_lookup(double tensor_error, double row_error) {
  return {{"precision", "fp32"},
          {"recipes",
           {{"e4m3_tensor", {{"error", {{"rel_l2_mean", tensor_error}, {"logloss_expected_mean", tensor_error}}}}},
            {"e4m3_row", {{"error", {{"rel_l2_mean", row_error}, {"logloss_expected_mean", row_error}}}}}}}};
}

/// Annotations as pin-precision and fuse-embedding-bags leave them.
json annotations(const std::string& budget = "rel_l2=0.01", double predicted = 0.008) {
  json document = {{"version", kAnnotationsVersion}};
  document["model"]["precision"] = {{"budget", budget}, {"predicted_error", predicted}};
  document["nodes"]["stack"] = {{"op", "EmbeddingBags"}, {"from", {"lookup_0", "lookup_1", "lookup_2"}}};
  document["nodes"]["lookup_0"] = fp32_lookup(0.004, 0.002);
  document["nodes"]["lookup_1"] = fp32_lookup(0.003, 0.006);
  document["nodes"]["lookup_2"] = {{"precision", "fp8_e4m3"}, {"recipe", "e4m3_row"}};
  return document;
}

/// Calibration sets of ids [rows, 4] in [-3, 3) (valid in every table; negative from the end).
std::filesystem::path calibration_ids(int sets = 3, int64_t rows = 64) {
  const std::filesystem::path dir = testing::make_temp_dir("loka-bf16-tables");
  std::mt19937 rng(9);
  std::uniform_int_distribution<int64_t> id(-3, 2);
  for (int s = 0; s < sets; ++s) {
    Tensor ids = Tensor::zeros(DType::kInt64, {rows, 4});
    for (int64_t& v : ids.values<int64_t>()) v = id(rng);
    const std::filesystem::path set = dir / ("test_data_set_" + std::to_string(s));
    std::filesystem::create_directories(set);
    EXPECT_TRUE(write_tensor_file(set / "input_0.pb", "ids", ids).is_ok());
  }
  return dir;
}

struct Stored {
  bool changed = false;
  std::map<std::string, double> statistics;
  json annotations;
  std::string printed;
  std::unique_ptr<ir::Graph> after;
};

/// Runs store-tables-bf16 on `text` carrying `document`, with `calib` as --calib.
Stored store(const std::string& text, const json& document, const std::filesystem::path& calib = calibration_ids()) {
  Stored result;
  auto graph = ir::parse_graph(text);
  EXPECT_TRUE(graph) << graph.status().message();
  if (!graph) return result;
  write_annotations(**graph, document);
  CompileSettings settings;
  settings.calibration_data = calib;
  auto records = testing::run_pipeline(**graph, "store-tables-bf16,infer-shapes", settings);
  EXPECT_TRUE(records) << records.status().message();
  if (!records) return result;
  result.changed = records->at(0).changed;
  result.statistics = records->at(0).statistics;
  result.annotations = *read_annotations(**graph);
  result.after = (*graph)->clone();
  (*graph)->metadata.erase(kAnnotationsKey);
  result.printed = ir::print_graph(**graph);
  return result;
}

/// The model with the chosen tables rounded to BF16 values by hand, kept FP32.
std::unique_ptr<ir::Graph> rounded_by_hand(const Model& m, bool t0, bool t1) {
  auto graph = ir::parse_graph(m.text);
  EXPECT_TRUE(graph);
  for (auto [name, values, round] : {std::tuple{"t0", m.t0, t0}, std::tuple{"t1", m.t1, t1}}) {
    if (!round) continue;
    for (float& v : values) v = bf16_to_float(float_to_bf16(v));
    ir::Value* table = (*graph)->find_value(name);
    (*graph)->set_initializer(table, Tensor::from_floats(table->initializer()->shape(), values));
  }
  return std::move(*graph);
}

/// ‖b − a‖ / ‖a‖ of the two graphs' outputs over the three calibration sets, summed here.
double brute_force_increment(const ir::Graph& a, const ir::Graph& b, const std::filesystem::path& calib) {
  double difference = 0, reference = 0;
  for (int s = 0; s < 3; ++s) {
    auto ids = read_tensor_file(calib / ("test_data_set_" + std::to_string(s)) / "input_0.pb");
    EXPECT_TRUE(ids);
    auto x = testing::run_graph(a, {ids->second});
    auto y = testing::run_graph(b, {ids->second});
    EXPECT_TRUE(x && y);
    const std::vector<float> xs = (*x)[0].to_floats(), ys = (*y)[0].to_floats();
    for (size_t i = 0; i < xs.size(); ++i) {
      difference += (static_cast<double>(ys[i]) - xs[i]) * (static_cast<double>(ys[i]) - xs[i]);
      reference += static_cast<double>(xs[i]) * xs[i];
    }
  }
  return std::sqrt(difference / reference);
}

// ------------------------------------------------------------------ golden --

TEST(StoreTablesBf16, TablesWhoseMeasuredCostFitsTheHeadroomBecomeBf16) {
  const Model m = three_table_model();
  const std::filesystem::path calib = calibration_ids();
  const Stored result = store(m.text, annotations("rel_l2=0.01", 0.005), calib);
  ASSERT_TRUE(result.changed);
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK: init %t0.bf16 : bf16[40,6]
CHECK-NEXT: init %t1.bf16 : bf16[20,6]
CHECK-NEXT: %out = ai.loka::EmbeddingBags(%ids, %t0.bf16, _, %t1.bf16, _, %q2, %s2)
)"),
            "")
      << result.printed;
  EXPECT_EQ(result.printed.find("init %t0 :"), std::string::npos) << "the FP32 table no one reads stays";
  EXPECT_EQ(result.statistics.at("tables-stored-bf16"), 2.0);
  EXPECT_EQ(result.statistics.at("bytes-saved"), 2.0 * (240 + 120));
  EXPECT_EQ(result.statistics.at("trial-runs"), 1.0) << "everything fits: one trial";
  // The measured cost: the outputs' relative L2 change against the model as it was.
  const auto fp32 = ir::parse_graph(m.text);
  const double expected = brute_force_increment(**fp32, *rounded_by_hand(m, true, true), calib);
  EXPECT_GT(expected, 0);
  EXPECT_NEAR(result.annotations["model"]["precision"]["storage_error"].get<double>(), expected, 1e-9);
  EXPECT_NEAR(result.statistics.at("storage-error"), expected, 1e-9);
  const json& nodes = result.annotations["nodes"];
  EXPECT_EQ(nodes["lookup_0"]["precision"], "bf16");
  EXPECT_EQ(nodes["lookup_0"]["table_storage"], "bf16");
  EXPECT_EQ(nodes["stack"]["tables"], json({{"fp8_e4m3", 1}, {"bf16", 2}, {"fp32", 0}}));
}

TEST(StoreTablesBf16, TheCpuRuntimeComputesTheFp32ModelOnTheRoundedTables) {
  const Model m = three_table_model();
  const Stored result = store(m.text, annotations("rel_l2=0.01", 0.005));
  ASSERT_TRUE(result.after);
  const std::unique_ptr<ir::Graph> reference = rounded_by_hand(m, true, true);
  std::mt19937 rng(3);
  for (int64_t batch : {1, 7, 300}) {
    Tensor ids = Tensor::zeros(DType::kInt64, {batch, 4});
    std::uniform_int_distribution<int64_t> id(-3, 2);
    for (int64_t& v : ids.values<int64_t>()) v = id(rng);
    auto expected = testing::run_graph(*reference, {ids});
    auto actual = testing::run_graph(*result.after, {ids});
    ASSERT_TRUE(expected && actual) << (expected ? actual.status().message() : expected.status().message());
    EXPECT_EQ(testing::max_abs_difference((*expected)[0], (*actual)[0]), 0.0f) << "batch " << batch;
  }
}

TEST(StoreTablesBf16, LargestTablesFirstWhileTheMeasuredSetFitsTheHeadroom) {
  const Model m = three_table_model();
  const std::filesystem::path calib = calibration_ids();
  const auto fp32 = ir::parse_graph(m.text);
  const double larger_alone = brute_force_increment(**fp32, *rounded_by_hand(m, true, false), calib);
  const double both = brute_force_increment(**fp32, *rounded_by_hand(m, true, true), calib);
  ASSERT_LT(larger_alone, both);
  // Headroom between the two: the set of both fails, the larger table alone is kept, then adding
  // the smaller one fails again.
  const Stored one = store(m.text, annotations("rel_l2=0.01", 0.01 - (larger_alone + both) / 2), calib);
  EXPECT_TRUE(one.changed);
  EXPECT_EQ(one.statistics.at("tables-stored-bf16"), 1.0);
  EXPECT_EQ(one.statistics.at("trial-runs"), 3.0);
  EXPECT_EQ(one.annotations["nodes"]["lookup_0"]["precision"], "bf16");
  EXPECT_EQ(one.annotations["nodes"]["lookup_1"]["precision"], "fp32");
  EXPECT_NE(one.annotations["nodes"]["lookup_1"]["storage_reason"].get<std::string>().find("over the headroom"),
            std::string::npos);
  EXPECT_NEAR(one.annotations["model"]["precision"]["storage_error"].get<double>(), larger_alone, 1e-9);
  EXPECT_NE(one.printed.find("init %t1 : f32[20,6]"), std::string::npos);
  EXPECT_EQ(one.printed.find("%t1.bf16"), std::string::npos) << "the rejected copy is dropped";
  // Negative twin: no headroom at all.
  const Stored none = store(m.text, annotations("rel_l2=0.01", 0.01), calib);
  EXPECT_EQ(none.statistics.count("tables-stored-bf16"), 0u);
  EXPECT_EQ(none.printed, testing::canonical_ir(m.text));
}

TEST(StoreTablesBf16, AMeasuredSelectionSpendsItsReserveAndDispatchGetsTheRest) {
  const Model m = three_table_model();
  json document = annotations("rel_l2=0.1", 0.3);  // a measured selection's prediction may exceed the budget
  document["model"]["precision"]["measured"] = true;
  document["model"]["precision"]["reserve"] = 0.1;  // 0.01 of headroom
  const Stored result = store(m.text, document);
  ASSERT_TRUE(result.changed);
  const double spent = result.annotations["model"]["precision"]["storage_error"].get<double>();
  EXPECT_GT(spent, 0);
  EXPECT_LE(spent, 0.01);
  auto use = dispatch::budget_use(result.annotations);
  ASSERT_TRUE(use);
  EXPECT_NEAR(use->headroom(), 0.01 - spent, 1e-15);
  EXPECT_NEAR(use->spent(), 0.1 * 0.9 + spent, 1e-15);
}

// ---------------------------------------------------------- negative twins --

TEST(StoreTablesBf16, UserPinsWin) {
  const Model m = three_table_model();
  json document = annotations("rel_l2=0.01", 0.01);  // no headroom
  document["nodes"]["lookup_0"]["pinned_by"] = "lookup_0=fp32";
  document["nodes"]["lookup_1"]["precision"] = "bf16";
  document["nodes"]["lookup_1"]["pinned_by"] = "lookup_1=bf16";
  const Stored result = store(m.text, document);
  ASSERT_TRUE(result.changed);
  EXPECT_EQ(result.statistics.at("tables-stored-bf16"), 1.0);
  EXPECT_EQ(result.statistics.at("trial-runs"), 1.0) << "the pin is measured, and charged";
  EXPECT_GT(result.annotations["model"]["precision"]["storage_error"].get<double>(), 0);
  EXPECT_EQ(result.annotations["nodes"]["lookup_0"]["precision"], "fp32");
  EXPECT_EQ(result.annotations["nodes"]["lookup_1"]["table_storage"], "bf16");
  // Twin: without the pin, lookup_1 stays (no headroom).
  document["nodes"]["lookup_1"] = fp32_lookup(0.003, 0.006);
  const Stored twin = store(m.text, document);
  EXPECT_EQ(twin.statistics.count("tables-stored-bf16"), 0u);
  EXPECT_EQ(twin.printed, testing::canonical_ir(m.text));
}

TEST(StoreTablesBf16, TablesAllPinnedFp32LeaveTheModelAndItsAnnotationsAlone) {
  const Model m = three_table_model();
  json document = annotations("rel_l2=0.01", 0.005);
  document["nodes"]["lookup_0"]["pinned_by"] = "lookup_=fp32";
  document["nodes"]["lookup_1"]["pinned_by"] = "lookup_=fp32";
  for (const std::filesystem::path& calib : {calibration_ids(), std::filesystem::path()}) {
    const Stored result = store(m.text, document, calib);
    EXPECT_FALSE(result.changed) << "--calib '" << calib.string() << "'";
    EXPECT_EQ(result.printed, testing::canonical_ir(m.text));
  }
}

TEST(StoreTablesBf16, WithoutCalibrationDataNothingIsMeasuredSoOnlyPinsGo) {
  const Model m = three_table_model();
  json document = annotations("rel_l2=0.01", 0.005);
  const Stored open = store(m.text, document, "");
  EXPECT_TRUE(open.changed) << "the annotations say why";
  EXPECT_EQ(open.printed, testing::canonical_ir(m.text));
  EXPECT_EQ(open.annotations["nodes"]["lookup_0"]["storage_reason"], "no calibration data (--calib) to measure BF16 on");
  document["nodes"]["lookup_1"]["precision"] = "bf16";
  document["nodes"]["lookup_1"]["pinned_by"] = "lookup_1=bf16";
  const Stored pinned = store(m.text, document, "");
  EXPECT_TRUE(pinned.changed);
  EXPECT_EQ(pinned.statistics.at("tables-stored-bf16"), 1.0);
}

TEST(StoreTablesBf16, ATableAnotherNodeReadsKeepsItsFp32Copy) {
  const Model m = three_table_model("  %row = Gather(%t0, %ids) : f32[batch,4,6] @\"other\"\n",
                                    "  output %out\n  output %row\n");
  const Stored result = store(m.text, annotations("rel_l2=0.01", 0.005));
  ASSERT_TRUE(result.changed);
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK: init %t0 : f32[40,6]
CHECK: init %t0.bf16 : bf16[40,6]
CHECK: ai.loka::EmbeddingBags(%ids, %t0.bf16, _, %t1.bf16
CHECK: Gather(%t0, %ids)
)"),
            "")
      << result.printed;
}

TEST(StoreTablesBf16, ATableTwoSlotsReadIsStoredOnce) {
  Model m = three_table_model();
  m.text.replace(m.text.find("%t1, _, %q2"), 11, "%t0, _, %q2");  // slot 2 reads %t0 too
  const Stored result = store(m.text, annotations("rel_l2=0.01", 0.005));
  ASSERT_TRUE(result.changed);
  EXPECT_EQ(result.statistics.at("tables-stored-bf16"), 1.0);
  EXPECT_EQ(result.statistics.at("bytes-saved"), 2.0 * 240);
  EXPECT_EQ(testing::check_lines(result.printed, R"(
CHECK: init %t0.bf16 : bf16[40,6]
CHECK: ai.loka::EmbeddingBags(%ids, %t0.bf16, _, %t0.bf16, _, %q2, %s2)
)"),
            "")
      << result.printed;
  EXPECT_EQ(result.annotations["nodes"]["lookup_0"]["table_storage"], "bf16");
  EXPECT_EQ(result.annotations["nodes"]["lookup_1"]["table_storage"], "bf16");
}

// pin-precision's measured choice: a table is stored, untried, only when it took every lookup of
// that table; a lookup it took whose table another lookup also reads, not taken, is undone, and a
// lookup it took that no EmbeddingBags reads is told why its table stays FP32.
TEST(StoreTablesBf16, APinPrecisionChoiceStoresATableOnlyWhenEveryLookupOfItWasTaken) {
  Model m = three_table_model();
  m.text.replace(m.text.find("%t1, _, %q2"), 11, "%t0, _, %q2");  // slot 2 reads %t0 too
  json document = annotations("rel_l2=0.01", 0.005);
  document["model"]["precision"]["bf16_tables"] = 1;
  const json taken = {{"precision", "bf16"}, {"table_storage", "bf16"}, {"table_storage_by", "pin-precision"}};
  document["nodes"]["lookup_0"].update(taken);
  document["nodes"]["lookup_1"]["storage_reason"] = "over budget (measured 0.02 > 0.0098)";
  document["nodes"]["unfused"] = taken;  // a lookup outside every EmbeddingBags
  const Stored half = store(m.text, document);
  ASSERT_TRUE(half.changed);
  EXPECT_EQ(half.statistics.count("tables-stored-bf16"), 0u) << half.printed;
  EXPECT_EQ(half.statistics.count("trial-runs"), 0u) << "the measured selection declined the rest";
  for (const char* lookup : {"lookup_0", "lookup_1"}) {
    const json& annotation = half.annotations["nodes"][lookup];
    EXPECT_EQ(annotation.value("precision", ""), "fp32") << lookup << annotation.dump();
    EXPECT_FALSE(annotation.contains("table_storage")) << lookup << annotation.dump();
    EXPECT_EQ(annotation.value("storage_reason", ""), "over budget (measured 0.02 > 0.0098)") << annotation.dump();
  }
  const json& unfused = half.annotations["nodes"]["unfused"];
  EXPECT_EQ(unfused.value("precision", ""), "fp32") << unfused.dump();
  EXPECT_NE(unfused.value("storage_reason", "").find("EmbeddingBags"), std::string::npos) << unfused.dump();
  // Both lookups of the table taken: stored with no trial and nothing charged.
  document["nodes"]["lookup_1"].update(taken);
  document["nodes"]["lookup_1"].erase("storage_reason");
  const Stored whole = store(m.text, document);
  ASSERT_TRUE(whole.changed);
  EXPECT_EQ(whole.statistics.at("tables-stored-bf16"), 1.0);
  EXPECT_EQ(whole.statistics.count("trial-runs"), 0u);
  EXPECT_EQ(whole.annotations["nodes"]["lookup_1"]["table_storage"], "bf16");
  EXPECT_EQ(whole.annotations["model"]["precision"].value("storage_error", -1.0), 0.0);
}

TEST(StoreTablesBf16, MaxAbsBudgetsMeasureTheLargestChange) {
  const Model m = three_table_model();
  const std::filesystem::path calib = calibration_ids();
  const Stored result = store(m.text, annotations("max_abs=1", 0.5), calib);
  ASSERT_TRUE(result.changed);
  // The largest change of a pooled sum of rows rounded to BF16: positive and far below 1.
  const double spent = result.annotations["model"]["precision"]["storage_error"].get<double>();
  EXPECT_GT(spent, 0);
  EXPECT_LT(spent, 0.05);
}

TEST(StoreTablesBf16, ALoglossBudgetWithoutLabelsIsAnErrorAndTheGraphStaysAsItWas) {
  const Model m = three_table_model();
  json document = annotations("logloss=0.0002", 0.0001);
  document["model"]["probe"] = {{"logloss_judged_samples", 4096}};
  auto graph = ir::parse_graph(m.text);
  ASSERT_TRUE(graph);
  write_annotations(**graph, document);
  CompileSettings settings;
  settings.calibration_data = calibration_ids();  // ids only: no labels.pb, and no probability to draw from
  auto records = testing::run_pipeline(**graph, "store-tables-bf16", settings);
  ASSERT_FALSE(records);
  EXPECT_NE(records.status().message().find("no labels.pb"), std::string::npos) << records.status().message();
  (*graph)->metadata.erase(kAnnotationsKey);
  EXPECT_EQ(ir::print_graph(**graph), testing::canonical_ir(m.text)) << "no BF16 copy or pointer left behind";
  // Twin: without the Probe's logloss statistics, an error before anything is run.
  document["model"].erase("probe");
  write_annotations(**graph, document);
  records = testing::run_pipeline(**graph, "store-tables-bf16", settings);
  ASSERT_FALSE(records);
  EXPECT_NE(records.status().message().find("logloss_judged_samples"), std::string::npos) << records.status().message();
}

TEST(StoreTablesBf16, WithoutPinPrecisionsAnnotationsItSaysWhatToRun) {
  auto graph = ir::parse_graph(three_table_model().text);
  ASSERT_TRUE(graph);
  json document = annotations();
  document.erase("model");
  write_annotations(**graph, document);
  auto records = testing::run_pipeline(**graph, "store-tables-bf16");
  ASSERT_FALSE(records);
  EXPECT_NE(records.status().message().find("run probe and pin-precision"), std::string::npos)
      << records.status().message();
}

// --------------------------------------------------------------------- zoo --

class StoreTablesBf16Zoo : public ::testing::TestWithParam<const char*> {};

TEST_P(StoreTablesBf16Zoo, EvalLoglossDriftStaysWithinTheBudget) {
  const std::filesystem::path zoo = testing::source_dir() / "models" / "zoo" / GetParam();
  auto reference = onnx_io::import_model_file(zoo / "model.onnx");
  ASSERT_TRUE(reference) << reference.status().message();
  const std::unique_ptr<ir::Graph> graph = (*reference)->clone();
  CompileSettings settings;
  settings.calibration_data = zoo / "calib";
  settings.budget = "logloss=0.0002";
  auto records = testing::run_pipeline(
      *graph, "infer-shapes,probe,pin-precision,insert-scales,fuse-embedding-bags,store-tables-bf16", settings);
  ASSERT_TRUE(records) << records.status().message();
  const auto stored = std::find_if(records->begin(), records->end(),
                                   [](const PassRunRecord& r) { return r.pass == "store-tables-bf16"; });
  ASSERT_NE(stored, records->end());
  const auto count = [&](const char* name) {
    return stored->statistics.count(name) ? stored->statistics.at(name) : 0.0;
  };
  EXPECT_GT(count("trial-runs"), 0) << "the model keeps FP32 tables to measure";
  auto drift = testing::eval_logloss_drift(**reference, *graph, zoo / "eval");
  ASSERT_TRUE(drift) << drift.status().message();
  std::printf("[ %s ] %.0f tables stored in BF16 (%.0f bytes saved, measured %.3g, %.0f trial runs), eval logloss drift %.4f%%\n",
              GetParam(), count("tables-stored-bf16"), count("bytes-saved"), count("storage-error"), count("trial-runs"),
              100 * drift->relative_drift);
  EXPECT_LE(drift->relative_drift, 0.0002);
}

// pin-precision's measured selection put the tables FP8 did not fit in BF16, measured with the
// sites in one run: stored here with no trial and nothing more charged; without that choice
// (bf16_storage=false) this pass measures its own trials, as before.
TEST(StoreTablesBf16, TablesPinPrecisionMeasuredInBf16AreStoredWithoutATrial) {
  const std::filesystem::path zoo = testing::source_dir() / "models" / "zoo" / "dlrm_dcnv2";
  auto reference = onnx_io::import_model_file(zoo / "model.onnx");
  ASSERT_TRUE(reference) << reference.status().message();
  CompileSettings settings;
  settings.calibration_data = zoo / "calib";
  settings.budget = "logloss=0.0002";
  for (const bool joint : {true, false}) {
    SCOPED_TRACE(joint ? "bf16_storage=true" : "bf16_storage=false");
    const std::unique_ptr<ir::Graph> graph = (*reference)->clone();
    auto records = testing::run_pipeline(*graph,
                                         std::string("infer-shapes,probe,pin-precision{measure=true,bf16_storage=") +
                                             (joint ? "true" : "false") +
                                             "},insert-scales,fuse-embedding-bags,store-tables-bf16",
                                         settings);
    ASSERT_TRUE(records) << records.status().message();
    const json document = *read_annotations(*graph);
    const json& precision = document["model"]["precision"];
    const std::map<std::string, double>& stored = records->back().statistics;
    const auto count = [&](const char* name) { return stored.count(name) ? stored.at(name) : 0.0; };
    if (!joint) {
      EXPECT_FALSE(precision.contains("bf16_tables"));
      EXPECT_GT(count("trial-runs"), 0) << "its own trials, as before";
      continue;
    }
    const double chosen = precision.value("bf16_tables", 0.0);
    EXPECT_GT(chosen, 0) << "the tiny model's budget leaves lookups out of FP8";
    EXPECT_EQ(count("tables-stored-bf16"), chosen);
    EXPECT_EQ(count("trial-runs"), 0);
    EXPECT_EQ(count("storage-error"), 0) << "already in pin-precision's measurement";
    size_t marked = 0;
    for (const auto& [name, node] : document["nodes"].items())
      if (node.value("table_storage_by", "") == "pin-precision") {
        ++marked;
        EXPECT_EQ(node.value("precision", ""), "bf16") << name;
      }
    EXPECT_EQ(static_cast<double>(marked), chosen);
    auto drift = testing::eval_logloss_drift(**reference, *graph, zoo / "eval");
    ASSERT_TRUE(drift) << drift.status().message();
    EXPECT_LE(std::fabs(drift->relative_drift), 0.0002);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, StoreTablesBf16Zoo, ::testing::Values("dlrm_dcnv2", "dhen"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace loka
