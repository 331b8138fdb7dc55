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
// each kernel switch (registers to 128 with row counts that leave a warp's
// second row or a block's last warps empty, a warp to 1024, a block to 8192,
// three passes beyond), float4 and scalar widths, one row, 65536 rows, with
// and without bias; FP8
// scales that
// are powers of two (codes from an exact product) and others (a product,
// divided near rounding boundaries). Rows of ±1 with epsilon 0 have exact
// statistics on both sides, so their codes must equal those of the IEEE
// quotient v / y_scale exactly, for values placed at and beside every E4M3
// rounding boundary and scales with and without a normal reciprocal. With a
// residual (ResidualLayerNorm) the reference normalizes the float sum, on
// staged widths and on the wide path (sum written first, normalized in place).
// ============================================================================
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
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

struct Inputs {
  int64_t rows = 0, cols = 0;
  std::vector<float> x, scale, bias;  // bias empty: none
  std::vector<float> residual;        // empty: none; else normalizes x + residual
  float epsilon = 1e-5f;
};

/// Random rows (a common mode plus noise, as GEMM outputs feeding a LayerNorm have), scale and bias.
Inputs random_inputs(int64_t rows, int64_t cols, bool with_bias) {
  std::mt19937 rng(static_cast<unsigned>(rows * 17 + cols));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> offset(-50.0f, 50.0f);
  Inputs in;
  in.rows = rows;
  in.cols = cols;
  in.x.resize(static_cast<size_t>(rows * cols));
  in.scale.resize(static_cast<size_t>(cols));
  in.bias.resize(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float row_offset = offset(rng);
    for (int64_t j = 0; j < cols; ++j) in.x[static_cast<size_t>(r * cols + j)] = row_offset + 3.0f * normal(rng);
  }
  for (float& s : in.scale) s = 1.0f + 0.5f * normal(rng);
  for (float& b : in.bias) b = 0.1f * normal(rng);
  if (!with_bias) in.bias.clear();
  return in;
}

/// Runs the GPU LayerNorm on `in` and compares with the CPU reference. FP8 (y_scale > 0): codes
/// equal to those of the CPU's value / y_scale, or, unless `exact_stats`, one step away where the
/// statistics' rounding explains it; FP32 (y_scale = 0): within a few ulps of the row's scale.
void check_inputs(const Inputs& in, float y_scale, bool exact_stats) {
  const bool fp8 = y_scale > 0.0f;
  const bool with_bias = !in.bias.empty();
  const bool with_residual = !in.residual.empty();
  std::vector<float> sum = in.x;  // what ResidualLayerNorm normalizes: the float sum of ONNX's Add
  for (size_t i = 0; with_residual && i < sum.size(); ++i) sum[i] = in.x[i] + in.residual[i];
  const Reference ref = cpu_layer_norm(sum, in.scale, with_bias ? &in.bias : nullptr, in.rows, in.cols, in.epsilon);

  DeviceBytes d_x(in.x), d_scale(in.scale), d_bias(with_bias ? in.bias : std::vector<float>{0.0f});
  DeviceBytes d_residual(with_residual ? in.residual : std::vector<float>{0.0f});
  DeviceBytes d_amax(std::vector<float>{0.0f});
  DeviceBytes d_y(in.x.size() * (fp8 ? 1 : sizeof(float)));
  cuda::LayerNormArgs args;
  args.x = d_x.as<float>();
  args.residual = with_residual ? d_residual.as<float>() : nullptr;
  args.scale = d_scale.as<float>();
  args.bias = with_bias ? d_bias.as<float>() : nullptr;
  args.rows = in.rows;
  args.cols = in.cols;
  args.epsilon = in.epsilon;
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
    const auto codes = d_y.download_vector<uint8_t>(in.x.size());
    for (size_t i = 0; i < in.x.size(); ++i) {
      const uint8_t expected = float_to_fp8e4m3fn(ref.values[i] / y_scale);
      if (codes[i] == expected) continue;
      ++moved;
      // Allowed only when a value within the stats' rounding of the CPU's lands on that code.
      const float slack = 1e-5f * (std::fabs(ref.values[i]) + 1.0f);
      const bool near_boundary = float_to_fp8e4m3fn((ref.values[i] + slack) / y_scale) == codes[i] ||
                                 float_to_fp8e4m3fn((ref.values[i] - slack) / y_scale) == codes[i];
      if ((exact_stats || !near_boundary) && bad++ < 5)
        ADD_FAILURE() << "code[" << i << "] = 0x" << std::hex << int(codes[i]) << ", expected 0x" << int(expected)
                      << std::dec << " (value " << ref.values[i] << ", y_scale " << y_scale << ")";
    }
    EXPECT_LE(moved, in.x.size() / 1000 + 1) << "more codes than stats rounding explains";
  } else {
    const auto y = d_y.download_vector<float>(in.x.size());
    for (size_t i = 0; i < in.x.size(); ++i) {
      if (std::fabs(y[i] - ref.values[i]) <= 1e-5f * (std::fabs(ref.values[i]) + 1.0f)) continue;
      if (bad++ < 5) ADD_FAILURE() << "y[" << i << "] = " << y[i] << ", expected " << ref.values[i];
    }
  }
  EXPECT_EQ(bad, 0u);
}

