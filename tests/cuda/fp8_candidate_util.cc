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

size_t fp8_candidate_mismatches(const kernels::GemmCandidate& candidate, const kernels::GemmKey& key,
                                const kernels::GemmShape& shape) {
  const int64_t m = shape.m, n = shape.n, k = shape.k;
  std::mt19937 rng(static_cast<unsigned>(m * 31 + n * 7 + k));
  std::normal_distribution<float> normal(0.0f, 60.0f);
  std::uniform_real_distribution<float> scale_draw(0.001f, 0.01f);
  std::vector<uint8_t> x_codes(static_cast<size_t>(m * k)), w_codes(static_cast<size_t>(n * k));
  for (uint8_t& v : x_codes) v = float_to_fp8e4m3fn(normal(rng));
  for (uint8_t& v : w_codes) v = float_to_fp8e4m3fn(normal(rng));
  std::vector<float> w_scale(static_cast<size_t>(n)), bias(static_cast<size_t>(n)), residual(static_cast<size_t>(m * n));
  for (float& s : w_scale) s = scale_draw(rng);
  for (float& b : bias) b = bf16_to_float(float_to_bf16(normal(rng) / 60.0f));
  for (float& r : residual) r = normal(rng) / 60.0f;
  const bool fp32_input = key.input == DType::kFloat32;
  const float x_scale = fp32_input ? 1.0f / 32 : scale_draw(rng);  // a power of two: exact quantization
  std::vector<float> x_values(x_codes.size());
  for (size_t i = 0; i < x_codes.size(); ++i) x_values[i] = fp8e4m3fn_to_float(x_codes[i]) * x_scale;

  Tensor host_w = Tensor::zeros(DType::kFloat8E4M3FN, {n, k});
  std::copy(w_codes.begin(), w_codes.end(), host_w.values<uint8_t>().begin());
  const Tensor host_w_scale = Tensor::from_floats({n}, w_scale);
  const Tensor host_bias = Tensor::from_floats({n}, bias);
  cuda::GemmCandidatePlanInputs inputs{&host_w, &host_w_scale, key.bias ? &host_bias : nullptr, x_scale, 8};
  auto kernel = cuda::GemmKernel::create(candidate, key, shape, inputs);
  EXPECT_TRUE(kernel.is_ok()) << kernel.status().message();
  if (!kernel.is_ok()) return 1;

  const size_t y_count = static_cast<size_t>(m * n);
  DeviceBytes d_x_codes(x_codes), d_x_values(x_values), d_w(w_codes), d_w_scale(w_scale), d_bias(bias),
      d_residual(residual), d_x_scale(std::vector<float>{x_scale}), d_y(y_count * sizeof(float)),
      workspace(cuda::kGemmWorkspaceBytes);
  cuda::GemmCandidateArgs args;
  args.x = fp32_input ? d_x_values.get() : d_x_codes.get();
  args.w = d_w.get();
  args.w_scale = d_w_scale.as<float>();
  args.x_scale = d_x_scale.as<float>();
  args.bias = key.bias ? d_bias.as<float>() : nullptr;
  args.residual = key.residual ? d_residual.as<float>() : nullptr;
  args.y = d_y.as<float>();
  const Status status = (*kernel)->run(args, workspace.get(), nullptr);
  EXPECT_TRUE(status) << status.message();
  const std::vector<float> y = d_y.download_vector<float>(y_count);

  size_t bad = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double term = double(fp8e4m3fn_to_float(x_codes[static_cast<size_t>(i * k + p)])) *
                            fp8e4m3fn_to_float(w_codes[static_cast<size_t>(j * k + p)]);
        sum += term;
        magnitude += std::fabs(term);
      }
      const double scale = double(x_scale) * w_scale[static_cast<size_t>(j)];
      double expected = sum * scale + (key.bias ? bias[static_cast<size_t>(j)] : 0.0);
      if (key.epilogue == cuda::GemmEpilogue::kRelu) expected = std::max(0.0, expected);
      // GELU: exact (erf) in the reference; its slope stays below 1.13, and a tanh_gelu candidate's
      // approximation adds at most 4.7e-4 (docs/dispatch.md).
      const bool gelu = key.epilogue == cuda::GemmEpilogue::kGelu;
      if (gelu) expected = 0.5 * expected * (1.0 + std::erf(expected / std::sqrt(2.0)));
      if (key.residual) expected += residual[static_cast<size_t>(i * n + j)];
      const double got = y[static_cast<size_t>(i * n + j)];
      const double tolerance = (gelu ? 1.13 : 1.0) * 2e-3 * magnitude * scale + 1e-6 * (1 + std::fabs(expected)) +
                               (candidate.tanh_gelu ? 5e-4 : 0.0);
      if (!(std::fabs(got - expected) <= tolerance) && bad++ < 5)
        ADD_FAILURE() << candidate.name() << " " << key.to_string() << " " << shape.to_string() << ": Y[" << i << "," << j
                      << "] = " << got << ", expected " << expected;
    }
  return bad;
}

}  // namespace loka::testing
