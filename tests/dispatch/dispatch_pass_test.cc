// ============================================================================
// tests/dispatch/dispatch_pass_test.cc — the `dispatch` pass on small graphs
// (cost model, no GPU) and on a zoo model through loka-opt: a complete,
// deterministic plan; budget-granted TF32/BF16 (activation x activation
// MatMuls too); pin-precision's reserve; pins honoured; reasons recorded.
// ============================================================================
#include <gtest/gtest.h>


#include <set>

#include "gemm_test_keys.h"
#include "kernels/registry/kernel_plan.h"
#include "kernels/registry/kernel_registry.h"
#include "passes/dispatch/dispatch_pass.h"
#include "passes/ir/shape_inference.h"
#include "passes/ir/text_format.h"
#include "passes/mods/pin_precision.h"
#include "passes/onnx/onnx_import.h"
#include "passes/pass_manager.h"
#include "passes/probe/annotations.h"
#include "test_support.h"

namespace loka {
namespace {

using nlohmann::json;
using testing::CommandResult;
using testing::make_temp_dir;
using testing::run_command;
using testing::source_dir;
using testing::tools_dir;

constexpr const char* kGraph = R"(graph "mlp" {
  opset "" 17
  opset "ai.loka" 1
  input %x : f32[batch,512]
  input %w1 : f32[256,512]
  input %b1 : f32[256]
  input %w2 : f32[256,128]
  input %w3 : f8e4m3fn[128,128]
  input %w3_scale : f32[128]
  input %x3_scale : f32[1]
  %h = Gemm(%x, %w1, %b1) {transB = 1} @"fc1"
  %g = MatMul(%h, %w2) @"fc2"
  %y = ai.loka::QuantizedGemm(%g, %w3, %w3_scale, %w3_scale, %x3_scale) {activation = "relu"} @"fc3"
  output %y
})";

/// Parses `text`, turns the named graph inputs into (zero) initializers — weights too large
/// to spell out in the text — and infers shapes.
std::unique_ptr<ir::Graph> make_graph(const char* text = kGraph,
                                      const std::vector<std::string>& constants = {"w1", "b1", "w2", "w3", "w3_scale",
                                                                                   "x3_scale"}) {
  auto graph = ir::parse_graph(text);
  EXPECT_TRUE(graph.is_ok()) << graph.status().message();
  for (const std::string& name : constants) {
    ir::Value* value = (*graph)->find_value(name);
    if (value == nullptr) continue;
    (*graph)->remove_input(value);
    (*graph)->set_initializer(value, Tensor::zeros(value->type().dtype, value->type().static_shape()));
  }
  EXPECT_TRUE(ir::infer_shapes(**graph).is_ok());
  return std::move(graph).value();
}

std::map<std::string, std::string> default_options() {
  std::map<std::string, std::string> options;
  for (const PassOption& option : dispatch_pass_info().options) options[option.name] = option.default_value;
  return options;
}

/// Runs the pass with the cost model; returns the annotation document.
json dispatch_with_cost_model(ir::Graph& graph, const dispatch::DispatchOptions& options = {}) {
  CompileSettings settings;
  PassContext context(settings, default_options());
  auto timer = dispatch::make_cost_model_timer();
  auto norm_timer = dispatch::make_cost_model_norm_timer();
  auto changed = dispatch::dispatch_kernels(graph, context, *timer, *norm_timer, options);
  EXPECT_TRUE(changed.is_ok()) << changed.status().message();
  auto document = read_annotations(graph);
  EXPECT_TRUE(document.is_ok());
  return *document;
}

/// Annotations as pin-precision leaves them: a rel_l2 budget with `predicted` spent.
void annotate_budget(ir::Graph& graph, double predicted, bool pin_fc1_fp32 = false) {
  json document = read_annotations(graph).value();
  document["model"]["precision"] = {{"budget", "rel_l2=0.01"}, {"predicted_error", predicted}};
  json& fc1 = document["nodes"]["fc1"];
  fc1 = {{"name", "fc1"}, {"op", "Gemm"}, {"precision", "fp32"},
         {"recipes", {{"e4m3_tensor", {{"error", {{"rel_l2_mean", 0.004}}}}}}}};
  if (pin_fc1_fp32) fc1["pinned_by"] = "fc1=fp32";
  document["nodes"]["fc3"] = {{"name", "fc3"}, {"op", "QuantizedGemm"}, {"precision", "fp8_e4m3"},
                              {"error", {{"rel_l2_mean", 0.001}}}};
  write_annotations(graph, document);
}

