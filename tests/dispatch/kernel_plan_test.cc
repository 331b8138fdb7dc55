// ============================================================================
// tests/dispatch/kernel_plan_test.cc — the "loka.kernels" text the runtime
// reads: round trip, nearest-M choice, errors naming the line.
// ============================================================================
#include <gtest/gtest.h>

#include "kernels/registry/kernel_plan.h"

namespace loka::kernels {
namespace {

TEST(KernelPlan, RoundTripsAndChoosesTheNearestM) {
  KernelPlan plan;
  plan.device = "NVIDIA H100 80GB HBM3 / driver 13000 / cuBLASLt 130100";
  plan.nodes["fc1"] = {{512, "cublaslt.bf16.algo0"}, {4096, "cublaslt.fp8.e4m3.tensor.algo3"},
                       {16384, "cublaslt.fp8.e4m3.tensor.algo1"}};
  plan.nodes["top"] = {{512, "cublaslt.fp32.algo0"}};
  auto parsed = parse_kernel_plan(plan.to_text());
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().message();
  EXPECT_EQ(parsed->device, plan.device);
  EXPECT_EQ(parsed->nodes, plan.nodes);
  EXPECT_EQ(parsed->choose("fc1", 4096)->candidate, "cublaslt.fp8.e4m3.tensor.algo3");
  EXPECT_EQ(parsed->choose("fc1", 64)->candidate, "cublaslt.bf16.algo0");
  EXPECT_EQ(parsed->choose("fc1", 10000)->candidate, "cublaslt.fp8.e4m3.tensor.algo3");
  EXPECT_EQ(parsed->choose("fc1", 12000)->candidate, "cublaslt.fp8.e4m3.tensor.algo1");
  EXPECT_EQ(parsed->choose("top", 99999)->candidate, "cublaslt.fp32.algo0");
  EXPECT_EQ(parsed->choose("absent", 512), nullptr);
}

TEST(KernelPlan, BadTextNamesTheLine) {
  for (const char* text : {"", "loka.kernels 2\n", "loka.kernels 1\ndevice\tx\nfc1 512 name\n",
                           "loka.kernels 1\ndevice\tx\nfc1\t-4\tname\n", "loka.kernels 1\ndevice\tx\nfc1\t512\t\n"}) {
    auto parsed = parse_kernel_plan(text);
    ASSERT_FALSE(parsed.is_ok()) << text;
    EXPECT_NE(parsed.status().message().find("line"), std::string::npos) << parsed.status().message();
  }
}

}  // namespace
}  // namespace loka::kernels