/// The FP8 scale a test uses: the delayed-scaling amax / 448 (rarely a power of two), or the power of
/// two at or above it (the exact-product path).
enum class YScale { kNone, kAmaxOver448, kPowerOfTwo };

void check(int64_t rows, int64_t cols, bool with_bias, YScale y_scale_kind) {
  SCOPED_TRACE("rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) + (with_bias ? " bias" : "") +
               (y_scale_kind == YScale::kNone ? " f32" : y_scale_kind == YScale::kAmaxOver448 ? " fp8" : " fp8 2^k"));
  const Inputs in = random_inputs(rows, cols, with_bias);
  float y_scale = 0.0f;
  if (y_scale_kind != YScale::kNone) {
    const float amax = cpu_layer_norm(in.x, in.scale, with_bias ? &in.bias : nullptr, rows, cols, in.epsilon).amax;
    y_scale = amax / 448.0f;
    if (y_scale_kind == YScale::kPowerOfTwo) y_scale = std::exp2(std::ceil(std::log2(y_scale)));
  }
  check_inputs(in, y_scale, /*exact_stats=*/false);
}

void check(int64_t rows, int64_t cols, bool with_bias, bool fp8) {
  check(rows, cols, with_bias, fp8 ? YScale::kAmaxOver448 : YScale::kNone);
}

