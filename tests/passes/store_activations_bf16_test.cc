// ============================================================================
// tests/passes/store_activations_bf16_test.cc — BF16 activation sets: which
// sets pin-precision may choose, its measured choice, and their lowering by
// store-activations-bf16 (the bundled DLRM-DCNv2: its cross-layer stream).
// ============================================================================
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "canonicalize_test_util.h"
#include "mods_test_util.h"
#include "passes/mods/store_activations_bf16.h"
#include "passes/ir/text_format.h"
#include "passes/onnx/onnx_import.h"
#include "passes/probe/annotations.h"
#include "passes/probe/sites.h"
#include "test_support.h"

namespace loka {
namespace {

using nlohmann::json;

const std::filesystem::path kZoo = testing::source_dir() / "models" / "zoo" / "dlrm_dcnv2";

std::unique_ptr<ir::Graph> shaped_dlrm() {
  auto graph = onnx_io::import_model_file(kZoo / "model.onnx");
  EXPECT_TRUE(graph) << graph.status().message();
  auto records = testing::run_pipeline(**graph, "canonicalize,infer-shapes");
  EXPECT_TRUE(records) << records.status().message();
  return std::move(*graph);
}

const ActivationStorageCandidate* set_with(const std::vector<ActivationStorageCandidate>& sets, const std::string& value) {
  for (const ActivationStorageCandidate& set : sets)
    if (std::find(set.values.begin(), set.values.end(), value) != set.values.end()) return &set;
  return nullptr;
}

TEST(ActivationStorageCandidates, DcnStreamSetsAreFoundWithTheirSourcesAndGemms) {
  const auto graph = shaped_dlrm();
  const auto sets = find_activation_storage_candidates(*graph, probe::find_sites(*graph), 0);
  // x0: the bottom MLP's output and the 26 bags, concatenated and flattened: one set.
  const ActivationStorageCandidate* x0 = set_with(sets, "cat");
  ASSERT_NE(x0, nullptr);
  for (const char* value : {"relu_2", "stack", "view"}) EXPECT_TRUE(set_with(sets, value) == x0) << value;
  EXPECT_EQ(x0->sources.size(), 27u) << "node_relu_2 and the 26 bags' sums";
  EXPECT_NE(std::find(x0->sources.begin(), x0->sources.end(), "node_relu_2"), x0->sources.end());
  const std::set<std::string> gemms(x0->gemm_sites.begin(), x0->gemm_sites.end());
  EXPECT_TRUE(gemms.count("node_linear_2")) << "the GEMM whose epilogue writes relu_2";
  EXPECT_TRUE(gemms.count("node_linear_4")) << "the first cross layer's up-projection: its epilogue reads x0 "
                                                "(Multiplier, Residual)";
  EXPECT_FALSE(gemms.count("node_linear_3")) << "the first cross layer's down-projection reads x0 as its X, which "
                                                "both GEMM forms read in BF16";
  EXPECT_DOUBLE_EQ(x0->elements_per_sample, 216);
  // Each cross layer's output x_l is a set of its own, written by its up-projection's epilogue.
  for (const char* value : {"add", "add_1", "add_2"}) {
    const ActivationStorageCandidate* xl = set_with(sets, value);
    ASSERT_NE(xl, nullptr) << value;
    EXPECT_EQ(xl->values.size(), 1u) << value;
    EXPECT_EQ(xl->sources.size(), 1u) << value;
  }
  EXPECT_NE(std::find(set_with(sets, "add")->gemm_sites.begin(), set_with(sets, "add")->gemm_sites.end(), "node_linear_4"),
            set_with(sets, "add")->gemm_sites.end());
  // Largest first, and the size floor drops the small ones.
  for (size_t i = 1; i < sets.size(); ++i) EXPECT_GE(sets[i - 1].elements_per_sample, sets[i].elements_per_sample);
  const auto large = find_activation_storage_candidates(*graph, probe::find_sites(*graph), 200);
  for (const ActivationStorageCandidate& set : large) EXPECT_GE(set.elements_per_sample, 200);
  EXPECT_NE(set_with(large, "cat"), nullptr);
  EXPECT_EQ(set_with(large, "relu_3"), nullptr) << "32 elements a sample";
}

TEST(ActivationStorageCandidates, OutputsAndOtherReadersAreNotCandidates) {
  const auto graph = shaped_dlrm();
  const auto sets = find_activation_storage_candidates(*graph, probe::find_sites(*graph), 0);
  // The last GEMM's output feeds the Sigmoid (a reader that is neither a GEMM nor an epilogue
  // op), and the probability is a graph output.
  EXPECT_EQ(set_with(sets, "linear_13"), nullptr);
  EXPECT_EQ(set_with(sets, "prob"), nullptr);
  // A GEMM's output read only by the next op of its epilogue is fused away, never stored:
  // the bottom MLP's pre-activation, the cross layer's up-projection and its product with x0.
  for (const char* value : {"linear_2", "linear_4", "mul_4"}) EXPECT_EQ(set_with(sets, value), nullptr) << value;
}

/// The candidate sets of a small IR graph (shapes as written), every value at least 0 elements.
std::vector<ActivationStorageCandidate> candidates_of(const std::string& text) {
  auto graph = ir::parse_graph(text);
  EXPECT_TRUE(graph) << graph.status().message();
  if (!graph) return {};
  auto records = testing::run_pipeline(**graph, "infer-shapes");
  EXPECT_TRUE(records) << records.status().message();
  return find_activation_storage_candidates(**graph, probe::find_sites(**graph), 0);
}

/// %s = Gemm(%x, %w, %b) (a weight GEMM site with its bias in it) read by a plain Gemm (so it is
/// stored, not fused away), then `tail` reading %s too.
std::string gemm_output_read_by(const std::string& tail) {
  return R"(graph "t" {
  opset "" 20
  input %x : f32[batch,4]
  init %w : f32[4,4] = [0.5, -1, 2, 0.25, 1, 0.5, -0.5, 1, 0.75, -2, 1, 0.5, 0.25, 1, -1, 2]
  init %w2 : f32[4,4] = [1, 0.5, -1, 2, 0.25, -0.5, 1, 0.75, -1, 2, 0.5, 1, 2, 0.25, -1, 0.5]
  init %b : f32[4] = [0.5, -0.25, 1, 0]
  %s = Gemm(%x, %w, %b) @"source"
  %r = Gemm(%s, %w2) @"reader"
  output %r
)" + tail + "}";
}