TEST(DispatchPass, WritesACompletePlanForEveryGemmAndBucket) {
  auto graph = make_graph();
  const json document = dispatch_with_cost_model(*graph);
  for (const char* name : {"fc1", "fc2", "fc3"}) {
    const json& node = document["nodes"][name];
    ASSERT_TRUE(node.contains("kernel")) << name;
    EXPECT_TRUE(node["kernel"].is_string());
    EXPECT_GT(node["kernel_time_us"].get<double>(), 0) << name;
    EXPECT_TRUE(node.contains("kernel_runner_up")) << name;
    EXPECT_EQ(node["kernel_source"], "cost_model");
    ASSERT_EQ(node["kernels"].size(), 3u) << name;
    for (const char* bucket : {"512", "4096", "16384"}) {
      const json& entry = node["kernels"][bucket];
      EXPECT_TRUE(entry["kernel"].is_string()) << name << " " << bucket;
      if (entry["runner_up"].is_string()) {
        EXPECT_GE(entry["runner_up_time_us"].get<double>(), entry["time_us"].get<double>()) << name << " " << bucket;
      }
    }
    EXPECT_EQ(node["kernel"], node["kernels"]["4096"]["kernel"]);
  }
  EXPECT_EQ(document["model"]["dispatch"]["dispatched_nodes"], 3);
  EXPECT_EQ(document["model"]["dispatch"]["device"], kernels::kCostModelDevice);
  // Without pin-precision's budget nothing may add error: FP32 nodes stay FP32.
  EXPECT_EQ(document["nodes"]["fc1"]["kernel_precision"], "fp32");
  EXPECT_EQ(document["nodes"]["fc2"]["kernel_precision"], "fp32");

  auto plan = kernels::parse_kernel_plan(graph->metadata.at(kernels::kKernelPlanKey));
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  EXPECT_EQ(plan->device, kernels::kCostModelDevice);
  ASSERT_EQ(plan->nodes.size(), 3u);
  EXPECT_EQ(plan->nodes["fc1"].size(), 3u);
  EXPECT_EQ(plan->nodes["fc1"][1].m, 4096);
  EXPECT_EQ(plan->nodes["fc1"][1].candidate, document["nodes"]["fc1"]["kernel"].get<std::string>());
  // The ai.loka node carries the choice as an attribute too; standard ops do not (onnx's checker).
  EXPECT_TRUE(graph->find_node("fc3")->attributes().has("kernel"));
  EXPECT_FALSE(graph->find_node("fc1")->attributes().has("kernel"));
}

TEST(DispatchPass, RunTwiceGivesIdenticalBytes) {
  auto first = make_graph(), second = make_graph();
  annotate_budget(*first, 0.002);
  annotate_budget(*second, 0.002);
  dispatch_with_cost_model(*first);
  dispatch_with_cost_model(*second);
  EXPECT_EQ(first->metadata, second->metadata);
  EXPECT_EQ(ir::print_graph(*first), ir::print_graph(*second));
  // Running it again on its own output changes nothing.
  const auto before = first->metadata;
  dispatch_with_cost_model(*first);
  EXPECT_EQ(first->metadata, before);
}

TEST(DispatchPass, SpendsBudgetHeadroomOnTensorCores) {
  auto graph = make_graph();
  annotate_budget(*graph, 0.002);
  const json document = dispatch_with_cost_model(*graph);
  const json& fc1 = document["nodes"]["fc1"];
  // 16384 x 256 x 512 in FP32 without tensor cores loses to TF32, which also beats a BF16
  // cast + GEMM at this memory-bound shape (one kernel, no cast).
  EXPECT_EQ(fc1["kernels"]["16384"]["precision"], "tf32");
  EXPECT_EQ(fc1["kernels"]["16384"]["kernel"], "cublaslt.tf32.algo0");
  EXPECT_GT(fc1["kernel_extra_error"].get<double>(), 0);
  const json& summary = document["model"]["dispatch"];
  EXPECT_TRUE(summary["within_budget"].get<bool>());
  EXPECT_LE(summary["predicted_error"].get<double>(), 0.01);
  // fc2 has no Probe measurement: no error may be added there.
  EXPECT_EQ(document["nodes"]["fc2"]["kernel_precision"], "fp32");
}

TEST(DispatchPass, NoHeadroomOrAPinKeepsFp32) {
  {
    auto graph = make_graph();
    annotate_budget(*graph, 0.00999);
    const json document = dispatch_with_cost_model(*graph);
    for (const auto& [bucket, entry] : document["nodes"]["fc1"]["kernels"].items())
      EXPECT_EQ(entry["precision"], "fp32") << bucket;
  }
  {
    auto graph = make_graph();
    annotate_budget(*graph, 0.002, /*pin_fc1_fp32=*/true);
    const json document = dispatch_with_cost_model(*graph);
    for (const auto& [bucket, entry] : document["nodes"]["fc1"]["kernels"].items())
      EXPECT_EQ(entry["precision"], "fp32") << bucket;
  }
}