TEST_F(CudaLayerNorm, Fp32OutputMatchesCpuReference) {
  for (bool bias : {false, true}) {
    check(1, 1, bias, false);
    check(1, 4, bias, false);     // registers: one lane of one warp's first row
    check(3, 128, bias, false);   // registers: a second row past the end
    check(17, 124, bias, false);  // registers: the last lane idle, a block mostly empty
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

TEST_F(CudaLayerNorm, Fp8OutputWithAPowerOfTwoScaleMatchesCpuQuantization) {
  for (bool bias : {false, true}) {
    check(1, 384, bias, YScale::kPowerOfTwo);
    check(1, 387, bias, YScale::kPowerOfTwo);
    check(65536, 128, bias, YScale::kPowerOfTwo);
    check(17, 128, bias, YScale::kPowerOfTwo);  // registers, a block mostly empty
    check(65536, 66, bias, YScale::kPowerOfTwo);
    check(100, 13, bias, YScale::kPowerOfTwo);
    check(9, 1024, bias, YScale::kPowerOfTwo);
    check(7, 2050, bias, YScale::kPowerOfTwo);
    check(9, 4096, bias, YScale::kPowerOfTwo);
    check(800, 4096, bias, YScale::kPowerOfTwo);
    check(3, 8191, bias, YScale::kPowerOfTwo);
    check(2, 20000, bias, YScale::kPowerOfTwo);
  }
}

TEST_F(CudaLayerNorm, Fp8OutputWithOtherScalesMatchesCpuQuantizationOnEveryKernel) {
  for (bool bias : {false, true}) {
    check(1, 387, bias, true);
    check(1, 8, bias, true);      // registers
    check(17, 128, bias, true);   // registers, a block mostly empty
    check(65536, 66, bias, true);
    check(33, 1024, bias, true);
    check(5, 1030, bias, true);   // a block per row, scalar
    check(5, 2048, bias, true);   // a block per row, float4
    check(3, 8192, bias, true);
    check(1000, 6000, bias, true);
    check(2, 8193, bias, true);   // three passes, scalar
  }
}

/// Rows of ±1 with epsilon 0: mean 0 and inv_std 1 exactly on both sides, so v = ±scale[j] and the
/// codes must be exactly those of the IEEE quotient. The scales put v / y_scale on, and a few float
/// steps either side of, every E4M3 rounding boundary (the subnormal ones included), and around
/// 2^-11, zero, 448 and beyond, and infinity. y_scale: others (a checked product), powers of two (an
/// exact product, 2^127's reciprocal subnormal), and scales without a normal reciprocal (division).
TEST_F(CudaLayerNorm, Fp8CodesAtRoundingBoundariesAreThoseOfTheIeeeQuotient) {
  std::vector<float> codes_values;  // the non-negative E4M3 values, increasing
  for (int code = 0; code <= 0x7E; ++code) codes_values.push_back(fp8e4m3fn_to_float(static_cast<uint8_t>(code)));
  std::vector<float> targets = {0.0f, 0x1p-12f, 0x1p-11f, 0x1p-6f, 432.0f, 448.0f, 464.0f, 500.0f, 1e6f};
  for (size_t c = 0; c + 1 < codes_values.size(); ++c) targets.push_back((codes_values[c] + codes_values[c + 1]) / 2);

  for (const float y_scale : {0.01f, 1.0f / 3.0f, 3.0f, 0.0078125f, 0x1p127f, 6e-39f, 0x1p-140f, 3e38f}) {
    std::vector<float> values;  // v = ±scale[j]
    for (const float target : targets) {
      const float center = target * y_scale;
      for (int steps = -4; steps <= 4; ++steps) {
        float v = center;
        for (int s = 0; s < std::abs(steps); ++s) v = std::nextafter(v, steps < 0 ? 0.0f : std::numeric_limits<float>::infinity());
        if (std::isfinite(v)) values.push_back(v);
      }
    }
    values.push_back(std::numeric_limits<float>::infinity());
    values.push_back(std::numeric_limits<float>::max());
    // Registers, a warp row (float4, scalar), a block row, three passes; each sees every value.
    for (const int64_t cols : {128, 1000, 998, 4000, 20000}) {
      for (size_t first = 0; first < values.size(); first += static_cast<size_t>(cols)) {
        char trace[96];
        std::snprintf(trace, sizeof trace, "y_scale=%g cols=%lld first=%zu", y_scale, static_cast<long long>(cols), first);
        SCOPED_TRACE(trace);
        Inputs in;
        in.rows = 2;  // each value with both signs
        in.cols = cols;
        in.epsilon = 0.0f;
        for (int64_t r = 0; r < in.rows; ++r)
          for (int64_t j = 0; j < cols; ++j) in.x.push_back((r + j) % 2 == 0 ? 1.0f : -1.0f);
        for (int64_t j = 0; j < cols; ++j) in.scale.push_back(values[(first + static_cast<size_t>(j)) % values.size()]);
        check_inputs(in, y_scale, /*exact_stats=*/true);
      }
    }
  }
}

/// A row of -0.0: the CPU's double sum starts at +0, so the mean is +0 and every value -0, code
/// 0x80. Each kernel must agree to the sign (a sum that started from the row's first -0 would
/// make the mean -0 and the codes +0). Widths for registers, a warp row and a block row, with a
/// power-of-two scale (an exact product) and another (a checked one).
TEST_F(CudaLayerNorm, RowsOfNegativeZeroKeepTheSignOfTheReference) {
  for (const int64_t cols : {128, 64, 1024, 2048}) {
    for (const float y_scale : {0.25f, 0.01f}) {
      SCOPED_TRACE("cols=" + std::to_string(cols) + " y_scale=" + std::to_string(y_scale));
      Inputs in;
      in.rows = 3;
      in.cols = cols;
      in.x.assign(static_cast<size_t>(in.rows * cols), -0.0f);
      in.scale.assign(static_cast<size_t>(cols), 1.5f);
      check_inputs(in, y_scale, /*exact_stats=*/true);
    }
  }
}

TEST_F(CudaLayerNorm, ResidualIsAddedAsRowsAreStagedAndOnWideRows) {
  for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {7, 63}, {4096, 64}, {17, 128}, {1, 124}, {33, 1024}, {5, 1025}, {3, 8192}, {2, 8193}, {1, 20000}}) {
    for (bool bias : {false, true}) {
      SCOPED_TRACE("rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) + (bias ? " bias" : ""));
      Inputs in = random_inputs(rows, cols, bias);
      std::mt19937 rng(static_cast<unsigned>(rows + cols));
      std::normal_distribution<float> normal(0.0f, 20.0f);
      in.residual.resize(in.x.size());
      for (float& r : in.residual) r = normal(rng);
      check_inputs(in, 0.0f, /*exact_stats=*/false);
    }
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
  args.y_scale = 1.0f;
  args.residual = buffer.as<float>();
  EXPECT_FALSE(cuda::launch_layer_norm(args, nullptr));  // a residual with FP8 output
}

}  // namespace
}  // namespace loka
