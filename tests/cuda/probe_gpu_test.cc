// ============================================================================
// tests/cuda/probe_gpu_test.cc — the Probe's GPU path.
//
// ai.loka.ProbeFakeQuant on the device equals the CPU kernel bit for bit (every
// mode, both formats, awkward shapes, non-finite values; Mode read on the device
// under a replayed CUDA graph), and the Probe with device=cuda (the switched model)
// reaches the CPU hooks' verdicts on the zoo: the GPU's FP32 GEMMs sum in
// another order, so errors agree closely, not bit for bit.
// ============================================================================
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cuda_test_util.h"
#include "loka/engine.h"
#include "loka/session.h"
#include "model_builder.h"
#include "passes/probe_test_util.h"

namespace loka {
namespace {

using Attrs = std::vector<std::pair<std::string, testing::TestAttribute>>;

class CudaProbe : public testing::CudaTest {};

Tensor mode_tensor(int32_t site_mode) {
  Tensor t = Tensor::zeros(DType::kInt32, {2});
  t.data<int32_t>()[1] = site_mode;
  return t;
}

TEST_F(CudaProbe, FakeQuantSwitchMatchesTheCpuBitForBit) {
  std::mt19937 rng(20261125);
  // The FP8 forms, then BF16 storage (form 4) beside two of them.
  for (const std::vector<int64_t>& forms : {std::vector<int64_t>{1, 2, 3}, std::vector<int64_t>{4, 2, 1}})
  for (const bool e5m2 : {false, true}) {
    for (const Shape& shape : {Shape{1, 1, 1}, Shape{7, 5, 17}, Shape{3, 40, 40}, Shape{65536, 1, 13}, Shape{2, 3, 1000}}) {
      SCOPED_TRACE("shape " + shape_to_string(shape) + (e5m2 ? " e5m2" : " e4m3") + " form " + std::to_string(forms[0]));
      const int64_t format = e5m2 ? 1 : 0;
      const Attrs attributes = {{"site", int64_t{1}},
                                {"forms", forms},
                                {"formats", std::vector<int64_t>{format, format, format}},
                                {"scales", std::vector<float>{0.03f, 1.0f, 1.0f}}};
      testing::ModelBuilder builder(17);
      builder.opset("ai.loka", 1);
      builder.input("x", DType::kFloat32, shape).input("mode", DType::kInt32, {2});
      builder.node("ProbeFakeQuant", {"x", "mode"}, {"y"}, attributes, "switch", "ai.loka").output_unshaped("y", DType::kFloat32);
      auto cpu = builder.build_engine();
      ASSERT_TRUE(cpu) << cpu.status().message();
      EngineOptions options;
      options.device = Device::kCuda;
      auto gpu = builder.build_engine(options);
      ASSERT_TRUE(gpu) << gpu.status().message();
      auto cpu_session = (*cpu)->new_session();
      auto gpu_session = (*gpu)->new_session();
      Tensor x = Tensor::zeros(DType::kFloat32, shape);
      std::normal_distribution<float> normal(0.0f, 2.0f);
      for (float& v : x.values<float>()) v = normal(rng) * (rng() % 7 == 0 ? 100.0f : 1.0f);
      if (x.element_count() > 3) {
        x.values<float>()[1] = NAN;
        x.values<float>()[2] = INFINITY;
      }
      for (int32_t mode = 0; mode <= 3; ++mode) {  // the same graph replays with each Mode
        const std::vector<Tensor> inputs{x, mode_tensor(mode)};
        auto expected = cpu_session->run(inputs);
        ASSERT_TRUE(expected) << expected.status().message();
        auto actual = gpu_session->run(inputs);
        ASSERT_TRUE(actual) << actual.status().message();
        testing::expect_close((*actual)[0], (*expected)[0], 0);  // bit for bit; NaN payloads may differ
      }
      const std::vector<Tensor> bad_inputs{x, mode_tensor(5)};
      auto bad = gpu_session->run(bad_inputs);
      ASSERT_FALSE(bad);
      EXPECT_NE(bad.status().message().find("Mode"), std::string::npos) << bad.status().message();
    }
  }
}

class CudaProbeZoo : public testing::CudaTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(CudaProbeZoo, GpuSwitchesReachTheCpuHooksVerdicts) {
  const nlohmann::json cpu = testing::probe_zoo_annotations(GetParam(), "device=cpu,method=hooks");
  const nlohmann::json gpu = testing::probe_zoo_annotations(GetParam(), "device=cuda");
  ASSERT_TRUE(cpu.contains("nodes") && gpu.contains("nodes"));
  EXPECT_EQ(gpu["model"]["probe"]["device"], "cuda");
  size_t sites = 0, same_verdict = 0;
  for (const auto& [name, node] : cpu["nodes"].items()) {
    if (!node.contains("verdict")) continue;
    ++sites;
    const nlohmann::json& other = gpu["nodes"][name];
    same_verdict += node["verdict"] == other["verdict"];
    const double want = node["recipes"]["e4m3_tensor"]["error"]["rel_l2_mean"];
    const double got = other["recipes"]["e4m3_tensor"]["error"]["rel_l2_mean"];
    EXPECT_NEAR(got, want, 0.05 * want + 1e-6) << name;
    const double local_want = node["recipes"]["e4m3_tensor"]["local_error"]["rel_l2_mean"];
    const double local_got = other["recipes"]["e4m3_tensor"]["local_error"]["rel_l2_mean"];
    EXPECT_NEAR(local_got, local_want, 0.05 * local_want + 1e-6) << name;
  }
  EXPECT_GE(sites, 5u);
  EXPECT_GE(same_verdict * 10, sites * 9) << same_verdict << " of " << sites << " verdicts agree";
}

INSTANTIATE_TEST_SUITE_P(Zoo, CudaProbeZoo, ::testing::Values("dlrm_dot", "dlrm_dcnv2", "wukong", "dhen", "attention_ranker"));

}  // namespace
}  // namespace loka
