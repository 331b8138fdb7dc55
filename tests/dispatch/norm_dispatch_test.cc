// ============================================================================
// tests/dispatch/norm_dispatch_test.cc — norm kernels in the registry and in
// the `dispatch` pass: names, keys and rules; a complete cost-model plan for
// LayerNormalization, LayerNormQuant and ResidualLayerNorm; forms the CUDA
// runtime has no kernel for recorded with a reason (negative twins); measured
// choices through the perf DB (a faster cuDNN graph taken only when its error
// matches LoKA's kernel's; a warm DB answers without measuring).
// ============================================================================
#include <gtest/gtest.h>

#include "kernels/registry/cost_model.h"
#include "kernels/registry/kernel_plan.h"
#include "kernels/registry/norm_kernel_key.h"
#include "passes/dispatch/dispatch_pass.h"
#include "passes/dispatch/norm_problems.h"
#include "passes/ir/shape_inference.h"
#include "passes/ir/text_format.h"
#include "passes/pass_manager.h"
#include "passes/probe/annotations.h"

namespace loka {
namespace {

using kernels::NormCandidate;
using kernels::NormKey;
using kernels::NormLibrary;
using kernels::NormShape;
using nlohmann::json;

TEST(NormRegistry, NamesRoundTripAndUnknownNamesAreRefused) {
  for (const NormCandidate& c : {NormCandidate{}, NormCandidate{NormLibrary::kCudnn, 0}, NormCandidate{NormLibrary::kCudnn, 7}}) {
    auto parsed = kernels::parse_norm_candidate(c.name());
    ASSERT_TRUE(parsed.is_ok()) << c.name();
    EXPECT_EQ(*parsed, c);
  }
  EXPECT_EQ(NormCandidate{}.name(), "loka.layernorm");
  EXPECT_EQ((NormCandidate{NormLibrary::kCudnn, 1}.name()), "cudnn.layernorm.engine1");
  for (const char* bad : {"cudnn.layernorm.engine", "cudnn.layernorm.engine-1", "cudnn.layernorm.engine1x", "loka.norm",
                          "cublaslt.fp32.algo0"}) {
    auto parsed = kernels::parse_norm_candidate(bad);
    ASSERT_FALSE(parsed.is_ok()) << bad;
    EXPECT_NE(parsed.status().message().find(bad), std::string::npos);
  }
}

TEST(NormRegistry, KeysNameWhatTheyCompute) {
  EXPECT_EQ((NormKey{"LayerNormalization", 128, true, false, false}.to_string()), "LayerNormalization:c=128:bias->f32");
  EXPECT_EQ((NormKey{"ResidualLayerNorm", 64, true, true, false}.to_string()), "ResidualLayerNorm:c=64:bias+residual->f32");
  EXPECT_EQ((NormKey{"LayerNormQuant", 7, false, false, true}.to_string()), "LayerNormQuant:c=7->f8e4m3fn");
  EXPECT_EQ(NormShape{4096}.to_string(), "rows=4096");
}

TEST(NormRegistry, ExpansionIsLokaFirstThenCudnnEngines) {
  const NormKey key{"LayerNormalization", 128, true, false, false};
  const auto none = kernels::norm_candidates(key, {512}, 0);
  ASSERT_EQ(none.size(), 1u);
  EXPECT_EQ(none[0].library, NormLibrary::kLoka);
  const auto two = kernels::norm_candidates(key, {512}, 2);
  ASSERT_EQ(two.size(), 3u);
  EXPECT_EQ(two[1].name(), "cudnn.layernorm.engine0");
  EXPECT_EQ(two[2].name(), "cudnn.layernorm.engine1");
}

TEST(NormRegistry, RulesSayWhyNot) {
  const NormShape rows{8};
  const auto message = [&](const NormCandidate& c, const NormKey& key, NormShape shape) {
    return kernels::can_implement(c, key, shape).message();
  };
  EXPECT_NE(message({}, {"Softmax", 8}, rows).find("not a norm op"), std::string::npos);
  EXPECT_NE(message({}, {"LayerNormalization", 0}, rows).find("width must be >= 1"), std::string::npos);
  EXPECT_NE(message({}, {"LayerNormalization", 8}, NormShape{-1}).find("rows must be >= 0"), std::string::npos);
  EXPECT_NE(message({}, {"LayerNormQuant", 8, false, true, true}, rows).find("takes no residual"), std::string::npos);
  EXPECT_NE(message({NormLibrary::kCudnn, -2}, {"LayerNormalization", 8}, rows).find("engine index"), std::string::npos);
  // LayerNormQuant's E4M3 output: LoKA's kernel only (cuDNN's graph faulted).
  EXPECT_NE(message({NormLibrary::kCudnn, 0}, {"LayerNormQuant", 8, false, false, true}, rows).find("E4M3"),
            std::string::npos);
  EXPECT_EQ(kernels::norm_candidates({"LayerNormQuant", 8, false, false, true}, rows, 2).size(), 1u);
  EXPECT_TRUE(kernels::can_implement(NormCandidate{}, {"LayerNormalization", 1}, NormShape{1}).is_ok());
  EXPECT_TRUE(kernels::norm_candidates({"LayerNormalization", 0}, rows, 2).empty());
}

TEST(NormCostModel, GrowsWithTheBytesMoved) {
  const NormKey plain{"LayerNormalization", 128, true, false, false};
  const NormKey residual{"ResidualLayerNorm", 128, true, true, false};
  const NormKey quant{"LayerNormQuant", 128, true, false, true};
  const double t = kernels::model_norm_time_us(plain, {262144});
  EXPECT_GT(t, kernels::model_norm_time_us(plain, {512}));
  EXPECT_GT(kernels::model_norm_time_us(residual, {262144}), t);
  EXPECT_LT(kernels::model_norm_time_us(quant, {262144}), t);
  // 262144 x 128 values, 8 bytes each, at 4.2 TB/s: 64 µs plus the launch.
  EXPECT_NEAR(t, 3.0 + 262144.0 * 128 * 8 / 4.2e12 * 1e6, 0.5);
}

constexpr const char* kNorms = R"(graph "norms" {
  opset "" 17
  opset "ai.loka" 1
  input %x : f32[batch,16,64]
  input %r : f32[batch,16,64]
  input %g : f32[64]
  input %b : f32[64]
  input %q_scale : f32[]
  input %g1 : f32[1]
  input %g2 : f32[16,64]
  input %z : f32[batch,0,64]
  %n1 = LayerNormalization(%x, %g, %b) {axis = -1} @"plain"
  %n2 = ai.loka::ResidualLayerNorm(%n1, %r, %g, %b) @"residual"
  %n3 = ai.loka::LayerNormQuant(%n2, %g, %b, %q_scale) @"quant"
  %n4 = LayerNormalization(%n1, %g1) {axis = -1} @"broadcast_scale"
  %n5, %mean = LayerNormalization(%n1, %g) {axis = -1} @"mean_read"
  %n6 = LayerNormalization(%x, %g2) {axis = 1} @"two_axes"
  %n7 = LayerNormalization(%z, %g) {axis = -1} @"empty"
  output %n3
  output %n4
  output %n5
  output %mean
  output %n6
  output %n7
})";

