// ============================================================================
// tests/cuda/loka_ops_cuda_test.cc — the ai.loka ops (docs/loka_ops.md) on the
// CUDA runtime against the CPU runtime, and every zoo model after `loka-opt`.
//
// One-node models of QuantizedGemm (both activation recipes, FP8 input,
// bias, ReLU/GELU, shapes the FP8 tensor cores take and shapes they do not:
// K or N not a multiple of 16; X, Multiplier, Residual and Y stored in BF16,
// also against the node storing them in float32), FusedGemm (FP32; 2-D and 3-D X, transB,
// bias, ReLU/GELU; X stored in BF16 on the default, TF32 and BF16 kernels, also bit for bit
// against the node reading the widened values in float32), QuantizedGather (per-row and per-tensor
// scales), EmbeddingBags (mixed float32/BF16/FP8 tables, odd D, float32 or BF16
// output), LayerNormQuant and ResidualLayerNorm run on both runtimes with fresh random inputs at
// awkward batches (1, 7, 4096). Then each zoo model goes through the default
// `loka-opt` pipeline and its eval data must agree between the runtimes:
// what the Probe measured on the CPU is what the GPU serves. Skips visibly
// without a GPU.
// ============================================================================
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/fp8_gemm.h"
#include "kernels/registry/kernel_plan.h"
#include "loka/bfloat16.h"
#include "loka/engine.h"
#include "loka/float8.h"
#include "loka/session.h"
#include "model_builder.h"
#include "passes/onnx/onnx_import.h"
#include "passes/probe/annotations.h"
#include "runtime/test_data.h"
#include "test_support.h"

