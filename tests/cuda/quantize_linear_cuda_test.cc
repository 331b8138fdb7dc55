// ============================================================================
// tests/cuda/quantize_linear_cuda_test.cc — QuantizeLinear to FP8 on the CUDA
// runtime (runtime/cuda/ops/quantization.cc), bit for bit against the CPU
// runtime's ONNX kernel: every code's value, the midpoints between
// neighbouring codes (ties to even), values just beside them, beyond the
// range (saturation), NaN, ±inf and random values, with power-of-two and
// other scales, at batches 1, 7 and 4096 and an odd row length (unaligned
// tails). The forms it does not run are refused when the model is loaded,
// with a message naming what is missing. Skips visibly without a GPU.
// ============================================================================
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "loka/engine.h"
#include "loka/float8.h"
#include "loka/session.h"
#include "model_builder.h"
#include "test_support.h"

namespace loka {
namespace {

class CudaQuantizeLinear : public testing::CudaTest {};

constexpr int64_t kCols = 261;  // odd: rows start unaligned, the vector path's tails run

/// x / scale lands on every code, on the midpoints between neighbours (ties), one float
/// beside those, beyond the largest finite value, NaN and ±inf; random values fill the rest.
Tensor hard_inputs(float scale, DType to, int64_t rows, std::mt19937& rng) {
  std::vector<float> special;
  std::vector<float> values;
  for (int code = 0; code < 256; ++code) {
    const float v = to == DType::kFloat8E4M3FN ? fp8e4m3fn_to_float(static_cast<uint8_t>(code))
                                               : fp8e5m2_to_float(static_cast<uint8_t>(code));
    if (std::isfinite(v)) values.push_back(v);
  }
  std::sort(values.begin(), values.end());
  for (size_t i = 0; i < values.size(); ++i) {
    special.push_back(values[i]);
    if (i + 1 < values.size()) {
      const float mid = 0.5f * (values[i] + values[i + 1]);
      special.insert(special.end(), {mid, std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY)});
    }
  }
  const float largest = values.back();
  special.insert(special.end(), {largest * 1.5f, -largest * 4.0f, 1e30f, std::numeric_limits<float>::quiet_NaN(),
                                 INFINITY, -INFINITY, 0.0f, -0.0f, 1e-30f});
  Tensor x = Tensor::zeros(DType::kFloat32, {rows, kCols});
  std::uniform_real_distribution<float> random(-2.0f * largest, 2.0f * largest);
  float* data = x.data<float>();
  for (int64_t i = 0; i < x.element_count(); ++i) {
    const size_t s = static_cast<size_t>(i);
    data[i] = (s < special.size() ? special[s] : random(rng)) * scale;
  }
  return x;
}

std::string quantize_model(float scale, DType to, bool with_zero_point = true) {
  testing::ModelBuilder builder(19);
  builder.input("x", DType::kFloat32, {-1, kCols});
  builder.initializer("scale", Tensor::scalar_float(scale));
  builder.initializer("zero", Tensor::zeros(to, {}));
  builder.node("QuantizeLinear", {"x", "scale", with_zero_point ? "zero" : ""}, {"y"}, {}, "quantize");
  builder.output_unshaped("y", with_zero_point ? to : DType::kUInt8);
  return builder.serialize();
}

TEST_F(CudaQuantizeLinear, CodesEqualTheCpuKernelBitForBit) {
  std::mt19937 rng(53);
  for (DType to : {DType::kFloat8E4M3FN, DType::kFloat8E5M2}) {
    for (float scale : {1.0f, 0.0625f, 3.0f / 448.0f, 0.37f, 1.7e-5f}) {
      SCOPED_TRACE(std::string(dtype_name(to)) + " scale " + std::to_string(scale));
      const std::string model = quantize_model(scale, to);
      const auto bytes = std::as_bytes(std::span(model.data(), model.size()));
      auto cpu = Engine::load_bytes(bytes);
      ASSERT_TRUE(cpu) << cpu.status().message();
      EngineOptions options;
      options.device = Device::kCuda;
      options.max_batch = 4096;
      auto gpu = Engine::load_bytes(bytes, options);
      ASSERT_TRUE(gpu) << gpu.status().message();
      auto cpu_session = (*cpu)->new_session();
      auto gpu_session = (*gpu)->new_session();
      for (int64_t rows : {1, 7, 4096}) {
        SCOPED_TRACE("batch " + std::to_string(rows));
        const std::vector<Tensor> x = {hard_inputs(scale, to, rows, rng)};
        auto expected = cpu_session->run(x);
        ASSERT_TRUE(expected) << expected.status().message();
        auto actual = gpu_session->run(x);
        ASSERT_TRUE(actual) << actual.status().message();
        ASSERT_EQ((*actual)[0].dtype(), to);
        ASSERT_EQ((*actual)[0].shape(), (*expected)[0].shape());
        testing::expect_same_bytes((*actual)[0].raw(), (*expected)[0].raw(), static_cast<size_t>(x[0].element_count()), 1);
      }
    }
  }
}

// What share-activation-quantize makes of a Transpose read by FP8 GEMMs: codes, then their transpose.
TEST_F(CudaQuantizeLinear, CodesTransposeOnTheGpuAsOnTheCpu) {
  std::mt19937 rng(59);
  testing::ModelBuilder builder(21);
  builder.input("x", DType::kFloat32, {-1, 7, kCols});
  builder.initializer("scale", Tensor::scalar_float(3.0f / 448.0f));
  builder.initializer("zero", Tensor::zeros(DType::kFloat8E4M3FN, {}));
  builder.node("QuantizeLinear", {"x", "scale", "zero"}, {"q"}, {}, "quantize");
  builder.node("Transpose", {"q"}, {"t"}, {{"perm", std::vector<int64_t>{0, 2, 1}}}, "transpose");
  builder.output_unshaped("t", DType::kFloat8E4M3FN);
  const std::string model = builder.serialize();
  const auto bytes = std::as_bytes(std::span(model.data(), model.size()));
  auto cpu = Engine::load_bytes(bytes);
  ASSERT_TRUE(cpu) << cpu.status().message();
  EngineOptions options;
  options.device = Device::kCuda;
  options.max_batch = 512;
  auto gpu = Engine::load_bytes(bytes, options);
  ASSERT_TRUE(gpu) << gpu.status().message();
  for (int64_t rows : {1, 512}) {
    const std::vector<Tensor> x = {testing::random_tensor(rng, {rows, 7, kCols}, -5.0f, 5.0f)};
    auto expected = (*cpu)->new_session()->run(x);
    auto actual = (*gpu)->new_session()->run(x);
    ASSERT_TRUE(expected && actual) << (expected ? actual.status() : expected.status()).message();
    ASSERT_EQ((*actual)[0].shape(), (Shape{rows, kCols, 7}));
    testing::expect_same_bytes((*actual)[0].raw(), (*expected)[0].raw(), static_cast<size_t>(x[0].element_count()), 1);
  }
}

TEST_F(CudaQuantizeLinear, FormsWithoutAKernelAreRefusedNamingTheNode) {
  EngineOptions options;
  options.device = Device::kCuda;
  // Ops are planned per batch bucket, at its first run: the refusal comes then, before any launch.
  std::mt19937 rng(1);
  const Tensor x = testing::random_tensor(rng, {4, kCols});
  const auto refused = [&](const std::string& model, const std::vector<Tensor>& inputs, const std::string& fragment) {
    auto engine = Engine::load_bytes(std::as_bytes(std::span(model.data(), model.size())), options);
    Status status = engine.status();
    if (engine) {
      auto session = (*engine)->new_session();
      status = session->run(inputs).status();
    }
    ASSERT_FALSE(status.is_ok()) << "expected the CUDA runtime to refuse: " << fragment;
    EXPECT_NE(status.message().find(fragment), std::string::npos) << status.message();
    EXPECT_NE(status.message().find("'quantize'"), std::string::npos) << status.message();
  };
  // No zero point: a UINT8 output, which has no CUDA kernel.
  refused(quantize_model(0.5f, DType::kFloat8E4M3FN, false), {x}, "has no CUDA kernel");
  // A scale computed at run time.
  testing::ModelBuilder builder(19);
  builder.input("x", DType::kFloat32, {-1, kCols});
  builder.input("s", DType::kFloat32, {});
  builder.initializer("zero", Tensor::zeros(DType::kFloat8E4M3FN, {}));
  builder.node("QuantizeLinear", {"x", "s", "zero"}, {"y"}, {}, "quantize");
  builder.output_unshaped("y", DType::kFloat8E4M3FN);
  refused(builder.serialize(), {x, Tensor::scalar_float(0.5f)}, "y_scale must be a constant");
}

}  // namespace
}  // namespace loka
