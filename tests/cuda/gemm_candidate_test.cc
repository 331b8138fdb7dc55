// ============================================================================
// tests/cuda/gemm_candidate_test.cc — the registry's TF32 and activation x
// activation BF16 candidates, the FP32, TF32 and BF16 candidates of a BF16
// activation (against their twins on its widened values, bit for bit), the
// tanh_gelu candidates of GELU nodes (FP32,
// TF32, BF16 and FP8 against the exact GELU), and the explicit split-K and tile configurations
// (kernels/cuda/gemm_candidate.h) against an FP32 CPU reference
// (dispatch_gpu_test.cc runs them through the runtime). Skips visibly without
// a GPU.
//
// Tolerances are worst-case bounds, element by element, on Σ|x·w|:
//   TF32  keeps 10 of FP32's 23 mantissa bits. Whether the tensor cores round
//         or truncate the dropped bits, each operand moves by at most 2^-10 of
//         itself, so each product by 2^-9 (plus a negligible 2^-20).
//   BF16  rounds to nearest with 7 stored bits (8 significant): 2^-8 per operand, 2^-7 per product.
// FP32 accumulation in any order adds at most K·2^-24 of Σ|x·w|. The
// relative L2 of the whole output is also checked against TF32's expected
// √(2/3)·2^-11 (≈ 4e-4) with room: below 2^-10.
// ============================================================================
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cuda/gemm_candidate.h"
#include "kernels/cuda/gemm_types.h"
#include "kernels/registry/cublaslt_tiles.h"
#include "cuda/fp8_candidate_util.h"
#include "loka/bfloat16.h"
#include "gemm_test_keys.h"

