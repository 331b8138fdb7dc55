// ============================================================================
// tests/cuda/fp8_convert_test.cc — device FP8 conversion vs the host codecs.
//
// Skips with the reason printed when no CUDA device is present (CI); runs on
// the GPU machine. Checks every code's decode and a dense sweep of encodes,
// bit-exactly, for E4M3FN and E5M2, including odd counts, counts below one
// 4-value pack, and misaligned views (the scalar path); BF16 values give the
// codes of their widened float32 values.
// ============================================================================
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/device.h"
#include "kernels/cuda/fp8_convert.h"
#include "loka/bfloat16.h"
#include "loka/float8.h"

namespace loka {
namespace {

class CudaFp8 : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = cuda::device_unavailable_reason();
    if (!reason.empty()) GTEST_SKIP() << "GPU test skipped: " << reason;
  }
};

template <typename T>
struct DeviceBuffer {
  explicit DeviceBuffer(size_t count) { EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&data), count * sizeof(T) + 1), cudaSuccess); }
  ~DeviceBuffer() { cudaFree(data); }
  T* data = nullptr;
};

/// Runs the sweep with every buffer viewed `offset` elements into its allocation:
/// 0 and 4 take the packed path (values 16-byte, codes 4-byte aligned), 1 the scalar one;
/// `limit` (when > 0) cuts the sweep to that many values (counts below one pack, odd tails).
void check_format(cuda::Fp8Kind kind, uint8_t (*encode)(float, bool), float (*decode)(uint8_t), size_t offset = 0,
                  size_t limit = 0) {
  // Sweep: every code's value, midpoints between neighbours (ties), random values, specials.
  std::vector<float> values;
  for (int code = 0; code < 256; ++code) {
    const float v = decode(static_cast<uint8_t>(code));
    if (std::isnan(v)) continue;
    values.push_back(v);
    const float next = decode(static_cast<uint8_t>(code + 1));
    if (code + 1 < 256 && !std::isnan(next) && !std::isinf(next) && !std::isinf(v)) values.push_back((v + next) / 2);
  }
  std::mt19937 rng(11);
  std::lognormal_distribution<float> magnitude(0.0f, 6.0f);
  for (int i = 0; i < 100001; ++i) values.push_back((i % 2 ? -1.0f : 1.0f) * magnitude(rng));
  values.insert(values.end(), {INFINITY, -INFINITY, 1e30f, -1e30f, 0.0f, -0.0f, 1e-30f});

  if (limit > 0 && limit < values.size()) values.resize(limit);
  const size_t n = values.size();
  DeviceBuffer<float> d_values_base(n + offset);
  DeviceBuffer<uint8_t> d_codes_base(n + offset);
  DeviceBuffer<float> d_decoded_base(n + offset);
  float* d_values = d_values_base.data + offset;
  uint8_t* d_codes = d_codes_base.data + offset;
  float* d_decoded = d_decoded_base.data + offset;
  ASSERT_EQ(cudaMemcpy(d_values, values.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cuda::launch_quantize_fp8(d_values, d_codes, static_cast<int64_t>(n), 1.0f, kind, nullptr), cudaSuccess);
  ASSERT_EQ(cuda::launch_dequantize_fp8(d_codes, d_decoded, static_cast<int64_t>(n), 1.0f, kind, nullptr), cudaSuccess);
  std::vector<uint8_t> codes(n);
  std::vector<float> decoded(n);
  ASSERT_EQ(cudaMemcpy(codes.data(), d_codes, n, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(decoded.data(), d_decoded, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  size_t mismatches = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t expected = encode(values[i], true);
    if (codes[i] != expected && mismatches++ < 5)
      ADD_FAILURE() << "value " << values[i] << ": device code 0x" << std::hex << int(codes[i]) << ", host 0x" << int(expected);
    const float host_decoded = decode(codes[i]);
    if (!(host_decoded == decoded[i] || (std::isnan(host_decoded) && std::isnan(decoded[i])))) ++mismatches;
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST_F(CudaFp8, E4M3FNMatchesHostCodecBitExactly) {
  check_format(cuda::Fp8Kind::kE4M3FN, float_to_fp8e4m3fn, fp8e4m3fn_to_float);
}

TEST_F(CudaFp8, E5M2MatchesHostCodecBitExactly) {
  check_format(cuda::Fp8Kind::kE5M2, float_to_fp8e5m2, fp8e5m2_to_float);
}

TEST_F(CudaFp8, PackedAndScalarPathsAgreeWithTheHostCodecAtEveryAlignmentAndCount) {
  for (const size_t offset : {size_t{1}, size_t{4}}) {
    SCOPED_TRACE("offset " + std::to_string(offset));
    check_format(cuda::Fp8Kind::kE4M3FN, float_to_fp8e4m3fn, fp8e4m3fn_to_float, offset);
  }
  for (const size_t count : {size_t{1}, size_t{3}, size_t{4}, size_t{5}, size_t{1027}}) {
    SCOPED_TRACE("count " + std::to_string(count));
    check_format(cuda::Fp8Kind::kE4M3FN, float_to_fp8e4m3fn, fp8e4m3fn_to_float, 0, count);
    check_format(cuda::Fp8Kind::kE5M2, float_to_fp8e5m2, fp8e5m2_to_float, 0, count);
  }
}

TEST_F(CudaFp8, Bf16ValuesQuantizeToTheCodesOfTheirWidenedFloat32Values) {
  // QuantizedGemm's BF16 X: widened exactly, then the FP32 recipe, with either division, by a
  // scale that is no power of two. BF16 views 0 and 4 elements in take the packed path (8-byte
  // aligned), 1 and 2 the scalar one; counts below a pack and odd tails; NaN, ±infinity, ±0.
  std::mt19937 rng(31);
  std::lognormal_distribution<float> magnitude(-4.0f, 4.0f);
  std::vector<uint16_t> bf16;
  for (int i = 0; i < 20001; ++i) bf16.push_back(float_to_bf16((i % 2 ? -1.0f : 1.0f) * magnitude(rng)));
  for (const float special : {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e30f, 1e-30f}) bf16.push_back(float_to_bf16(special));
  std::vector<float> widened(bf16.size());
  for (size_t i = 0; i < bf16.size(); ++i) widened[i] = bf16_to_float(bf16[i]);
  const float scale = 0.0123f;
  for (const cuda::ScaleDivision division : {cuda::ScaleDivision::kReciprocal, cuda::ScaleDivision::kDivide}) {
    for (const size_t offset : {size_t{0}, size_t{1}, size_t{2}, size_t{4}}) {
      for (const size_t count : {bf16.size(), size_t{1}, size_t{3}, size_t{5}, size_t{1027}}) {
        SCOPED_TRACE(std::string(division == cuda::ScaleDivision::kDivide ? "divide" : "reciprocal") + " offset " +
                     std::to_string(offset) + " count " + std::to_string(count));
        DeviceBuffer<uint16_t> d_bf16(count + offset);
        DeviceBuffer<float> d_widened(count);
        DeviceBuffer<uint8_t> d_codes(count), d_reference(count);
        ASSERT_EQ(cudaMemcpy(d_bf16.data + offset, bf16.data(), count * 2, cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(d_widened.data, widened.data(), count * 4, cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_EQ(cuda::launch_quantize_fp8(d_bf16.data + offset, DType::kBFloat16, d_codes.data, static_cast<int64_t>(count),
                                            scale, cuda::Fp8Kind::kE4M3FN, nullptr, division),
                  cudaSuccess);
        ASSERT_EQ(cuda::launch_quantize_fp8(d_widened.data, d_reference.data, static_cast<int64_t>(count), scale,
                                            cuda::Fp8Kind::kE4M3FN, nullptr, division),
                  cudaSuccess);
        std::vector<uint8_t> codes(count), reference(count);
        ASSERT_EQ(cudaMemcpy(codes.data(), d_codes.data, count, cudaMemcpyDeviceToHost), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(reference.data(), d_reference.data, count, cudaMemcpyDeviceToHost), cudaSuccess);
        size_t mismatches = 0;
        for (size_t i = 0; i < count; ++i) {
          // The division is QuantizeLinear's: the host codec of the quotient, exactly.
          const bool host_agrees = division != cuda::ScaleDivision::kDivide || std::isnan(widened[i]) ||
                                   codes[i] == float_to_fp8e4m3fn(widened[i] / scale);
          if ((codes[i] != reference[i] || !host_agrees) && mismatches++ < 5)
            ADD_FAILURE() << "value " << widened[i] << ": code 0x" << std::hex << int(codes[i]) << ", of float32 0x"
                          << int(reference[i]);
        }
        EXPECT_EQ(mismatches, 0u);
      }
    }
  }
  uint8_t code = 0;
  EXPECT_EQ(cuda::launch_quantize_fp8(&code, DType::kFloat16, &code, 1, 1.0f, cuda::Fp8Kind::kE4M3FN, nullptr),
            cudaErrorInvalidValue);
}

TEST_F(CudaFp8, RowsEncodedIntoASliceMatchQuantizeLinearAndLeaveTheRestAlone) {
  // ai.loka ConcatQuant's kernel: rows of `cols` values into rows `pitch` codes apart, starting
  // `offset` codes in, dividing by a scale that is no power of two (x / s, not x · (1 / s)).
  struct Case {
    int64_t rows, cols, pitch, offset;
  };
  const float scale = 0.0123f;
  std::mt19937 rng(29);
  std::normal_distribution<float> value(0.0f, 3.0f);
  for (const Case& c : {Case{1, 1, 1, 0}, Case{7, 13, 40, 3}, Case{65536, 4, 12, 8}, Case{4099, 128, 640, 256},
                        Case{300, 128, 640, 1}, Case{70000, 16, 48, 32}, Case{5, 3, 3, 0}}) {
    SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.cols) + " pitch " + std::to_string(c.pitch) +
                 " offset " + std::to_string(c.offset));
    const size_t count = static_cast<size_t>(c.rows * c.cols), codes_size = static_cast<size_t>(c.rows * c.pitch);
    std::vector<float> values(count);
    for (float& v : values) v = value(rng);
    values[0] = NAN;
    if (count > 2) values[1] = 1e9f, values[2] = -0.0f;  // saturates; keeps its sign
    DeviceBuffer<float> d_values(count);
    DeviceBuffer<uint8_t> d_codes(codes_size);
    ASSERT_EQ(cudaMemcpy(d_values.data, values.data(), count * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemset(d_codes.data, 0xAB, codes_size), cudaSuccess);
    ASSERT_EQ(cuda::launch_quantize_e4m3_rows_into(d_values.data, c.rows, c.cols, scale, d_codes.data + c.offset, c.pitch,
                                                   nullptr),
              cudaSuccess);
    std::vector<uint8_t> codes(codes_size);
    ASSERT_EQ(cudaMemcpy(codes.data(), d_codes.data, codes_size, cudaMemcpyDeviceToHost), cudaSuccess);
    size_t mismatches = 0;
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t j = 0; j < c.pitch; ++j) {
        const size_t at = static_cast<size_t>(r * c.pitch + j);
        const int64_t col = j - c.offset;
        const bool inside = col >= 0 && col < c.cols && at < codes_size;
        const uint8_t expected = inside ? float_to_fp8e4m3fn(values[static_cast<size_t>(r * c.cols + col)] / scale) : 0xAB;
        if (at < codes_size && codes[at] != expected && mismatches++ < 5)
          ADD_FAILURE() << "row " << r << " code " << j << ": 0x" << std::hex << int(codes[at]) << ", expected 0x"
                        << int(expected);
      }
    EXPECT_EQ(mismatches, 0u);
  }
}

}  // namespace
}  // namespace loka
