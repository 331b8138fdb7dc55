// ============================================================================
// tests/cuda/cuda_test_util.h — shared helpers of the CUDA kernel tests:
// the skip-without-GPU fixture, device buffers, and float comparisons that
// report the first mismatches with their index.
// ============================================================================
#pragma once

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "loka/status.h"
#include "loka/tensor.h"

namespace loka::testing {

/// Skips visibly (with the reason) when no CUDA device is usable.
class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override;
};

/// Skips visibly also when this build has no cuDNN or cuDNN opens no handle here.
class CudnnTest : public CudaTest {
 protected:
  void SetUp() override;
};

/// A device allocation of `bytes` (at least 1), freed on destruction.
class DeviceBytes {
 public:
  explicit DeviceBytes(size_t bytes);
  /// Uploads the bytes of `host`.
  explicit DeviceBytes(const Tensor& host);
  template <typename T>
  explicit DeviceBytes(const std::vector<T>& host) : DeviceBytes(host.size() * sizeof(T)) {
    upload(host.data(), host.size() * sizeof(T));
  }
  ~DeviceBytes();
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;

  void* get() const { return data_; }
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }
  void upload(const void* host, size_t bytes);
  /// Synchronises the device, then copies the first `bytes` back.
  void download(void* host, size_t bytes) const;
  template <typename T>
  std::vector<T> download_vector(size_t count) const {
    std::vector<T> host(count);
    download(host.data(), count * sizeof(T));
    return host;
  }
  /// A host tensor of `dtype` and `shape` filled from the first bytes.
  Tensor download_tensor(DType dtype, const Shape& shape) const;

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

/// Expects every element of `actual` (FLOAT, BFLOAT16 or FLOAT16) within `max_ulp`
/// units of its type (+0 and -0 are equal, NaN matches NaN), or within
/// `abs_tolerance`, of `expected` (same dtype and
/// shape); reports the count and the first few mismatches with their index.
void expect_close(const Tensor& actual, const Tensor& expected, int64_t max_ulp, float abs_tolerance = 0.0f);
/// Expects every byte to match; reports the first mismatching element of `element_size` bytes.
void expect_same_bytes(const void* actual, const void* expected, size_t count, size_t element_size);

/// Captures `launch` on a stream of its own (as the runtime captures a batch bucket's first run),
/// instantiates the graph, replays it `replays` times and synchronises; the status names the step
/// that failed, or carries the launch's own error.
Status replay_in_cuda_graph(const std::function<Status(cudaStream_t)>& launch, int replays = 1);

/// Runs a model given as bytes on the CPU and on the GPU for each batch size (the rows of every
/// input's first dim, cut from `full_inputs`); expects float outputs within
/// `tolerance` · (1 + max |CPU output|), FP8 codes at most one step apart on 0.2% of elements.
/// With `codes_scale` > 0, FP8 outputs are instead the codes of the GPU's own output 0 divided by
/// it, exactly (a QuantizedGemm's Yq: the CPU's Y differs in summation order, which moves the
/// codes of small values by many steps).
void expect_runtimes_agree(const std::string& model, const std::vector<Tensor>& full_inputs,
                           const std::vector<int64_t>& batches, float tolerance, float codes_scale = 0.0f);

}  // namespace loka::testing
