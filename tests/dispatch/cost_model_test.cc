// ============================================================================
// tests/dispatch/cost_model_test.cc — the roofline cost model is monotonic,
// deterministic, and ranks the cases ARCHITECTURE.md measured the right way.
// ============================================================================
#include <gtest/gtest.h>

#include "kernels/registry/cost_model.h"
#include "kernels/registry/kernel_registry.h"
#include "gemm_test_keys.h"

namespace loka::kernels {
namespace {

GemmKey quantized(DType input = DType::kFloat32) {
  return testing::quantized_gemm_key(ScaleGranularity::kTensor, input);
}

const GemmCandidate kFp8{GemmPrecision::kFp8E4M3, ScaleGranularity::kTensor, 0, false};
const GemmCandidate kBf16{GemmPrecision::kBf16, ScaleGranularity::kNone, 0, false};
const GemmCandidate kFp32{GemmPrecision::kFp32, ScaleGranularity::kNone, 0, false};
const GemmCandidate kEmulated{GemmPrecision::kFp8Emulated, ScaleGranularity::kNone, 0, false};
const GemmCandidate kTf32{GemmPrecision::kTf32, ScaleGranularity::kNone, 0, false};

/// Attention QK^T / an interaction: a batched MatMul of two activations.
GemmKey activation_matmul() { return testing::activation_matmul_key(); }

/// A FusedGemm whose X is stored in BF16, and its twin reading FP32.
GemmKey bf16_activation() { return testing::bf16_activation_gemm_key(); }
GemmKey fp32_activation() {
  GemmKey key = bf16_activation();
  key.input = DType::kFloat32;
  return key;
}

TEST(CostModel, MonotonicInEveryDimension) {
  GemmKey fp32_key;
  fp32_key.op = "Gemm";
  for (const auto& [candidate, key] : std::vector<std::pair<GemmCandidate, GemmKey>>{
           {kFp8, quantized()}, {kBf16, quantized()}, {kEmulated, quantized()}, {kFp32, fp32_key}, {kBf16, fp32_key},
           {kTf32, fp32_key}, {kTf32, activation_matmul()}, {kBf16, activation_matmul()},
           {kFp32, bf16_activation()}, {kTf32, bf16_activation()}, {kBf16, bf16_activation()}}) {
    double previous_m = 0;
    for (int64_t m = 16; m <= 32768; m += m / 3 + 16) {
      const double t = model_gemm_time(candidate, key, {m, 512, 512, 1}).total_us;
      EXPECT_GE(t, previous_m) << candidate.name() << " m=" << m;
      previous_m = t;
    }
    double previous_n = 0, previous_k = 0;
    for (int64_t d = 16; d <= 16384; d += 16 * (d / 160 + 1)) {
      const double tn = model_gemm_time(candidate, key, {4096, d, 512, 1}).total_us;
      const double tk = model_gemm_time(candidate, key, {4096, 512, d, 1}).total_us;
      EXPECT_GE(tn, previous_n) << candidate.name() << " n=" << d;
      EXPECT_GE(tk, previous_k) << candidate.name() << " k=" << d;
      previous_n = tn;
      previous_k = tk;
    }
  }
}

TEST(CostModel, Deterministic) {
  const GemmShape shape{4096, 1024, 1024, 1};
  const ModelledTime a = model_gemm_time(kFp8, quantized(), shape);
  const ModelledTime b = model_gemm_time(kFp8, quantized(), shape);
  EXPECT_EQ(a.total_us, b.total_us);
  EXPECT_EQ(a.kernels, 2);  // quantize, GEMM (which applies the scales)
  GemmKey gelu = quantized();
  gelu.epilogue = cuda::GemmEpilogue::kGelu;
  EXPECT_EQ(model_gemm_time(kFp8, gelu, shape).kernels, 3);  // ... and LoKA's scale epilogue for exact GELU
  EXPECT_DOUBLE_EQ(a.total_us, a.gemm_us + a.extra_us);
}

TEST(CostModel, RanksSmallAndLargeGemmsAsMeasured) {
  // Small rec-shaped GEMMs with exact GELU: the separate quantize and epilogue cost more than FP8 saves.
  GemmKey gelu = quantized();
  gelu.epilogue = cuda::GemmEpilogue::kGelu;
  EXPECT_LT(model_gemm_time(kBf16, gelu, {512, 256, 256, 1}).total_us, model_gemm_time(kFp8, gelu, {512, 256, 256, 1}).total_us);
  // Large GEMMs are compute-bound: FP8's rate wins.
  EXPECT_LT(model_gemm_time(kFp8, quantized(), {16384, 8192, 8192, 1}).total_us,
            model_gemm_time(kBf16, quantized(), {16384, 8192, 8192, 1}).total_us);
  // A producer that already wrote FP8 saves the quantize kernel.
  const GemmShape shape{4096, 1024, 1024, 1};
  EXPECT_LT(model_gemm_time(kFp8, quantized(DType::kFloat8E4M3FN), shape).total_us,
            model_gemm_time(kFp8, quantized(), shape).total_us);
  // FP32 without tensor cores is the slowest path for any sizeable GEMM.
  GemmKey fp32_key;
  fp32_key.op = "Gemm";
  EXPECT_GT(model_gemm_time(kFp32, fp32_key, shape).total_us, model_gemm_time(kBf16, fp32_key, shape).total_us);
}

}  // namespace
}  // namespace loka::kernels

