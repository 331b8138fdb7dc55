// ============================================================================
// tests/cuda/cuda_test_util.cc — device buffers and comparisons for CUDA tests.
// ============================================================================
#include "cuda/cuda_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cuda/cudnn_fp8_gemm.h"  // cudnn_unavailable_reason()
#include "kernels/cuda/device.h"
#include "loka/engine.h"
#include "loka/float8.h"
#include "loka/session.h"
#include "test_support.h"

namespace loka::testing {

void CudaTest::SetUp() {
  const std::string reason = cuda::device_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << "GPU test skipped: " << reason;
}

void CudnnTest::SetUp() {
  CudaTest::SetUp();
  if (IsSkipped()) return;
  const std::string reason = cuda::cudnn_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << "cuDNN test skipped: " << reason;
}

Status replay_in_cuda_graph(const std::function<Status(cudaStream_t)>& launch, int replays) {
  cudaStream_t stream = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess)
    return Status::error("cannot create a stream to capture on");
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  Status status = Status::ok();
  if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    status = Status::error("the capture does not begin");
  } else {
    const Status launched = launch(stream);
    const bool ended = cudaStreamEndCapture(stream, &graph) == cudaSuccess;
    if (!launched)
      status = launched;
    else if (!ended || graph == nullptr)
      status = Status::error("the capture does not end in a graph");
    else if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess)
      status = Status::error("the captured graph does not instantiate");
  }
  for (int replay = 0; status && replay < replays; ++replay)
    if (cudaGraphLaunch(exec, stream) != cudaSuccess) status = Status::error("the graph does not launch");
  if (status && cudaStreamSynchronize(stream) != cudaSuccess)
    status = Status::error(std::string("the replay fails: ") + cudaGetErrorString(cudaGetLastError()));
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  return status;
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

void expect_runtimes_agree(const std::string& model, const std::vector<Tensor>& full_inputs,
                           const std::vector<int64_t>& batches, float tolerance, float codes_scale) {
  const auto bytes = std::as_bytes(std::span(model.data(), model.size()));
  auto cpu = Engine::load_bytes(bytes);
  ASSERT_TRUE(cpu) << cpu.status().message();
  EngineOptions options;
  options.device = Device::kCuda;
  options.max_batch = std::max<int64_t>(1, *std::max_element(batches.begin(), batches.end()));
  auto gpu = Engine::load_bytes(bytes, options);
  ASSERT_TRUE(gpu) << gpu.status().message();
  auto cpu_session = (*cpu)->new_session();
  auto gpu_session = (*gpu)->new_session();
  for (int64_t rows : batches) {
    SCOPED_TRACE("batch " + std::to_string(rows));
    std::vector<Tensor> inputs;
    for (const Tensor& t : full_inputs) {
      Shape shape = t.shape();
      shape[0] = rows;
      Tensor part = Tensor::zeros(t.dtype(), shape);
      std::memcpy(part.raw(), t.raw(), part.byte_size());
      inputs.push_back(part);
    }
    auto expected = cpu_session->run(inputs);
    ASSERT_TRUE(expected) << expected.status().message();
    auto actual = gpu_session->run(inputs);
    ASSERT_TRUE(actual) << actual.status().message();
    ASSERT_EQ(actual->size(), expected->size());
    for (size_t o = 0; o < expected->size(); ++o) {
      const Tensor& e = (*expected)[o];
      const Tensor& a = (*actual)[o];
      ASSERT_EQ(a.shape(), e.shape());
      ASSERT_EQ(a.dtype(), e.dtype());
      if (e.dtype() == DType::kFloat8E4M3FN && codes_scale > 0.0f) {
        const Tensor& y = (*actual)[0];
        ASSERT_EQ(y.element_count(), a.element_count());
        size_t wrong = 0;
        for (int64_t i = 0; i < a.element_count(); ++i)
          if (static_cast<const uint8_t*>(a.raw())[i] != float_to_fp8e4m3fn(y.data<float>()[i] / codes_scale) && wrong++ < 5)
            ADD_FAILURE() << "code " << i << " is not that of output 0's " << y.data<float>()[i];
        EXPECT_EQ(wrong, 0u);
        continue;
      }
      if (e.dtype() == DType::kFloat8E4M3FN) {
        // LayerNormQuant: codes may move one step where the row statistics round differently.
        size_t moved = 0;
        for (int64_t i = 0; i < e.element_count(); ++i) {
          const int want = static_cast<const uint8_t*>(e.raw())[i], got = static_cast<const uint8_t*>(a.raw())[i];
          if (want == got) continue;
          ++moved;
          EXPECT_LE(std::abs(fp8e4m3fn_to_float(static_cast<uint8_t>(want)) - fp8e4m3fn_to_float(static_cast<uint8_t>(got))),
                    std::fabs(fp8e4m3fn_to_float(static_cast<uint8_t>(want))) * 0.126f + 1e-9f)
              << "code " << i;
        }
        EXPECT_LE(moved, static_cast<size_t>(e.element_count() / 500 + 1));
        continue;
      }
      float magnitude = 0;
      for (int64_t i = 0; i < e.element_count(); ++i) magnitude = std::max(magnitude, std::fabs(e.data<float>()[i]));
      EXPECT_LE(max_abs_difference(a, e), tolerance * (1.0f + magnitude)) << "output " << o;
    }
  }
}

}  // namespace loka::testing