TEST(DispatchPass, FreeChoicesNeverAddError) {
  auto graph = make_graph();
  annotate_budget(*graph, 0.00999);
  const json document = dispatch_with_cost_model(*graph);
  // fc3 runs FP8 (its own precision) or BF16 (less error): never anything else, no added error.
  const std::string precision = document["nodes"]["fc3"]["kernel_precision"];
  EXPECT_TRUE(precision == "fp8_e4m3" || precision == "bf16" || precision == "fp8_emulated") << precision;
  EXPECT_EQ(document["nodes"]["fc3"]["kernel_extra_error"].get<double>(), 0.0);
  EXPECT_EQ(document["model"]["dispatch"]["extra_error"].get<double>(), 0.0);
}

/// Measurements as a GPU might give them: FP8 FAST_ACCUM and BF16 are faster but less exact.
dispatch::MeasureFn fake_gpu() {
  return [](const kernels::GemmKey& key, const kernels::GemmShape& shape) -> Result<std::vector<dispatch::CandidateTiming>> {
    std::vector<dispatch::CandidateTiming> out;
    for (const kernels::GemmCandidate& c : kernels::gemm_candidates(key, shape, {2, true, true})) {
      double time = 0, error = 0;
      switch (c.precision) {
        case kernels::GemmPrecision::kFp32: time = 20 + c.algorithm, error = 1e-7; break;
        case kernels::GemmPrecision::kTf32: time = 12, error = 0.0004; break;
        case kernels::GemmPrecision::kBf16: time = key.weight == DType::kFloat8E4M3FN ? 12 : 8, error = 0.002; break;
        case kernels::GemmPrecision::kFp8E4M3: time = c.fast_accum ? 6 : 10 - c.algorithm, error = c.fast_accum ? 0.08 : 0.05; break;
        case kernels::GemmPrecision::kFp8Emulated: time = 30, error = 0.05; break;
        case kernels::GemmPrecision::kBf16x2: time = 10, error = 2e-6; break;
      }
      out.push_back({c, time, error});
    }
    return out;
  };
}

json dispatch_measured(ir::Graph& graph) {
  dispatch::PerfDb db;
  dispatch::PerfDbUse use;
  auto timer = dispatch::make_perf_db_timer(db, {"Test GPU", "1", "2"}, fake_gpu(), use);
  CompileSettings settings;
  PassContext context(settings, default_options());
  auto norm_timer = dispatch::make_cost_model_norm_timer();
  EXPECT_TRUE(dispatch::dispatch_kernels(graph, context, *timer, *norm_timer, {}).is_ok());
  return read_annotations(graph).value();
}

TEST(DispatchPass, MeasuredFastAccumAndBf16NeedBudget) {
  {
    auto graph = make_graph();
    annotate_budget(*graph, 0.002);  // 0.008 of headroom
    const json document = dispatch_measured(*graph);
    EXPECT_EQ(document["nodes"]["fc3"]["kernel"], "cublaslt.fp8.e4m3.tensor.fast_accum.algo0");
    EXPECT_EQ(document["nodes"]["fc3"]["kernel_runner_up"], "cublaslt.fp8.e4m3.tensor.fast_accum.algo1");
    EXPECT_EQ(document["nodes"]["fc1"]["kernel"], "cublaslt.bf16.algo0");
    EXPECT_EQ(document["nodes"]["fc2"]["kernel"], "cublaslt.fp32.algo0");  // no Probe figure: exact only
    EXPECT_EQ(document["nodes"]["fc1"]["kernel_source"], "measured");
    EXPECT_EQ(document["model"]["dispatch"]["device"], "Test GPU / driver 1 / cuBLASLt 2");
    // 0.001 x 0.08/0.05 - 0.001 for fc3, 0.004 x 0.002/0.051 for fc1.
    EXPECT_NEAR(document["model"]["dispatch"]["extra_error"].get<double>(), 0.0006 + 0.004 * 0.002 / 0.051, 1e-6);
  }
  {
    auto graph = make_graph();
    annotate_budget(*graph, 0.0099);  // 0.0001 of headroom: neither FAST_ACCUM nor BF16 fits, TF32 does
    const json document = dispatch_measured(*graph);
    EXPECT_EQ(document["nodes"]["fc3"]["kernel"], "cublaslt.fp8.e4m3.tensor.algo1");  // fastest exact FP8
    EXPECT_EQ(document["nodes"]["fc3"]["kernel_runner_up"], "cublaslt.fp8.e4m3.tensor.algo0");
    EXPECT_EQ(document["nodes"]["fc1"]["kernel"], "cublaslt.tf32.algo0");
    EXPECT_NEAR(document["model"]["dispatch"]["extra_error"].get<double>(), 0.004 * 0.0004 / 0.051, 1e-6);
  }
  {
    auto graph = make_graph();
    annotate_budget(*graph, 0.01);  // no headroom: exact kernels only
    const json document = dispatch_measured(*graph);
    EXPECT_EQ(document["nodes"]["fc1"]["kernel"], "cublaslt.fp32.algo0");
    EXPECT_EQ(document["model"]["dispatch"]["extra_error"].get<double>(), 0.0);
  }
}

