// ============================================================================
// tests/dispatch/kernel_plan_runtime_test.cc — the runtime reads the
// "loka.kernels" plan when it loads a model: a valid plan leaves the CPU
// results untouched (it only steers GPU kernels); a malformed one is a load
// error naming the metadata key and line.
// ============================================================================
#include <gtest/gtest.h>

#include <random>

#include "kernels/registry/kernel_plan.h"
#include "model_builder.h"
#include "test_support.h"

namespace loka::testing {
namespace {

ModelBuilder gemm_model(std::mt19937& rng, const std::string& plan) {
  ModelBuilder builder;
  builder.input("x", DType::kFloat32, {-1, 16})
      .initializer("w", random_tensor(rng, {8, 16}))
      .node("Gemm", {"x", "w"}, {"y"}, {{"transB", int64_t{1}}}, "fc")
      .output("y", DType::kFloat32, {-1, 8});
  if (!plan.empty()) {
    auto* property = builder.proto().add_metadata_props();
    property->set_key(kernels::kKernelPlanKey);
    property->set_value(plan);
  }
  return builder;
}

TEST(KernelPlanRuntime, AValidPlanLeavesCpuResultsUntouched) {
  std::mt19937 rng(3), same(3), inputs(5);
  auto plain = gemm_model(rng, "").build_engine();
  auto planned = gemm_model(same, "loka.kernels 1\ndevice\tcost-model\nfc\t512\tcublaslt.bf16.algo0\n").build_engine();
  ASSERT_TRUE(plain.is_ok()) << plain.status().message();
  ASSERT_TRUE(planned.is_ok()) << planned.status().message();
  const Tensor x = random_tensor(inputs, {4, 16});
  auto a = run_once(**plain, {x});
  auto b = run_once(**planned, {x});
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_EQ(max_abs_difference((*a)[0], (*b)[0]), 0.0f);
}

TEST(KernelPlanRuntime, AMalformedPlanIsALoadErrorNamingIt) {
  std::mt19937 rng(3);
  auto engine = gemm_model(rng, "loka.kernels 1\ndevice\tcost-model\nfc\tmany\tcublaslt.bf16.algo0\n").build_engine();
  ASSERT_FALSE(engine.is_ok());
  EXPECT_NE(engine.status().message().find("loka.kernels line 3"), std::string::npos) << engine.status().message();
}

}  // namespace
}  // namespace loka::testing
