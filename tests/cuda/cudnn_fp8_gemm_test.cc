// ============================================================================
// tests/cuda/cudnn_fp8_gemm_test.cc — the cuDNN FP8 graph candidates
// (cudnn.fp8.e4m3.tensor.engineN, kernels/cuda/cudnn_fp8_gemm.h) through
// GemmKernel, as Dispatch and the runtime run them: against the CPU
// reference with every fused step (scales, bias, ReLU, residual; E4M3 and
// quantized FP32 activations), on one row, awkward sizes and M = 4096;
// inside a CUDA graph; and a configuration cuDNN does not have is a one-line
// error. Skips visibly without a GPU or without cuDNN; a graph this cuDNN
// cannot build skips with cuDNN's reason (the candidate is then not offered).
// ============================================================================
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "cuda/fp8_candidate_util.h"
#include "gemm_test_keys.h"
#include "kernels/cuda/cudnn_fp8_gemm.h"
#include "kernels/cuda/gemm_candidate.h"
#include "loka/float8.h"

namespace loka::testing {
namespace {

using kernels::GemmCandidate;
using kernels::GemmKey;
using kernels::GemmShape;

class CudnnFp8GemmTest : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    const std::string reason = cuda::cudnn_unavailable_reason();
    if (!reason.empty()) GTEST_SKIP() << "cuDNN test skipped: " << reason;
  }
};

GemmCandidate cudnn_engine(int engine) {
  GemmCandidate c{kernels::GemmPrecision::kFp8E4M3, kernels::ScaleGranularity::kTensor, engine, false};
  c.library = kernels::GemmLibrary::kCudnn;
  return c;
}

/// A QuantizedGemm key: E4M3 or FP32 (per-tensor scale) activation, bias, ReLU, residual as asked.
GemmKey key_with(DType input, bool bias, bool relu, bool residual) {
  GemmKey key = quantized_gemm_key(kernels::ScaleGranularity::kTensor, input);
  key.bias = bias;
  key.epilogue = relu ? cuda::GemmEpilogue::kRelu : cuda::GemmEpilogue::kNone;
  key.residual = residual;
  return key;
}

/// Whether engine 0 plans here; a refusal must be one line naming cuDNN (what create() promises).
bool plans_here(const GemmKey& key, const GemmShape& shape, std::string& refusals) {
  auto planned = cuda::GemmKernel::create(cudnn_engine(0), key, shape, {});
  if (planned) return true;
  const std::string message = planned.status().message();
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_NE(message.find("cuDNN"), std::string::npos) << message;
  refusals += "\n  " + key.to_string() + " " + shape.to_string() + ": " + message;
  return false;
}

TEST_F(CudnnFp8GemmTest, MatchesTheReferenceWithEveryFusedStep) {
  const std::vector<GemmKey> keys = {
      key_with(DType::kFloat8E4M3FN, true, true, false),  // LayerNormQuant -> QuantizedGemm + bias + ReLU
      key_with(DType::kFloat32, true, true, false),       // quantized first (per-tensor static scale)
      key_with(DType::kFloat32, false, false, true),      // scales and a residual only
      key_with(DType::kFloat8E4M3FN, true, false, true),  // bias and residual, no activation
  };
  int planned = 0;
  std::string refusals;
  for (const GemmKey& key : keys)
    for (const GemmShape shape : {GemmShape{1, 256, 48, 1}, GemmShape{40, 272, 80, 1}, GemmShape{4096, 128, 256, 1}}) {
      SCOPED_TRACE(key.to_string() + " " + shape.to_string());
      if (!plans_here(key, shape, refusals)) continue;
      ++planned;
      EXPECT_EQ(fp8_candidate_mismatches(cudnn_engine(0), key, shape), 0u);
    }
  if (planned == 0) GTEST_SKIP() << "this cuDNN builds no FP8 matmul graph here:" << refusals;
  if (!refusals.empty()) std::printf("[ info ] cuDNN graphs refused here:%s\n", refusals.c_str());
}

TEST_F(CudnnFp8GemmTest, ReplaysInsideACudaGraphAsItRunsEagerly) {
  const GemmKey key = key_with(DType::kFloat8E4M3FN, true, true, false);
  const GemmShape shape{512, 256, 512, 1};
  std::string refusals;
  if (!plans_here(key, shape, refusals)) GTEST_SKIP() << "this cuDNN builds no FP8 matmul graph here:" << refusals;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 60.0f);
  std::vector<uint8_t> x(static_cast<size_t>(shape.m * shape.k)), w(static_cast<size_t>(shape.n * shape.k));
  for (uint8_t& v : x) v = float_to_fp8e4m3fn(normal(rng));
  for (uint8_t& v : w) v = float_to_fp8e4m3fn(normal(rng));
  const std::vector<float> w_scale(static_cast<size_t>(shape.n), 0.004f), bias(static_cast<size_t>(shape.n), 0.25f);
  const float x_scale = 0.003f;
  auto kernel = cuda::GemmKernel::create(cudnn_engine(0), key, shape, {nullptr, nullptr, nullptr, x_scale, 8});
  ASSERT_TRUE(kernel.is_ok()) << kernel.status().message();

  const size_t y_count = static_cast<size_t>(shape.m * shape.n);
  DeviceBytes d_x(x), d_w(w), d_w_scale(w_scale), d_bias(bias), d_x_scale(std::vector<float>{x_scale}),
      eager(y_count * sizeof(float)), replayed(y_count * sizeof(float)), workspace(cuda::kGemmWorkspaceBytes);
  cuda::GemmCandidateArgs args;
  args.x = d_x.get();
  args.w = d_w.get();
  args.w_scale = d_w_scale.as<float>();
  args.x_scale = d_x_scale.as<float>();
  args.bias = d_bias.as<float>();
  args.y = eager.as<float>();
  ASSERT_TRUE((*kernel)->run(args, workspace.get(), nullptr));

  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  args.y = replayed.as<float>();
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const Status captured = (*kernel)->run(args, workspace.get(), stream);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_TRUE(captured) << captured.message();
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  const std::vector<float> a = eager.download_vector<float>(y_count), b = replayed.download_vector<float>(y_count);
  expect_same_bytes(b.data(), a.data(), y_count, sizeof(float));
}

TEST_F(CudnnFp8GemmTest, AnEngineTheHeuristicDoesNotOfferIsAOneLineError) {
  const GemmKey key = key_with(DType::kFloat8E4M3FN, true, true, false);
  const GemmShape shape{512, 256, 512, 1};
  std::string refusals;
  if (!plans_here(key, shape, refusals)) GTEST_SKIP() << "this cuDNN builds no FP8 matmul graph here:" << refusals;
  auto refused = cuda::GemmKernel::create(cudnn_engine(9999), key, shape, {});
  ASSERT_FALSE(refused.is_ok());
  const std::string message = refused.status().message();
  EXPECT_NE(message.find("cudnn.fp8.e4m3.tensor.engine9999"), std::string::npos) << message;
  EXPECT_NE(message.find("engine configuration(s)"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

}  // namespace
}  // namespace loka::testing