/// Annotations as pin-precision leaves them (a rel_l2=0.01 budget with `predicted` spent) for
/// FP32 nodes with a Probe-measured FP8 site error each; `pins` are pinned fp32.
void annotate_sites(ir::Graph& graph, double predicted, const std::map<std::string, double>& site_errors,
                    const std::set<std::string>& pins = {}) {
  json document = read_annotations(graph).value();
  document["model"]["precision"] = {{"budget", "rel_l2=0.01"}, {"predicted_error", predicted}};
  for (const auto& [name, error] : site_errors) {
    json& node = document["nodes"][name];
    node = {{"name", name}, {"precision", "fp32"}, {"recipes", {{"e4m3_tensor", {{"error", {{"rel_l2_mean", error}}}}}}}};
    if (pins.count(name)) node["pinned_by"] = name + "=fp32";
  }
  write_annotations(graph, document);
}

std::set<std::string> precisions_of(const json& node) {
  std::set<std::string> out;
  for (const auto& [bucket, entry] : node["kernels"].items()) out.insert(entry["precision"].get<std::string>());
  return out;
}

constexpr const char* kComputeBound = R"(graph "big" {
  opset "" 17
  input %x : f32[batch,4096]
  input %w : f32[4096,4096]
  %y = MatMul(%x, %w) @"big"
  output %y
})";

TEST(DispatchPass, Tf32WhenOnlyItFitsBf16WhenBothDo) {
  // 4096x4096 weights: compute-bound, BF16's rate beats TF32 once both are allowed. Added
  // errors (site 0.004): TF32 0.004 x 0.0004/0.051 = 3.1e-5, BF16 0.004 x 0.0032/0.051 = 2.5e-4.
  auto roomy = make_graph(kComputeBound, {"w"});
  annotate_sites(*roomy, 0.002, {{"big", 0.004}});
  const json both = dispatch_with_cost_model(*roomy);
  EXPECT_EQ(precisions_of(both["nodes"]["big"]), std::set<std::string>{"bf16"});
  auto tight = make_graph(kComputeBound, {"w"});
  annotate_sites(*tight, 0.00992, {{"big", 0.004}});  // 8e-5 of headroom
  const json tf32_only = dispatch_with_cost_model(*tight);
  EXPECT_EQ(precisions_of(tf32_only["nodes"]["big"]), std::set<std::string>{"tf32"});
  EXPECT_LE(tf32_only["model"]["dispatch"]["predicted_error"].get<double>(), 0.01);
  EXPECT_GT(tf32_only["nodes"]["big"]["kernel_extra_error"].get<double>(), 0);
  // Its runner-up is FP32: BF16 was not granted, so it is no runner-up.
  EXPECT_EQ(tf32_only["nodes"]["big"]["kernel_runner_up"], "cublaslt.fp32.algo0");
}

TEST(DispatchPass, NegativeTwinPinnedFp32OrNoHeadroomKeepsTheComputeBoundGemmFp32) {
  auto pinned = make_graph(kComputeBound, {"w"});
  annotate_sites(*pinned, 0.002, {{"big", 0.004}}, {"big"});
  EXPECT_EQ(precisions_of(dispatch_with_cost_model(*pinned)["nodes"]["big"]), std::set<std::string>{"fp32"});
  auto full = make_graph(kComputeBound, {"w"});
  annotate_sites(*full, 0.01, {{"big", 0.004}});
  const json document = dispatch_with_cost_model(*full);
  EXPECT_EQ(precisions_of(document["nodes"]["big"]), std::set<std::string>{"fp32"});
  EXPECT_EQ(document["model"]["dispatch"]["extra_error"].get<double>(), 0.0);
}

/// As pin-precision leaves a *measured* selection: its summed prediction (0.012) exceeds the
/// rel_l2=0.01 budget, while what it measured on the calibration data is `measured`.
void annotate_measured_selection(ir::Graph& graph, double measured) {
  annotate_sites(graph, 0.012, {{"big", 0.004}});
  json document = read_annotations(graph).value();
  json& precision = document["model"]["precision"];
  precision["measured"] = true;
  precision["measured_error"] = measured;
  precision["margin"] = 0.7;
  precision["reserve"] = 0.02;
  precision["selection_limit"] = 0.0098;
  write_annotations(graph, document);
}

TEST(DispatchPass, AMeasuredSelectionLeavesItsReserveToDispatch) {
  // Reserve 0.02 x 0.01 = 0.0002 of headroom: TF32 (3.1e-5) fits, BF16 (2.5e-4) does not. The
  // summed prediction alone (0.012 > 0.01) would have left nothing: FP32.
  auto graph = make_graph(kComputeBound, {"w"});
  annotate_measured_selection(*graph, 0.005);
  const json document = dispatch_with_cost_model(*graph);
  EXPECT_EQ(precisions_of(document["nodes"]["big"]), std::set<std::string>{"tf32"});
  const json& summary = document["model"]["dispatch"];
  EXPECT_NEAR(summary["headroom"].get<double>(), 0.0002, 1e-12);  // the unspent margin stays unspent
  EXPECT_TRUE(summary["within_budget"].get<bool>());
  EXPECT_LE(summary["predicted_error"].get<double>(), 0.01);
  EXPECT_EQ(summary["headroom_from"], "measured selection: the reserve");
}

