// ============================================================================
// tests/cuda/dispatch_gpu_test.cc — Dispatch on the GPU (skipped without one):
// the autotuner measures every candidate with sane errors; a warm perf DB
// makes the dispatch pass >= 10x faster with an identical plan; a BF16
// activation is measured on the values its kernels read; the runtime
// runs dispatched BF16, TF32 and tile-configured kernels, and refuses a foreign
// plan in strict mode.
// ============================================================================
#include <gtest/gtest.h>

#include <algorithm>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <random>

#include "cuda_test_util.h"
#include "gemm_test_keys.h"
#include "kernels/cuda/gemm_autotune.h"
#include "kernels/registry/kernel_plan.h"
#include "model_builder.h"
#include "passes/dispatch/dispatch_pass.h"
#include "passes/ir/shape_inference.h"
#include "passes/ir/text_format.h"
#include "test_support.h"

namespace loka::testing {
namespace {

class DispatchGpuTest : public CudaTest {};

kernels::GemmKey quantized_key() {
  kernels::GemmKey key;
  key.op = "QuantizedGemm";
  key.weight = DType::kFloat8E4M3FN;
  key.activation_scale = kernels::ScaleGranularity::kTensor;
  key.bias = true;
  key.epilogue = cuda::GemmEpilogue::kRelu;
  return key;
}

TEST_F(DispatchGpuTest, TheTimingHoldIsTakenAroundEveryTimingAndNeverNested) {
  // Dispatch holds the GPU's inter-process timing lock through this hook: once per candidate's
  // timing and once for the re-timing of close winners (when any is close: re-timed ones have
  // more samples than the first timing's repeats), never inside another hold.
  int holds = 0, open = 0, nested = 0;
  cuda::AutotuneOptions options;
  options.repeats = 5;
  options.max_algorithms = 2;
  options.hold_gpu_for_timing = [&]() -> std::shared_ptr<void> {
    ++holds;
    nested += open > 0;
    ++open;
    return std::shared_ptr<void>(nullptr, [&](void*) { --open; });
  };
  auto measured = cuda::autotune_gemm(quantized_key(), {512, 256, 512, 1}, options);
  ASSERT_TRUE(measured.is_ok()) << measured.status().message();
  const bool retimed = std::any_of(measured->begin(), measured->end(),
                                   [&](const cuda::GemmMeasurement& m) { return m.samples > options.repeats; });
  EXPECT_EQ(holds, static_cast<int>(measured->size()) + (retimed ? 1 : 0));
  EXPECT_EQ(nested, 0);
  EXPECT_EQ(open, 0) << "every hold was released";
}

TEST_F(DispatchGpuTest, AutotuneMeasuresEveryCandidateWithSaneErrors) {
  cuda::AutotuneOptions options;
  options.repeats = 5;
  options.max_algorithms = 4;
  auto fp8 = cuda::autotune_gemm(quantized_key(), {512, 256, 512, 1}, options);
  ASSERT_TRUE(fp8.is_ok()) << fp8.status().message();
  double fp8_error = -1, bf16_error = -1;
  bool emulated = false;
  for (const cuda::GemmMeasurement& m : *fp8) {
    EXPECT_GT(m.median_us, 0) << m.candidate.name();
    EXPECT_GE(m.samples, 5);  // close winners are timed again
    if (m.candidate.precision == kernels::GemmPrecision::kFp8E4M3 && !m.candidate.fast_accum) fp8_error = m.rel_error;
    if (m.candidate.precision == kernels::GemmPrecision::kBf16) bf16_error = m.rel_error;
    emulated |= m.candidate.precision == kernels::GemmPrecision::kFp8Emulated;
    EXPECT_LT(m.rel_error, 0.1) << m.candidate.name();
  }
  EXPECT_GT(fp8_error, 0.005);  // E4M3 rounding is visible
  size_t tiled = 0, cudnn = 0;
  for (const cuda::GemmMeasurement& m : *fp8) {
    tiled += m.candidate.tile > 0;
    cudnn += m.candidate.library == kernels::GemmLibrary::kCudnn;
  }
  std::printf("[ info ] of %zu measured FP8-key candidates, %zu are explicit tile configurations, %zu cuDNN graphs\n",
              fp8->size(), tiled, cudnn);
  EXPECT_GT(bf16_error, 0);
  EXPECT_TRUE(emulated);

  kernels::GemmKey fp32;
  fp32.op = "Gemm";
  auto exact = cuda::autotune_gemm(fp32, {4096, 256, 512, 1}, options);
  ASSERT_TRUE(exact.is_ok()) << exact.status().message();
  for (const cuda::GemmMeasurement& m : *exact) {
    if (m.candidate.precision == kernels::GemmPrecision::kFp32) {
      EXPECT_LT(m.rel_error, 1e-5) << m.candidate.name();
    } else if (m.candidate.precision == kernels::GemmPrecision::kBf16) {
      EXPECT_LT(m.rel_error, 0.01) << m.candidate.name();
    }
  }
}

TEST_F(DispatchGpuTest, AutotuneOfABf16ActivationMeasuresOnTheValuesTheKernelsRead) {
  // The synthetic X is rounded to BF16 and the reference reads the rounded values: FP32 (X widened
  // exactly, then the reference's own GEMM) is within summation order of it, as for an FP32 X;
  // against the unrounded X it would be off by BF16's rounding, up to 2^-8. No FP8 candidate.
  cuda::AutotuneOptions options;
  options.repeats = 3;
  options.max_algorithms = 2;
  options.cudnn_engines = 2;
  auto measured = cuda::autotune_gemm(bf16_activation_gemm_key(), {512, 256, 512, 1}, options);
  ASSERT_TRUE(measured.is_ok()) << measured.status().message();
  bool fp32 = false, bf16 = false;
  for (const cuda::GemmMeasurement& m : *measured) {
    SCOPED_TRACE(m.candidate.name());
    EXPECT_NE(m.candidate.precision, kernels::GemmPrecision::kFp8E4M3);
    EXPECT_NE(m.candidate.precision, kernels::GemmPrecision::kFp8Emulated);
    if (m.candidate.precision == kernels::GemmPrecision::kFp32) {
      fp32 = true;
      EXPECT_LT(m.rel_error, 1e-5);
    } else if (m.candidate.precision == kernels::GemmPrecision::kBf16) {
      bf16 = true;
      EXPECT_LT(m.rel_error, 0.01);
    }
  }
  EXPECT_TRUE(fp32 && bf16);
}

constexpr const char* kGraph = R"(graph "mlp" {
  opset "" 17
  input %x : f32[batch,1024]
  input %w1 : f32[1024,1024]
  input %w2 : f32[512,1024]
  input %w3 : f32[512,256]
  %h = Gemm(%x, %w1) {transB = 1} @"fc1"
  %g = Gemm(%h, %w2) {transB = 1} @"fc2"
  %y = MatMul(%g, %w3) @"fc3"
  output %y
})";

