// ============================================================================
// tests/cuda/gemm_test.cc — cuBLASLt FP32/BF16 GEMM (kernels/cuda/gemm.h) vs a
// double-precision CPU reference.
//
// Fresh random operands per case; FP32 and BF16 inputs, FP32 and BF16
// outputs; W stored [K,N] or [N,K]; strided batches; bias with no activation,
// ReLU and GELU; awkward shapes (one row, 65536 rows, K not a multiple of 16)
// and operands that start mid-buffer (4-byte aligned views, which need the
// element-aligned algorithm). Every kept heuristic algorithm is run, since
// Dispatch may pin any of them. Skips visibly without a GPU.
// ============================================================================
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cuda/gemm.h"
#include "loka/bfloat16.h"

namespace loka {
namespace {

using testing::DeviceBytes;

struct Case {
  int64_t m, n, k, batch;
  DType input, output;
  bool transpose_w;
  bool has_bias;
  cuda::GemmEpilogue epilogue;
  size_t misalign_elements = 0;  ///< operands start this many elements into their buffers
  bool broadcast_x = false;       ///< one X for every batch
  int64_t y_row_pitch = 0;        ///< Y's rows this many elements apart (0: N); the gaps must stay untouched
};

std::string describe(const Case& c) {
  return "M=" + std::to_string(c.m) + " N=" + std::to_string(c.n) + " K=" + std::to_string(c.k) +
         " batch=" + std::to_string(c.batch) + (c.input == DType::kBFloat16 ? " bf16" : " f32") + "->" +
         (c.output == DType::kBFloat16 ? "bf16" : "f32") + (c.transpose_w ? " W[N,K]" : " W[K,N]") +
         (c.has_bias ? " bias" : "") + " epilogue=" + std::to_string(static_cast<int>(c.epilogue)) +
         " misalign=" + std::to_string(c.misalign_elements) + (c.broadcast_x ? " broadcast X" : "") +
         (c.y_row_pitch ? " Y row pitch " + std::to_string(c.y_row_pitch) : "");
}

/// Values as the device will read them: BF16 operands are rounded first.
std::vector<float> random_values(size_t count, DType dtype, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) {
    v = normal(rng);
    if (dtype == DType::kBFloat16) v = bf16_to_float(float_to_bf16(v));
  }
  return values;
}

/// The bytes of `values` in `dtype`, preceded by `pad_elements` zero elements.
std::vector<uint8_t> encode(const std::vector<float>& values, DType dtype, size_t pad_elements) {
  const size_t size = dtype == DType::kBFloat16 ? 2 : 4;
  std::vector<uint8_t> bytes((values.size() + pad_elements) * size, 0);
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kBFloat16) {
      const uint16_t code = float_to_bf16(values[i]);
      std::memcpy(bytes.data() + (i + pad_elements) * 2, &code, 2);
    } else {
      std::memcpy(bytes.data() + (i + pad_elements) * 4, &values[i], 4);
    }
  }
  return bytes;
}

float decode(const std::vector<uint8_t>& bytes, size_t index, DType dtype) {
  if (dtype == DType::kBFloat16) {
    uint16_t code;
    std::memcpy(&code, bytes.data() + index * 2, 2);
    return bf16_to_float(code);
  }
  float value;
  std::memcpy(&value, bytes.data() + index * 4, 4);
  return value;
}

double activation(double v, cuda::GemmEpilogue epilogue) {
  switch (epilogue) {
    case cuda::GemmEpilogue::kRelu: return std::max(0.0, v);
    case cuda::GemmEpilogue::kGelu:  // exact: not cuBLASLt's tanh-approximating GELU epilogue (4.7e-4 off)
      return 0.5 * v * (1.0 + std::erf(v * 0.7071067811865476));
    case cuda::GemmEpilogue::kNone: return v;
  }
  return v;
}