namespace loka {
namespace {

using Attributes = std::vector<std::pair<std::string, testing::TestAttribute>>;

class CudaLokaOps : public testing::CudaTest {};

/// Random FP8 E4M3FN codes (finite: NaN codes 0x7F/0xFF excluded).
Tensor random_codes(std::mt19937& rng, const Shape& shape) {
  Tensor codes = Tensor::zeros(DType::kFloat8E4M3FN, shape);
  std::uniform_int_distribution<int> code(0, 255);
  auto* bytes = static_cast<uint8_t*>(codes.raw());
  for (int64_t i = 0; i < codes.element_count(); ++i) {
    int c = code(rng);
    while ((c & 0x7F) == 0x7F) c = code(rng);
    bytes[i] = static_cast<uint8_t>(c);
  }
  return codes;
}

Tensor scalar(float value) {
  Tensor t = Tensor::zeros(DType::kFloat32, {});
  *t.data<float>() = value;
  return t;
}

/// A tensor's float32 values rounded to BF16 (nearest even): as a BF16 tensor, and widened back
/// (exactly) as a float32 one.
struct Bf16Values {
  Tensor bf16, widened;
};
Bf16Values bf16_values(const Tensor& values) {
  Bf16Values out{Tensor::zeros(DType::kBFloat16, values.shape()), Tensor::zeros(DType::kFloat32, values.shape())};
  for (int64_t i = 0; i < values.element_count(); ++i) {
    out.bf16.data<uint16_t>()[i] = float_to_bf16(values.data<float>()[i]);
    out.widened.data<float>()[i] = bf16_to_float(out.bf16.data<uint16_t>()[i]);
  }
  return out;
}

/// The first `rows` rows of `full` (a feed at a smaller batch).
Tensor first_rows(const Tensor& full, int64_t rows) {
  Shape shape = full.shape();
  shape[0] = rows;
  Tensor part = Tensor::zeros(full.dtype(), shape);
  std::memcpy(part.raw(), full.raw(), part.byte_size());
  return part;
}

struct QuantizedGemmCase {
  int64_t k, n;
  std::string recipe;      // "tensor", "row" or "fp8" (FP8 input from a LayerNormQuant)
  std::string activation;  // "none", "relu", "gelu"
  bool bias;
  bool epilogue_terms = false;  // Multiplier and Residual (the DCN cross layer)
  bool residual_only = false;   // a Residual alone (cuBLASLt's C, or an add after the activation)
  bool codes = false;           // output 1, Yq (fuse-epilogue-quantize)
};

std::string describe(const QuantizedGemmCase& c) {
  return "K=" + std::to_string(c.k) + " N=" + std::to_string(c.n) + " " + c.recipe + " " + c.activation +
         (c.bias ? " bias" : "") + (c.epilogue_terms ? " multiplier+residual" : "") +
         (c.residual_only ? " residual" : "") + (c.codes ? " codes" : "");
}

/// Which of QuantizedGemm's activations a model stores in BF16 (docs/loka_ops.md): X, the
/// Multiplier, the Residual, and Y (output_dtype = 16).
struct Bf16Storage {
  bool x = false, multiplier = false, residual = false, y = false;
};

std::string describe(const Bf16Storage& bf16) {
  return std::string("BF16") + (bf16.x ? " X" : "") + (bf16.multiplier ? " Multiplier" : "") +
         (bf16.residual ? " Residual" : "") + (bf16.y ? " Y" : "");
}

/// Y reaches a few units: this Yq scale saturates part of the codes. Not a power of two, so
/// Y / s and Y · (1 / s) differ where they round: the codes must divide, as the op says.
constexpr float kYScale = 0.0123f;

constexpr int64_t kQuantizedGemmRows = 4096;

/// A serialized model and its feeds at the largest batch it is run at.
struct OneNodeModel {
  std::string bytes;
  std::vector<Tensor> feeds;
};

/// `c` as a one-node model, with fresh random weights and feeds drawn from a seed of K and N.
/// With `bf16`, the float feeds hold BF16 values, stored as BF16 where it says (so a model that
/// stores them as float32 reads the very same values) and Y is BF16 where it says.
OneNodeModel quantized_gemm_model(const QuantizedGemmCase& c, const std::optional<Bf16Storage>& bf16) {
  std::mt19937 rng(static_cast<unsigned>(c.k * 1000 + c.n));
  const int64_t rows = kQuantizedGemmRows;
  testing::ModelBuilder builder(17);
  builder.opset("ai.loka", 1);
  std::uniform_real_distribution<float> w_scale(0.001f, 0.01f);
  Tensor scales = Tensor::zeros(DType::kFloat32, {c.n});
  for (int64_t j = 0; j < c.n; ++j) scales.data<float>()[j] = w_scale(rng);
  builder.initializer("w", random_codes(rng, {c.n, c.k})).initializer("w_scale", scales);
  builder.initializer("b", testing::random_tensor(rng, {c.n}, -0.5f, 0.5f));
  builder.initializer("x_scale", scalar(3.0f / 448.0f));
  // A graph input [rows, cols] of values in [-bound, bound]: float32, or BF16 values stored as
  // `stored_bf16` says.
  const auto float_input = [&](const std::string& name, int64_t cols, float bound, bool stored_bf16) {
    const Tensor values = testing::random_tensor(rng, {rows, cols}, -bound, bound);
    builder.input(name, stored_bf16 ? DType::kBFloat16 : DType::kFloat32, {-1, cols});
    if (!bf16) return values;
    Bf16Values rounded = bf16_values(values);
    return stored_bf16 ? rounded.bf16 : rounded.widened;
  };
  OneNodeModel model;
  if (c.recipe == "fp8") {
    model.feeds.push_back(random_codes(rng, {rows, c.k}));
    builder.input("x", DType::kFloat8E4M3FN, {-1, c.k});
  } else {
    model.feeds.push_back(float_input("x", c.k, 3.0f, bf16 && bf16->x));
  }
  Attributes attributes = {{"act_recipe", std::string(c.recipe == "row" ? "row" : "tensor")},
                           {"activation", c.activation}};
  const bool bf16_y = bf16 && bf16->y;
  if (bf16_y) attributes.emplace_back("output_dtype", int64_t{16});
  std::vector<std::string> inputs = {"x", "w", "w_scale", c.bias ? "b" : "", "x_scale"};
  if (c.epilogue_terms || c.residual_only) {
    model.feeds.push_back(float_input("residual", c.n, 2.0f, bf16 && bf16->residual));
    if (c.epilogue_terms) model.feeds.push_back(float_input("x0", c.n, 2.0f, bf16 && bf16->multiplier));
    inputs.insert(inputs.end(), {c.epilogue_terms ? "x0" : "", "residual"});
  }
  std::vector<std::string> outputs = {"y"};
  if (c.codes) {
    builder.initializer("y_scale", scalar(kYScale));
    inputs.resize(7);
    inputs.push_back("y_scale");
    outputs.push_back("yq");
  }
  builder.node("QuantizedGemm", inputs, outputs, attributes, "qgemm", "ai.loka");
  builder.output_unshaped("y", bf16_y ? DType::kBFloat16 : DType::kFloat32);
  if (c.codes) builder.output_unshaped("yq", DType::kFloat8E4M3FN);
  model.bytes = builder.serialize();
  return model;
}

void check_quantized_gemm(const QuantizedGemmCase& c) {
  SCOPED_TRACE(describe(c));
  const OneNodeModel model = quantized_gemm_model(c, std::nullopt);
  // Exact FP8 products summed in another order, by tensor cores whose accumulator keeps about 14
  // significant bits between FP32 promotions (measured here: 3.5e-3 of the largest output at K=64).
  testing::expect_runtimes_agree(model.bytes, model.feeds, {1, 7, kQuantizedGemmRows}, 6e-3f, c.codes ? kYScale : 0.0f);
}

TEST_F(CudaLokaOps, QuantizedGemmMatchesTheCpuRuntime) {
  for (const QuantizedGemmCase& c : std::vector<QuantizedGemmCase>{
           {64, 32, "tensor", "none", true},
           {64, 32, "row", "relu", true},
           {128, 256, "fp8", "gelu", true},
           {256, 48, "row", "none", false},
           {216, 6, "tensor", "none", true},   // N not a multiple of 16: no FP8 tensor-core path
           {6, 216, "row", "relu", true},      // K not a multiple of 16
           {6, 216, "tensor", "gelu", true},   // ... exact GELU after the FP32 fallback GEMM
           {6, 216, "tensor", "none", false},
           {13, 7, "fp8", "relu", true},
           {64, 32, "tensor", "none", true, true},  // the DCN cross layer's epilogue
           {216, 6, "row", "none", true, true},     // ... on the FP32 fallback
           {64, 32, "tensor", "none", true, false, true},  // a residual alone: cuBLASLt's C
           {64, 32, "fp8", "relu", true, false, true},     // ... after ReLU: an add pass
           {128, 256, "row", "gelu", false, false, true},  // ... after GELU: the scale epilogue
           {6, 216, "tensor", "none", true, false, true},  // ... on the FP32 fallback
           {64, 32, "tensor", "none", true, true, false, true},  // the cross layer writing Yq
           {128, 256, "fp8", "relu", false, true, false, true},  // ... from FP8 codes, ReLU
           {216, 6, "row", "none", true, true, false, true},     // ... on the FP32 fallback
       })
    check_quantized_gemm(c);
}

/// One batch's outputs of a model storing activations in BF16, on both runtimes, and of its twin
/// storing them in float32 on the GPU.
struct Bf16Runs {
  std::vector<Tensor> cpu, gpu, float32_twin;
};

/// Runs `model` on the CPU and the GPU, and `twin` on the GPU, on the first rows of their feeds at
/// each of `batches`, and hands each batch's outputs to `check`.
void run_beside_float32_twin(const OneNodeModel& model, const OneNodeModel& twin, const std::vector<int64_t>& batches,
                             const std::function<void(const Bf16Runs&)>& check) {
  const auto bytes = [](const std::string& text) { return std::as_bytes(std::span(text.data(), text.size())); };
  EngineOptions options;
  options.device = Device::kCuda;
  options.max_batch = *std::max_element(batches.begin(), batches.end());
  auto cpu = Engine::load_bytes(bytes(model.bytes));
  auto gpu = Engine::load_bytes(bytes(model.bytes), options);
  auto gpu_twin = Engine::load_bytes(bytes(twin.bytes), options);
  ASSERT_TRUE(cpu) << cpu.status().message();
  ASSERT_TRUE(gpu) << gpu.status().message();
  ASSERT_TRUE(gpu_twin) << gpu_twin.status().message();
  auto cpu_session = (*cpu)->new_session();
  auto gpu_session = (*gpu)->new_session();
  auto twin_session = (*gpu_twin)->new_session();
  for (const int64_t rows : batches) {
    SCOPED_TRACE("batch " + std::to_string(rows));
    std::vector<Tensor> feeds, twin_feeds;
    for (const Tensor& feed : model.feeds) feeds.push_back(first_rows(feed, rows));
    for (const Tensor& feed : twin.feeds) twin_feeds.push_back(first_rows(feed, rows));
    auto expected = cpu_session->run(feeds);
    ASSERT_TRUE(expected) << expected.status().message();
    auto actual = gpu_session->run(feeds);
    ASSERT_TRUE(actual) << actual.status().message();
    auto float32_storage = twin_session->run(twin_feeds);
    ASSERT_TRUE(float32_storage) << float32_storage.status().message();
    check(Bf16Runs{std::move(*expected), std::move(*actual), std::move(*float32_storage)});
    if (::testing::Test::HasFatalFailure()) return;
  }
}

/// `c` storing activations in BF16 as `storage` says, on both runtimes and beside its twin storing
/// them in float32 on the GPU (the same values: the feeds hold BF16 values either way). Y is the
/// CPU runtime's within QuantizedGemm's tolerance (which covers Y's BF16 rounding, 2^-8 of a value)
/// or one BF16 step. Where the twin runs the same kernels (the scale epilogue after the FP8 GEMM,
/// for a Multiplier or Yq; or the FP32 fallback, K or N not a multiple of 16) a BF16 X, Multiplier
/// or Residual computes exactly what its widened float32 values do: Y is the twin's, rounded to
/// nearest even when BF16, and the codes are the twin's, bit for bit (those of the float32 result,
/// before Y's rounding).
void check_bf16_quantized_gemm(const QuantizedGemmCase& c, const Bf16Storage& storage) {
  SCOPED_TRACE(describe(c) + ", " + describe(storage));
  const bool same_kernels = c.epilogue_terms || c.codes || c.k % 16 != 0 || c.n % 16 != 0;
  run_beside_float32_twin(
      quantized_gemm_model(c, storage), quantized_gemm_model(c, Bf16Storage{}), {1, 7, kQuantizedGemmRows},
      [&](const Bf16Runs& runs) {
        const Tensor& y = runs.gpu[0];
        ASSERT_EQ(y.dtype(), storage.y ? DType::kBFloat16 : DType::kFloat32);
        float magnitude = 0;
        for (const float v : runs.cpu[0].to_floats()) magnitude = std::max(magnitude, std::fabs(v));
        testing::expect_close(y, runs.cpu[0], 1, 6e-3f * (1.0f + magnitude));
        if (!same_kernels) return;
        const Tensor& twin_y = runs.float32_twin[0];
        const Tensor expected_y = storage.y ? bf16_values(twin_y).bf16 : twin_y;
        testing::expect_same_bytes(y.raw(), expected_y.raw(), static_cast<size_t>(y.element_count()),
                                   dtype_size(y.dtype()));
        if (c.codes)
          testing::expect_same_bytes(runs.gpu[1].raw(), runs.float32_twin[1].raw(),
                                     static_cast<size_t>(runs.gpu[1].element_count()), 1);
      });
}

TEST_F(CudaLokaOps, QuantizedGemmStoringActivationsInBf16MatchesTheCpuAndItsFloat32Twin) {
  const Bf16Storage everything{true, true, true, true}, y_only{false, false, false, true};
  for (const auto& [c, storage] : std::vector<std::pair<QuantizedGemmCase, Bf16Storage>>{
           // DLRM-DCNv2's cross layer with its residual stream in BF16: x0, x and y, writing Yq.
           {{64, 32, "tensor", "none", true, true, false, true}, everything},
           {{64, 32, "tensor", "none", true, true, false, true}, y_only},
           {{64, 32, "tensor", "none", true, true, false, true}, {true, false, false, false}},
           {{64, 32, "row", "relu", true, true}, {false, true, false, false}},   // a BF16 Multiplier alone
           {{64, 32, "row", "relu", true, true}, {false, false, true, true}},    // ... a BF16 Residual, and Y
           {{128, 256, "fp8", "relu", false, true, false, true}, {false, true, true, true}},  // FP8 X
           // No Multiplier nor Yq: the registry's cuBLASLt FP8 kernel quantizes a BF16 X and writes a
           // BF16 Y as its D, a residual in Y's dtype as C. Not the twin's kernels (its D is FP32):
           // no bytes claim.
           {{64, 32, "tensor", "relu", true}, {true, false, false, false}},
           {{64, 32, "row", "relu", true}, {true, false, false, true}},
           {{64, 32, "tensor", "none", true}, {false, false, false, true}},
           {{64, 32, "tensor", "none", true, false, true}, {false, false, true, true}},  // residual as C, BF16
           // QuantizedGemm's own op: a BF16 Y after the exact GELU or with a residual after its
           // activation, and a BF16 Residual beside an FP32 Y.
           {{128, 256, "row", "gelu", false}, {true, false, false, true}},
           {{64, 32, "row", "relu", true, false, true}, {true, false, true, true}},
           {{64, 32, "tensor", "none", true, false, true}, {false, false, true, false}},
           // The FP32 fallback (N or K not a multiple of 16).
           {{216, 6, "row", "none", true, true, false, true}, everything},
           {{6, 216, "tensor", "gelu", true}, {true, false, false, true}},
           {{6, 216, "tensor", "none", true, false, true}, {false, false, true, false}},
       })
    check_bf16_quantized_gemm(c, storage);
}

/// A QuantizedGemm (bias, `activation`) on x [rows, 128] -> [rows, 256] writing Yq at kYScale;
/// `with_y`: Y is an output too, else the node leaves it out (fuse-epilogue-quantize's export).
std::string codes_writing_gemm(bool with_y, const std::string& activation, std::mt19937& rng) {
  testing::ModelBuilder builder(17);
  builder.opset("ai.loka", 1);
  Tensor scales = Tensor::zeros(DType::kFloat32, {256});
  for (int64_t j = 0; j < 256; ++j) scales.data<float>()[j] = 0.002f + 0.00003f * static_cast<float>(j);
  builder.initializer("w", random_codes(rng, {256, 128})).initializer("w_scale", scales);
  builder.initializer("b", testing::random_tensor(rng, {256}, -0.5f, 0.5f));
  builder.initializer("x_scale", scalar(3.0f / 448.0f)).initializer("y_scale", scalar(kYScale));
  builder.input("x", DType::kFloat32, {-1, 128});
  builder.node("QuantizedGemm", {"x", "w", "w_scale", "b", "x_scale", "", "", "y_scale"}, {with_y ? "y" : "", "yq"},
               {{"activation", activation}}, "qgemm", "ai.loka");
  if (with_y) builder.output_unshaped("y", DType::kFloat32);
  builder.output_unshaped("yq", DType::kFloat8E4M3FN);
  return builder.serialize();
}

TEST_F(CudaLokaOps, QuantizedGemmLeavingYOutWritesTheCodesItWritesBesideY) {
  for (const std::string activation : {"none", "gelu"}) {
    SCOPED_TRACE(activation);
    std::mt19937 rng(91);
    const std::string with_y = codes_writing_gemm(true, activation, rng);
    rng.seed(91);
    const std::string codes_only = codes_writing_gemm(false, activation, rng);
    const Tensor x = testing::random_tensor(rng, {4099, 128}, -3.0f, 3.0f);
    EngineOptions options;
    options.device = Device::kCuda;
    options.max_batch = 4099;
    auto gpu_with_y = Engine::load_bytes(std::as_bytes(std::span(with_y.data(), with_y.size())), options);
    auto gpu_codes_only = Engine::load_bytes(std::as_bytes(std::span(codes_only.data(), codes_only.size())), options);
    auto cpu_with_y = Engine::load_bytes(std::as_bytes(std::span(with_y.data(), with_y.size())));
    ASSERT_TRUE(gpu_with_y && gpu_codes_only && cpu_with_y);
    const std::vector<Tensor> feeds{x};
    auto both = (*gpu_with_y)->new_session()->run(feeds);
    auto codes = (*gpu_codes_only)->new_session()->run(feeds);
    auto reference = (*cpu_with_y)->new_session()->run(feeds);
    ASSERT_TRUE(both && codes && reference) << (both ? (codes ? reference.status() : codes.status()) : both.status()).message();
    ASSERT_EQ(both->size(), 2u);
    ASSERT_EQ(codes->size(), 1u);
    // The same kernels, Y written or not: the same codes, bit for bit, and those of Y.
    EXPECT_EQ(std::memcmp((*both)[1].raw(), (*codes)[0].raw(), (*codes)[0].byte_size()), 0);
    const Tensor& y = (*both)[0];
    size_t not_of_y = 0;
    for (int64_t i = 0; i < y.element_count(); ++i)
      not_of_y += static_cast<const uint8_t*>((*codes)[0].raw())[i] != float_to_fp8e4m3fn(y.data<float>()[i] / kYScale);
    EXPECT_EQ(not_of_y, 0u);
    // And Y is the CPU runtime's within QuantizedGemm's tolerance: the BF16 sums add 2^-8 of each
    // sum (before the bias, so a code of a small Y may move more than a step where the bias
    // cancels most of the sum) to the summation order's error.
    float magnitude = 0;
    for (int64_t i = 0; i < y.element_count(); ++i) magnitude = std::max(magnitude, std::fabs((*reference)[0].data<float>()[i]));
    EXPECT_LE(testing::max_abs_difference(y, (*reference)[0]), 6e-3f * (1.0f + magnitude));
  }
}

TEST_F(CudaLokaOps, ConcatQuantWritesTheCpuRuntimesCodesBitForBit) {
  // DHEN's combine at width 128 + 128 + 64 along the last axis, and a token-axis join; batch 1, 7
  // and 4099. The same FP32 division and encoding on both runtimes: identical codes.
  for (const int64_t axis : {int64_t{-1}, int64_t{1}}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    std::mt19937 rng(97);
    testing::ModelBuilder builder(19);
    builder.opset("ai.loka", 1);
    builder.initializer("y_scale", scalar(0.0123f));
    const std::vector<int64_t> widths = axis == -1 ? std::vector<int64_t>{128, 128, 64} : std::vector<int64_t>{34, 32, 1};
    std::vector<std::string> inputs = {"y_scale"};
    std::vector<Tensor> feeds;
    for (size_t i = 0; i < widths.size(); ++i) {
      const std::string name = "x" + std::to_string(i);
      const std::vector<int64_t> shape = axis == -1 ? std::vector<int64_t>{-1, 34, widths[i]} : std::vector<int64_t>{-1, widths[i], 128};
      builder.input(name, DType::kFloat32, shape);
      inputs.push_back(name);
      Shape full = shape;
      full[0] = 4099;
      feeds.push_back(testing::random_tensor(rng, full, -8.0f, 8.0f));
    }
    builder.node("ConcatQuant", inputs, {"yq"}, {{"axis", axis}}, "combine", "ai.loka");
    builder.output_unshaped("yq", DType::kFloat8E4M3FN);
    const std::string model = builder.serialize();
    EngineOptions options;
    options.device = Device::kCuda;
    options.max_batch = 4099;
    auto gpu = Engine::load_bytes(std::as_bytes(std::span(model.data(), model.size())), options);
    auto cpu = Engine::load_bytes(std::as_bytes(std::span(model.data(), model.size())));
    ASSERT_TRUE(gpu && cpu) << (gpu ? cpu.status() : gpu.status()).message();
    auto gpu_session = (*gpu)->new_session();
    auto cpu_session = (*cpu)->new_session();
    for (const int64_t batch : {int64_t{1}, int64_t{7}, int64_t{4099}}) {
      std::vector<Tensor> part;
      for (const Tensor& t : feeds) {
        Shape shape = t.shape();
        shape[0] = batch;
        Tensor slice = Tensor::zeros(DType::kFloat32, shape);
        std::memcpy(slice.raw(), t.raw(), slice.byte_size());
        part.push_back(slice);
      }
      auto expected = cpu_session->run(part);
      auto actual = gpu_session->run(part);
      ASSERT_TRUE(expected && actual) << (expected ? actual.status() : expected.status()).message();
      ASSERT_EQ((*actual)[0].shape(), (*expected)[0].shape());
      EXPECT_EQ(std::memcmp((*actual)[0].raw(), (*expected)[0].raw(), (*expected)[0].byte_size()), 0) << "batch " << batch;
    }
  }
}

TEST_F(CudaLokaOps, GemmChainsBorrowTheirRunScratchFromTheArena) {
  // 16 FP8 GEMMs in a chain, each quantizing its X [4096, 1024] per tensor: the codes (4 MiB a
  // step) are borrowed from the bucket's arena for that step alone, so planning the bucket
  // allocates about one codes buffer beside the values. Kept by each GEMM, they took 64 MiB.
  constexpr int kLayers = 16;
  constexpr int64_t kRows = 4096, kWidth = 1024;
  // Without cuBLASLt FP8 (before sm_89) the FP32 fallback keeps 4 MiB of decoded weights a layer.
  if (!cuda::Fp8Gemm::create({kRows, kWidth, kWidth, false, false, DType::kFloat32, false, cuda::GemmEpilogue::kNone}))
    GTEST_SKIP() << "no cuBLASLt FP8 GEMM for " << kRows << "x" << kWidth << "x" << kWidth << " on this device";
  std::mt19937 rng(5);
  testing::ModelBuilder builder(17);
  builder.opset("ai.loka", 1);
  builder.input("x0", DType::kFloat32, {-1, kWidth});
  Tensor scales = Tensor::zeros(DType::kFloat32, {kWidth});
  for (int64_t j = 0; j < kWidth; ++j) scales.data<float>()[j] = 1.0f / 1024.0f;
  builder.initializer("ws", scales).initializer("xs", scalar(4.0f / 448.0f));
  // prefix + index, appended (gcc 12's -Wrestrict misreads "literal" + std::string here).
  const auto name = [](const char* prefix, int index) { return std::string(prefix).append(std::to_string(index)); };
  for (int l = 0; l < kLayers; ++l) {
    builder.initializer(name("w", l), random_codes(rng, {kWidth, kWidth}));
    builder.node("QuantizedGemm", {name("x", l), name("w", l), "ws", "", "xs"}, {name("x", l + 1)}, {}, name("gemm", l),
                 "ai.loka");
  }
  builder.output_unshaped(name("x", kLayers), DType::kFloat32);
  const std::string model = builder.serialize();
  EngineOptions options;
  options.device = Device::kCuda;
  options.max_batch = kRows;
  auto engine = Engine::load_bytes(std::as_bytes(std::span(model.data(), model.size())), options);
  ASSERT_TRUE(engine) << engine.status().message();
  auto session = (*engine)->new_session();
  const std::vector<Tensor> x = {testing::random_tensor(rng, {kRows, kWidth}, -3.0f, 3.0f)};
  const size_t before = cuda::device_memory_use().live_bytes;
  auto outputs = session->run(x);  // plans the bucket: arena, kernels
  ASSERT_TRUE(outputs) << outputs.status().message();
  const size_t grown = cuda::device_memory_use().live_bytes - before;
  const size_t values = kRows * kWidth * sizeof(float), codes = kRows * kWidth;
  // Two value slots the steps alternate between, the graph output, one codes buffer all steps
  // share and the kernels' scale vectors (about 36 MiB): well under the 16 codes buffers alone.
  // That the shared bytes hold no step's live values is what the zoo and op tests on CUDA check
  // against the CPU runtime (a GEMM's codes beside its input, output and the Concat outputs).
  EXPECT_LT(grown, 3 * values + 2 * codes) << grown / (1 << 20) << " MiB";
  const Tensor& y = (*outputs)[0];
  for (int64_t i = 0; i < y.element_count(); ++i) ASSERT_TRUE(std::isfinite(y.data<float>()[i])) << i;
}

TEST_F(CudaLokaOps, FusedGemmMatchesTheCpuRuntime) {
  struct Case {
    int64_t k, n;
    bool three_d, trans_b, bias;
    std::string activation;
    bool residual = false;
  };
  for (const Case& c : std::vector<Case>{{64, 32, true, false, true, "relu"},
                                         {216, 6, false, true, true, "gelu"},
                                         {13, 7, true, false, false, "relu"},
                                         {48, 40, false, false, true, "none"},
                                         {48, 40, true, false, true, "none", true},   // residual as cuBLASLt's C
                                         {64, 32, false, true, false, "gelu", true},  // ... after GELU: a pass
                                         {64, 32, true, false, true, "relu", true}}) {
    SCOPED_TRACE("K=" + std::to_string(c.k) + " N=" + std::to_string(c.n) + (c.three_d ? " 3-D" : " 2-D") +
                 (c.trans_b ? " transB" : "") + (c.bias ? " bias " : " ") + c.activation + (c.residual ? " residual" : ""));
    std::mt19937 rng(static_cast<unsigned>(c.k * 100 + c.n));
    testing::ModelBuilder builder(17);
    builder.opset("ai.loka", 1);
    builder.initializer("w", testing::random_tensor(rng, c.trans_b ? Shape{c.n, c.k} : Shape{c.k, c.n}, -1.0f, 1.0f));
    builder.initializer("b", testing::random_tensor(rng, {c.n}, -0.5f, 0.5f));
    const int64_t tokens = 5;
    builder.input("x", DType::kFloat32, c.three_d ? Shape{-1, tokens, c.k} : Shape{-1, c.k});
    if (c.residual) builder.input("r", DType::kFloat32, c.three_d ? Shape{-1, tokens, c.n} : Shape{-1, c.n});
    const Attributes attributes = {{"transB", int64_t{c.trans_b ? 1 : 0}}, {"activation", c.activation}};
    std::vector<std::string> inputs = {"x", "w", c.bias ? "b" : ""};
    if (c.residual) inputs.push_back("r");
    builder.node("FusedGemm", inputs, {"y"}, attributes, "fused", "ai.loka");
    builder.output_unshaped("y", DType::kFloat32);
    const int64_t rows = 4096;
    std::vector<Tensor> feeds = {
        testing::random_tensor(rng, c.three_d ? Shape{rows, tokens, c.k} : Shape{rows, c.k}, -2.0f, 2.0f)};
    if (c.residual)
      feeds.push_back(testing::random_tensor(rng, c.three_d ? Shape{rows, tokens, c.n} : Shape{rows, c.n}, -2.0f, 2.0f));
    // cuBLASLt's FP32 GEMM sums in another order than the CPU reference: FP32 rounding only.
    testing::expect_runtimes_agree(builder.serialize(), feeds, {1, 7, rows}, 1e-4f);
  }
}

TEST_F(CudaLokaOps, BatchedFusedGemmMatchesTheCpuRuntime) {
  // fold-transposes' X·Yᵀ: one strided-batched cuBLASLt GEMM reading W [B, N, K] transposed in place.
  for (const bool trans_b : {true, false}) {
    for (const int64_t k : {128, 13}) {
      SCOPED_TRACE(std::string(trans_b ? "transB" : "W [K, N]") + " K=" + std::to_string(k));
      std::mt19937 rng(static_cast<unsigned>(k + (trans_b ? 1 : 0)));
      const int64_t m = 34, n = trans_b ? 34 : 24;
      testing::ModelBuilder builder(17);
      builder.opset("ai.loka", 1);
      builder.input("x", DType::kFloat32, Shape{-1, m, k});
      builder.input("w", DType::kFloat32, trans_b ? Shape{-1, n, k} : Shape{-1, k, n});
      builder.node("FusedGemm", {"x", "w"}, {"y"}, {{"transB", int64_t{trans_b ? 1 : 0}}}, "fused", "ai.loka");
      builder.output_unshaped("y", DType::kFloat32);
      const int64_t rows = 4096;
      const std::vector<Tensor> feeds = {testing::random_tensor(rng, {rows, m, k}, -2.0f, 2.0f),
                                         testing::random_tensor(rng, trans_b ? Shape{rows, n, k} : Shape{rows, k, n}, -2.0f, 2.0f)};
      testing::expect_runtimes_agree(builder.serialize(), feeds, {1, 7, rows}, 1e-4f);
    }
  }
}

/// A FusedGemm whose X is stored in BF16 (store-activations-bf16): the FP32 op on its widened values.
struct Bf16FusedGemmCase {
  int64_t k, n;
  bool three_d, trans_b, bias;
  std::string activation;
  bool residual = false;
  bool batched_w = false;  // W an activation [rows, N, K] (or [rows, K, N]): a strided batch over X [rows, 5, K]
};

std::string describe(const Bf16FusedGemmCase& c) {
  return "K=" + std::to_string(c.k) + " N=" + std::to_string(c.n) + (c.three_d ? " 3-D" : " 2-D") +
         (c.trans_b ? " transB" : "") + (c.bias ? " bias " : " ") + c.activation + (c.residual ? " residual" : "") +
         (c.batched_w ? " batched W" : "");
}

constexpr int64_t kFusedGemmRows = 4099;

/// `c` as a one-node model reading X as `x_type`, with feeds at kFusedGemmRows rows drawn from a
/// seed of K and N, as the weights are: X holds BF16 values either way, so a model reading it as
/// float32 reads the very same values. With `kernel`, a Dispatch plan (the cost model's: no
/// algorithm index to re-check) asks for that candidate at every batch.
OneNodeModel bf16_fused_gemm_model(const Bf16FusedGemmCase& c, DType x_type, const std::string& kernel) {
  std::mt19937 rng(static_cast<unsigned>(c.k * 100 + c.n));
  const int64_t tokens = 5;
  const Shape w_matrix = c.trans_b ? Shape{c.n, c.k} : Shape{c.k, c.n};
  const auto rows_of = [&](int64_t rows, int64_t width) {
    return c.three_d ? Shape{rows, tokens, width} : Shape{rows, width};
  };
  testing::ModelBuilder builder(17);
  builder.opset("ai.loka", 1);
  builder.input("x", x_type, rows_of(-1, c.k));
  if (c.batched_w) {
    builder.input("w", DType::kFloat32, {-1, w_matrix[0], w_matrix[1]});
  } else {
    builder.initializer("w", testing::random_tensor(rng, w_matrix, -1.0f, 1.0f));
  }
  builder.initializer("b", testing::random_tensor(rng, {c.n}, -0.5f, 0.5f));
  if (c.residual) builder.input("r", DType::kFloat32, rows_of(-1, c.n));
  std::vector<std::string> inputs = {"x", "w", c.bias ? "b" : ""};
  if (c.residual) inputs.push_back("r");
  builder.node("FusedGemm", inputs, {"y"}, {{"transB", int64_t{c.trans_b ? 1 : 0}}, {"activation", c.activation}},
               "fused", "ai.loka");
  builder.output_unshaped("y", DType::kFloat32);
  if (!kernel.empty()) {
    auto* plan = builder.proto().add_metadata_props();
    plan->set_key(kernels::kKernelPlanKey);
    plan->set_value("loka.kernels 1\ndevice\t" + std::string(kernels::kCostModelDevice) + "\nfused\t1\t" + kernel +
                    "\n");
  }
  const Bf16Values x = bf16_values(testing::random_tensor(rng, rows_of(kFusedGemmRows, c.k), -2.0f, 2.0f));
  OneNodeModel model{builder.serialize(), {x_type == DType::kBFloat16 ? x.bf16 : x.widened}};
  if (c.batched_w)
    model.feeds.push_back(testing::random_tensor(rng, {kFusedGemmRows, w_matrix[0], w_matrix[1]}, -1.0f, 1.0f));
  if (c.residual) model.feeds.push_back(testing::random_tensor(rng, rows_of(kFusedGemmRows, c.n), -2.0f, 2.0f));
  return model;
}

TEST_F(CudaLokaOps, FusedGemmReadingBf16MatchesTheCpuAndItsFloat32TwinBitForBit) {
  // A BF16 X is widened exactly, then the op is unchanged: each kernel writes what it writes for
  // the float32 twin fed the widened values, bit for bit — the default FP32 kernel (X widened
  // first), and Dispatch's TF32 (the same widening) and BF16 (X read as it is, where the twin's
  // is cast: exactly, its values are BF16's) — and the CPU runtime's Y within the kernel's
  // tolerance: FP32 rounding only for FP32; for TF32 and BF16, X is exact and W rounds (2^-10
  // and 2^-8 of a product). Strictly: a candidate that does not build is an error, no fallback.
  ::setenv("LOKA_STRICT_KERNELS", "1", 1);
  for (const auto& [kernel, tolerance] : std::vector<std::pair<std::string, float>>{
           {"", 1e-4f}, {"cublaslt.tf32.algo0", 4e-3f}, {"cublaslt.bf16.algo0", 4e-3f}}) {
    for (const Bf16FusedGemmCase& c : std::vector<Bf16FusedGemmCase>{
             {37, 48, false, true, true, "relu"},              // K = 37, bias and ReLU in cuBLASLt's epilogue
             {37, 40, true, false, true, "gelu", true},        // 3-D X, W [K,N], exact GELU, a residual after it
             {64, 32, false, true, true, "none", true},        // a residual as cuBLASLt's C
             {216, 6, false, false, false, "none"},            // N = 6, no bias
             {13, 34, true, true, false, "none", false, true},  // fold-transposes' X·Yᵀ, K = 13
         }) {
      SCOPED_TRACE((kernel.empty() ? std::string("default kernel") : kernel) + ", " + describe(c));
      run_beside_float32_twin(
          bf16_fused_gemm_model(c, DType::kBFloat16, kernel), bf16_fused_gemm_model(c, DType::kFloat32, kernel),
          {1, 7, kFusedGemmRows}, [&](const Bf16Runs& runs) {
            const Tensor& y = runs.gpu[0];
            ASSERT_EQ(y.dtype(), DType::kFloat32);
            float magnitude = 0;
            for (const float v : runs.cpu[0].to_floats()) magnitude = std::max(magnitude, std::fabs(v));
            testing::expect_close(y, runs.cpu[0], 0, tolerance * (1.0f + magnitude));
            ASSERT_EQ(runs.float32_twin[0].shape(), y.shape());
            testing::expect_same_bytes(y.raw(), runs.float32_twin[0].raw(), static_cast<size_t>(y.element_count()),
                                       sizeof(float));
          });
    }
  }
  ::unsetenv("LOKA_STRICT_KERNELS");
}

TEST_F(CudaLokaOps, QuantizedGatherMatchesTheCpuRuntime) {
  for (bool per_row : {true, false}) {
    SCOPED_TRACE(per_row ? "per-row scales" : "one scale");
    std::mt19937 rng(per_row ? 11 : 12);
    const int64_t vocabulary = 1000, dim = 24, rows = 4096, bag = 3;
    Tensor scales = testing::random_tensor(rng, {per_row ? vocabulary : 1}, 0.001f, 0.01f);
    Tensor ids = Tensor::zeros(DType::kInt64, {rows, bag});
    std::uniform_int_distribution<int64_t> id(-vocabulary, vocabulary - 1);
    for (int64_t i = 0; i < ids.element_count(); ++i) ids.data<int64_t>()[i] = id(rng);
    testing::ModelBuilder builder(17);
    builder.opset("ai.loka", 1);
    builder.initializer("table", random_codes(rng, {vocabulary, dim})).initializer("scales", scales);
    builder.input("ids", DType::kInt64, {-1, bag});
    builder.node("QuantizedGather", {"table", "scales", "ids"}, {"y"}, {}, "qgather", "ai.loka");
    builder.output_unshaped("y", DType::kFloat32);
    testing::expect_runtimes_agree(builder.serialize(), {ids}, {1, 7, rows}, 0.0f);  // one multiply: exact
  }
}

TEST_F(CudaLokaOps, EmbeddingBagsMatchTheCpuRuntime) {
  // Float32, FP8 per-row and FP8 per-tensor tables; D = 24 (vector loads) and D = 5 (scalar
  // path); bags of 1, 3 and 2 ids starting at column 1 of 7; a batch of 65536 covers the grid limit.
  for (const int64_t dim : {int64_t{24}, int64_t{5}}) {
    SCOPED_TRACE("D=" + std::to_string(dim));
    std::mt19937 rng(static_cast<unsigned>(40 + dim));
    const std::vector<int64_t> vocabulary{50, 1000, 7};
    const int64_t rows = 65536;
    Tensor ids = Tensor::zeros(DType::kInt64, {rows, 7});
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < 7; ++k) {
        const int64_t v = vocabulary[k < 2 ? 0 : k < 5 ? 1 : 2];
        ids.data<int64_t>()[r * 7 + k] = std::uniform_int_distribution<int64_t>(-v, v - 1)(rng);
      }
    testing::ModelBuilder builder(17);
    builder.opset("ai.loka", 1);
    builder.initializer("t0", testing::random_tensor(rng, {vocabulary[0], dim}));
    builder.initializer("t1", random_codes(rng, {vocabulary[1], dim}));
    builder.initializer("s1", testing::random_tensor(rng, {vocabulary[1]}, 0.001f, 0.01f));
    builder.initializer("t2", random_codes(rng, {vocabulary[2], dim}));
    builder.initializer("s2", testing::random_tensor(rng, {1}, 0.001f, 0.01f));
    builder.input("ids", DType::kInt64, {-1, 7});
    builder.node("EmbeddingBags", {"ids", "t0", "", "t1", "s1", "t2", "s2"}, {"y"},
                 {{"offsets", std::vector<int64_t>{1, 2, 5, 7}}}, "bags", "ai.loka");
    builder.output_unshaped("y", DType::kFloat32);
    // The GPU sums in FP32 (FMA for FP8 rows), the CPU in double: a few ulps of values below ~15.
    testing::expect_runtimes_agree(builder.serialize(), {ids}, {1, 7, 4096}, 1e-5f);
  }
}

TEST_F(CudaLokaOps, EmbeddingBagsWithBf16TablesMatchTheCpuAndTheirWidenedFloat32Tables) {
  // BF16 tables (what store-tables-bf16 writes) among float32 and FP8 per-row ones, int32 ids.
  // D = 24, 12 and 5 take the BF16 kernel's 8-wide, 4-wide and scalar loads; bags of 2, 1, 3
  // and 1 over columns 0..6 of 7, the last table BF16 with its Row_scale dropped.
  for (const int64_t dim : {int64_t{24}, int64_t{12}, int64_t{5}}) {
    SCOPED_TRACE("D=" + std::to_string(dim));
    std::mt19937 rng(static_cast<unsigned>(50 + dim));
    const std::vector<int64_t> vocabulary{50, 7, 1000, 300}, offsets{0, 2, 3, 6, 7};
    const int64_t rows = 4099;
    Tensor ids = Tensor::zeros(DType::kInt32, {rows, 7});
    for (int64_t r = 0; r < rows; ++r)
      for (size_t t = 0; t < 4; ++t)
        for (int64_t k = offsets[t]; k < offsets[t + 1]; ++k)
          ids.data<int32_t>()[r * 7 + k] =
              static_cast<int32_t>(std::uniform_int_distribution<int64_t>(-vocabulary[t], vocabulary[t] - 1)(rng));
    // A BF16 table and the float32 table of its widened values (exact).
    const auto bf16_table = [&](int64_t v) { return bf16_values(testing::random_tensor(rng, {v, dim}, -2.0f, 2.0f)); };
    const auto [t0, t0_widened] = bf16_table(vocabulary[0]);
    const Tensor t1 = testing::random_tensor(rng, {vocabulary[1], dim});
    const Tensor t2 = random_codes(rng, {vocabulary[2], dim});
    const Tensor s2 = testing::random_tensor(rng, {vocabulary[2]}, 0.001f, 0.01f);
    const auto [t3, t3_widened] = bf16_table(vocabulary[3]);
    const auto model = [&](const Tensor& first, const Tensor& last) {
      testing::ModelBuilder builder(17);
      builder.opset("ai.loka", 1);
      builder.initializer("t0", first).initializer("t1", t1).initializer("t2", t2).initializer("s2", s2);
      builder.initializer("t3", last);
      builder.input("ids", DType::kInt32, {-1, 7});
      builder.node("EmbeddingBags", {"ids", "t0", "", "t1", "", "t2", "s2", "t3"}, {"y"}, {{"offsets", offsets}}, "bags",
                   "ai.loka");
      builder.output_unshaped("y", DType::kFloat32);
      return builder.serialize();
    };
    const std::string bf16_model = model(t0, t3), widened_model = model(t0_widened, t3_widened);
    // The GPU sums in FP32, the CPU in double: a few ulps of values below ~10.
    testing::expect_runtimes_agree(bf16_model, {ids}, {1, 7, rows}, 1e-5f);
    // On the GPU as on the CPU, a BF16 table pools exactly as its widened float32 table: the same
    // FP32 values added in the same (bag) order, whatever the load width.
    EngineOptions options;
    options.device = Device::kCuda;
    options.max_batch = rows;
    auto bf16_gpu = Engine::load_bytes(std::as_bytes(std::span(bf16_model.data(), bf16_model.size())), options);
    auto widened_gpu = Engine::load_bytes(std::as_bytes(std::span(widened_model.data(), widened_model.size())), options);
    ASSERT_TRUE(bf16_gpu) << bf16_gpu.status().message();
    ASSERT_TRUE(widened_gpu) << widened_gpu.status().message();
    auto bf16_session = (*bf16_gpu)->new_session();
    auto widened_session = (*widened_gpu)->new_session();
    for (const int64_t batch : {int64_t{1}, int64_t{7}, rows}) {
      SCOPED_TRACE("batch " + std::to_string(batch));
      const std::vector<Tensor> inputs{first_rows(ids, batch)};
      auto actual = bf16_session->run(inputs);
      ASSERT_TRUE(actual) << actual.status().message();
      auto expected = widened_session->run(inputs);
      ASSERT_TRUE(expected) << expected.status().message();
      ASSERT_EQ((*actual)[0].shape(), (Shape{batch, 4, dim}));
      ASSERT_EQ((*expected)[0].shape(), (*actual)[0].shape());
      testing::expect_same_bytes((*actual)[0].raw(), (*expected)[0].raw(),
                                 static_cast<size_t>((*actual)[0].element_count()), sizeof(float));
    }
  }
}

TEST_F(CudaLokaOps, EmbeddingBagsWithBf16OutputMatchTheCpuAndTheirFloat32OutputRounded) {
  // output_dtype = 16 over float32, FP8 (per-row) and BF16 tables, int64 ids, bags of 1, 3 and 2;
  // D = 24, 12 and 5 take the 8-wide, 4-wide and scalar stores of BF16 rows. Against the CPU
  // (double sums rounded to float32, then to BF16: one BF16 step apart, or 1e-5 of the largest
  // value where a bag's sum cancels near zero and the GPU's FMA sums and the CPU's rounded products
  // part by more), and against the same node writing float32 on the GPU: its sums rounded to
  // nearest even, bit for bit.
  for (const int64_t dim : {int64_t{24}, int64_t{12}, int64_t{5}}) {
    SCOPED_TRACE("D=" + std::to_string(dim));
    std::mt19937 rng(static_cast<unsigned>(60 + dim));
    const std::vector<int64_t> vocabulary{50, 1000, 300}, offsets{0, 1, 4, 6};
    const int64_t rows = 4099;
    Tensor ids = Tensor::zeros(DType::kInt64, {rows, 6});
    for (int64_t r = 0; r < rows; ++r)
      for (size_t t = 0; t < 3; ++t)
        for (int64_t k = offsets[t]; k < offsets[t + 1]; ++k)
          ids.data<int64_t>()[r * 6 + k] = std::uniform_int_distribution<int64_t>(-vocabulary[t], vocabulary[t] - 1)(rng);
    const Tensor t0 = testing::random_tensor(rng, {vocabulary[0], dim}, -2.0f, 2.0f);
    const Tensor t1 = random_codes(rng, {vocabulary[1], dim});
    const Tensor s1 = testing::random_tensor(rng, {vocabulary[1]}, 0.001f, 0.01f);
    const Tensor t2 = bf16_values(testing::random_tensor(rng, {vocabulary[2], dim}, -2.0f, 2.0f)).bf16;
    const auto model = [&](DType output) {
      testing::ModelBuilder builder(17);
      builder.opset("ai.loka", 1);
      builder.initializer("t0", t0).initializer("t1", t1).initializer("s1", s1).initializer("t2", t2);
      builder.input("ids", DType::kInt64, {-1, 6});
      builder.node("EmbeddingBags", {"ids", "t0", "", "t1", "s1", "t2"}, {"y"},
                   {{"offsets", offsets}, {"output_dtype", static_cast<int64_t>(output)}}, "bags", "ai.loka");
      builder.output_unshaped("y", output);
      return OneNodeModel{builder.serialize(), {ids}};
    };
    run_beside_float32_twin(model(DType::kBFloat16), model(DType::kFloat32), {1, 7, rows}, [&](const Bf16Runs& runs) {
      const Tensor& y = runs.gpu[0];
      ASSERT_EQ(y.dtype(), DType::kBFloat16);
      ASSERT_EQ(y.shape(), (Shape{runs.cpu[0].dim(0), 3, dim}));
      float largest = 0.0f;
      for (const float v : runs.cpu[0].to_floats()) largest = std::max(largest, std::fabs(v));
      testing::expect_close(y, runs.cpu[0], 1, 1e-5f * (1.0f + largest));
      const Tensor rounded = bf16_values(runs.float32_twin[0]).bf16;
      testing::expect_same_bytes(y.raw(), rounded.raw(), static_cast<size_t>(y.element_count()), 2);
    });
  }
}

TEST_F(CudaLokaOps, EmbeddingBagsOutOfRangeIdFailsTheRunNamingTheNode) {
  std::mt19937 rng(44);
  testing::ModelBuilder builder(17);
  builder.opset("ai.loka", 1);
  builder.initializer("t0", testing::random_tensor(rng, {10, 8}));
  builder.input("ids", DType::kInt64, {-1, 2});
  builder.node("EmbeddingBags", {"ids", "t0"}, {"y"}, {{"offsets", std::vector<int64_t>{0, 2}}}, "bags", "ai.loka");
  builder.output_unshaped("y", DType::kFloat32);
  const std::string model = builder.serialize();
  EngineOptions options;
  options.device = Device::kCuda;
  options.max_batch = 64;
  auto gpu = Engine::load_bytes(std::as_bytes(std::span(model.data(), model.size())), options);
  ASSERT_TRUE(gpu) << gpu.status().message();
  const std::vector<int64_t> ids{0, 1, 9, 10};  // 10 is outside [-10, 10)
  const std::vector<Tensor> inputs{Tensor::from_int64s({2, 2}, ids)};
  auto result = (*gpu)->new_session()->run(inputs);
  ASSERT_FALSE(result);
  EXPECT_NE(result.status().message().find("bags"), std::string::npos) << result.status().message();
}

TEST_F(CudaLokaOps, LayerNormQuantMatchesTheCpuRuntime) {
  for (int64_t cols : {8, 64, 1500}) {
    SCOPED_TRACE("C=" + std::to_string(cols));
    std::mt19937 rng(static_cast<unsigned>(cols));
    testing::ModelBuilder builder(17);
    builder.opset("ai.loka", 1);
    builder.initializer("scale", testing::random_tensor(rng, {cols}, 0.5f, 1.5f));
    builder.initializer("b", testing::random_tensor(rng, {cols}, -0.2f, 0.2f));
    builder.initializer("y_scale", scalar(4.0f / 448.0f));
    builder.input("x", DType::kFloat32, {-1, cols});
    builder.node("LayerNormQuant", {"x", "scale", "b", "y_scale"}, {"y"}, {{"epsilon", 1e-5f}}, "lnq", "ai.loka");
    builder.output_unshaped("y", DType::kFloat8E4M3FN);
    testing::expect_runtimes_agree(builder.serialize(), {testing::random_tensor(rng, {4096, cols}, -20.0f, 30.0f)}, {1, 7, 4096},
                          0.0f);
  }
}

TEST_F(CudaLokaOps, ResidualLayerNormMatchesTheCpuRuntime) {
  for (int64_t cols : {8, 64, 1500, 9000}) {
    SCOPED_TRACE("C=" + std::to_string(cols));
    std::mt19937 rng(static_cast<unsigned>(cols + 7));
    testing::ModelBuilder builder(17);
    builder.opset("ai.loka", 1);
    builder.initializer("scale", testing::random_tensor(rng, {cols}, 0.5f, 1.5f));
    builder.initializer("b", testing::random_tensor(rng, {cols}, -0.2f, 0.2f));
    builder.input("x", DType::kFloat32, {-1, cols});
    builder.input("r", DType::kFloat32, {-1, cols});
    builder.node("ResidualLayerNorm", {"x", "r", "scale", cols == 64 ? "" : "b"}, {"y"}, {{"epsilon", 1e-5f}}, "rln",
                 "ai.loka");
    builder.output_unshaped("y", DType::kFloat32);
    const int64_t rows = cols > 1500 ? 512 : 4096;
    testing::expect_runtimes_agree(builder.serialize(),
                                   {testing::random_tensor(rng, {rows, cols}, -20.0f, 30.0f),
                                    testing::random_tensor(rng, {rows, cols}, -5.0f, 5.0f)},
                                   {1, 7, rows}, 1e-5f);
  }
}

class OptimizedZooOnCuda : public testing::CudaTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(OptimizedZooOnCuda, EvalOutputsMatchTheCpuRuntime) {
  const auto folder = testing::source_dir() / "models" / "zoo" / GetParam();
  const auto out = testing::make_temp_dir("loka_opt_cuda") / "model.loka.onnx";
  const testing::CommandResult opt = testing::run_command(
      (testing::tools_dir() / "loka-opt").string() + " " + (folder / "model.onnx").string() + " -o " + out.string() +
      " --calib " + (folder / "calib").string() + " --quiet");
  ASSERT_EQ(opt.exit_code, 0) << opt.output;
  // The CPU runtime computes every GEMM in FP32 (FP8 operands exactly), the GPU runs the
  // dispatched kernels: FP8 products are exact on both and sums differ in order and width
  // (1e-3), but a kernel Dispatch granted in BF16 or TF32 rounds its operands (BF16: 2^-8
  // relative), which moves probabilities by up to ~1e-2 through a few layers.
  float tolerance = 1e-3f;
  auto graph = onnx_io::import_model_file(out);
  ASSERT_TRUE(graph) << graph.status().message();
  auto document = read_annotations(**graph);
  ASSERT_TRUE(document) << document.status().message();
  for (const auto& [name, node] : (*document)["nodes"].items()) {
    if (!node.is_object() || !node.contains("kernels") || !node["kernels"].is_object()) continue;
    for (const auto& [bucket, choice] : node["kernels"].items()) {
      if (!choice.is_object() || !choice.contains("precision") || !choice["precision"].is_string()) continue;
      const std::string precision = choice["precision"].get<std::string>();
      if (precision == "bf16" || precision == "tf32") tolerance = 1e-2f;
    }
  }
  auto reader = DataSetReader::open(folder / "eval");
  ASSERT_TRUE(reader) << reader.status().message();
  auto cpu = Engine::load_file(out);
  ASSERT_TRUE(cpu) << cpu.status().message();
  std::ifstream file(out, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  for (size_t d = 0; d < reader->size(); ++d) {
    auto data = reader->read(d);
    ASSERT_TRUE(data) << data.status().message();
    std::vector<std::string> names;
    for (const TensorInfo& info : (*cpu)->inputs()) names.push_back(info.name);
    auto inputs = order_inputs(*data, names);
    ASSERT_TRUE(inputs) << inputs.status().message();
    testing::expect_runtimes_agree(bytes, *inputs, {(*inputs)[0].dim(0), 1, 100}, tolerance);
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, OptimizedZooOnCuda, ::testing::ValuesIn(testing::zoo_model_dirs(false)),
                         [](const auto& info) { return testing::zoo_test_name(info.param); });

}  // namespace
}  // namespace loka