/// Runs dispatch{device=cuda,perf_db=DB} on a fresh graph; returns (seconds, plan text).
std::pair<double, std::string> dispatch_on_gpu(const std::filesystem::path& db) {
  auto graph = ir::parse_graph(kGraph);
  EXPECT_TRUE(graph.is_ok());
  for (const char* name : {"w1", "w2", "w3"}) {  // weights: constants, as in a real model
    ir::Value* value = (*graph)->find_value(name);
    (*graph)->remove_input(value);
    (*graph)->set_initializer(value, Tensor::zeros(DType::kFloat32, value->type().static_shape()));
  }
  EXPECT_TRUE(ir::infer_shapes(**graph).is_ok());
  std::map<std::string, std::string> options;
  for (const PassOption& option : dispatch_pass_info().options) options[option.name] = option.default_value;
  options["device"] = "cuda";
  options["perf_db"] = db.string();
  CompileSettings settings;
  PassContext context(settings, options);
  const auto start = std::chrono::steady_clock::now();
  auto changed = make_dispatch_pass()->run(**graph, context);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(changed.is_ok()) << changed.status().message();
  return {seconds, (*graph)->metadata[kernels::kKernelPlanKey] + (*graph)->metadata["loka.annotations"]};
}

TEST_F(DispatchGpuTest, WarmPerfDbIsTenTimesFasterAndGivesTheSamePlan) {
  const auto db = make_temp_dir("dispatch_gpu") / "perfdb.json";
  const auto [cold, cold_plan] = dispatch_on_gpu(db);
  const auto [warm, warm_plan] = dispatch_on_gpu(db);
  std::printf("dispatch pass: cold %.3f s, warm %.4f s (%.0fx)\n", cold, warm, cold / warm);
  EXPECT_GE(cold, 10 * warm);
  EXPECT_EQ(cold_plan, warm_plan);
  EXPECT_EQ(cold_plan.find("cost-model"), std::string::npos);
}

/// y = x W^T + b with W [32, 64], and a dispatch plan naming `kernel` measured on `device`.
ModelBuilder gemm_model(const std::string& device, const std::string& kernel) {
  std::mt19937 rng(7);
  ModelBuilder builder;
  builder.input("x", DType::kFloat32, {-1, 64})
      .initializer("w", random_tensor(rng, {32, 64}))
      .initializer("b", random_tensor(rng, {32}))
      .node("Gemm", {"x", "w", "b"}, {"y"}, {{"transB", int64_t{1}}}, "fc")
      .output("y", DType::kFloat32, {-1, 32});
  auto* property = builder.proto().add_metadata_props();
  property->set_key(kernels::kKernelPlanKey);
  property->set_value("loka.kernels 1\ndevice\t" + device + "\nfc\t64\t" + kernel + "\n");
  return builder;
}