namespace loka::kernels {
namespace {

TEST(CostModel, Tf32SitsBetweenFp32AndBf16) {
  GemmKey fp32_key;
  fp32_key.op = "Gemm";
  // One kernel, no cast: faster than FP32 SIMT on any sizeable GEMM, and than BF16 where
  // the cast's bytes and launch matter (memory-bound rec shapes).
  const GemmShape rec{16384, 256, 512, 1};
  EXPECT_EQ(model_gemm_time(kTf32, fp32_key, rec).kernels, 1);
  EXPECT_LT(model_gemm_time(kTf32, fp32_key, rec).total_us, model_gemm_time(kFp32, fp32_key, rec).total_us);
  EXPECT_LT(model_gemm_time(kTf32, fp32_key, rec).total_us, model_gemm_time(kBf16, fp32_key, rec).total_us);
  // Compute-bound: BF16's twice-the-rate tensor cores pay for the cast.
  const GemmShape big{16384, 4096, 4096, 1};
  EXPECT_LT(model_gemm_time(kBf16, fp32_key, big).total_us, model_gemm_time(kTf32, fp32_key, big).total_us);
  // TF32 is priced at the assumed 400 TFLOP/s: a compute-bound GEMM takes its FLOPs at that rate.
  const double flops = 2.0 * 16384 * 4096 * 4096;
  EXPECT_NEAR(model_gemm_time(kTf32, fp32_key, big).gemm_us, 3.0 + flops / 400e12 * 1e6, 0.05 * flops / 400e12 * 1e6);
}

TEST(CostModel, ActivationMatMulBf16CastsBothOperands) {
  const GemmShape shape{64, 64, 512, 4096};
  const ModelledTime bf16 = model_gemm_time(kBf16, activation_matmul(), shape);
  EXPECT_EQ(bf16.kernels, 3);  // cast X, cast W, GEMM
  GemmKey constant = activation_matmul();
  constant.constant_weight = true;
  EXPECT_EQ(model_gemm_time(kBf16, constant, shape).kernels, 2);  // W converted when planned
  EXPECT_GT(bf16.total_us, model_gemm_time(kBf16, constant, shape).total_us);
  EXPECT_LT(model_gemm_time(kTf32, activation_matmul(), shape).total_us,
            model_gemm_time(kFp32, activation_matmul(), shape).total_us);
}

}  // namespace
}  // namespace loka::kernels

