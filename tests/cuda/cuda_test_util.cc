// ============================================================================
// tests/cuda/cuda_test_util.cc — device buffers and comparisons for CUDA tests.
// ============================================================================
#include "cuda/cuda_test_util.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cuda/device.h"

namespace loka::testing {

void CudaTest::SetUp() {
  const std::string reason = cuda::device_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << "GPU test skipped: " << reason;
}

DeviceBytes::DeviceBytes(size_t bytes) : bytes_(bytes) {
  EXPECT_EQ(cudaMalloc(&data_, bytes == 0 ? 1 : bytes), cudaSuccess);
}

DeviceBytes::DeviceBytes(const Tensor& host) : DeviceBytes(host.byte_size()) { upload(host.raw(), host.byte_size()); }

DeviceBytes::~DeviceBytes() { cudaFree(data_); }

void DeviceBytes::upload(const void* host, size_t bytes) {
  ASSERT_LE(bytes, bytes_);
  if (bytes == 0) return;
  ASSERT_EQ(cudaMemcpy(data_, host, bytes, cudaMemcpyHostToDevice), cudaSuccess);
}

void DeviceBytes::download(void* host, size_t bytes) const {
  ASSERT_LE(bytes, bytes_);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << "kernel failed: " << cudaGetErrorString(cudaGetLastError());
  if (bytes == 0) return;
  ASSERT_EQ(cudaMemcpy(host, data_, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
}

Tensor DeviceBytes::download_tensor(DType dtype, const Shape& shape) const {
  Tensor tensor = Tensor::zeros(dtype, shape);
  download(tensor.raw(), tensor.byte_size());
  return tensor;
}

namespace {

/// Bits of element i widened to a signed line on which neighbouring values are 1 apart.
int64_t ordered_bits(const Tensor& tensor, int64_t i) {
  if (tensor.dtype() == DType::kFloat32) {
    int32_t bits;
    std::memcpy(&bits, tensor.data<float>() + i, sizeof bits);
    return bits < 0 ? -static_cast<int64_t>(bits & 0x7FFFFFFF) : static_cast<int64_t>(bits);
  }
  const uint16_t code = tensor.data<uint16_t>()[i];
  return (code & 0x8000) ? -static_cast<int64_t>(code & 0x7FFF) : static_cast<int64_t>(code);
}

}  // namespace

void expect_close(const Tensor& actual, const Tensor& expected, int64_t max_ulp, float abs_tolerance) {
  ASSERT_EQ(actual.dtype(), expected.dtype());
  ASSERT_EQ(actual.shape(), expected.shape());
  const DType dtype = actual.dtype();
  ASSERT_TRUE(dtype == DType::kFloat32 || dtype == DType::kBFloat16 || dtype == DType::kFloat16);
  const std::vector<float> got = actual.to_floats(), want = expected.to_floats();
  size_t mismatches = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float x = got[i], y = want[i];
    if (std::isnan(x) || std::isnan(y)) {
      if (std::isnan(x) && std::isnan(y)) continue;
    } else if (x == y || std::fabs(x - y) <= abs_tolerance) {
      continue;
    } else {
      const int64_t ulps = std::llabs(ordered_bits(actual, static_cast<int64_t>(i)) - ordered_bits(expected, static_cast<int64_t>(i)));
      if (ulps <= max_ulp) continue;
    }
    if (mismatches++ < 5)
      ADD_FAILURE() << "element " << i << ": got " << x << ", expected " << y << " (allowed " << max_ulp << " ulp or "
                    << abs_tolerance << ")";
  }
  EXPECT_EQ(mismatches, 0u) << "of " << got.size() << " elements";
}

void expect_same_bytes(const void* actual, const void* expected, size_t count, size_t element_size) {
  const auto* a = static_cast<const unsigned char*>(actual);
  const auto* e = static_cast<const unsigned char*>(expected);
  size_t mismatches = 0;
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(a + i * element_size, e + i * element_size, element_size) == 0) continue;
    if (mismatches++ < 5) ADD_FAILURE() << "element " << i << " differs";
  }
  EXPECT_EQ(mismatches, 0u) << "of " << count << " elements";
}

}  // namespace loka::testing