/// The largest difference between the CPU FP32 reference and the CUDA runtime running the plan's
/// `kernel` on random x [64,64], strictly (a fallback to the default FP32 kernel is an error).
Result<float> dispatched_difference(const std::string& kernel, unsigned seed) {
  std::mt19937 rng(seed);
  const Tensor x = random_tensor(rng, {64, 64});
  LOKA_ASSIGN_OR_RETURN(auto reference, gemm_model("cost-model", "cublaslt.fp32.algo0").build_engine());
  LOKA_ASSIGN_OR_RETURN(const std::vector<Tensor> expected, run_once(*reference, {x}));
  EngineOptions options;
  options.device = Device::kCuda;
  options.max_batch = 64;
  ::setenv("LOKA_STRICT_KERNELS", "1", 1);
  auto engine = gemm_model("cost-model", kernel).build_engine(options);
  Result<std::vector<Tensor>> got = engine.is_ok() ? run_once(**engine, {x}) : Result<std::vector<Tensor>>(engine.status());
  ::unsetenv("LOKA_STRICT_KERNELS");
  LOKA_RETURN_IF_ERROR(got.status());
  return max_abs_difference((*got)[0], expected[0]);
}

TEST_F(DispatchGpuTest, RuntimeRunsTheDispatchedBf16Kernel) {
  const Result<float> difference = dispatched_difference("cublaslt.bf16.algo0", 11);
  ASSERT_TRUE(difference.is_ok()) << difference.status().message();
  EXPECT_GT(*difference, 0.0f);   // BF16 operands: not the FP32 result
  EXPECT_LT(*difference, 0.05f);  // |y| ~ 5, BF16 rounding up to 2^-8 relative
}

TEST_F(DispatchGpuTest, RuntimeRunsTheDispatchedTf32Kernel) {
  const Result<float> difference = dispatched_difference("cublaslt.tf32.algo0", 17);
  ASSERT_TRUE(difference.is_ok()) << difference.status().message();
  // |x|, |w| <= 1, K = 64: Σ|x·w| <= 64, and TF32 moves each product by at most 2^-9 of itself.
  EXPECT_LT(*difference, 64 * std::ldexp(1.0f, -9));
}

TEST_F(DispatchGpuTest, RuntimeRunsADispatchedTileConfiguration) {
  // TF32 with tiles every tensor-core algorithm has (64x64, 128x128): strictly, so a refused
  // configuration is an error naming the tile, never a silent fallback.
  int ran = 0;
  std::string refusals;
  for (const char* kernel : {"cublaslt.tf32.algo0.tile15", "cublaslt.tf32.algo0.tile20"}) {
    const Result<float> difference = dispatched_difference(kernel, 19);
    if (!difference.is_ok()) {
      EXPECT_NE(difference.status().message().find("refuses tile"), std::string::npos) << difference.status().message();
      refusals += "\n  " + difference.status().message();
      continue;
    }
    ++ran;
    EXPECT_LT(*difference, 64 * std::ldexp(1.0f, -9)) << kernel;  // as RuntimeRunsTheDispatchedTf32Kernel
  }
  EXPECT_GT(ran, 0) << "no TF32 tile configuration ran:" << refusals;
}

TEST_F(DispatchGpuTest, AForeignPlanFallsBackOrFailsInStrictMode) {
  std::mt19937 rng(13);
  const Tensor x = random_tensor(rng, {64, 64});
  EngineOptions options;
  options.device = Device::kCuda;
  options.max_batch = 64;
  const std::string foreign = "Some Other GPU / driver 1 / cuBLASLt 1";
  ::setenv("LOKA_STRICT_KERNELS", "1", 1);
  auto strict = gemm_model(foreign, "cublaslt.fp32.algo3").build_engine(options);
  Result<std::vector<Tensor>> refused = strict.is_ok() ? run_once(**strict, {x}) : Result<std::vector<Tensor>>(strict.status());
  ::unsetenv("LOKA_STRICT_KERNELS");
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("tuned on Some Other GPU"), std::string::npos) << refused.status().message();
  auto lenient = gemm_model(foreign, "cublaslt.fp32.algo3").build_engine(options);
  ASSERT_TRUE(lenient.is_ok()) << lenient.status().message();
  auto ran = run_once(**lenient, {x});
  EXPECT_TRUE(ran.is_ok()) << ran.status().message();  // algorithm 0 of the family, with a warning
}

}  // namespace
}  // namespace loka::testing
