// ============================================================================
// tests/cuda/quantize_rows_test.cc — per-row dynamic FP8 quantization on the
// GPU (kernels/cuda/quantize_rows.h) vs the CPU reference, bit for bit.
//
// The Probe decides on the "row" recipe by emulating it on the CPU, so the
// GPU must produce the same scales and codes: scale = finite amax / 448 (1 for
// an all-zero row), code = E4M3(x / scale). Fresh random rows with a wide
// dynamic range, NaN, ±Inf, zero rows and FP32/BF16 inputs; widths on both
// sides of the warp/block switch (256) and of the register limit (8192),
// one row and 65536 rows.
// ============================================================================
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cpu/fp8_quantize.h"
#include "kernels/cuda/quantize_rows.h"
#include "loka/bfloat16.h"
#include "loka/float8.h"

namespace loka {
namespace {

using testing::DeviceBytes;

class CudaQuantizeRows : public testing::CudaTest {};

/// Random values spanning many binades, with specials sprinkled in and every 7th row zero.
std::vector<float> hostile_rows(int64_t rows, int64_t k, DType dtype, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> exponent(-20.0f, 12.0f);
  std::uniform_int_distribution<int> special(0, 499);
  std::vector<float> x(static_cast<size_t>(rows * k));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < k; ++j) {
      float& v = x[static_cast<size_t>(r * k + j)];
      if (r % 7 == 3) { v = 0.0f; continue; }
      v = normal(rng) * std::exp2(exponent(rng));
      switch (special(rng)) {
        case 0: v = std::numeric_limits<float>::quiet_NaN(); break;
        case 1: v = std::numeric_limits<float>::infinity(); break;
        case 2: v = -std::numeric_limits<float>::infinity(); break;
        default: break;
      }
      if (dtype == DType::kBFloat16) v = bf16_to_float(float_to_bf16(v));
    }
  return x;
}

/// `offset` views x and the codes that many elements into their allocations
/// (1: the scalar path even when k % 4 == 0; 4: aligned again).
void check(int64_t rows, int64_t k, DType dtype, size_t offset = 0) {
  SCOPED_TRACE("rows=" + std::to_string(rows) + " k=" + std::to_string(k) + (dtype == DType::kBFloat16 ? " bf16" : " f32") +
               " offset " + std::to_string(offset));
  const std::vector<float> x = hostile_rows(rows, k, dtype, static_cast<unsigned>(rows * 31 + k));
  std::vector<float> x_padded(offset, 0.0f);
  x_padded.insert(x_padded.end(), x.begin(), x.end());
  std::vector<uint16_t> x_bf16;
  if (dtype == DType::kBFloat16)
    for (float v : x_padded) x_bf16.push_back(float_to_bf16(v));
  DeviceBytes d_x = dtype == DType::kBFloat16 ? DeviceBytes(x_bf16) : DeviceBytes(x_padded);
  DeviceBytes d_codes(x.size() + offset), d_scales(static_cast<size_t>(rows) * sizeof(float));
  const void* x_view = d_x.as<char>() + offset * dtype_size(dtype);
  const Status status = cuda::launch_quantize_rows(x_view, dtype, rows, k, d_codes.as<uint8_t>() + offset,
                                                   d_scales.as<float>(), nullptr);
  ASSERT_TRUE(status) << status.message();
  const auto all_codes = d_codes.download_vector<uint8_t>(x.size() + offset);
  const std::vector<uint8_t> codes(all_codes.begin() + static_cast<std::ptrdiff_t>(offset), all_codes.end());
  const auto scales = d_scales.download_vector<float>(static_cast<size_t>(rows));

  size_t bad = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const std::span<const float> row(x.data() + r * k, static_cast<size_t>(k));
    const float scale = cpu::fp8_scale_for_amax(cpu::finite_amax(row), cpu::Fp8Format::kE4M3FN);
    if (std::bit_cast<uint32_t>(scale) != std::bit_cast<uint32_t>(scales[static_cast<size_t>(r)]) && bad++ < 5)
      ADD_FAILURE() << "scale[" << r << "] = " << scales[static_cast<size_t>(r)] << ", expected " << scale;
    for (int64_t j = 0; j < k; ++j) {
      const uint8_t expected = float_to_fp8e4m3fn(row[static_cast<size_t>(j)] / scale);
      const uint8_t got = codes[static_cast<size_t>(r * k + j)];
      if (got != expected && bad++ < 5)
        ADD_FAILURE() << "code[" << r << "," << j << "] of " << row[static_cast<size_t>(j)] << " = 0x" << std::hex
                      << int(got) << ", expected 0x" << int(expected) << std::dec;
    }
  }
  EXPECT_EQ(bad, 0u);
}

TEST_F(CudaQuantizeRows, MatchesCpuReferenceBitForBit) {
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    check(1, 1, dtype);
    check(1, 512, dtype);
    check(37, 13, dtype);
    check(65536, 64, dtype);
    check(9, 256, dtype);
    check(9, 257, dtype);
    check(9, 1025, dtype);
    check(4, 8192, dtype);
    check(3, 8193, dtype);
    check(5, 2049, dtype);
    check(3, 10000, dtype);
    // k % 4 == 0 runs 4 columns per access when x and the codes are aligned; misaligned views do not.
    check(5, 4, dtype);
    check(33, 12, dtype);
    check(9, 256, dtype, 1);
    check(65536, 64, dtype, 1);
    check(9, 1024, dtype, 4);
    check(3, 4096, dtype, 3);
  }
}

TEST_F(CudaQuantizeRows, EmptyInputIsANoOpAndBadDtypeIsAnError) {
  EXPECT_TRUE(cuda::launch_quantize_rows(nullptr, DType::kFloat32, 0, 16, nullptr, nullptr, nullptr));
  DeviceBytes buffer(64);
  const Status status = cuda::launch_quantize_rows(buffer.get(), DType::kInt64, 1, 4, buffer.as<uint8_t>(),
                                                   buffer.as<float>(), nullptr);
  EXPECT_FALSE(status);
}

}  // namespace
}  // namespace loka