namespace loka::kernels {
namespace {

const GemmCandidate kSmallM{GemmPrecision::kFp8E4M3, ScaleGranularity::kTensor, 0, false, 0, 0, 0, GemmLibrary::kLoka};

TEST(CostModel, SmallMIsOneLaunchAtTheSimtRate) {
  // 64 x 512 x 1024: 16 column blocks x 8 row tiles = 128 CTAs, one wave; a CTA's 8 rows x 32
  // columns x K at one SM's share of 50 TFLOP/s (1.38 µs) outweigh the whole GEMM's FLOPs at the
  // full rate (1.34 µs) and its bytes (0.92 MB, 0.22 µs).
  const ModelledTime t = model_gemm_time(kSmallM, quantized(), {64, 512, 1024, 1});
  EXPECT_EQ(t.kernels, 1);
  EXPECT_EQ(t.extra_us, 0.0);
  EXPECT_NEAR(t.total_us, 3.0 + 2.0 * 8 * 32 * 1024 / (50e12 / 132) * 1e6, 1e-9);
  // A residual is read in the same launch: no kernel of its own.
  GemmKey residual = quantized();
  residual.residual = true;
  residual.epilogue = cuda::GemmEpilogue::kGelu;
  EXPECT_EQ(model_gemm_time(kSmallM, residual, {64, 512, 1024, 1}).kernels, 1);
}

TEST(CostModel, SmallMWinsFewRowsAndLosesManyAsMeasuredOrAssumed) {
  // Serving batches: one launch against quantize + GEMM (the FP8 tensor-core tiles are mostly empty).
  for (const GemmShape shape : {GemmShape{1, 512, 512, 1}, GemmShape{64, 512, 1024, 1}, GemmShape{16, 1024, 1024, 1}}) {
    EXPECT_LT(model_gemm_time(kSmallM, quantized(), shape).total_us, model_gemm_time(kFp8, quantized(), shape).total_us)
        << shape.to_string();
    EXPECT_LT(model_gemm_time(kSmallM, quantized(DType::kFloat8E4M3FN), shape).total_us,
              model_gemm_time(kFp8, quantized(DType::kFloat8E4M3FN), shape).total_us)
        << shape.to_string();
  }
  // At the row limit a 1024 x 1024 layer is compute-bound at the SIMT rate: the tensor cores win
  // even with the separate quantize (kSmallMMaxRows' reason, small_m_tiling.h).
  const GemmShape limit{cuda::kSmallMMaxRows, 1024, 1024, 1};
  EXPECT_GT(model_gemm_time(kSmallM, quantized(), limit).total_us, model_gemm_time(kFp8, quantized(), limit).total_us);
}

TEST(CostModel, SmallMIsMonotonicUpToItsRowLimit) {
  for (const DType input : {DType::kFloat32, DType::kFloat8E4M3FN}) {
    // Every row count (the CTA's rows step 1, 2, 4, 8, 16), narrow to wide layers.
    for (int64_t m = 1; m < cuda::kSmallMMaxRows; ++m)
      for (const int64_t n : {1, 24, 512, 4096})
        EXPECT_GE(model_gemm_time(kSmallM, quantized(input), {m + 1, n, 512, 1}).total_us,
                  model_gemm_time(kSmallM, quantized(input), {m, n, 512, 1}).total_us)
            << "m=" << m << " n=" << n;
    double previous_n = 0, previous_k = 0;
    for (int64_t d = 1; d <= 8192; d += d / 7 + 1) {
      const double tn = model_gemm_time(kSmallM, quantized(input), {64, d, 512, 1}).total_us;
      const double tk = model_gemm_time(kSmallM, quantized(input), {64, 512, d, 1}).total_us;
      EXPECT_GE(tn, previous_n) << "n=" << d;
      EXPECT_GE(tk, previous_k) << "k=" << d;
      previous_n = tn;
      previous_k = tk;
    }
  }
}

}  // namespace
}  // namespace loka::kernels

