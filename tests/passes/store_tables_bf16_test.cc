// ============================================================================
// tests/passes/store_tables_bf16_test.cc — `store-tables-bf16`: which tables
// go to BF16 and what each is priced at (against a brute-force ratio), the
// headroom and the user's pins, a negative twin per rule, outputs on the CPU
// runtime equal to the FP32 model run on the BF16-rounded tables, dispatch's
// headroom, and the bundled DLRM through the default pipeline.
// ============================================================================
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "canonicalize_test_util.h"
#include "loka/bfloat16.h"
#include "loka/float8.h"
#include "mods_test_util.h"
#include "passes/dispatch/budget_use.h"
#include "passes/ir/text_format.h"
#include "passes/onnx/onnx_import.h"
#include "passes/mods/insert_scales.h"
#include "passes/probe/annotations.h"
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

struct Stored {
  bool changed = false;
  std::map<std::string, double> statistics;
  json annotations;
  std::string printed;
  std::unique_ptr<ir::Graph> before, after;
};

Stored store(const std::string& text, const json& document) {
  Stored result;
  auto graph = ir::parse_graph(text);
  EXPECT_TRUE(graph) << graph.status().message();
  if (!graph) return result;
  write_annotations(**graph, document);
  result.before = (*graph)->clone();
  auto records = testing::run_pipeline(**graph, "store-tables-bf16,infer-shapes");
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

/// ‖bf16(T) − T‖ / ‖fp8(T) − T‖, summed here element by element in double.
double brute_force_ratio(const std::vector<float>& values, int64_t rows, int64_t dim, bool per_row) {
  const QuantizedWeight fp8 = quantize_table(Tensor::from_floats({rows, dim}, values), per_row);
  double bf16_sum = 0, fp8_sum = 0;
  for (int64_t i = 0; i < rows * dim; ++i) {
    const double x = values[static_cast<size_t>(i)];
    const double b = bf16_to_float(float_to_bf16(values[static_cast<size_t>(i)])) - x;
    const double q = static_cast<double>(fp8e4m3fn_to_float(fp8.codes.data<uint8_t>()[i])) *
                         fp8.scales.data<float>()[per_row ? i / dim : 0] - x;
    bf16_sum += b * b;
    fp8_sum += q * q;
  }
  return std::sqrt(bf16_sum / fp8_sum);
}

// ------------------------------------------------------------------ golden --

TEST(StoreTablesBf16, FloatTablesWithinTheHeadroomBecomeBf16AtTheirPricedError) {
  const Model m = three_table_model();
  const Stored result = store(m.text, annotations());
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
  // Each priced as its best E4M3 recipe's model error times the brute-force ratio (rel_l2: linear).
  const double priced0 = 0.002 * brute_force_ratio(m.t0, 40, 6, /*per_row=*/true);
  const double priced1 = 0.003 * brute_force_ratio(m.t1, 20, 6, /*per_row=*/false);
  const json& nodes = result.annotations["nodes"];
  EXPECT_NEAR(nodes["lookup_0"]["storage_error"].get<double>(), priced0, 1e-12);
  EXPECT_NEAR(nodes["lookup_1"]["storage_error"].get<double>(), priced1, 1e-12);
  // BF16 keeps 8 bits of precision to E4M3's 4: the ratio is about 1/16.
  EXPECT_GT(priced0 / 0.002, 1.0 / 32);
  EXPECT_LT(priced0 / 0.002, 1.0 / 8);
  EXPECT_EQ(nodes["lookup_0"]["precision"], "bf16");
  EXPECT_EQ(nodes["lookup_0"]["table_storage"], "bf16");
  EXPECT_EQ(nodes["stack"]["tables"], json({{"fp8_e4m3", 1}, {"bf16", 2}, {"fp32", 0}}));
  EXPECT_NEAR(result.annotations["model"]["precision"]["storage_error"].get<double>(), priced0 + priced1, 1e-12);
  EXPECT_NEAR(result.statistics.at("storage-error"), priced0 + priced1, 1e-12);
}

TEST(StoreTablesBf16, ALoglossBudgetPricesTheSquaredRatio) {
  const Model m = three_table_model();
  const Stored result = store(m.text, annotations("logloss=0.0002", 0.0001));
  ASSERT_TRUE(result.changed);
  const double ratio = brute_force_ratio(m.t0, 40, 6, true);
  EXPECT_NEAR(result.annotations["nodes"]["lookup_0"]["storage_error"].get<double>(), 0.002 * ratio * ratio, 1e-14);
}

TEST(StoreTablesBf16, TheCpuRuntimeComputesTheFp32ModelOnTheRoundedTables) {
  const Model m = three_table_model();
  const Stored result = store(m.text, annotations());
  ASSERT_TRUE(result.after);
  // The FP32 model with its tables rounded to BF16 values by hand.
  Model rounded = m;
  for (std::vector<float>* table : {&rounded.t0, &rounded.t1})
    for (float& v : *table) v = bf16_to_float(float_to_bf16(v));
  auto reference = ir::parse_graph(three_table_model().text);
  ASSERT_TRUE(reference);
  for (auto& [name, values] : {std::pair{"t0", &rounded.t0}, std::pair{"t1", &rounded.t1}})
    (*reference)->set_initializer((*reference)->find_value(name),
                                  Tensor::from_floats((*reference)->find_value(name)->initializer()->shape(), *values));
  std::mt19937 rng(3);
  for (int64_t batch : {1, 7, 300}) {
    Tensor ids = Tensor::zeros(DType::kInt64, {batch, 4});
    std::uniform_int_distribution<int64_t> id(-3, 2);  // valid in every table, negative from the end
    for (int64_t& v : ids.values<int64_t>()) v = id(rng);
    auto expected = testing::run_graph(**reference, {ids});
    auto actual = testing::run_graph(*result.after, {ids});
    ASSERT_TRUE(expected && actual) << (expected ? actual.status().message() : expected.status().message());
    EXPECT_EQ(testing::max_abs_difference((*expected)[0], (*actual)[0]), 0.0f) << "batch " << batch;
  }
}

TEST(StoreTablesBf16, LargestTablesFirstWhileThePricesFitTheHeadroom) {
  // Headroom 0.01 - 0.00999 = 1e-5: lookup_0 (the larger table, ~1.2e-4) does not fit; lookup_1
  // (~1.9e-4) neither; with 1.5e-4 left only lookup_0 fits, though it is priced first.
  const Model m = three_table_model();
  const double priced0 = 0.002 * brute_force_ratio(m.t0, 40, 6, true);
  const double priced1 = 0.003 * brute_force_ratio(m.t1, 20, 6, false);
  ASSERT_LT(priced0, priced1);
  const double between = (priced0 + priced1) / 2;
  const Stored one = store(m.text, annotations("rel_l2=0.01", 0.01 - between));
  EXPECT_TRUE(one.changed);
  EXPECT_EQ(one.statistics.at("tables-stored-bf16"), 1.0);
  EXPECT_EQ(one.annotations["nodes"]["lookup_0"]["precision"], "bf16");
  EXPECT_EQ(one.annotations["nodes"]["lookup_1"]["precision"], "fp32");
  // Negative twin: no headroom at all.
  const Stored none = store(m.text, annotations("rel_l2=0.01", 0.01));
  EXPECT_FALSE(none.changed);
}

TEST(StoreTablesBf16, AMeasuredSelectionSpendsItsReserveAndDispatchGetsTheRest) {
  const Model m = three_table_model();
  json document = annotations("rel_l2=0.01", 0.03);  // a measured selection's prediction may exceed the budget
  document["model"]["precision"]["measured"] = true;
  document["model"]["precision"]["reserve"] = 0.02;  // 2e-4 of headroom
  const Stored result = store(m.text, document);
  ASSERT_TRUE(result.changed);
  const double spent = result.annotations["model"]["precision"]["storage_error"].get<double>();
  EXPECT_GT(spent, 0);
  EXPECT_LE(spent, 2e-4);
  auto use = dispatch::budget_use(result.annotations);
  ASSERT_TRUE(use);
  EXPECT_NEAR(use->headroom(), 2e-4 - spent, 1e-15);
  EXPECT_NEAR(use->spent(), 0.01 * 0.98 + spent, 1e-15);
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
  EXPECT_EQ(result.annotations["nodes"]["lookup_0"]["precision"], "fp32");
  EXPECT_EQ(result.annotations["nodes"]["lookup_1"]["table_storage"], "bf16");
  // Twin: without the pin, lookup_1 stays (no headroom).
  document["nodes"]["lookup_1"] = fp32_lookup(0.003, 0.006);
  EXPECT_FALSE(store(m.text, document).changed);
}

TEST(StoreTablesBf16, UnmeasuredSitesStayFp32) {
  const Model m = three_table_model();
  json document = annotations();
  document["nodes"]["lookup_0"].erase("recipes");
  const Stored result = store(m.text, document);
  EXPECT_EQ(result.annotations["nodes"]["lookup_0"]["precision"], "fp32");
  EXPECT_EQ(result.annotations["nodes"]["lookup_1"]["precision"], "bf16");
}

TEST(StoreTablesBf16, ATableAnotherNodeReadsKeepsItsFp32Copy) {
  const Model m = three_table_model("  %row = Gather(%t0, %ids) : f32[batch,4,6] @\"other\"\n",
                                    "  output %out\n  output %row\n");
  const Stored result = store(m.text, annotations());
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

TEST(StoreTablesBf16, TheBundledDlrmStoresItsFp32TablesInBf16WithinTheBudget) {
  const std::filesystem::path zoo = testing::source_dir() / "models" / "zoo" / "dlrm_dcnv2";
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
  EXPECT_GT(stored->statistics.at("tables-stored-bf16"), 0);
  auto drift = testing::eval_logloss_drift(**reference, *graph, zoo / "eval");
  ASSERT_TRUE(drift) << drift.status().message();
  std::printf("[ dlrm_dcnv2 ] %.0f tables stored in BF16 (%.0f bytes saved, priced %.3g), eval logloss drift %.4f%%\n",
              stored->statistics.at("tables-stored-bf16"), stored->statistics.at("bytes-saved"),
              stored->statistics.at("storage-error"), 100 * drift->relative_drift);
  EXPECT_LE(drift->relative_drift, 0.0002);
}

}  // namespace
}  // namespace loka