TEST(ActivationStorageCandidates, AMulOrAddReaderNeedsTheGemmOnItsOtherSideNotTheSetsSource) {
  // Mul(s, G2(x)): the Mul is G2's epilogue (its Multiplier), so G2 must be FP8, whatever the
  // search meets first through s itself.
  const auto dcn_like = candidates_of(gemm_output_read_by(R"(  %g = Gemm(%x, %w2) {transB = 1} @"other"
  %out = Mul(%s, %g) @"multiply"
  output %out
)"));
  const ActivationStorageCandidate* s = set_with(dcn_like, "s");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(std::set<std::string>(s->gemm_sites.begin(), s->gemm_sites.end()), (std::set<std::string>{"other", "source"}));
  // Negative twins: a Mul after no GEMM (a gate), an Add of the set with itself, and a reader
  // Gemm with no FusedGemm form (alpha 2) leave s no candidate.
  for (const char* tail : {"  %g = Sigmoid(%x) @\"gate\"\n  %out = Mul(%s, %g) @\"multiply\"\n  output %out\n",
                           "  %out = Add(%s, %s) @\"double\"\n  output %out\n",
                           "  %out = Gemm(%s, %w2) {alpha = 2.0f} @\"scaled\"\n  output %out\n"})
    EXPECT_EQ(set_with(candidates_of(gemm_output_read_by(tail)), "s"), nullptr) << tail;
  // The twin's positive side: plain reader Gemms are fine, and need no FP8.
  const auto plain = candidates_of(gemm_output_read_by("  %out = Gemm(%s, %w) @\"reader_2\"\n  output %out\n"));
  ASSERT_NE(set_with(plain, "s"), nullptr);
  EXPECT_EQ(set_with(plain, "s")->gemm_sites, std::vector<std::string>{"source"});
}

/// DLRM through pin-precision (measured on the CPU, BF16 storage open or not) and the lowering.
struct Lowered {
  std::unique_ptr<ir::Graph> graph;
  json precision;
  std::vector<PassRunRecord> records;
  json nodes;  ///< the annotations' nodes, Dispatch's choices among them
};

Lowered lower_dlrm(const std::string& budget, bool bf16_storage, std::vector<std::string> pin_rules = {}) {
  Lowered out;
  auto graph = onnx_io::import_model_file(kZoo / "model.onnx");
  EXPECT_TRUE(graph) << graph.status().message();
  out.graph = std::move(*graph);
  CompileSettings settings;
  settings.calibration_data = kZoo / "calib";
  settings.budget = budget;
  settings.pin_rules = std::move(pin_rules);
  auto records = testing::run_pipeline(
      *out.graph,
      std::string("canonicalize,infer-shapes,probe,pin-precision{measure=true,storage_min_elements=0,bf16_storage=") +
          (bf16_storage ? "true" : "false") +
          "},insert-scales,fuse-gemm-epilogue,fuse-embedding-bags,store-tables-bf16,"
          "share-activation-quantize,fuse-concat-quantize,fuse-epilogue-quantize,store-activations-bf16,infer-shapes,"
          "dispatch{device=cpu}",
      settings);
  EXPECT_TRUE(records) << records.status().message();
  if (records) out.records = *records;
  auto document = read_annotations(*out.graph);
  EXPECT_TRUE(document) << document.status().message();
  if (document) {
    out.precision = (*document)["model"]["precision"];
    out.nodes = (*document)["nodes"];
  }
  return out;
}

TEST(StoreActivationsBf16, AGenerousBudgetStoresTheCrossStreamInBf16AndTheModelStillRuns) {
  // 1% of logloss: room for every GEMM and every set, so the lowering is what is tested.
  const Lowered lowered = lower_dlrm("logloss=0.01", /*bf16_storage=*/true);
  ASSERT_TRUE(lowered.precision.contains("bf16_activations")) << lowered.precision.dump();
  EXPECT_GT(lowered.precision["bf16_activations"].size(), 0u) << lowered.precision.dump();
  const json& report = lowered.precision["bf16_activations_lowered"];
  size_t stored = 0;
  for (const json& entry : report) stored += entry.value("stored", false);
  EXPECT_GT(stored, 0u) << report.dump();
  // x0 and the cross-layer outputs are BF16 between the fused ops, written by them as such.
  for (const char* name : {"view", "add", "add_1"}) {
    const ir::Value* value = lowered.graph->find_value(name);
    ASSERT_NE(value, nullptr) << name;
    EXPECT_EQ(value->type().dtype, DType::kBFloat16) << name << ": " << report.dump();
  }
  const ir::Value* add = lowered.graph->find_value("add");
  ASSERT_TRUE(add->producer()->is("QuantizedGemm", "ai.loka"));
  EXPECT_EQ(add->producer()->attributes().get_int("output_dtype", 1).value(), 16);
  // Dispatch keys the BF16 nodes by their dtypes: cuBLASLt's FP8 kernels, or, where they cannot
  // take the shape (the bottom MLP's K = 13), a reason instead of a kernel.
  size_t with_kernel = 0, k13 = 0;
  for (const ir::Node* node : lowered.graph->nodes()) {
    if (!node->is("QuantizedGemm", "ai.loka")) continue;
    const json& annotation = lowered.nodes[node->name()];
    const bool bf16 = node->output(0)->type().dtype == DType::kBFloat16 || node->input(0)->type().dtype == DType::kBFloat16;
    if (annotation.value("kernel", json()).is_string()) {
      ++with_kernel;
      if (bf16) EXPECT_EQ(annotation["kernel"].get<std::string>().rfind("cublaslt.fp8.", 0), 0u) << annotation.dump();
    } else {
      const std::string reason = annotation.value("kernel_reason", "");
      EXPECT_FALSE(reason.empty()) << node->name() << ": " << annotation.dump();
      k13 += reason.find("K=13") != std::string::npos;
    }
  }
  EXPECT_GT(with_kernel, 0u);
  EXPECT_GT(k13, 0u) << "the bottom MLP's first layer (K = 13) writes a BF16 set";
  {  // Again on the lowered graph: the same sets, already BF16, still reported stored.
    auto again = lowered.graph->clone();
    auto records = testing::run_pipeline(*again, "store-activations-bf16,infer-shapes");
    ASSERT_TRUE(records) << records.status().message();
    EXPECT_EQ(records->front().statistics.at("sets-stored-bf16"), static_cast<double>(stored));
  }
  // The lowered model runs on the CPU runtime and stays close to the one without BF16 storage.
  const Lowered fp32_storage = lower_dlrm("logloss=0.01", /*bf16_storage=*/false);
  EXPECT_EQ(fp32_storage.precision.value("bf16_activations", json::array()).size(), 0u);
  EXPECT_EQ(fp32_storage.graph->find_value("add")->type().dtype, DType::kFloat32);
  auto difference = testing::max_output_difference_on_data(*lowered.graph, *fp32_storage.graph, kZoo / "calib", 1);
  ASSERT_TRUE(difference) << difference.status().message();
  EXPECT_GT(*difference, 0.0f) << "BF16 storage rounds something";
  EXPECT_LT(*difference, 0.05f);
}

TEST(StoreActivationsBf16, ASetWhoseGemmStaysFp32IsDeclinedWithItsReason) {
  // The first cross layer's up-projection pinned FP32: its epilogue (the Mul by x0 and the Add
  // of x0) is no QuantizedGemm's (only that epilogue reads a BF16 Multiplier and Residual), so
  // x0 is not measured at all.
  const std::string x0_gemm = "node_linear_4";
  auto graph = onnx_io::import_model_file(kZoo / "model.onnx");
  ASSERT_TRUE(graph) << graph.status().message();
  CompileSettings settings;
  settings.calibration_data = kZoo / "calib";
  settings.budget = "logloss=0.01";
  settings.pin_rules = {x0_gemm + "$=fp32"};
  auto records = testing::run_pipeline(**graph, "canonicalize,infer-shapes,probe,pin-precision{measure=true,bf16_storage=true,storage_min_elements=0}",
      settings);
  ASSERT_TRUE(records) << records.status().message();
  const json precision = (*read_annotations(**graph))["model"]["precision"];
  bool declined = false;
  for (const json& entry : precision["bf16_activations_declined"]) {
    const json& values = entry["values"];
    if (std::find(values.begin(), values.end(), "cat") == values.end()) continue;
    declined = true;
    EXPECT_NE(entry.value("reason", "").find(x0_gemm), std::string::npos) << entry.dump();
  }
  EXPECT_TRUE(declined) << precision.dump();
}

TEST(StoreActivationsBf16, AFloatGemmReadingTheSetReadsItInBf16AsAFusedGemm) {
  // The first cross layer's down-projection (x0 -> 6, no bias) pinned FP32: it reads x0 as its X
  // only, so x0 is still chosen; the lowering makes the bare Gemm a FusedGemm, which reads BF16.
  const std::string x0_reader = "node_linear_3";
  const Lowered lowered = lower_dlrm("logloss=0.01", /*bf16_storage=*/true, {x0_reader + "$=fp32"});
  bool x0_stored = false;
  for (const json& entry : lowered.precision["bf16_activations_lowered"]) {
    const json& values = entry["values"];
    if (std::find(values.begin(), values.end(), "cat") != values.end()) x0_stored = entry.value("stored", false);
  }
  EXPECT_TRUE(x0_stored) << lowered.precision["bf16_activations_lowered"].dump();
  const ir::Node* reader = lowered.graph->find_node(x0_reader);
  ASSERT_NE(reader, nullptr);
  EXPECT_TRUE(reader->is("FusedGemm", "ai.loka")) << reader->op_type();
  EXPECT_EQ(reader->input(0)->type().dtype, DType::kBFloat16);
  EXPECT_EQ(reader->attributes().get_string("activation", "none").value(), "none");
  // It runs on the CPU runtime, close to the twin without BF16 storage (same pin).
  const Lowered fp32_storage = lower_dlrm("logloss=0.01", /*bf16_storage=*/false, {x0_reader + "$=fp32"});
  const ir::Node* twin = fp32_storage.graph->find_node(x0_reader);
  ASSERT_NE(twin, nullptr);
  EXPECT_TRUE(twin->is("Gemm")) << "without BF16 storage nothing turns it into a FusedGemm";
  // The measured selection (sites and sets together) stayed within the 1% budget; the largest
  // change of one probability is a looser figure than that mean, hence the wider bound.
  EXPECT_TRUE(lowered.precision.value("within_budget", false)) << lowered.precision.dump();
  auto difference = testing::max_output_difference_on_data(*lowered.graph, *fp32_storage.graph, kZoo / "calib", 1);
  ASSERT_TRUE(difference) << difference.status().message();
  EXPECT_GT(*difference, 0.0f);
  EXPECT_LT(*difference, 0.1f);
}

/// Writes pin-precision's choice of the set {h} into `graph`'s annotations.
void choose_h_for_bf16(ir::Graph& graph) {
  auto document = read_annotations(graph);
  ASSERT_TRUE(document) << document.status().message();
  (*document)["model"]["precision"]["bf16_activations"] = json::array({{{"values", {"h"}}}});
  write_annotations(graph, *document);
}

TEST(StoreActivationsBf16, AChosenSetIsRetypedItsWriterWritesBf16AndABareFloatReaderBecomesAFusedGemm) {
  // The lowering alone, on a small graph with the choice written as pin-precision writes it: an
  // FP8 GEMM's output read by another FP8 GEMM and by a float Gemm with nothing after it.
  auto graph = ir::parse_graph(R"(graph "t" {
  opset "" 20
  opset "ai.loka" 1
  input %x : f32[batch,2]
  init %w : f8e4m3fn[2,2] = [0x38, 0x40, 0xb8, 0x30]
  init %ws : f32[2] = [1, 0.5]
  init %xs : f32[] = [0.5]
  init %wf : f32[2,3] = [0.5, -1.25, 2, 0.75, 0.125, -3]
  %h = ai.loka::QuantizedGemm(%x, %w, %ws, _, %xs) : f32[batch,2] @"writer"
  %a = ai.loka::QuantizedGemm(%h, %w, %ws, _, %xs) : f32[batch,2] @"fp8_reader"
  %b = Gemm(%h, %wf) : f32[batch,3] @"float_reader"
  output %a
  output %b
})");
  ASSERT_TRUE(graph) << graph.status().message();
  const auto fp32_storage = (*graph)->clone();
  choose_h_for_bf16(**graph);
  auto records = testing::run_pipeline(**graph, "store-activations-bf16,infer-shapes");
  ASSERT_TRUE(records) << records.status().message();
  EXPECT_EQ(records->front().statistics.at("sets-stored-bf16"), 1.0);
  EXPECT_EQ(records->front().statistics.at("float-readers-fused"), 1.0);
  const json lowered = (*read_annotations(**graph))["model"]["precision"]["bf16_activations_lowered"];
  EXPECT_EQ(lowered[0]["fused_readers"], json::array({"float_reader"})) << lowered.dump();
  EXPECT_EQ((*graph)->find_value("h")->type().dtype, DType::kBFloat16);
  EXPECT_EQ((*graph)->find_node("writer")->attributes().get_int("output_dtype", 1).value(), 16);
  const ir::Node* reader = (*graph)->find_node("float_reader");
  ASSERT_NE(reader, nullptr);
  EXPECT_TRUE(reader->is("FusedGemm", "ai.loka")) << reader->op_type();
  EXPECT_EQ((*graph)->find_value("b")->type().dtype, DType::kFloat32) << "the float site's Y stays FLOAT";
  // It runs on the CPU runtime; h's BF16 rounding is all that differs from the FP32 storage.
  for (int64_t batch : {1, 5}) {
    auto difference = testing::max_output_difference(*fp32_storage, **graph, batch, /*seed=*/3);
    ASSERT_TRUE(difference) << difference.status().message();
    EXPECT_LT(*difference, 0.1f) << "batch " << batch;
  }
  // Negative twin: a reader with no BF16 form (Sigmoid) keeps the set FP32, with the reason.
  auto twin = ir::parse_graph(R"(graph "t" {
  opset "" 20
  opset "ai.loka" 1
  input %x : f32[batch,2]
  init %w : f8e4m3fn[2,2] = [0x38, 0x40, 0xb8, 0x30]
  init %ws : f32[2] = [1, 0.5]
  init %xs : f32[] = [0.5]
  %h = ai.loka::QuantizedGemm(%x, %w, %ws, _, %xs) : f32[batch,2] @"writer"
  %a = Sigmoid(%h) : f32[batch,2] @"other_reader"
  output %a
})");
  ASSERT_TRUE(twin) << twin.status().message();
  choose_h_for_bf16(**twin);
  auto twin_records = testing::run_pipeline(**twin, "store-activations-bf16,infer-shapes");
  ASSERT_TRUE(twin_records) << twin_records.status().message();
  EXPECT_EQ((*twin)->find_value("h")->type().dtype, DType::kFloat32);
  const json report = (*read_annotations(**twin))["model"]["precision"]["bf16_activations_lowered"];
  ASSERT_EQ(report.size(), 1u);
  EXPECT_FALSE(report[0]["stored"].get<bool>());
  EXPECT_NE(report[0]["reason"].get<std::string>().find("Sigmoid 'other_reader'"), std::string::npos) << report.dump();
}

TEST(StoreActivationsBf16, WithoutAChoiceTheGraphIsUntouched) {
  auto graph = onnx_io::import_model_file(kZoo / "model.onnx");
  ASSERT_TRUE(graph) << graph.status().message();
  auto records = testing::run_pipeline(**graph, "canonicalize,infer-shapes,store-activations-bf16");
  ASSERT_TRUE(records) << records.status().message();
  EXPECT_FALSE(records->back().changed);
}

}  // namespace
}  // namespace loka