std::unique_ptr<ir::Graph> norm_graph() {
  auto graph = ir::parse_graph(kNorms);
  EXPECT_TRUE(graph.is_ok()) << graph.status().message();
  for (const char* name : {"g", "b", "q_scale", "g1", "g2"}) {
    ir::Value* value = (*graph)->find_value(name);
    (*graph)->remove_input(value);
    (*graph)->set_initializer(value, value->type().rank() == 0 ? Tensor::scalar_float(1.0f)
                                                               : Tensor::zeros(DType::kFloat32, value->type().static_shape()));
  }
  EXPECT_TRUE(ir::infer_shapes(**graph).is_ok());
  return std::move(graph).value();
}

std::map<std::string, std::string> default_options() {
  std::map<std::string, std::string> options;
  for (const PassOption& option : dispatch_pass_info().options) options[option.name] = option.default_value;
  return options;
}

json dispatch_norm_graph(ir::Graph& graph, dispatch::NormTimer& norm_timer) {
  CompileSettings settings;
  PassContext context(settings, default_options());
  auto timer = dispatch::make_cost_model_timer();
  auto changed = dispatch::dispatch_kernels(graph, context, *timer, norm_timer, {});
  EXPECT_TRUE(changed.is_ok()) << changed.status().message();
  return read_annotations(graph).value();
}

TEST(NormDispatch, CostModelPlansEveryNormAndBucket) {
  auto graph = norm_graph();
  auto timer = dispatch::make_cost_model_norm_timer();
  const json document = dispatch_norm_graph(*graph, *timer);
  const json& nodes = document["nodes"];
  for (const char* name : {"plain", "residual", "quant", "two_axes"}) {
    const json& node = nodes[name];
    EXPECT_EQ(node["kernel"], "loka.layernorm") << name;
    EXPECT_EQ(node["kernel_source"], "cost_model");
    ASSERT_EQ(node["kernels"].size(), 3u) << name;
    EXPECT_GT(node["kernels"]["16384"]["time_us"].get<double>(), node["kernels"]["512"]["time_us"].get<double>());
  }
  EXPECT_EQ(nodes["quant"]["kernel_precision"], "fp8_e4m3");
  EXPECT_EQ(nodes["plain"]["kernels"]["4096"]["shape"], "rows=65536");
  // axis 1 of [batch,16,64]: 16 x 64 columns per row, batch rows.
  EXPECT_EQ(nodes["two_axes"]["kernels"]["4096"]["shape"], "rows=4096");
  EXPECT_EQ(document["model"]["dispatch"]["norm_nodes"], 7);
  EXPECT_EQ(document["model"]["dispatch"]["dispatched_norm_nodes"], 4);

  auto plan = kernels::parse_kernel_plan(graph->metadata[kernels::kKernelPlanKey]);
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  ASSERT_EQ(plan->nodes["residual"].size(), 3u);
  EXPECT_EQ(plan->nodes["residual"][1], (kernels::KernelChoice{4096 * 16, "loka.layernorm"}));
}