void run_case(const Case& c, const cuda::GemmOptions& options = {}) {
  SCOPED_TRACE(describe(c));
  std::mt19937 rng(static_cast<unsigned>(c.m * 131 + c.n * 7 + c.k * 3 + c.batch));
  const int64_t x_batches = c.broadcast_x ? 1 : c.batch;
  const std::vector<float> x = random_values(static_cast<size_t>(x_batches * c.m * c.k), c.input, rng);
  const std::vector<float> w = random_values(static_cast<size_t>(c.batch * c.k * c.n), c.input, rng);
  const std::vector<float> bias = random_values(static_cast<size_t>(c.n), c.output, rng);

  cuda::GemmProblem problem{c.m, c.n, c.k, c.batch, c.broadcast_x, c.input, c.output, c.transpose_w, c.has_bias, c.epilogue};
  problem.y_row_pitch = c.y_row_pitch;
  auto gemm = cuda::Gemm::create(problem, options);
  ASSERT_TRUE(gemm) << gemm.status().message();

  const size_t pad = c.misalign_elements;
  const size_t in_size = c.input == DType::kBFloat16 ? 2 : 4, out_size = c.output == DType::kBFloat16 ? 2 : 4;
  DeviceBytes d_x(encode(x, c.input, pad)), d_w(encode(w, c.input, pad)), d_bias(encode(bias, c.output, pad));
  const int64_t ldy = c.y_row_pitch ? c.y_row_pitch : c.n;
  const size_t y_count = static_cast<size_t>(c.batch * c.m * ldy);
  DeviceBytes d_y((y_count + pad) * out_size), workspace(cuda::kGemmWorkspaceBytes);
  const cuda::GemmArgs args{d_x.as<uint8_t>() + pad * in_size, d_w.as<uint8_t>() + pad * in_size,
                            c.has_bias ? d_bias.as<uint8_t>() + pad * out_size : nullptr,
                            d_y.as<uint8_t>() + pad * out_size};

  // Rows checked: all of them for small problems, a prefix and the tail of huge ones.
  const int64_t rows_checked = std::min<int64_t>(c.m, 1024);
  for (int algorithm = 0; algorithm < (*gemm)->algorithm_count(); ++algorithm) {
    SCOPED_TRACE("algorithm " + std::to_string(algorithm));
    ASSERT_EQ(cudaMemset(d_y.get(), 0xFF, (y_count + pad) * out_size), cudaSuccess);  // NaN: what no run writes
    const Status status = (*gemm)->run_algorithm(algorithm, args, workspace.get(), nullptr);
    ASSERT_TRUE(status) << status.message();
    std::vector<uint8_t> y((y_count + pad) * out_size);
    d_y.download(y.data(), y.size());
    size_t bad = 0;
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t ii = 0; ii < rows_checked; ++ii) {
        const int64_t i = ii < rows_checked / 2 ? ii : c.m - (rows_checked - ii);
        for (int64_t j = 0; j < c.n; ++j) {
          double sum = 0, magnitude = 0;
          for (int64_t p = 0; p < c.k; ++p) {
            const size_t w_at = static_cast<size_t>(b * c.k * c.n + (c.transpose_w ? j * c.k + p : p * c.n + j));
            const int64_t x_batch = c.broadcast_x ? 0 : b;
            const double term = double(x[static_cast<size_t>((x_batch * c.m + i) * c.k + p)]) * w[w_at];
            sum += term;
            magnitude += std::fabs(term);
          }
          if (c.has_bias) sum += bias[static_cast<size_t>(j)];
          const double expected = activation(sum, c.epilogue);
          const float got = decode(y, pad + static_cast<size_t>((b * c.m + i) * ldy + j), c.output);
          // FP32 accumulation in another order: a few ulps of Σ|x·w|; BF16 output adds 2^-8 relative;
          // GELU evaluated in float (erff) adds ~1e-6.
          // TF32 rounds each input to 10 mantissa bits: 2^-10 relative per product, at worst.
          const double tolerance = (options.tf32 ? 2e-3 : 4e-6) * (magnitude + 1.0) +
                                   (c.output == DType::kBFloat16 ? std::ldexp(std::fabs(expected), -8) : 0.0) +
                                   (c.epilogue == cuda::GemmEpilogue::kGelu ? 1e-5 * (1.0 + std::fabs(sum)) : 0.0);
          if (!(std::fabs(got - expected) <= tolerance) && bad++ < 5)
            ADD_FAILURE() << "Y[" << b << "," << i << "," << j << "] = " << got << ", expected " << expected;
        }
        // Between rows, the wider matrix's other columns: untouched.
        for (int64_t j = c.n; j < ldy; ++j)
          if (!std::isnan(decode(y, pad + static_cast<size_t>((b * c.m + i) * ldy + j), c.output)) && bad++ < 5)
            ADD_FAILURE() << "column " << j << " of row " << i << " beyond N was written";
      }
    ASSERT_EQ(bad, 0u);
  }
}