namespace loka::testing {
namespace {

using kernels::GemmCandidate;
using kernels::GemmKey;
using kernels::GemmLayout;
using kernels::GemmPrecision;
using kernels::GemmShape;

class GemmCandidateTest : public CudaTest {};

struct Outcome {
  size_t bad = 0;
  double rel_l2 = 0;
  std::vector<float> y;  ///< what the candidate wrote
};

/// Runs `candidate` on random operands and compares it with the FP32 GEMM computed in double
/// (a residual, when key.residual, added after the activation as the op says).
/// The bound per element is `per_product` x Σ|x·w| plus FP32 accumulation (K·2^-24 of it).
/// With `bf16_x_values` (and always for a BF16 key.input), X holds BF16 values: stored as BF16
/// codes when key.input is BF16, else widened to FP32; the reference reads those values.
Outcome run_against_reference(const GemmCandidate& candidate, const GemmKey& key, const GemmShape& shape,
                              double per_product, bool bf16_x_values = false) {
  std::mt19937 rng(static_cast<unsigned>(shape.m * 131 + shape.n * 7 + shape.k * 3 + shape.batch));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t w_batches = is_batched(key.layout) ? shape.batch : 1;
  std::vector<float> x(static_cast<size_t>(shape.batch * shape.m * shape.k));
  std::vector<float> w(static_cast<size_t>(w_batches * shape.k * shape.n));
  std::vector<float> bias(static_cast<size_t>(shape.n));
  for (std::vector<float>* values : {&x, &w, &bias})
    for (float& v : *values) v = normal(rng);
  const bool bf16_x = key.input == DType::kBFloat16;
  std::vector<uint16_t> x_codes;
  if (bf16_x || bf16_x_values) {
    for (float& v : x) {
      x_codes.push_back(float_to_bf16(v));
      v = bf16_to_float(x_codes.back());
    }
  }

  const Tensor host_w = Tensor::from_floats({static_cast<int64_t>(w.size())}, w);
  cuda::GemmCandidatePlanInputs inputs;
  inputs.host_w = key.constant_weight ? &host_w : nullptr;
  auto kernel = cuda::GemmKernel::create(candidate, key, shape, inputs);
  EXPECT_TRUE(kernel.is_ok()) << kernel.status().message();
  if (!kernel.is_ok()) return {1, 0};

  const size_t y_count = static_cast<size_t>(shape.batch * shape.m * shape.n);
  std::vector<float> residual(key.residual ? y_count : 0);
  for (float& v : residual) v = normal(rng);
  DeviceBytes d_residual(residual.empty() ? std::vector<float>{0.0f} : residual);
  DeviceBytes d_x(x.size() * (bf16_x ? sizeof(uint16_t) : sizeof(float)));
  d_x.upload(bf16_x ? static_cast<const void*>(x_codes.data()) : x.data(), x.size() * (bf16_x ? 2 : 4));
  DeviceBytes d_w(w), d_bias(bias), d_y(y_count * sizeof(float)), workspace(cuda::kGemmWorkspaceBytes);
  cuda::GemmCandidateArgs args;
  args.x = d_x.get();
  args.w = d_w.get();
  args.bias = key.bias ? d_bias.as<float>() : nullptr;
  args.y = d_y.as<float>();
  args.residual = key.residual ? d_residual.as<float>() : nullptr;
  const Status status = (*kernel)->run(args, workspace.get(), nullptr);
  EXPECT_TRUE(status) << status.message();
  const std::vector<float> y = d_y.download_vector<float>(y_count);

  Outcome outcome;
  outcome.y = y;
  double error = 0, norm = 0;
  for (int64_t b = 0; b < shape.batch; ++b)
    for (int64_t i = 0; i < shape.m; ++i)
      for (int64_t j = 0; j < shape.n; ++j) {
        double sum = key.bias ? bias[static_cast<size_t>(j)] : 0.0, magnitude = 0;
        for (int64_t p = 0; p < shape.k; ++p) {
          const int64_t wb = is_batched(key.layout) ? b : 0;
          const size_t w_at = static_cast<size_t>(wb * shape.k * shape.n +
                                                  (stores_w_transposed(key.layout) ? j * shape.k + p : p * shape.n + j));
          const double term = double(x[static_cast<size_t>((b * shape.m + i) * shape.k + p)]) * w[w_at];
          sum += term;
          magnitude += std::fabs(term);
        }
        // GELU: exact (erf) here; its slope stays below 1.13, and cuBLASLt's tanh form (a
        // tanh_gelu candidate) is within 4.7e-4 of it.
        const bool gelu = key.epilogue == cuda::GemmEpilogue::kGelu;
        if (gelu) sum = 0.5 * sum * (1.0 + std::erf(sum / std::sqrt(2.0)));
        if (key.epilogue == cuda::GemmEpilogue::kRelu) sum = std::max(sum, 0.0);
        if (key.residual) sum += residual[static_cast<size_t>((b * shape.m + i) * shape.n + j)];
        const double got = y[static_cast<size_t>((b * shape.m + i) * shape.n + j)];
        const double tolerance =
            (gelu ? 1.13 : 1.0) * (per_product + static_cast<double>(shape.k) * std::ldexp(1.0, -24)) * magnitude +
            1e-6 + (candidate.tanh_gelu ? 5e-4 : 0.0);
        error += (got - sum) * (got - sum);
        norm += sum * sum;
        if (!(std::fabs(got - sum) <= tolerance) && outcome.bad++ < 5)
          ADD_FAILURE() << candidate.name() << " " << shape.to_string() << ": Y[" << b << "," << i << "," << j
                        << "] = " << got << ", expected " << sum << " (tolerance " << tolerance << ")";
      }
  outcome.rel_l2 = norm > 0 ? std::sqrt(error / norm) : 0;
  return outcome;
}

/// Whether cuBLASLt here accepts `candidate` for `key` at `shape` (planned with stand-in FP32
/// weights where the candidate converts them); a refusal's reason is appended to `refusals`.
bool plans_here(const GemmCandidate& candidate, const GemmKey& key, const GemmShape& shape, std::string& refusals) {
  const Tensor host_w = Tensor::from_floats({shape.n * shape.k}, std::vector<float>(static_cast<size_t>(shape.n * shape.k), 0.5f));
  cuda::GemmCandidatePlanInputs inputs;
  if (key.weight == DType::kFloat32) inputs.host_w = &host_w;
  auto planned = cuda::GemmKernel::create(candidate, key, shape, inputs);
  if (!planned) refusals += "\n  " + shape.to_string() + ": " + planned.status().message();
  return planned.is_ok();
}

const GemmCandidate kTf32{GemmPrecision::kTf32, kernels::ScaleGranularity::kNone, 0, false};
const GemmCandidate kBf16{GemmPrecision::kBf16, kernels::ScaleGranularity::kNone, 0, false};
const double kTf32PerProduct = std::ldexp(1.0, -9);  // two operands, each within 2^-10
const double kBf16PerProduct = std::ldexp(1.0, -7);  // two operands, each within 2^-8 (8 significant bits)

TEST_F(GemmCandidateTest, Tf32MatchesTheFp32ReferenceOnAwkwardShapes) {
  // One row, K = 37 (no multiple of anything), N odd, and a sizeable tensor-core GEMM.
  for (const GemmShape shape : {GemmShape{1, 64, 37, 1}, GemmShape{33, 17, 37, 1}, GemmShape{1, 1, 1, 1},
                                GemmShape{512, 256, 1024, 1}}) {
    SCOPED_TRACE(shape.to_string());
    const Outcome outcome = run_against_reference(kTf32, fp32_gemm_key(), shape, kTf32PerProduct);
    EXPECT_EQ(outcome.bad, 0u);
    EXPECT_LT(outcome.rel_l2, std::ldexp(1.0, -10));
  }
  GemmKey nn = fp32_gemm_key();
  nn.layout = GemmLayout::kNN;
  nn.bias = false;
  EXPECT_EQ(run_against_reference(kTf32, nn, {1, 48, 37, 1}, kTf32PerProduct).bad, 0u);
}

TEST_F(GemmCandidateTest, ActivationMatMulRunsTf32AndBf16) {
  // Batched, both operands computed: TF32 reads them as they are, BF16 casts both per run.
  for (const GemmShape shape : {GemmShape{1, 16, 37, 3}, GemmShape{64, 64, 128, 8}}) {
    SCOPED_TRACE(shape.to_string());
    EXPECT_EQ(run_against_reference(kTf32, activation_matmul_key(), shape, kTf32PerProduct).bad, 0u);
    const Outcome bf16 = run_against_reference(kBf16, activation_matmul_key(), shape, kBf16PerProduct);
    EXPECT_EQ(bf16.bad, 0u);
    EXPECT_LT(bf16.rel_l2, std::ldexp(1.0, -7));
  }
  GemmKey nn = activation_matmul_key();  // [M,K] x [K,N], both computed
  nn.layout = GemmLayout::kNN;
  EXPECT_EQ(run_against_reference(kBf16, nn, {5, 24, 37, 1}, kBf16PerProduct).bad, 0u);
  // fold-transposes' X·Yᵀ: W [batch, N, K] read transposed in place; batch 1, an odd K, DHEN's shape.
  const GemmKey nt = activation_matmul_key(GemmLayout::kBatchedNT);
  for (const GemmShape shape : {GemmShape{34, 34, 128, 1}, GemmShape{7, 5, 13, 9}, GemmShape{34, 34, 128, 4096}}) {
    SCOPED_TRACE("batched_nt " + shape.to_string());
    EXPECT_EQ(run_against_reference(kTf32, nt, shape, kTf32PerProduct).bad, 0u);
    EXPECT_EQ(run_against_reference(kBf16, nt, shape, kBf16PerProduct).bad, 0u);
  }
}

TEST_F(GemmCandidateTest, NegativeTwinExactFp32IsWithinAccumulationErrorOnly) {
  // The same harness with FP32: no operand rounding, so only the accumulation bound.
  const GemmCandidate fp32{GemmPrecision::kFp32, kernels::ScaleGranularity::kNone, 0, false};
  const Outcome outcome = run_against_reference(fp32, fp32_gemm_key(), {33, 17, 37, 1}, 0.0);
  EXPECT_EQ(outcome.bad, 0u);
  EXPECT_LT(outcome.rel_l2, 1e-6);
}

// A BF16 activation (FusedGemm's X under BF16 activation storage) is the FP32 op on its widened
// values: each family computes, bit for bit, what it computes from those values stored as FP32.
// FP32 and TF32 widen X exactly before the same cuBLASLt call; BF16 reads X as it is where an
// FP32 X is cast (exactly: the values are BF16's). X is exact in TF32 and BF16, so only W rounds:
// TF32 by 2^-10 of a product (twice its 2^-11), BF16 by 2^-8 (8 significant bits). One row, K = 37, 4099 rows; ReLU with a bias, GELU
// without one over W [K,N].
TEST_F(GemmCandidateTest, ABf16ActivationComputesWhatItsWidenedValuesDoBitForBit) {
  GemmKey relu = bf16_activation_gemm_key();
  relu.epilogue = cuda::GemmEpilogue::kRelu;
  GemmKey gelu = bf16_activation_gemm_key(false);
  gelu.epilogue = cuda::GemmEpilogue::kGelu;
  gelu.layout = GemmLayout::kNN;
  for (const GemmKey& key : {relu, gelu}) {
    GemmKey fp32_twin = key;
    fp32_twin.input = DType::kFloat32;
    for (const GemmShape shape : {GemmShape{1, 64, 37, 1}, GemmShape{4099, 48, 37, 1}, GemmShape{33, 17, 64, 1}}) {
      for (const auto& [precision, per_product] : {std::pair{GemmPrecision::kFp32, 0.0},
                                                   std::pair{GemmPrecision::kTf32, std::ldexp(1.0, -10)},
                                                   std::pair{GemmPrecision::kBf16, std::ldexp(1.0, -8)}}) {
        const GemmCandidate c{precision, kernels::ScaleGranularity::kNone, 0, false};
        SCOPED_TRACE(c.name() + " " + key.to_string() + " " + shape.to_string());
        const Outcome stored = run_against_reference(c, key, shape, per_product);
        EXPECT_EQ(stored.bad, 0u);
        const Outcome widened = run_against_reference(c, fp32_twin, shape, per_product, true);
        ASSERT_EQ(stored.y.size(), widened.y.size());
        expect_same_bytes(stored.y.data(), widened.y.data(), stored.y.size(), sizeof(float));
      }
    }
  }
}

TEST_F(GemmCandidateTest, ABf16ActivationIsWidenedInTheRunScratchForFp32AndReadAsItIsByBf16) {
  const GemmShape shape{4099, 48, 37, 1};
  const Tensor host_w = Tensor::from_floats({48 * 37}, std::vector<float>(48 * 37, 0.5f));
  cuda::GemmCandidatePlanInputs inputs;
  inputs.host_w = &host_w;
  const auto run_scratch = [&](GemmPrecision precision, DType input) -> size_t {
    GemmKey key = bf16_activation_gemm_key();
    key.input = input;
    auto kernel = cuda::GemmKernel::create({precision, kernels::ScaleGranularity::kNone, 0, false}, key, shape, inputs);
    EXPECT_TRUE(kernel.is_ok()) << kernel.status().message();
    return kernel.is_ok() ? (*kernel)->run_scratch_bytes() : 0;
  };
  const size_t values = 4099 * 37;
  EXPECT_EQ(run_scratch(GemmPrecision::kFp32, DType::kBFloat16), values * sizeof(float));
  EXPECT_EQ(run_scratch(GemmPrecision::kTf32, DType::kBFloat16), values * sizeof(float));
  EXPECT_EQ(run_scratch(GemmPrecision::kBf16, DType::kBFloat16), 0u);
  // The negative twins: an FP32 X is read as it is by FP32, cast into the run scratch for BF16.
  EXPECT_EQ(run_scratch(GemmPrecision::kFp32, DType::kFloat32), 0u);
  EXPECT_GE(run_scratch(GemmPrecision::kBf16, DType::kFloat32), values * sizeof(uint16_t));
}

// bf16x2: a BF16 X times W split once into W_hi = bf16(W) and W_lo = bf16(W - W_hi), two BF16
// GEMMs summed in FP32. X is exact, W_hi + W_lo is W to 2^-17 of itself (the remainder's own
// rounding): within 2^-16 of each product plus FP32 accumulation of the reference, against
// TF32's 2^-10, and no run scratch (no
// FP32 copy of X). Awkward shapes (one row, K = 37, N = 17, 65536 rows); ReLU with a bias over
// W [N,K], exact GELU over W [K,N], and a residual both where it rides in the first GEMM's C (no
// activation) and where it is added after the activation.
TEST_F(GemmCandidateTest, SplitWeightBf16OfABf16ActivationIsFp32ClassWithNoRunScratch) {
  const GemmCandidate split{GemmPrecision::kBf16x2, kernels::ScaleGranularity::kNone, 0, false};
  GemmKey relu = bf16_activation_gemm_key();
  relu.epilogue = cuda::GemmEpilogue::kRelu;
  GemmKey gelu = bf16_activation_gemm_key(false);
  gelu.epilogue = cuda::GemmEpilogue::kGelu;
  gelu.layout = GemmLayout::kNN;
  GemmKey residual = bf16_activation_gemm_key();
  residual.residual = true;
  GemmKey gelu_residual = gelu;
  gelu_residual.residual = true;
  for (const GemmKey& key : {relu, gelu, residual, gelu_residual}) {
    for (const GemmShape shape : {GemmShape{1, 64, 37, 1}, GemmShape{33, 17, 64, 1}, GemmShape{4099, 48, 37, 1},
                                  GemmShape{512, 256, 1024, 1}}) {
      SCOPED_TRACE(key.to_string() + " " + shape.to_string());
      const Outcome outcome = run_against_reference(split, key, shape, std::ldexp(1.0, -16));
      EXPECT_EQ(outcome.bad, 0u);
      EXPECT_LT(outcome.rel_l2, 1e-5);
    }
  }
  EXPECT_EQ(run_against_reference(split, relu, {65536, 16, 24, 1}, std::ldexp(1.0, -16)).bad, 0u);
  // Negative twin: the one-term BF16 path on the same operands rounds W to 2^-8.
  const Outcome one_term = run_against_reference(kBf16, relu, {512, 256, 1024, 1}, std::ldexp(1.0, -7));
  EXPECT_GT(one_term.rel_l2, 1e-4);
  const Tensor host_w = Tensor::from_floats({48 * 37}, std::vector<float>(48 * 37, 0.3f));
  cuda::GemmCandidatePlanInputs inputs;
  inputs.host_w = &host_w;
  auto planned = cuda::GemmKernel::create(split, relu, {4099, 48, 37, 1}, inputs);
  ASSERT_TRUE(planned.is_ok()) << planned.status().message();
  EXPECT_EQ((*planned)->run_scratch_bytes(), 0u);
  // Both GEMMs write Y, so no row pitch (a Concat slice); said so.
  inputs.y_row_pitch = 64;
  auto pitched = cuda::GemmKernel::create(split, bf16_activation_gemm_key(), {4099, 48, 37, 1}, inputs);
  ASSERT_FALSE(pitched.is_ok());
  EXPECT_NE(pitched.status().message().find("no row pitch"), std::string::npos) << pitched.status().message();
}

// Explicit split-K configurations (cublaslt.*.algo0.splitkN) change only the summation order. On a
// small-M, large-K problem (where splitting K pays) each one cuBLASLt accepts must match the
// reference within its format's bound; where it refuses every one, the test says so and skips.
TEST_F(GemmCandidateTest, ExplicitSplitKConfigurationsMatchTheReference) {
  const GemmShape shape{64, 256, 4096, 1};
  int accepted = 0;
  std::string refusals;
  for (const auto& [precision, per_product] : std::vector<std::pair<GemmPrecision, double>>{
           {GemmPrecision::kFp32, 0.0}, {GemmPrecision::kTf32, kTf32PerProduct}, {GemmPrecision::kBf16, kBf16PerProduct}}) {
    for (int split_k : {2, 4}) {
      const GemmCandidate candidate{precision, kernels::ScaleGranularity::kNone, 0, false, split_k};
      SCOPED_TRACE(candidate.name());
      if (!plans_here(candidate, fp32_gemm_key(), shape, refusals)) continue;
      ++accepted;
      const Outcome outcome = run_against_reference(candidate, fp32_gemm_key(), shape, per_product);
      EXPECT_EQ(outcome.bad, 0u);
    }
  }
  if (accepted == 0) GTEST_SKIP() << "cuBLASLt here accepts no explicit split-K configuration:" << refusals;
  if (!refusals.empty()) std::printf("[ info ] refused here:%s\n", refusals.c_str());
}

// Explicit tile configurations (cublaslt.*.algo0.tileT) change the blocking, not the arithmetic:
// each tile the registry offers for a shape, where cuBLASLt accepts it, must match the reference
// within its format's bound. One row, K = 37 (no multiple of anything), and M = 4096.
TEST_F(GemmCandidateTest, ExplicitTileConfigurationsMatchTheReference) {
  std::string refusals;
  for (const auto& [precision, per_product] : std::vector<std::pair<GemmPrecision, double>>{
           {GemmPrecision::kFp32, 0.0}, {GemmPrecision::kTf32, kTf32PerProduct}, {GemmPrecision::kBf16, kBf16PerProduct}}) {
    int accepted = 0;
    for (const GemmShape shape : {GemmShape{1, 256, 37, 1}, GemmShape{33, 128, 200, 1}, GemmShape{4096, 128, 256, 1}}) {
      for (const int tile : kernels::offered_tiles(shape, kernels::kOfferedTilesPerFamily)) {
        const GemmCandidate candidate{precision, kernels::ScaleGranularity::kNone, 0, false, 0, tile};
        SCOPED_TRACE(candidate.name() + " " + shape.to_string());
        if (!plans_here(candidate, fp32_gemm_key(), shape, refusals)) continue;
        ++accepted;
        EXPECT_EQ(run_against_reference(candidate, fp32_gemm_key(), shape, per_product).bad, 0u);
      }
    }
    // The tensor-core families have every classic tile the registry offers among their capabilities.
    if (precision != GemmPrecision::kFp32) {
      EXPECT_GT(accepted, 0) << kernels::precision_name(precision) << ": no tile accepted:" << refusals;
    }
  }
  if (!refusals.empty()) std::printf("[ info ] tiles refused here:%s\n", refusals.c_str());
}

/// A QuantizedGemm of an E4M3 activation (its per-tensor scale) with bias and ReLU.
GemmKey fp8_input_key() {
  GemmKey key = quantized_gemm_key(kernels::ScaleGranularity::kTensor, DType::kFloat8E4M3FN);
  key.bias = true;
  return key;
}

TEST_F(GemmCandidateTest, ExplicitFp8TileConfigurationsMatchTheReference) {
  // FP8 needs K and N multiples of 16: one row, a few rows with K = 80, and M = 4096.
  int accepted = 0;
  std::string refusals;
  const GemmKey key = fp8_input_key();
  for (const GemmShape shape : {GemmShape{1, 256, 48, 1}, GemmShape{40, 272, 80, 1}, GemmShape{4096, 128, 256, 1}}) {
    EXPECT_EQ(fp8_candidate_mismatches({GemmPrecision::kFp8E4M3, kernels::ScaleGranularity::kTensor, 0, false}, key, shape), 0u)
        << "the heuristic's own configuration";
    for (const int tile : kernels::offered_tiles(shape, kernels::kOfferedTilesPerFamily)) {
      const GemmCandidate candidate{GemmPrecision::kFp8E4M3, kernels::ScaleGranularity::kTensor, 0, false, 0, tile};
      if (!plans_here(candidate, key, shape, refusals)) continue;
      ++accepted;
      EXPECT_EQ(fp8_candidate_mismatches(candidate, key, shape), 0u) << candidate.name();
    }
  }
  EXPECT_GT(accepted, 0) << "no FP8 tile accepted:" << refusals;
  if (!refusals.empty()) std::printf("[ info ] FP8 tiles refused here:%s\n", refusals.c_str());
}

// BF16 activation storage on cuBLASLt's FP8 family: a BF16 X is quantized as an FP32 one is (the
// same codes: its values are E4M3 values times a power of two), and a BF16 Y is cuBLASLt's D with
// the scales, bias and ReLU (or tanh GELU) in the GEMM; a residual is in Y's dtype, as C. Each
// within the FP8 bound plus Y's rounding; one row, an odd M, 4096 rows; with FAST_ACCUM. A BF16 Y
// after the exact GELU, or with a residual after its activation, is refused (the node's own op
// writes it); an FP32 Y there runs the scale epilogue, as ever.
TEST_F(GemmCandidateTest, Fp8CandidatesQuantizeABf16XAndWriteABf16Y) {
  const GemmCandidate fp8{GemmPrecision::kFp8E4M3, kernels::ScaleGranularity::kTensor, 0, false};
  GemmCandidate fast = fp8;
  fast.fast_accum = true;
  GemmCandidate tanh = fp8;
  tanh.tanh_gelu = true;
  for (const auto& [x, y] : {std::pair{DType::kBFloat16, DType::kFloat32}, std::pair{DType::kFloat32, DType::kBFloat16},
                             std::pair{DType::kBFloat16, DType::kBFloat16}}) {
    for (const cuda::GemmEpilogue activation :
         {cuda::GemmEpilogue::kNone, cuda::GemmEpilogue::kRelu, cuda::GemmEpilogue::kGelu}) {
      for (const bool residual : {false, true}) {
        GemmKey key = quantized_gemm_key(kernels::ScaleGranularity::kTensor, x);
        key.output = y;
        key.epilogue = activation;
        key.bias = true;
        key.residual = residual;
        const bool own_op = y == DType::kBFloat16 &&
                            (activation == cuda::GemmEpilogue::kGelu || (residual && activation != cuda::GemmEpilogue::kNone));
        for (const GemmShape shape : {GemmShape{1, 64, 32, 1}, GemmShape{37, 48, 80, 1}, GemmShape{4096, 128, 256, 1}}) {
          SCOPED_TRACE(key.to_string() + " " + shape.to_string());
          if (own_op) {
            std::string why;
            EXPECT_FALSE(plans_here(fp8, key, shape, why));
            EXPECT_NE(why.find("node's own op"), std::string::npos) << why;
          } else {
            EXPECT_EQ(fp8_candidate_mismatches(fp8, key, shape), 0u);
            EXPECT_EQ(fp8_candidate_mismatches(fast, key, shape), 0u);
          }
          if (activation == cuda::GemmEpilogue::kGelu && !(y == DType::kBFloat16 && residual))
            EXPECT_EQ(fp8_candidate_mismatches(tanh, key, shape), 0u);
        }
      }
    }
  }
  // A BF16 Y written into its slice of a wider matrix (a Concat's output): D's row pitch.
  GemmKey sliced = quantized_gemm_key(kernels::ScaleGranularity::kTensor, DType::kBFloat16);
  sliced.output = DType::kBFloat16;
  sliced.bias = true;
  EXPECT_EQ(fp8_candidate_mismatches(fp8, sliced, {37, 48, 80, 1}, 80), 0u);  // a pitch of 16 elements' multiple
  // A BF16 Y with a residual after cuBLASLt's tanh GELU: refused, saying why (no double rounding).
  GemmKey refused = quantized_gemm_key(kernels::ScaleGranularity::kTensor);
  refused.output = DType::kBFloat16;
  refused.epilogue = cuda::GemmEpilogue::kGelu;
  refused.residual = true;
  std::string why;
  EXPECT_FALSE(plans_here(tanh, refused, {64, 64, 64, 1}, why));
  EXPECT_NE(why.find("node's own op"), std::string::npos) << why;
}

TEST_F(GemmCandidateTest, TanhGeluCandidatesMatchTheExactGeluWithinTheApproximation) {
  GemmKey gelu = fp32_gemm_key();
  gelu.epilogue = cuda::GemmEpilogue::kGelu;
  for (const GemmShape shape : {GemmShape{1, 64, 37, 1}, GemmShape{33, 17, 37, 1}, GemmShape{4096, 256, 128, 1}}) {
    SCOPED_TRACE(shape.to_string());
    for (const auto& [precision, per_product] : {std::pair{GemmPrecision::kFp32, 0.0}, std::pair{GemmPrecision::kTf32, kTf32PerProduct},
                                                 std::pair{GemmPrecision::kBf16, kBf16PerProduct}}) {
      for (bool tanh_gelu : {false, true}) {  // the negative twin: the exact GELU pass
        GemmCandidate c{precision, kernels::ScaleGranularity::kNone, 0, false};
        c.tanh_gelu = tanh_gelu;
        EXPECT_EQ(run_against_reference(c, gelu, shape, per_product).bad, 0u) << c.name();
      }
    }
  }
  // FP8: the scales, bias and tanh GELU all in cuBLASLt's epilogue, float and E4M3 activations.
  for (DType input : {DType::kFloat32, DType::kFloat8E4M3FN}) {
    GemmKey q = quantized_gemm_key(kernels::ScaleGranularity::kTensor, input);
    q.epilogue = cuda::GemmEpilogue::kGelu;
    q.bias = true;
    GemmCandidate c{GemmPrecision::kFp8E4M3, kernels::ScaleGranularity::kTensor, 0, false};
    for (bool tanh_gelu : {false, true}) {
      c.tanh_gelu = tanh_gelu;
      for (const GemmShape shape : {GemmShape{1, 256, 48, 1}, GemmShape{40, 272, 80, 1}, GemmShape{4096, 256, 128, 1}})
        EXPECT_EQ(fp8_candidate_mismatches(c, q, shape), 0u) << c.name() << " " << shape.to_string();
    }
  }
}

TEST_F(GemmCandidateTest, PitchedOutputsMatchTheReferenceAndRefusalsSayWhy) {
  // Y written into its slice of a wider matrix (a Concat's output): FP8 with the scales in
  // cuBLASLt's GEMM, FP32 and E4M3 inputs, with bias and ReLU. (The shared reference is the
  // tensor recipe's; the row recipe's pitched GEMM, paired vector scales, is CudaFp8Gemm's.)
  const GemmShape shape{1000, 128, 64, 1};
  GemmKey key = quantized_gemm_key(kernels::ScaleGranularity::kTensor);
  key.bias = true;
  const GemmCandidate fp8{GemmPrecision::kFp8E4M3, kernels::ScaleGranularity::kTensor, 0, false};
  EXPECT_EQ(fp8_candidate_mismatches(fp8, key, shape, 640), 0u) << fp8.name();
  EXPECT_EQ(fp8_candidate_mismatches(fp8, quantized_gemm_key(kernels::ScaleGranularity::kTensor, DType::kFloat8E4M3FN),
                                     shape, 192),
            0u);
  // Refused, each saying so: LoKA's small-M kernel, a residual (added after the GEMM), a pitch
  // narrower than a row. The node then writes packed rows and its Concat copies them.
  const Tensor w = Tensor::zeros(DType::kFloat8E4M3FN, {128, 64});
  const Tensor w_scale = Tensor::from_floats({128}, std::vector<float>(128, 0.01f));
  cuda::GemmCandidatePlanInputs pitched{&w, &w_scale, nullptr, 0.5f, 8, 640};
  GemmCandidate small_m = fp8;
  small_m.library = kernels::GemmLibrary::kLoka;
  const GemmKey plain = quantized_gemm_key(kernels::ScaleGranularity::kTensor);
  GemmKey residual = plain;
  residual.epilogue = cuda::GemmEpilogue::kNone;
  residual.residual = true;
  for (const auto& [candidate, key, pitch] : {std::tuple{small_m, plain, int64_t{640}},
                                              std::tuple{fp8, residual, int64_t{640}}, std::tuple{fp8, plain, int64_t{64}}}) {
    pitched.y_row_pitch = pitch;
    auto refused = cuda::GemmKernel::create(candidate, key, {16, 128, 64, 1}, pitched);
    ASSERT_FALSE(refused) << candidate.name() << " " << key.to_string() << " pitch " << pitch;
    EXPECT_NE(refused.status().message().find("pitch"), std::string::npos) << refused.status().message();
  }
}

TEST_F(GemmCandidateTest, ARefusedTileConfigurationSaysWhy) {
  const std::vector<float> w(64 * 64, 0.5f);
  const Tensor host_w = Tensor::from_floats({64 * 64}, w);
  cuda::GemmCandidatePlanInputs inputs;
  inputs.host_w = &host_w;
  // 9999 is no cublasLtMatmulTile_t value at all; stages 9999 no cublasLtMatmulStages_t.
  const GemmCandidate no_such_tile{GemmPrecision::kBf16, kernels::ScaleGranularity::kNone, 0, false, 0, 9999};
  auto refused = cuda::GemmKernel::create(no_such_tile, fp32_gemm_key(), {64, 64, 64, 1}, inputs);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("refuses tile 9999"), std::string::npos) << refused.status().message();
  EXPECT_NE(refused.status().message().find("tile ids"), std::string::npos) << refused.status().message();
  const GemmCandidate no_such_stages{GemmPrecision::kTf32, kernels::ScaleGranularity::kNone, 0, false, 0, 20, 9999};
  refused = cuda::GemmKernel::create(no_such_stages, fp32_gemm_key(), {64, 64, 64, 1}, inputs);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("stages 9999"), std::string::npos) << refused.status().message();
}

}  // namespace
}  // namespace loka::testing