TEST(NormDispatch, NegativeTwinFormsWithoutACudaKernelGetAReasonNotAKernel) {
  auto graph = norm_graph();
  auto timer = dispatch::make_cost_model_norm_timer();
  const json nodes = dispatch_norm_graph(*graph, *timer)["nodes"];
  EXPECT_FALSE(nodes["broadcast_scale"].contains("kernel"));
  EXPECT_NE(nodes["broadcast_scale"]["kernel_reason"].get<std::string>().find("broadcast Scale/B"), std::string::npos);
  EXPECT_FALSE(nodes["mean_read"].contains("kernel"));
  EXPECT_NE(nodes["mean_read"]["kernel_reason"].get<std::string>().find("Mean / InvStdDev"), std::string::npos);
  // No rows: nothing to time, and a plan line of 0 rows would not load.
  EXPECT_FALSE(nodes["empty"].contains("kernel"));
  EXPECT_NE(nodes["empty"]["kernel_reason"].get<std::string>().find("nothing to normalize"), std::string::npos);
  auto plan = kernels::parse_kernel_plan(graph->metadata[kernels::kKernelPlanKey]).value();
  EXPECT_EQ(plan.nodes.count("empty"), 0u);
  EXPECT_EQ(plan.nodes.count("broadcast_scale"), 0u);
  EXPECT_EQ(plan.nodes.count("mean_read"), 0u);
}

/// A fake GPU: cuDNN engine 0 twice as fast as LoKA's kernel with the same error, engine 1
/// faster still with an error far above FP32 rounding (a graph that, say, dropped the bias).
dispatch::NormMeasureFn fake_norm_gpu(int* calls) {
  return [calls](const NormKey& key, const NormShape& shape) -> Result<std::vector<dispatch::NormTiming>> {
    ++*calls;
    std::vector<dispatch::NormTiming> out;
    const double base = static_cast<double>(shape.rows) * static_cast<double>(key.cols) / 1e5;
    for (const NormCandidate& c : kernels::norm_candidates(key, shape, 2)) {
      if (c.library == NormLibrary::kLoka) out.push_back({c, base, 1e-7});
      else if (c.engine == 0) out.push_back({c, base / 2, 1.02e-7});
      else out.push_back({c, base / 4, 1e-3});
    }
    return out;
  };
}

TEST(NormDispatch, MeasuredTakesTheFastestWithLokasErrorAndAWarmDbMeasuresNothing) {
  dispatch::PerfDb db;
  dispatch::PerfDbUse use;
  int calls = 0;
  auto timer = dispatch::make_perf_db_norm_timer(db, {"Test GPU", "1", "2"}, fake_norm_gpu(&calls), use, 2);
  auto graph = norm_graph();
  const json nodes = dispatch_norm_graph(*graph, *timer)["nodes"];
  for (const char* name : {"plain", "residual", "two_axes"}) {
    EXPECT_EQ(nodes[name]["kernel"], "cudnn.layernorm.engine0") << name;
    EXPECT_EQ(nodes[name]["kernel_runner_up"], "loka.layernorm") << name;
    EXPECT_EQ(nodes[name]["kernels"]["512"]["candidates"], 3);
  }
  // Negative twin: LayerNormQuant's E4M3 output has LoKA's kernel alone.
  EXPECT_EQ(nodes["quant"]["kernel"], "loka.layernorm");
  EXPECT_TRUE(nodes["quant"]["kernel_runner_up"].is_null());
  EXPECT_GT(calls, 0);
  const int cold_calls = calls;

  auto warm_graph = norm_graph();
  dispatch::PerfDbUse warm_use;
  auto warm = dispatch::make_perf_db_norm_timer(db, {"Test GPU", "1", "2"}, fake_norm_gpu(&calls), warm_use, 2);
  dispatch_norm_graph(*warm_graph, *warm);
  EXPECT_EQ(calls, cold_calls);
  EXPECT_GT(warm_use.hits, 0u);
  EXPECT_EQ(warm_graph->metadata[kernels::kKernelPlanKey], graph->metadata[kernels::kKernelPlanKey]);
}

TEST(NormDispatch, NegativeTwinWithoutCudnnEnginesLokasKernelIsChosen) {
  dispatch::PerfDb db;
  dispatch::PerfDbUse use;
  int calls = 0;
  // The DB holds cuDNN records, but a run offering no cuDNN engines must not bring them back.
  auto cold = dispatch::make_perf_db_norm_timer(db, {"Test GPU", "1", "2"}, fake_norm_gpu(&calls), use, 2);
  auto first = norm_graph();
  dispatch_norm_graph(*first, *cold);
  auto loka_only = dispatch::make_perf_db_norm_timer(db, {"Test GPU", "1", "2"}, fake_norm_gpu(&calls), use, 0);
  auto graph = norm_graph();
  const json nodes = dispatch_norm_graph(*graph, *loka_only)["nodes"];
  EXPECT_EQ(nodes["plain"]["kernel"], "loka.layernorm");
  EXPECT_TRUE(nodes["plain"]["kernel_runner_up"].is_null());
}

}  // namespace
}  // namespace loka