class CudaGemm : public testing::CudaTest {};

TEST_F(CudaGemm, Fp32MatchesCpuReference) {
  for (const Case& c : std::vector<Case>{
           {1, 64, 64, 1, DType::kFloat32, DType::kFloat32, true, false, cuda::GemmEpilogue::kNone},
           {37, 80, 43, 1, DType::kFloat32, DType::kFloat32, false, true, cuda::GemmEpilogue::kNone},
           {256, 512, 1024, 1, DType::kFloat32, DType::kFloat32, true, true, cuda::GemmEpilogue::kRelu},
           {65536, 48, 13, 1, DType::kFloat32, DType::kFloat32, true, true, cuda::GemmEpilogue::kRelu},
           {129, 65, 31, 1, DType::kFloat32, DType::kFloat32, true, true, cuda::GemmEpilogue::kGelu},
       })
    run_case(c);
}

TEST_F(CudaGemm, Bf16MatchesCpuReference) {
  for (const Case& c : std::vector<Case>{
           {1, 256, 512, 1, DType::kBFloat16, DType::kBFloat16, true, false, cuda::GemmEpilogue::kNone},
           {512, 1024, 1024, 1, DType::kBFloat16, DType::kBFloat16, true, true, cuda::GemmEpilogue::kRelu},
           {100, 72, 24, 1, DType::kBFloat16, DType::kFloat32, false, true, cuda::GemmEpilogue::kGelu},
           {65536, 128, 256, 1, DType::kBFloat16, DType::kBFloat16, true, true, cuda::GemmEpilogue::kNone},
       })
    run_case(c);
}

TEST_F(CudaGemm, Tf32MatchesCpuReferenceWithinTf32Rounding) {
  cuda::GemmOptions tf32;
  tf32.tf32 = true;
  run_case({1, 64, 64, 1, DType::kFloat32, DType::kFloat32, true, false, cuda::GemmEpilogue::kNone}, tf32);
  run_case({4096, 512, 1024, 1, DType::kFloat32, DType::kFloat32, true, true, cuda::GemmEpilogue::kRelu}, tf32);
  run_case({37, 80, 43, 3, DType::kFloat32, DType::kFloat32, false, false, cuda::GemmEpilogue::kNone}, tf32);
}

TEST_F(CudaGemm, StridedBatchesMatchCpuReference) {
  // Attention scores and interactions: batch of small matrix products between activations.
  run_case({27, 27, 16, 64, DType::kFloat32, DType::kFloat32, true, false, cuda::GemmEpilogue::kNone});
  run_case({1, 33, 9, 513, DType::kFloat32, DType::kFloat32, false, false, cuda::GemmEpilogue::kNone});
  run_case({40, 24, 64, 7, DType::kBFloat16, DType::kBFloat16, false, false, cuda::GemmEpilogue::kNone});
}

TEST_F(CudaGemm, OneXSharedByEveryBatchMatchesCpuReference) {
  // Wukong's and DHEN's W [M,K] · X [B,K,N]: the weight is the left operand.
  Case c{28, 8, 28, 4096, DType::kFloat32, DType::kFloat32, false, false, cuda::GemmEpilogue::kNone};
  c.broadcast_x = true;
  run_case(c);
  c = {8, 16, 28, 33, DType::kBFloat16, DType::kBFloat16, false, false, cuda::GemmEpilogue::kNone};
  c.broadcast_x = true;
  run_case(c);
}

