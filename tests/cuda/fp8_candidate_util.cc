// ============================================================================
// tests/cuda/fp8_candidate_util.cc — operands, run and reference of an FP8 candidate.
// ============================================================================
#include "cuda/fp8_candidate_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "kernels/cuda/gemm_candidate.h"
#include "kernels/cuda/gemm_types.h"
#include "loka/bfloat16.h"
#include "loka/float8.h"

namespace loka::testing {

std::vector<float> run_fp8_candidate(const kernels::GemmCandidate& candidate, const kernels::GemmKey& key,
                                     const kernels::GemmShape& shape, const Fp8GemmOperands& o, bool in_graph,
                                     int64_t y_row_pitch) {
  const int64_t m = shape.m, n = shape.n, k = shape.k;
  Tensor host_w = Tensor::zeros(DType::kFloat8E4M3FN, {n, k});
  std::copy(o.w_codes.begin(), o.w_codes.end(), host_w.values<uint8_t>().begin());
  const Tensor host_w_scale = Tensor::from_floats({n}, o.w_scale);
  const Tensor host_bias = Tensor::from_floats({n}, o.bias);
  cuda::GemmCandidatePlanInputs inputs{&host_w, &host_w_scale, key.bias ? &host_bias : nullptr, o.x_scale, 8,
                                       y_row_pitch};
  auto kernel = cuda::GemmKernel::create(candidate, key, shape, inputs);
  EXPECT_TRUE(kernel.is_ok()) << kernel.status().message();
  if (!kernel.is_ok()) return {};

  const int64_t ldy = y_row_pitch ? y_row_pitch : n;
  const size_t y_count = static_cast<size_t>(m * ldy);
  const bool fp32_input = key.input == DType::kFloat32, bf16_input = key.input == DType::kBFloat16;
  const bool bf16_y = key.output == DType::kBFloat16;  // Y and the residual held in BF16
  const auto bf16_codes = [](const std::vector<float>& values) {
    std::vector<uint16_t> codes(values.size());
    for (size_t i = 0; i < values.size(); ++i) codes[i] = float_to_bf16(values[i]);
    return codes;
  };
  const size_t y_element = bf16_y ? sizeof(uint16_t) : sizeof(float);
  DeviceBytes d_x(fp32_input ? o.x.size() * sizeof(float) : bf16_input ? o.x.size() * 2 : o.x_codes.size()),
      d_w(o.w_codes), d_w_scale(o.w_scale), d_bias(o.bias), d_residual(o.residual.size() * sizeof(float)),
      d_x_scale(std::vector<float>{o.x_scale}), d_y(y_count * y_element), workspace(cuda::kGemmWorkspaceBytes);
  if (fp32_input) {
    d_x.upload(o.x.data(), o.x.size() * sizeof(float));
  } else if (bf16_input) {
    const std::vector<uint16_t> codes = bf16_codes(o.x);
    d_x.upload(codes.data(), codes.size() * 2);
  } else {
    d_x.upload(o.x_codes.data(), o.x_codes.size());
  }
  if (bf16_y) {
    const std::vector<uint16_t> codes = bf16_codes(o.residual);
    d_residual.upload(codes.data(), codes.size() * 2);
  } else {
    d_residual.upload(o.residual.data(), o.residual.size() * sizeof(float));
  }
  cuda::GemmCandidateArgs args;
  args.x = d_x.get();
  args.w = d_w.get();
  args.w_scale = d_w_scale.as<float>();
  args.x_scale = d_x_scale.as<float>();
  args.bias = key.bias ? d_bias.as<float>() : nullptr;
  args.residual = key.residual ? d_residual.get() : nullptr;
  args.y = d_y.get();
  EXPECT_EQ(cudaMemset(d_y.get(), 0xFF, y_count * y_element), cudaSuccess);  // NaN: what no run writes
  if (y_row_pitch != 0) EXPECT_EQ((*kernel)->output_row_pitch(), y_row_pitch) << candidate.name();
  if (!in_graph) {
    const Status status = (*kernel)->run(args, workspace.get(), nullptr);
    EXPECT_TRUE(status) << status.message();
    if (!status) return {};
  } else {
    const Status replayed = replay_in_cuda_graph(
        [&](cudaStream_t stream) { return (*kernel)->run(args, workspace.get(), stream); });
    EXPECT_TRUE(replayed) << candidate.name() << " in a CUDA graph: " << replayed.message();
    if (!replayed) return {};
  }
  std::vector<float> y(y_count);
  if (bf16_y) {
    const std::vector<uint16_t> codes = d_y.download_vector<uint16_t>(y_count);
    for (size_t i = 0; i < y_count; ++i) y[i] = bf16_to_float(codes[i]);
  } else {
    y = d_y.download_vector<float>(y_count);
  }
  if (ldy == n) return y;
  std::vector<float> rows(static_cast<size_t>(m * n));
  size_t written_between = 0;
  for (int64_t i = 0; i < m; ++i) {
    std::copy_n(y.begin() + i * ldy, n, rows.begin() + i * n);
    for (int64_t j = n; j < ldy; ++j) written_between += !std::isnan(y[static_cast<size_t>(i * ldy + j)]);
  }
  EXPECT_EQ(written_between, 0u) << candidate.name() << " wrote between its rows (pitch " << ldy << ")";
  return rows;
}

size_t fp8_candidate_mismatches(const kernels::GemmCandidate& candidate, const kernels::GemmKey& key,
                                const kernels::GemmShape& shape, int64_t y_row_pitch) {
  const int64_t m = shape.m, n = shape.n, k = shape.k;
  std::mt19937 rng(static_cast<unsigned>(m * 31 + n * 7 + k));
  std::normal_distribution<float> normal(0.0f, 60.0f);
  std::uniform_real_distribution<float> scale_draw(0.001f, 0.01f);
  Fp8GemmOperands o;
  o.x_codes.resize(static_cast<size_t>(m * k));
  o.w_codes.resize(static_cast<size_t>(n * k));
  for (uint8_t& v : o.x_codes) v = float_to_fp8e4m3fn(normal(rng));
  for (uint8_t& v : o.w_codes) v = float_to_fp8e4m3fn(normal(rng));
  o.w_scale.resize(static_cast<size_t>(n));
  o.bias.resize(static_cast<size_t>(n));
  o.residual.resize(static_cast<size_t>(m * n));
  for (float& s : o.w_scale) s = scale_draw(rng);
  for (float& b : o.bias) b = bf16_to_float(float_to_bf16(normal(rng) / 60.0f));
  for (float& r : o.residual) r = normal(rng) / 60.0f;
  const bool bf16_y = key.output == DType::kBFloat16;
  if (bf16_y)  // held in BF16 with Y: the reference adds the values the kernel reads
    for (float& r : o.residual) r = bf16_to_float(float_to_bf16(r));
  // A power of two for an FP32 or BF16 X: its values (E4M3 values times it, exact in BF16 too)
  // quantize back to the drawn codes exactly.
  o.x_scale = key.input == DType::kFloat8E4M3FN ? scale_draw(rng) : 1.0f / 32;
  o.x.resize(o.x_codes.size());
  for (size_t i = 0; i < o.x_codes.size(); ++i) o.x[i] = fp8e4m3fn_to_float(o.x_codes[i]) * o.x_scale;
  const std::vector<float> y = run_fp8_candidate(candidate, key, shape, o, false, y_row_pitch);
  if (y.size() != static_cast<size_t>(m * n)) return 1;

  size_t bad = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double term = double(fp8e4m3fn_to_float(o.x_codes[static_cast<size_t>(i * k + p)])) *
                            fp8e4m3fn_to_float(o.w_codes[static_cast<size_t>(j * k + p)]);
        sum += term;
        magnitude += std::fabs(term);
      }
      const double scale = double(o.x_scale) * o.w_scale[static_cast<size_t>(j)];
      double expected = sum * scale + (key.bias ? o.bias[static_cast<size_t>(j)] : 0.0);
      if (key.epilogue == cuda::GemmEpilogue::kRelu) expected = std::max(0.0, expected);
      // GELU: exact (erf) in the reference; its slope stays below 1.13, and a tanh_gelu candidate's
      // approximation adds at most 4.7e-4 (docs/dispatch.md).
      const bool gelu = key.epilogue == cuda::GemmEpilogue::kGelu;
      if (gelu) expected = 0.5 * expected * (1.0 + std::erf(expected / std::sqrt(2.0)));
      if (key.residual) expected += o.residual[static_cast<size_t>(i * n + j)];
      const double got = y[static_cast<size_t>(i * n + j)];
      // A BF16 Y adds its own rounding, 2^-8 of the value (and of an intermediate sum the
      // tolerance's accumulation term already covers).
      const double tolerance = (gelu ? 1.13 : 1.0) * 2e-3 * magnitude * scale + 1e-6 * (1 + std::fabs(expected)) +
                               (candidate.tanh_gelu ? 5e-4 : 0.0) + (bf16_y ? std::ldexp(std::fabs(expected), -8) : 0.0);
      if (!(std::fabs(got - expected) <= tolerance) && bad++ < 5)
        ADD_FAILURE() << candidate.name() << " " << key.to_string() << " " << shape.to_string() << ": Y[" << i << "," << j
                      << "] = " << got << ", expected " << expected;
    }
  return bad;
}

}  // namespace loka::testing