namespace loka::kernels {
namespace {

TEST(CostModel, ABf16ActivationSavesBf16ItsCastAndCostsFp32AndTf32AWidening) {
  const GemmShape shape{4096, 256, 512, 1};
  const double widen_us = 3.0 + 6.0 * 4096 * 512 / 4.2e12 * 1e6;  // read 2 bytes, write 4, per element
  // BF16 reads the stored activation: the GEMM alone, the same GEMM as from an FP32 one.
  const ModelledTime bf16 = model_gemm_time(kBf16, bf16_activation(), shape);
  EXPECT_EQ(bf16.kernels, 1);
  EXPECT_EQ(bf16.extra_us, 0.0);
  EXPECT_DOUBLE_EQ(bf16.gemm_us, model_gemm_time(kBf16, fp32_activation(), shape).gemm_us);
  EXPECT_EQ(model_gemm_time(kBf16, fp32_activation(), shape).kernels, 2);  // the negative twin: the cast
  // FP32 and TF32 widen it first: one more kernel, then the FP32 GEMM's bytes.
  for (const GemmCandidate& c : {kFp32, kTf32}) {
    const ModelledTime widened = model_gemm_time(c, bf16_activation(), shape);
    const ModelledTime fp32 = model_gemm_time(c, fp32_activation(), shape);
    EXPECT_EQ(widened.kernels, 2) << c.name();
    EXPECT_EQ(fp32.kernels, 1) << c.name();
    EXPECT_DOUBLE_EQ(widened.gemm_us, fp32.gemm_us) << c.name();
    EXPECT_NEAR(widened.extra_us, widen_us, 1e-9) << c.name();
    EXPECT_DOUBLE_EQ(widened.total_us, widened.gemm_us + widened.extra_us) << c.name();
  }
  // Memory-bound rec shapes: with no cast left, BF16 now beats TF32 (with an FP32 X it does not).
  const GemmShape rec{16384, 256, 512, 1};
  EXPECT_LT(model_gemm_time(kBf16, bf16_activation(), rec).total_us,
            model_gemm_time(kTf32, bf16_activation(), rec).total_us);
  EXPECT_GT(model_gemm_time(kBf16, fp32_activation(), rec).total_us,
            model_gemm_time(kTf32, fp32_activation(), rec).total_us);
  // A computed W is still cast for BF16: two kernels, W's cast and the GEMM.
  GemmKey computed = bf16_activation();
  computed.constant_weight = false;
  EXPECT_EQ(model_gemm_time(kBf16, computed, shape).kernels, 2);
}

TEST(CostModel, SplitWeightBf16IsTwoBf16GemmsOnTheStoredActivation) {
  // Two GEMMs at the BF16 rate on the stored X, the second reading the first's sums back: no
  // widening kernel, unlike FP32 and TF32 on a BF16 X.
  const GemmCandidate split{GemmPrecision::kBf16x2, ScaleGranularity::kNone, 0, false};
  const GemmShape shape{4096, 256, 512, 1};
  const ModelledTime t = model_gemm_time(split, bf16_activation(), shape);
  EXPECT_EQ(t.kernels, 2);
  EXPECT_EQ(t.extra_us, 0.0);
  const ModelledTime one = model_gemm_time(kBf16, bf16_activation(), shape);
  EXPECT_GT(t.gemm_us, 2 * one.gemm_us - 1e-9);  // the second term reads Y back
  EXPECT_LT(t.gemm_us, 2 * one.gemm_us + 2 * 4096.0 * 256 * 4 / 4.2e12 * 1e6 + 1e-9);
  // On a memory-bound rec shape it beats TF32, which widens X first, and FP32.
  const GemmShape rec{16384, 256, 512, 1};
  EXPECT_LT(model_gemm_time(split, bf16_activation(), rec).total_us,
            model_gemm_time(kTf32, bf16_activation(), rec).total_us);
  EXPECT_LT(model_gemm_time(split, bf16_activation(), rec).total_us,
            model_gemm_time(kFp32, bf16_activation(), rec).total_us);
}

}  // namespace
}  // namespace loka::kernels
