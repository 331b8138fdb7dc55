// ============================================================================
// tests/cuda/fp8_gemm_test.cc — cuBLASLt FP8 GEMM vs the CPU reference.
//
// Fresh random E4M3 operands and scales; per-tensor and paired per-row /
// per-channel scales; BF16, FP32 and E4M3 outputs (with AMAX_D); bias + ReLU; awkward shapes (one
// row, 65536 rows, N and K barely multiples of 16); K not a multiple of 16 is
// refused by can_implement with a reason. Skips visibly without a GPU.
// ============================================================================
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cuda/device.h"
#include "kernels/cuda/fp8_gemm.h"
#include "loka/bfloat16.h"
#include "loka/float8.h"

namespace loka {
namespace {

class CudaFp8Gemm : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = cuda::device_unavailable_reason();
    if (!reason.empty()) GTEST_SKIP() << "GPU test skipped: " << reason;
  }
};

template <typename T>
T* to_device(const std::vector<T>& host) {
  void* device = nullptr;
  EXPECT_EQ(cudaMalloc(&device, std::max<size_t>(1, host.size() * sizeof(T))), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return static_cast<T*>(device);
}

struct Case {
  int64_t m, n, k;
  bool per_row, per_channel;
  DType output;
  bool bias_relu;
  int64_t y_row_pitch = 0;  ///< Y's rows this many elements apart (0: N); the gaps must stay untouched
};

void run_case(const Case& c) {
  SCOPED_TRACE("M=" + std::to_string(c.m) + " N=" + std::to_string(c.n) + " K=" + std::to_string(c.k));
  std::mt19937 rng(static_cast<unsigned>(c.m * 131 + c.n * 7 + c.k));
  std::normal_distribution<float> normal(0.0f, 60.0f);
  std::uniform_real_distribution<float> scale_dist(0.001f, 0.01f);
  std::vector<uint8_t> x(static_cast<size_t>(c.m * c.k)), w(static_cast<size_t>(c.n * c.k));
  for (auto& v : x) v = float_to_fp8e4m3fn(normal(rng));
  for (auto& v : w) v = float_to_fp8e4m3fn(normal(rng));
  std::vector<float> x_scale(c.per_row ? static_cast<size_t>(c.m) : 1), w_scale(c.per_channel ? static_cast<size_t>(c.n) : 1);
  for (auto& s : x_scale) s = scale_dist(rng);
  for (auto& s : w_scale) s = scale_dist(rng);
  const bool bf16 = c.output == DType::kBFloat16;
  std::vector<uint16_t> bias_bf16(static_cast<size_t>(c.n));
  std::vector<float> bias_f32(static_cast<size_t>(c.n));
  for (int64_t j = 0; j < c.n; ++j) {
    bias_f32[static_cast<size_t>(j)] = normal(rng) / 60.0f;
    bias_bf16[static_cast<size_t>(j)] = float_to_bf16(bias_f32[static_cast<size_t>(j)]);
    bias_f32[static_cast<size_t>(j)] = bf16_to_float(bias_bf16[static_cast<size_t>(j)]);  // the GPU reads BF16
  }

  cuda::Fp8GemmProblem problem{c.m, c.n, c.k, c.per_row, c.per_channel, c.output, c.bias_relu,
                               c.bias_relu ? cuda::GemmEpilogue::kRelu : cuda::GemmEpilogue::kNone};
  problem.y_row_pitch = c.y_row_pitch;
  const int64_t ldy = c.y_row_pitch ? c.y_row_pitch : c.n;
  auto gemm = cuda::Fp8Gemm::create(problem);
  ASSERT_TRUE(gemm) << gemm.status().message();
  uint8_t* d_x = to_device(x);
  uint8_t* d_w = to_device(w);
  float* d_xs = to_device(x_scale);
  float* d_ws = to_device(w_scale);
  void* d_bias = to_device(bias_bf16);
  void* d_y = nullptr;
  void* workspace = nullptr;
  const size_t out_bytes = static_cast<size_t>(c.m * ldy) * (bf16 ? 2 : 4);
  ASSERT_EQ(cudaMalloc(&d_y, out_bytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(d_y, 0xFF, out_bytes), cudaSuccess);  // NaN: what the GEMM must not touch stays so
  ASSERT_EQ(cudaMalloc(&workspace, cuda::kGemmWorkspaceBytes), cudaSuccess);
  const Status status = (*gemm)->run({d_x, d_w, d_xs, d_ws, c.bias_relu ? d_bias : nullptr, d_y}, workspace, nullptr);
  ASSERT_TRUE(status) << status.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint8_t> y(out_bytes);
  ASSERT_EQ(cudaMemcpy(y.data(), d_y, out_bytes, cudaMemcpyDeviceToHost), cudaSuccess);

  // CPU reference with the same semantics, double accumulation.
  std::vector<float> xf(x.size()), wf(w.size());
  for (size_t i = 0; i < x.size(); ++i) xf[i] = fp8e4m3fn_to_float(x[i]);
  for (size_t i = 0; i < w.size(); ++i) wf[i] = fp8e4m3fn_to_float(w[i]);
  size_t bad = 0;
  const int64_t rows_checked = std::min<int64_t>(c.m, 2048);  // 65536 rows: check a prefix and the tail
  for (int64_t ii = 0; ii < rows_checked; ++ii) {
    const int64_t i = ii < rows_checked / 2 ? ii : c.m - (rows_checked - ii);
    for (int64_t j = 0; j < c.n; ++j) {
      double acc = 0, magnitude = 0;
      for (int64_t p = 0; p < c.k; ++p) {
        const double term = double(xf[static_cast<size_t>(i * c.k + p)]) * wf[static_cast<size_t>(j * c.k + p)];
        acc += term;
        magnitude += std::fabs(term);
      }
      const double scale = double(x_scale[c.per_row ? static_cast<size_t>(i) : 0]) * w_scale[c.per_channel ? static_cast<size_t>(j) : 0];
      double expected = acc * scale;
      if (c.bias_relu) expected = std::max(0.0, expected + bias_f32[static_cast<size_t>(j)]);
      const size_t at = static_cast<size_t>(i * ldy + j);
      float got;
      if (bf16) {
        uint16_t code;
        std::memcpy(&code, y.data() + at * 2, 2);
        got = bf16_to_float(code);
      } else {
        std::memcpy(&got, y.data() + at * 4, 4);
      }
      // Hopper's FP8 tensor cores accumulate with about 14 significant bits (DeepSeek-V3
      // report; seen here as ~3e-4 relative), so the bound scales with Σ|x·w|, plus BF16
      // output rounding (2^-8 relative).
      const double tolerance = 2e-3 * magnitude * scale + (bf16 ? std::ldexp(std::fabs(expected), -8) : 0.0) + 1e-6;
      if (std::fabs(got - expected) > tolerance && bad++ < 5)
        ADD_FAILURE() << "Y[" << i << "," << j << "] = " << got << ", expected " << expected;
    }
    for (int64_t j = c.n; j < ldy; ++j) {  // the wider matrix's other columns: untouched
      const size_t at = static_cast<size_t>(i * ldy + j) * (bf16 ? 2 : 4);
      const bool untouched = std::all_of(y.begin() + static_cast<long>(at), y.begin() + static_cast<long>(at + (bf16 ? 2 : 4)),
                                         [](uint8_t byte) { return byte == 0xFF; });
      if (!untouched && bad++ < 5) ADD_FAILURE() << "column " << j << " of row " << i << " beyond N was written";
    }
  }
  EXPECT_EQ(bad, 0u);
  for (void* p : {static_cast<void*>(d_x), static_cast<void*>(d_w), static_cast<void*>(d_xs), static_cast<void*>(d_ws), d_bias, d_y, workspace})
    cudaFree(p);
}

TEST_F(CudaFp8Gemm, MatchesCpuReferenceAcrossShapesScalesAndOutputs) {
  const std::vector<Case> cases = {
      {1, 256, 512, false, false, DType::kBFloat16, false},
      {37, 80, 48, false, false, DType::kFloat32, false},
      {512, 1024, 1024, false, false, DType::kBFloat16, true},
      {65536, 128, 256, false, false, DType::kBFloat16, false},
      {3, 16, 16, false, false, DType::kFloat32, true},
      {4096, 512, 1024, false, false, DType::kFloat32, false},
  };
  for (const Case& c : cases) run_case(c);
}

// Vector scales (cuBLASLt's OUTER_VEC_32F) run on sm_90 in pairs only: per-row activation
// scales with per-channel weight scales (cuBLASLt 13.1, H100, 2026-11-26). Where a cuBLASLt has
// no algorithm for them the registry's FP8 kernel applies them in its own epilogue, and this
// test skips, saying so.
TEST_F(CudaFp8Gemm, PairedVectorScalesMatchTheCpuReference) {
  auto probe = cuda::Fp8Gemm::create({256, 256, 256, true, true, DType::kFloat32, false, cuda::GemmEpilogue::kNone});
  if (!probe) GTEST_SKIP() << "this cuBLASLt has no FP8 algorithm with vector scales: " << probe.status().message();
  const std::vector<Case> cases = {
      {1, 256, 512, true, true, DType::kFloat32, true},
      {37, 80, 48, true, true, DType::kFloat32, false},
      {512, 1024, 1024, true, true, DType::kBFloat16, true},
      {65536, 128, 256, true, true, DType::kFloat32, true},
      {3, 16, 16, true, true, DType::kFloat32, true},
      {4096, 512, 1008, true, true, DType::kFloat32, false},  // K a multiple of 16, not of 128
  };
  for (const Case& c : cases) run_case(c);
}

/// E4M3 output: codes of v / y_scale through cuBLASLt's D_SCALE (= 1 / y_scale), and AMAX_D.
void run_fp8_output_case(int64_t m, int64_t n, int64_t k, bool bias_relu) {
  SCOPED_TRACE("M=" + std::to_string(m) + " N=" + std::to_string(n) + " K=" + std::to_string(k) +
               (bias_relu ? " bias+relu" : ""));
  std::mt19937 rng(static_cast<unsigned>(m * 31 + n * 17 + k));
  std::normal_distribution<float> normal(0.0f, 60.0f);
  std::vector<uint8_t> x(static_cast<size_t>(m * k)), w(static_cast<size_t>(n * k));
  for (auto& v : x) v = float_to_fp8e4m3fn(normal(rng));
  for (auto& v : w) v = float_to_fp8e4m3fn(normal(rng));
  const std::vector<float> x_scale = {0.004f}, w_scale = {0.003f};
  std::vector<uint16_t> bias_bf16(static_cast<size_t>(n));
  std::vector<float> bias(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    bias_bf16[static_cast<size_t>(j)] = float_to_bf16(normal(rng) / 60.0f);
    bias[static_cast<size_t>(j)] = bf16_to_float(bias_bf16[static_cast<size_t>(j)]);
  }
  const float y_scale = 0.0125f, y_scale_inverse = 1.0f / y_scale;
  auto gemm = cuda::Fp8Gemm::create({m, n, k, false, false, DType::kFloat8E4M3FN, bias_relu,
                                     bias_relu ? cuda::GemmEpilogue::kRelu : cuda::GemmEpilogue::kNone});
  ASSERT_TRUE(gemm) << gemm.status().message();
  uint8_t* d_x = to_device(x);
  uint8_t* d_w = to_device(w);
  float* d_xs = to_device(x_scale);
  float* d_ws = to_device(w_scale);
  void* d_bias = to_device(bias_bf16);
  float* d_inverse = to_device(std::vector<float>{y_scale_inverse});
  float* d_amax = to_device(std::vector<float>{0.0f});
  void* d_y = nullptr;
  void* workspace = nullptr;
  ASSERT_EQ(cudaMalloc(&d_y, static_cast<size_t>(m * n)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&workspace, cuda::kGemmWorkspaceBytes), cudaSuccess);
  cuda::Fp8GemmArgs args{d_x, d_w, d_xs, d_ws, bias_relu ? d_bias : nullptr, d_y, d_inverse, d_amax};
  const Status status = (*gemm)->run(args, workspace, nullptr);
  ASSERT_TRUE(status) << status.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint8_t> codes(static_cast<size_t>(m * n));
  float amax = 0;
  ASSERT_EQ(cudaMemcpy(codes.data(), d_y, codes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(&amax, d_amax, sizeof amax, cudaMemcpyDeviceToHost), cudaSuccess);

  size_t bad = 0;
  double expected_amax = 0, amax_slack = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0, magnitude = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double term = double(fp8e4m3fn_to_float(x[static_cast<size_t>(i * k + p)])) *
                            fp8e4m3fn_to_float(w[static_cast<size_t>(j * k + p)]);
        acc += term;
        magnitude += std::fabs(term);
      }
      const double scale = double(x_scale[0]) * w_scale[0];
      double v = acc * scale;
      if (bias_relu) v = std::max(0.0, v + bias[static_cast<size_t>(j)]);
      const double slack = 2e-3 * magnitude * scale + 1e-6;  // the tensor cores' accumulation (see run_case)
      if (std::fabs(v) > expected_amax) expected_amax = std::fabs(v), amax_slack = slack;
      const uint8_t got = codes[static_cast<size_t>(i * n + j)];
      // Any code the value can reach within the accumulation slack (codes are monotonic in v).
      const uint8_t low = float_to_fp8e4m3fn(static_cast<float>((v - slack) * y_scale_inverse));
      const uint8_t high = float_to_fp8e4m3fn(static_cast<float>((v + slack) * y_scale_inverse));
      const float got_value = fp8e4m3fn_to_float(got);
      if (!(got_value >= fp8e4m3fn_to_float(low) && got_value <= fp8e4m3fn_to_float(high)) && bad++ < 5)
        ADD_FAILURE() << "code[" << i << "," << j << "] = " << got_value << ", expected between "
                      << fp8e4m3fn_to_float(low) << " and " << fp8e4m3fn_to_float(high) << " (v / y_scale = "
                      << v * y_scale_inverse << ")";
    }
  EXPECT_EQ(bad, 0u);
  EXPECT_NEAR(amax, expected_amax, amax_slack) << "AMAX_D is max |v| before the output scale";
  for (void* p : {static_cast<void*>(d_x), static_cast<void*>(d_w), static_cast<void*>(d_xs), static_cast<void*>(d_ws),
                  d_bias, static_cast<void*>(d_inverse), static_cast<void*>(d_amax), d_y, workspace})
    cudaFree(p);
}

TEST_F(CudaFp8Gemm, E4M3OutputMatchesTheQuantizedCpuReference) {
  run_fp8_output_case(1, 256, 512, false);
  run_fp8_output_case(37, 80, 48, true);
  run_fp8_output_case(1024, 512, 1024, true);
}

TEST_F(CudaFp8Gemm, APitchedOutputFillsItsColumnsOfAWiderMatrixOnly) {
  // As a GEMM writes its slice of a Concat's output (DHEN: 128 of 640 columns).
  run_case({4096, 128, 128, false, false, DType::kFloat32, true, 640});
  run_case({1, 64, 48, false, false, DType::kFloat32, false, 96});
  auto probe = cuda::Fp8Gemm::create({64, 64, 64, true, true, DType::kFloat32});
  if (!probe) GTEST_SKIP() << "this cuBLASLt has no FP8 algorithm with vector scales: " << probe.status().message();
  run_case({1000, 32, 64, true, true, DType::kFloat32, true, 4096});
}

TEST(Fp8GemmPlan, ARowPitchIsAtLeastNAMultipleOf16AndTakesNoAddend) {
  cuda::Fp8GemmProblem problem{64, 32, 16};
  problem.y_row_pitch = 96;
  EXPECT_TRUE(cuda::Fp8Gemm::can_implement(problem));
  for (int64_t pitch : {16, 40}) {
    problem.y_row_pitch = pitch;
    EXPECT_FALSE(cuda::Fp8Gemm::can_implement(problem)) << pitch;
  }
  problem.y_row_pitch = 96;
  problem.has_addend = true;
  const Status status = cuda::Fp8Gemm::can_implement(problem);
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("row pitch"), std::string::npos) << status.message();
}

TEST(Fp8GemmPlan, RefusesUnpairedVectorScalesAndVectorScalesWithE4M3Output) {
  const Status unpaired = cuda::Fp8Gemm::can_implement({64, 64, 64, false, true});
  ASSERT_FALSE(unpaired);
  EXPECT_NE(unpaired.message().find("pairs"), std::string::npos) << unpaired.message();
  EXPECT_FALSE(cuda::Fp8Gemm::can_implement({64, 64, 64, true, true, DType::kFloat8E4M3FN}));
  EXPECT_TRUE(cuda::Fp8Gemm::can_implement({64, 64, 64, false, false, DType::kFloat8E4M3FN}));
}

TEST(Fp8GemmPlan, RefusesKNotAMultipleOf16WithAReason) {
  const Status status = cuda::Fp8Gemm::can_implement({64, 64, 40});
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("K=40"), std::string::npos) << status.message();
  EXPECT_TRUE(cuda::Fp8Gemm::can_implement({64, 64, 48}));
}

}  // namespace
}  // namespace loka