TEST(DispatchPass, NegativeTwinAMeasuredSelectionWithoutReserveKeepsFp32) {
  auto graph = make_graph(kComputeBound, {"w"});
  annotate_measured_selection(*graph, 0.005);
  json document = read_annotations(*graph).value();
  document["model"]["precision"]["reserve"] = 0.0;
  write_annotations(*graph, document);
  const json result = dispatch_with_cost_model(*graph);
  EXPECT_EQ(precisions_of(result["nodes"]["big"]), std::set<std::string>{"fp32"});
  EXPECT_EQ(result["model"]["dispatch"]["extra_error"].get<double>(), 0.0);
}

constexpr const char* kAttention = R"(graph "attention" {
  opset "" 17
  input %q : f32[batch,64,512]
  input %k : f32[batch,512,64]
  %s = MatMul(%q, %k) @"qk"
  output %s
})";

TEST(DispatchPass, ActivationMatMulGetsTf32AndBf16Candidates) {
  auto graph = make_graph(kAttention, {});
  annotate_sites(*graph, 0.002, {{"qk", 0.004}});
  const json document = dispatch_with_cost_model(*graph);
  const json& qk = document["nodes"]["qk"];
  for (const auto& [bucket, entry] : qk["kernels"].items()) {
    EXPECT_EQ(entry["candidates"], 3) << bucket;  // FP32, TF32, BF16 (both operands cast)
    EXPECT_NE(entry["precision"], "fp32") << bucket;
  }
  EXPECT_EQ(qk["kernels"]["4096"]["shape"], "m=64,n=64,k=512,batch=4096");
  auto timer = dispatch::make_cost_model_timer();
  auto timings = timer->time(testing::activation_matmul_key(), {64, 64, 512, 8});
  ASSERT_TRUE(timings.is_ok());
  std::vector<std::string> names;
  for (const dispatch::CandidateTiming& t : *timings) names.push_back(t.candidate.name());
  EXPECT_EQ(names, (std::vector<std::string>{"cublaslt.fp32.algo0", "cublaslt.tf32.algo0", "cublaslt.bf16.algo0"}));
}

TEST(DispatchPass, AFoldedTransposeIsABatchedNtProblemWithTheSameCandidates) {
  // fold-transposes' X·Yᵀ: a FusedGemm with a batched W read transposed in place.
  auto graph = make_graph(R"(graph "t" {
  opset "" 17
  opset "ai.loka" 1
  input %q : f32[batch,64,512]
  input %k : f32[batch,48,512]
  %s = ai.loka::FusedGemm(%q, %k) {transB = 1} @"qk"
  output %s
})",
                          {});
  annotate_sites(*graph, 0.002, {{"qk", 0.004}});
  const json document = dispatch_with_cost_model(*graph);
  const json& qk = document["nodes"]["qk"];
  ASSERT_TRUE(qk.contains("kernels")) << qk.dump();
  for (const auto& [bucket, entry] : qk["kernels"].items()) EXPECT_EQ(entry["candidates"], 3) << bucket;
  EXPECT_EQ(qk["kernels"]["4096"]["shape"], "m=64,n=48,k=512,batch=4096");
  kernels::GemmKey key = testing::activation_matmul_key(kernels::GemmLayout::kBatchedNT);
  EXPECT_EQ(key.to_string().find(":batched_nt~act:") != std::string::npos, true) << key.to_string();
}

TEST(DispatchPass, ABatchedMatMulsPlanTellsItsBucketsApartByRowsOverAllBatches) {
  // qk's M is 64 at every bucket; its batch count is the bucket. The plan keys each choice by
  // M x batch, so the runtime finds the 4096 choice at 4096 (keyed by M, every bucket got the
  // first one).
  auto graph = make_graph(kAttention, {});
  annotate_sites(*graph, 0.002, {{"qk", 0.004}});
  dispatch_with_cost_model(*graph);
  auto plan = kernels::parse_kernel_plan(graph->metadata[kernels::kKernelPlanKey]);
  ASSERT_TRUE(plan) << plan.status().message();
  std::vector<int64_t> rows;
  for (const kernels::KernelChoice& choice : plan->nodes.at("qk")) rows.push_back(choice.m);
  EXPECT_EQ(rows, (std::vector<int64_t>{64 * 512, 64 * 4096, 64 * 16384}));
  for (int64_t bucket : {512, 4096, 16384}) {
    const kernels::KernelChoice* choice = plan->choose("qk", 64 * bucket);
    ASSERT_NE(choice, nullptr);
    EXPECT_EQ(choice->m, 64 * bucket);
  }
}

