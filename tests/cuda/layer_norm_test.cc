// ============================================================================
// tests/cuda/layer_norm_test.cc — LayerNorm on the GPU (FP32 output, and
// E4M3 output with its static scale and amax) vs the CPU reference
// (kernels/cpu/layer_norm.h, the arithmetic of the CPU runtime's
// LayerNormalization and ai.loka LayerNormQuant).
//
// The two differ only in the order of the double sums, which can move the
// float mean or inv_std by an ulp: FP32 outputs are compared within a few
// ulps of the row's scale, and FP8 codes may move by one step only where the
// CPU's value lies that close to a rounding boundary. Widths on both sides of
// the warp/block switch (1024), one row, 65536 rows, with and without bias.
// ============================================================================
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cpu/layer_norm.h"
#include "kernels/cuda/layer_norm.h"
#include "loka/float8.h"

namespace loka {
namespace {

using testing::DeviceBytes;

class CudaLayerNorm : public testing::CudaTest {};

struct Reference {
  std::vector<float> values;  // the CPU's normalized values
  float amax = 0.0f;
};

Reference cpu_layer_norm(const std::vector<float>& x, const std::vector<float>& scale, const std::vector<float>* bias,
                         int64_t rows, int64_t cols, float epsilon) {
  Reference ref;
  ref.values.resize(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x.data() + r * cols;
    const cpu::LayerNormRowStats stats = cpu::layer_norm_row_stats(row, cols, epsilon);
    for (int64_t j = 0; j < cols; ++j) {
      float v = cpu::layer_norm_element(row[j], stats, scale[static_cast<size_t>(j)]);
      if (bias) v += (*bias)[static_cast<size_t>(j)];
      ref.values[static_cast<size_t>(r * cols + j)] = v;
      if (std::isfinite(v)) ref.amax = std::max(ref.amax, std::fabs(v));
    }
  }
  return ref;
}

void check(int64_t rows, int64_t cols, bool with_bias, bool fp8) {
  SCOPED_TRACE("rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) + (with_bias ? " bias" : "") +
               (fp8 ? " fp8" : " f32"));
  std::mt19937 rng(static_cast<unsigned>(rows * 17 + cols));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> offset(-50.0f, 50.0f);
  std::vector<float> x(static_cast<size_t>(rows * cols)), scale(static_cast<size_t>(cols)), bias(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float row_offset = offset(rng);  // a common mode, as GEMM outputs feeding a LayerNorm have
    for (int64_t j = 0; j < cols; ++j) x[static_cast<size_t>(r * cols + j)] = row_offset + 3.0f * normal(rng);
  }
  for (float& s : scale) s = 1.0f + 0.5f * normal(rng);
  for (float& b : bias) b = 0.1f * normal(rng);
  const float epsilon = 1e-5f;
  const Reference ref = cpu_layer_norm(x, scale, with_bias ? &bias : nullptr, rows, cols, epsilon);

  DeviceBytes d_x(x), d_scale(scale), d_bias(bias), d_amax(std::vector<float>{0.0f});
  DeviceBytes d_y(x.size() * (fp8 ? 1 : sizeof(float)));
  const float y_scale = ref.amax / 448.0f;
  cuda::LayerNormArgs args;
  args.x = d_x.as<float>();
  args.scale = d_scale.as<float>();
  args.bias = with_bias ? d_bias.as<float>() : nullptr;
  args.rows = rows;
  args.cols = cols;
  args.epsilon = epsilon;
  args.amax = d_amax.as<float>();
  if (fp8) {
    args.y_codes = d_y.as<uint8_t>();
    args.y_scale = y_scale;
  } else {
    args.y = d_y.as<float>();
  }
  const Status status = cuda::launch_layer_norm(args, nullptr);
  ASSERT_TRUE(status) << status.message();

  const float amax = d_amax.download_vector<float>(1)[0];
  EXPECT_NEAR(amax, ref.amax, 1e-5f * ref.amax);
  size_t bad = 0, moved = 0;
  if (fp8) {
    const auto codes = d_y.download_vector<uint8_t>(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const uint8_t expected = float_to_fp8e4m3fn(ref.values[i] / y_scale);
      if (codes[i] == expected) continue;
      ++moved;
      // Allowed only when a value within the stats' rounding of the CPU's lands on that code.
      const float slack = 1e-5f * (std::fabs(ref.values[i]) + 1.0f);
      const bool near_boundary = float_to_fp8e4m3fn((ref.values[i] + slack) / y_scale) == codes[i] ||
                                 float_to_fp8e4m3fn((ref.values[i] - slack) / y_scale) == codes[i];
      if (!near_boundary && bad++ < 5)
        ADD_FAILURE() << "code[" << i << "] = 0x" << std::hex << int(codes[i]) << ", expected 0x" << int(expected)
                      << std::dec << " (value " << ref.values[i] << ")";
    }
    EXPECT_LE(moved, x.size() / 1000 + 1) << "more codes than stats rounding explains";
  } else {
    const auto y = d_y.download_vector<float>(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::fabs(y[i] - ref.values[i]) <= 1e-5f * (std::fabs(ref.values[i]) + 1.0f)) continue;
      if (bad++ < 5) ADD_FAILURE() << "y[" << i << "] = " << y[i] << ", expected " << ref.values[i];
    }
  }
  EXPECT_EQ(bad, 0u);
}

TEST_F(CudaLayerNorm, Fp32OutputMatchesCpuReference) {
  for (bool bias : {false, true}) {
    check(1, 1, bias, false);
    check(1, 256, bias, false);
    check(65536, 64, bias, false);
    check(33, 1024, bias, false);
    check(7, 1025, bias, false);
    check(3, 5000, bias, false);
    check(5, 8000, bias, false);
    check(3, 8192, bias, false);
    check(2, 8193, bias, false);  // too wide for shared memory: the three-pass kernel
  }
}

TEST_F(CudaLayerNorm, Fp8OutputMatchesCpuQuantizationOfTheSameValues) {
  for (bool bias : {false, true}) {
    check(1, 384, bias, true);
    check(65536, 128, bias, true);
    check(100, 13, bias, true);
    check(9, 4096, bias, true);
    check(2, 20000, bias, true);
  }
}

TEST_F(CudaLayerNorm, RefusesAmbiguousOrInvalidOutputs) {
  DeviceBytes buffer(256);
  cuda::LayerNormArgs args;
  args.x = buffer.as<float>();
  args.scale = buffer.as<float>();
  args.rows = 1;
  args.cols = 4;
  EXPECT_FALSE(cuda::launch_layer_norm(args, nullptr));  // neither output
  args.y = buffer.as<float>();
  args.y_codes = buffer.as<uint8_t>();
  EXPECT_FALSE(cuda::launch_layer_norm(args, nullptr));  // both outputs
  args.y = nullptr;
  args.y_scale = 0.0f;
  EXPECT_FALSE(cuda::launch_layer_norm(args, nullptr));  // a zero scale
}

}  // namespace
}  // namespace loka