TEST_F(CudaGemm, OperandsThatStartMidBufferUseTheElementAlignedAlgorithm) {
  run_case({33, 17, 19, 1, DType::kFloat32, DType::kFloat32, true, true, cuda::GemmEpilogue::kRelu, 1});
  run_case({64, 64, 64, 3, DType::kFloat32, DType::kFloat32, false, false, cuda::GemmEpilogue::kNone, 3});
  run_case({32, 40, 24, 1, DType::kBFloat16, DType::kBFloat16, true, true, cuda::GemmEpilogue::kNone, 2});
}

TEST_F(CudaGemm, OperandsBelowFourByteAlignmentAreRefusedWithAReason) {
  auto gemm = cuda::Gemm::create({8, 8, 8, 1, false, DType::kBFloat16, DType::kBFloat16});
  ASSERT_TRUE(gemm) << gemm.status().message();
  DeviceBytes x(256), w(256), y(256), workspace(cuda::kGemmWorkspaceBytes);
  const Status status = (*gemm)->run({x.as<uint8_t>() + 2, w.get(), nullptr, y.get()}, workspace.get(), nullptr);
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("4-byte aligned"), std::string::npos) << status.message();
}

TEST_F(CudaGemm, OutOfRangeAlgorithmIsAnError) {
  auto gemm = cuda::Gemm::create({64, 64, 64});
  ASSERT_TRUE(gemm) << gemm.status().message();
  EXPECT_FALSE((*gemm)->select_algorithm((*gemm)->algorithm_count()));
  EXPECT_FALSE((*gemm)->select_algorithm(-1));
  EXPECT_TRUE((*gemm)->select_algorithm((*gemm)->algorithm_count() - 1));
}

TEST_F(CudaGemm, APitchedOutputFillsItsColumnsOfAWiderMatrixOnly) {
  // As a GEMM writes its slice of a Concat's output: rows `pitch` apart, the rest left alone.
  using cuda::GemmEpilogue;
  run_case({1000, 48, 40, 1, DType::kFloat32, DType::kFloat32, true, true, GemmEpilogue::kRelu, 0, false, 112});
  run_case({1, 128, 640, 1, DType::kFloat32, DType::kFloat32, false, false, GemmEpilogue::kNone, 0, false, 640});
  run_case({257, 64, 40, 1, DType::kBFloat16, DType::kFloat32, true, true, GemmEpilogue::kNone, 0, false, 192});
  cuda::GemmOptions tf32;
  tf32.tf32 = true;
  run_case({4096, 128, 128, 1, DType::kFloat32, DType::kFloat32, true, true, GemmEpilogue::kNone, 0, false, 640}, tf32);
}

TEST(GemmPlan, ARowPitchNeedsBatchOneNoAddendNoGeluAndAtLeastN) {
  cuda::GemmProblem problem{64, 32, 16};
  problem.y_row_pitch = 96;
  EXPECT_TRUE(cuda::Gemm::can_implement(problem));
  for (int refusal = 0; refusal < 4; ++refusal) {
    cuda::GemmProblem refused = problem;
    if (refusal == 0) refused.y_row_pitch = 31;
    if (refusal == 1) refused.batch = 2;
    if (refusal == 2) refused.has_addend = true;
    if (refusal == 3) refused.epilogue = cuda::GemmEpilogue::kGelu;
    const Status status = cuda::Gemm::can_implement(refused);
    ASSERT_FALSE(status) << "refusal " << refusal;
    EXPECT_NE(status.message().find("row pitch"), std::string::npos) << status.message();
  }
}

TEST(GemmPlan, RefusesWhatItCannotRunWithAReason) {
  cuda::GemmProblem fp32_to_bf16{8, 8, 8};
  fp32_to_bf16.output = DType::kBFloat16;
  EXPECT_FALSE(cuda::Gemm::can_implement(fp32_to_bf16));
  cuda::GemmProblem empty{0, 8, 8};
  EXPECT_FALSE(cuda::Gemm::can_implement(empty));
  cuda::GemmProblem fp8{8, 8, 16};
  fp8.input = DType::kFloat8E4M3FN;
  const Status status = cuda::Gemm::can_implement(fp8);
  ASSERT_FALSE(status);
  EXPECT_FALSE(status.message().empty());
  EXPECT_TRUE(cuda::Gemm::can_implement({8, 8, 8}));
}

}  // namespace
}  // namespace loka