TEST(DispatchPass, NegativeTwinPinnedActivationMatMulStaysFp32) {
  auto graph = make_graph(kAttention, {});
  annotate_sites(*graph, 0.002, {{"qk", 0.004}}, {"qk"});
  const json document = dispatch_with_cost_model(*graph);
  EXPECT_EQ(precisions_of(document["nodes"]["qk"]), std::set<std::string>{"fp32"});
  EXPECT_EQ(document["nodes"]["qk"]["kernels"]["4096"]["candidates"], 3);  // offered, not allowed
}

constexpr const char* kChain = R"(graph "chain" {
  opset "" 17
  input %x : f32[batch,1024]
  input %wa : f32[1024,1024]
  input %wb : f32[1024,1024]
  input %wc : f32[1024,1024]
  %a = Gemm(%x, %wa) @"a"
  %b = Gemm(%a, %wb) @"b"
  %c = Gemm(%b, %wc) @"c"
  output %c
})";

/// The chain with the Probe's annotations: three equal sites, e4m3_tensor errors as given.
std::unique_ptr<ir::Graph> probed_chain(double a, double b, double c) {
  auto graph = make_graph(kChain, {"wa", "wb", "wc"});
  const auto site = [](double error) {
    return json{{"verdict", "safe"},
                {"precision", "fp32"},
                {"recipes",
                 {{"e4m3_tensor", {{"error", {{"rel_l2_mean", error}}}, {"verdict", "safe"}}},
                  {"e4m3_row", {{"error", {{"rel_l2_mean", 0.5}}}, {"verdict", "safe"}}}}},
                {"stats", {{"activation", {{"scale_e4m3", 0.01}}}}}};
  };
  write_annotations(*graph, json{{"version", 1},
                                 {"model", {{"probe", {{"budget", "rel_l2=0.01"}}}}},
                                 {"nodes", {{"a", site(a)}, {"b", site(b)}, {"c", site(c)}}}});
  return graph;
}

/// Runs `pipeline` (pin-precision and dispatch on the cost model) with a rel_l2=0.01 budget.
json pin_and_dispatch(ir::Graph& graph, const std::string& pipeline_text, std::vector<std::string> pins = {}) {
  PassRegistry registry;
  registry.add(pin_precision_pass_info(), make_pin_precision_pass);
  registry.add(dispatch_pass_info(), make_dispatch_pass);
  auto pipeline = parse_pipeline(pipeline_text, registry);
  EXPECT_TRUE(pipeline) << pipeline.status().message();
  CompileSettings settings;
  settings.budget = "rel_l2=0.01";
  settings.pin_rules = std::move(pins);
  PassManagerOptions options;
  options.reproducer_dir = make_temp_dir("loka-dispatch-repro");
  auto records = PassManager(registry, options).run(graph, *pipeline, settings);
  EXPECT_TRUE(records.is_ok()) << records.status().message();
  return read_annotations(graph).value();
}

// Sites c (0.00435) then a (0.009) fill sqrt(0.009^2 + 0.00435^2) = 0.009996 of the 0.01 budget
// when pin-precision may spend all of it; b (0.02) never fits. With the default 2% reserve the
// sites stop at c (a would pass 0.0098), and dispatch runs the FP32 nodes on tensor cores.
TEST(DispatchPass, PinPrecisionsReserveLeavesRoomForTensorCoreKernels) {
  auto graph = probed_chain(0.009, 0.02, 0.00435);
  const json document = pin_and_dispatch(*graph, "pin-precision,dispatch{device=cpu}");
  const json& precision = document["model"]["precision"];
  EXPECT_EQ(precision["reserve"].get<double>(), 0.02);
  EXPECT_NEAR(precision["selection_limit"].get<double>(), 0.0098, 1e-12);
  EXPECT_EQ(document["model"]["precision"]["sites_in_fp8"], json::array({"c"}));
  for (const char* node : {"a", "b"}) EXPECT_EQ(precisions_of(document["nodes"][node]).count("fp32"), 0u) << node;
  EXPECT_GT(document["model"]["dispatch"]["extra_error"].get<double>(), 0);
  EXPECT_TRUE(document["model"]["dispatch"]["within_budget"].get<bool>());
}

TEST(DispatchPass, NegativeTwinReserveZeroOrAPinLeavesFp32NodesFp32) {
  {  // reserve=0: the sites spend the budget as before, dispatch has no headroom for anything.
    auto graph = probed_chain(0.009, 0.02, 0.00435);
    const json document = pin_and_dispatch(*graph, "pin-precision{reserve=0},dispatch{device=cpu}");
    EXPECT_EQ(document["model"]["precision"]["sites_in_fp8"], json::array({"a", "c"}));
    EXPECT_EQ(precisions_of(document["nodes"]["b"]), std::set<std::string>{"fp32"});
    EXPECT_EQ(document["model"]["dispatch"]["extra_error"].get<double>(), 0.0);
  }
  {  // The reserve, but b pinned fp32 by the user: never an error-adding kernel there.
    auto graph = probed_chain(0.009, 0.02, 0.00435);
    const json document = pin_and_dispatch(*graph, "pin-precision,dispatch{device=cpu}", {"^b$=fp32"});
    EXPECT_EQ(precisions_of(document["nodes"]["b"]), std::set<std::string>{"fp32"});
    EXPECT_EQ(document["nodes"]["b"]["kernel_extra_error"].get<double>(), 0.0);
    EXPECT_EQ(precisions_of(document["nodes"]["a"]).count("fp32"), 0u);
  }
}

TEST(DispatchPass, UnknownShapesAreRecordedWithAReason) {
  auto graph = make_graph(R"(graph "g" {
  opset "" 17
  input %x : f32[?,64]
  input %w : f32[64,32]
  %y = MatMul(%x, %w) @"mm"
  output %y
})");
  const json document = dispatch_with_cost_model(*graph);
  EXPECT_FALSE(document["nodes"]["mm"].contains("kernel"));
  EXPECT_NE(document["nodes"]["mm"]["kernel_reason"].get<std::string>().find("shapes unknown"), std::string::npos);
}

// A QuantizedGemm holding BF16 activations (store-activations-bf16) gets cuBLASLt's FP8 kernels,
// which quantize a BF16 X and write a BF16 Y, keyed by those dtypes: the cost model prices the
// bytes they save against the FP32 twin's. A BF16 Multiplier (the DCN cross) keeps the node's
// own op: no kernel, and the reason says why.
TEST(DispatchPass, Bf16StorageQuantizedGemmsGetCublasLtFp8Kernels) {
  std::map<std::string, double> bf16_us, fp32_us;
  for (const bool bf16 : {true, false}) {
    SCOPED_TRACE(bf16 ? "bf16 Y" : "fp32 Y");
    const std::string text = std::string(R"(graph "g" {
  opset "" 17
  opset "ai.loka" 1
  input %x : f32[batch,128]
  input %w : f8e4m3fn[128,128]
  input %w_scale : f32[128]
  input %x_scale : f32[1]
  %y = ai.loka::QuantizedGemm(%x, %w, %w_scale, %w_scale, %x_scale) {activation = "relu", output_dtype = )") +
                             (bf16 ? "16" : "1") + R"(} @"fc"
  %z = ai.loka::QuantizedGemm(%y, %w, %w_scale, %w_scale, %x_scale) @"fc2"
  output %z
})";
    auto graph = make_graph(text.c_str(), {"w", "w_scale", "x_scale"});
    ASSERT_EQ(graph->find_value("y")->type().dtype, bf16 ? DType::kBFloat16 : DType::kFloat32);
    const json document = dispatch_with_cost_model(*graph);
    for (const char* node : {"fc", "fc2"}) {  // fc writes the BF16 activation, fc2 reads it
      SCOPED_TRACE(node);
      const json& annotation = document["nodes"][node];
      ASSERT_TRUE(annotation.contains("kernel")) << annotation.dump();
      EXPECT_EQ(annotation["kernel"].get<std::string>().rfind("cublaslt.fp8.e4m3.", 0), 0u) << annotation.dump();
      (bf16 ? bf16_us : fp32_us)[node] = annotation["kernel_time_us"].get<double>();
    }
  }
  EXPECT_LT(bf16_us["fc"], fp32_us["fc"]);    // writes Y in 2 bytes an element
  EXPECT_LT(bf16_us["fc2"], fp32_us["fc2"]);  // reads X in 2 to quantize it
  auto cross = make_graph(R"(graph "g" {
  opset "" 17
  opset "ai.loka" 1
  input %x : bf16[batch,128]
  input %w : f8e4m3fn[128,128]
  input %w_scale : f32[128]
  input %x_scale : f32[1]
  %y = ai.loka::QuantizedGemm(%x, %w, %w_scale, %w_scale, %x_scale, %x, %x) {output_dtype = 16} @"cross"
  output %y
})", {"w", "w_scale", "x_scale"});
  const json cross_document = dispatch_with_cost_model(*cross);
  const json& annotation = cross_document["nodes"]["cross"];
  EXPECT_FALSE(annotation.contains("kernel")) << annotation.dump();
  EXPECT_NE(annotation.value("kernel_reason", "").find("BF16 Multiplier"), std::string::npos) << annotation.dump();
}

// A float GEMM reading a BF16 set (store-activations-bf16's FusedGemm) gets split-weight BF16:
// exact enough to be the node's own arithmetic (no budget spent, none needed), and faster than
// FP32 or TF32, which widen X into an FP32 run scratch first. Its FP32-X twin is not offered it.
TEST(DispatchPass, AFloatGemmReadingABf16SetRunsSplitWeightBf16WithoutSpendingBudget) {
  for (const bool bf16 : {true, false}) {
    SCOPED_TRACE(bf16 ? "bf16 X" : "fp32 X");
    const std::string text = std::string(R"(graph "g" {
  opset "" 17
  opset "ai.loka" 1
  input %x : )") + (bf16 ? "bf16" : "f32") + R"([batch,512]
  input %w : f32[256,512]
  input %b : f32[256]
  %y = ai.loka::FusedGemm(%x, %w, %b) {activation = "relu", transB = 1} @"fc"
  output %y
})";
    auto graph = make_graph(text.c_str(), {"w", "b"});
    const json document = dispatch_with_cost_model(*graph);
    const json& fc = document["nodes"]["fc"];
    EXPECT_EQ(precisions_of(fc), std::set<std::string>{bf16 ? "bf16x2" : "fp32"}) << fc.dump();
    EXPECT_EQ(fc["kernel_extra_error"].get<double>(), 0.0) << fc.dump();
  }
}

TEST(DispatchPass, OptionsAreValidated) {
  EXPECT_EQ(*dispatch::parse_buckets("512:4096:16384"), (std::vector<int64_t>{512, 4096, 16384}));
  EXPECT_TRUE(dispatch::parse_buckets("512,4096,16384").is_ok());
  EXPECT_EQ(*dispatch::parse_buckets("8"), std::vector<int64_t>{8});
  for (const char* bad : {"", "512,", "512:", "4096:512", "0", "a,b", "512:512"})
    EXPECT_FALSE(dispatch::parse_buckets(bad).is_ok()) << bad;
  auto graph = make_graph();
  CompileSettings settings;
  auto options = default_options();
  options["device"] = "tpu";
  PassContext context(settings, options);
  auto result = make_dispatch_pass()->run(*graph, context);
  ASSERT_FALSE(result.is_ok());
  EXPECT_NE(result.status().message().find("device='tpu'"), std::string::npos);
  options = default_options();
  options["device"] = "cpu";
  options["calibration_rows"] = "-1";
  PassContext negative_rows(settings, options);
  result = make_dispatch_pass()->run(*graph, negative_rows);
  ASSERT_FALSE(result.is_ok());
  EXPECT_NE(result.status().message().find("calibration_rows must be >= 0"), std::string::npos) << result.status().message();
}

/// The model with what legitimately differs between two runs removed: the Probe's wall time.
std::string comparable(const std::filesystem::path& path) {
  auto graph = onnx_io::import_model_file(path);
  EXPECT_TRUE(graph.is_ok()) << graph.status().message();
  json document = read_annotations(**graph).value();
  document["model"]["probe"].erase("seconds");
  write_annotations(**graph, document);
  return ir::print_graph(**graph) + (*graph)->metadata[kAnnotationsKey] + (*graph)->metadata[kernels::kKernelPlanKey];
}

// loka-opt's default pipeline ends with dispatch: twice on a zoo model gives
// the same model, annotations and plan (all but model.probe.seconds, a wall
// time), and loka-inspect shows the kernel of every GEMM.
TEST(DispatchPass, LokaOptDefaultPipelineIsDeterministicOnAZooModel) {
  const auto model = source_dir() / "models" / "zoo" / "dlrm_dot";
  const auto dir = make_temp_dir("dispatch_zoo");
  // On a GPU machine dispatch tunes: keep its perf DB out of the user's cache.
  const std::string base = "LOKA_PERF_DB=" + (dir / "perfdb.json").string() + " " + (tools_dir() / "loka-opt").string() +
                           " " + (model / "model.onnx").string() + " --calib " + (model / "calib").string();
  for (const char* out : {"a.onnx", "b.onnx"}) {
    const CommandResult run = run_command(base + " -o " + (dir / out).string());
    ASSERT_EQ(run.exit_code, 0) << run.output;
  }
  const std::string a = comparable(dir / "a.onnx"), b = comparable(dir / "b.onnx");
  EXPECT_TRUE(a == b) << "two loka-opt runs differ beyond the Probe's wall time";
  EXPECT_NE(a.find("cublaslt."), std::string::npos);
  const CommandResult inspect = run_command((tools_dir() / "loka-inspect").string() + " " + (dir / "a.onnx").string() + " --json");
  ASSERT_EQ(inspect.exit_code, 0) << inspect.output;
  const json printed = json::parse(inspect.output.substr(inspect.output.find('{')));
  size_t gemms = 0;
  for (const json& node : printed["nodes"]) {
    const std::string op = node.value("op", "");
    if (op != "Gemm" && op != "MatMul" && op != "QuantizedGemm") continue;
    ++gemms;
    EXPECT_TRUE(node["kernel"].is_string()) << node.dump();
  }
  EXPECT_GT(gemms, 0u);
}

}  // namespace
}  // namespace loka
