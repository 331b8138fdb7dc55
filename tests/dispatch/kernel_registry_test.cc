// ============================================================================
// tests/dispatch/kernel_registry_test.cc — GEMM keys, candidate names,
// can_implement and the registry's expansion (kernels/registry).
// ============================================================================
#include <gtest/gtest.h>

#include "kernels/registry/gemm_kernel_key.h"
#include "kernels/registry/kernel_registry.h"
#include "gemm_test_keys.h"

namespace loka::kernels {
namespace {

GemmKey fp32_gemm() { return testing::fp32_gemm_key(); }

GemmKey quantized(ScaleGranularity granularity, DType input = DType::kFloat32) {
  return testing::quantized_gemm_key(granularity, input);
}

TEST(GemmKernelKey, KeyTextNamesEveryField) {
  EXPECT_EQ(fp32_gemm().to_string(), "Gemm:f32*f32->f32:none:nt:bias+none");
  EXPECT_EQ(quantized(ScaleGranularity::kRow).to_string(), "QuantizedGemm:f32*f8e4m3fn->f32:row:nt:nobias+relu");
  EXPECT_NE(quantized(ScaleGranularity::kRow).to_string(), quantized(ScaleGranularity::kTensor).to_string());
  EXPECT_EQ((GemmShape{4096, 256, 512, 1}).to_string(), "m=4096,n=256,k=512");
  EXPECT_EQ((GemmShape{64, 8, 16, 32}).to_string(), "m=64,n=8,k=16,batch=32");
}

TEST(GemmKernelKey, NamesRoundTrip) {
  const std::vector<std::pair<GemmCandidate, std::string>> cases = {
      {{GemmPrecision::kFp32, ScaleGranularity::kNone, 0, false}, "cublaslt.fp32.algo0"},
      {{GemmPrecision::kTf32, ScaleGranularity::kNone, 1, false}, "cublaslt.tf32.algo1"},
      {{GemmPrecision::kBf16, ScaleGranularity::kNone, 2, false}, "cublaslt.bf16.algo2"},
      {{GemmPrecision::kBf16x2, ScaleGranularity::kNone, 1, false}, "cublaslt.bf16x2.algo1"},
      {{GemmPrecision::kBf16x2, ScaleGranularity::kNone, 0, false, 0, 20}, "cublaslt.bf16x2.algo0.tile20"},
      {{GemmPrecision::kFp8E4M3, ScaleGranularity::kTensor, 3, false}, "cublaslt.fp8.e4m3.tensor.algo3"},
      {{GemmPrecision::kFp8E4M3, ScaleGranularity::kRow, 1, true}, "cublaslt.fp8.e4m3.row.fast_accum.algo1"},
      {{GemmPrecision::kFp8Emulated, ScaleGranularity::kNone, 0, false}, "loka.fp8_emulated_fp32"},
      {{GemmPrecision::kBf16, ScaleGranularity::kNone, 0, false, 4}, "cublaslt.bf16.algo0.splitk4"},
      {{GemmPrecision::kFp8E4M3, ScaleGranularity::kRow, 0, true, 2}, "cublaslt.fp8.e4m3.row.fast_accum.algo0.splitk2"},
      {{GemmPrecision::kBf16, ScaleGranularity::kNone, 0, false, 0, 20}, "cublaslt.bf16.algo0.tile20"},
      {{GemmPrecision::kTf32, ScaleGranularity::kNone, 0, false, 0, 20, 8}, "cublaslt.tf32.algo0.tile20.stages8"},
      {{GemmPrecision::kFp8E4M3, ScaleGranularity::kTensor, 0, true, 0, 312}, "cublaslt.fp8.e4m3.tensor.fast_accum.algo0.tile312"},
      {{GemmPrecision::kFp8E4M3, ScaleGranularity::kTensor, 1, false, 0, 0, 0, GemmLibrary::kCudnn},
       "cudnn.fp8.e4m3.tensor.engine1"},
      {{GemmPrecision::kFp8E4M3, ScaleGranularity::kTensor, 0, false, 0, 0, 0, GemmLibrary::kLoka},
       "loka.fp8.e4m3.tensor.small_m"},
      {{GemmPrecision::kFp8E4M3, ScaleGranularity::kRow, 0, false, 0, 0, 0, GemmLibrary::kLoka},
       "loka.fp8.e4m3.row.small_m"},
  };
  GemmCandidate bf16_tanh{GemmPrecision::kBf16, ScaleGranularity::kNone, 1, false};
  bf16_tanh.tanh_gelu = true;
  GemmCandidate fp8_tanh{GemmPrecision::kFp8E4M3, ScaleGranularity::kRow, 2, true};
  fp8_tanh.tanh_gelu = true;
  std::vector<std::pair<GemmCandidate, std::string>> all = cases;
  all.push_back({bf16_tanh, "cublaslt.bf16.tanh_gelu.algo1"});
  all.push_back({fp8_tanh, "cublaslt.fp8.e4m3.row.fast_accum.tanh_gelu.algo2"});
  for (const auto& [candidate, name] : all) {
    EXPECT_EQ(candidate.name(), name);
    auto parsed = parse_gemm_candidate(name);
    ASSERT_TRUE(parsed.is_ok()) << parsed.status().message();
    EXPECT_EQ(*parsed, candidate) << name;
  }
  EXPECT_EQ((GemmCandidate{GemmPrecision::kBf16, ScaleGranularity::kNone, 5, false}).family_default().name(),
            "cublaslt.bf16.algo0");
  // An explicit configuration falls back to the heuristic's own.
  EXPECT_EQ((GemmCandidate{GemmPrecision::kTf32, ScaleGranularity::kNone, 0, false, 4}).family_default().name(),
            "cublaslt.tf32.algo0");
  EXPECT_EQ((GemmCandidate{GemmPrecision::kTf32, ScaleGranularity::kNone, 0, false, 0, 20, 8}).family_default().name(),
            "cublaslt.tf32.algo0");
  EXPECT_EQ((GemmCandidate{GemmPrecision::kFp8E4M3, ScaleGranularity::kTensor, 3, false, 0, 0, 0, GemmLibrary::kCudnn})
                .family_default()
                .name(),
            "cudnn.fp8.e4m3.tensor.engine0");
  // LoKA's small-M kernel has one configuration: its family default is itself.
  const GemmCandidate small_m{GemmPrecision::kFp8E4M3, ScaleGranularity::kRow, 0, false, 0, 0, 0, GemmLibrary::kLoka};
  EXPECT_EQ(small_m.family_default(), small_m);
}

TEST(GemmKernelKey, BadNamesAreErrorsQuotingThem) {
  for (const char* name : {"", "cublaslt", "cublaslt.fp16.algo0", "cublaslt.fp32.algoX", "cublaslt.fp32.algo-1",
                           "cublaslt.fp8.e4m3.block.algo0", "cublaslt.fp8.e4m3.tensor.slow.algo0",
                           "cutlass.fp8.algo0", "cublaslt.fp32.extra.algo0", "cublaslt.tf32.algo",
                           "cublaslt.tf32.fast.algo0", "cublaslt.bf16.algo0.splitk1", "cublaslt.bf16.algo0.splitk",
                           "cublaslt.bf16.algo0.splitkx", "cublaslt.bf16.splitk2", "cublaslt.bf16.algo0.tile0",
                           "cublaslt.bf16.algo0.tile", "cublaslt.bf16.algo0.tilex", "cublaslt.bf16.algo0.tile-3",
                           "cublaslt.bf16.tile20", "cublaslt.bf16.algo0.stages8", "cublaslt.bf16.algo0.tile20.stages0",
                           "cublaslt.bf16.algo0.tile20.stages", "cublaslt.bf16.algo0.tile20.splitk2",
                           "cublaslt.bf16.algo0.splitk2.tile20", "cublaslt.bf16.algo0.stages8.tile20",
                           "cublaslt.bf16.algo0.tile20.stages8.stages8", "cublaslt.tile20.stages8", "cudnn",
                           "cudnn.fp8.e4m3.row.engine0", "cudnn.fp8.e4m3.tensor.engine", "cudnn.fp8.e4m3.tensor.enginex",
                           "cudnn.fp8.e4m3.tensor.algo0", "cudnn.bf16.engine0", "cudnn.fp8.e4m3.tensor.engine0.tile20",
                           "cudnn.fp8.e4m3.tensor.fast_accum.engine0", "cudnn.fp8.e5m2.tensor.engine0",
                           "cublaslt.tanh_gelu.algo0", "cublaslt.bf16.algo0.tanh_gelu", "cublaslt.tanh_gelu.bf16.algo0",
                           "cublaslt.fp8.e4m3.tanh_gelu.tensor.algo0", "cublaslt.fp8.e4m3.tensor.tanh_gelu.fast_accum.algo0",
                           "cublaslt.bf16.tanh_gelu.tanh_gelu.algo0", "cublaslt.fp32.tanh_gelu.x.algo0", "loka",
                           "loka.small_m", "loka.fp8.e4m3.small_m", "loka.fp8.e4m3.block.small_m",
                           "loka.fp8.e5m2.tensor.small_m", "loka.bf16.tensor.small_m", "loka.fp8.e4m3.tensor.small_m.algo0",
                           "loka.fp8.e4m3.tensor.fast_accum.small_m", "loka.fp8.e4m3.tensor.large_m",
                           "loka.fp8.e4m3.tensor.algo0", "loka.fp8_emulated_fp32.algo0"}) {
    auto parsed = parse_gemm_candidate(name);
    ASSERT_FALSE(parsed.is_ok()) << name;
    EXPECT_NE(parsed.status().message().find(std::string("'") + name + "'"), std::string::npos) << parsed.status().message();
  }
}

TEST(GemmKernelKey, CanImplementFollowsTheHardwareRules) {
  const GemmCandidate fp8{GemmPrecision::kFp8E4M3, ScaleGranularity::kTensor, 0, false};
  const GemmCandidate bf16{GemmPrecision::kBf16, ScaleGranularity::kNone, 0, false};
  const GemmCandidate fp32{GemmPrecision::kFp32, ScaleGranularity::kNone, 0, false};
  const GemmKey q = quantized(ScaleGranularity::kTensor);
  EXPECT_TRUE(can_implement(fp8, q, {512, 256, 512, 1}).is_ok());
  EXPECT_FALSE(can_implement(fp8, q, {512, 256, 24, 1}).is_ok());   // K % 16
  EXPECT_FALSE(can_implement(fp8, q, {512, 24, 512, 1}).is_ok());   // N % 16
  EXPECT_FALSE(can_implement(fp8, fp32_gemm(), {512, 256, 512, 1}).is_ok());  // FP32 weights
  EXPECT_FALSE(can_implement(fp8, quantized(ScaleGranularity::kRow), {512, 256, 512, 1}).is_ok());  // granularity
  EXPECT_FALSE(can_implement(fp32, q, {512, 256, 512, 1}).is_ok());
  EXPECT_TRUE(can_implement(bf16, q, {512, 256, 24, 1}).is_ok());
  EXPECT_FALSE(can_implement(bf16, quantized(ScaleGranularity::kTensor, DType::kFloat8E4M3FN), {512, 256, 512, 1}).is_ok());
  GemmKey computed_w = fp32_gemm();
  computed_w.constant_weight = false;
  EXPECT_TRUE(can_implement(fp32, computed_w, {512, 256, 512, 1}).is_ok());
  EXPECT_EQ(computed_w.to_string(), "Gemm:f32*f32->f32:none:nt~act:bias+none");
  EXPECT_FALSE(can_implement(fp32, fp32_gemm(), {0, 256, 512, 1}).is_ok());
  GemmCandidate fast = fp32;
  fast.fast_accum = true;
  EXPECT_FALSE(can_implement(fast, fp32_gemm(), {512, 256, 512, 1}).is_ok());
}

TEST(GemmKernelKey, TanhGeluReplacesTheGeluOfCublasLtFamiliesOnly) {
  GemmKey gelu = fp32_gemm();
  gelu.epilogue = cuda::GemmEpilogue::kGelu;
  GemmKey q_gelu = quantized(ScaleGranularity::kTensor);
  q_gelu.epilogue = cuda::GemmEpilogue::kGelu;
  for (GemmPrecision precision : {GemmPrecision::kFp32, GemmPrecision::kTf32, GemmPrecision::kBf16}) {
    GemmCandidate c{precision, ScaleGranularity::kNone, 0, false};
    c.tanh_gelu = true;
    EXPECT_TRUE(can_implement(c, gelu, {512, 256, 512, 1}).is_ok()) << c.name();
    EXPECT_NE(can_implement(c, fp32_gemm(), {512, 256, 512, 1}).message().find("has none"), std::string::npos) << c.name();
  }
  GemmCandidate fp8{GemmPrecision::kFp8E4M3, ScaleGranularity::kTensor, 0, false};
  fp8.tanh_gelu = true;
  EXPECT_TRUE(can_implement(fp8, q_gelu, {512, 256, 512, 1}).is_ok());
  GemmCandidate emulated{GemmPrecision::kFp8Emulated, ScaleGranularity::kNone, 0, false};
  emulated.tanh_gelu = true;
  EXPECT_NE(can_implement(emulated, q_gelu, {512, 256, 512, 1}).message().find("cuBLASLt"), std::string::npos);
  GemmCandidate cudnn{GemmPrecision::kFp8E4M3, ScaleGranularity::kTensor, 0, false, 0, 0, 0, GemmLibrary::kCudnn};
  cudnn.tanh_gelu = true;
  EXPECT_FALSE(can_implement(cudnn, q_gelu, {512, 256, 512, 1}).is_ok());
}

TEST(GemmKernelKey, CudnnGraphsTakeFp8WithATensorScaleBiasReluAndResidual) {
  const GemmCandidate cudnn{GemmPrecision::kFp8E4M3, ScaleGranularity::kTensor, 0, false, 0, 0, 0, GemmLibrary::kCudnn};
  const GemmKey q = quantized(ScaleGranularity::kTensor);
  EXPECT_TRUE(can_implement(cudnn, q, {512, 256, 512, 1}).is_ok());
  EXPECT_TRUE(can_implement(cudnn, quantized(ScaleGranularity::kTensor, DType::kFloat8E4M3FN), {1, 16, 16, 1}).is_ok());
  GemmKey residual = q;
  residual.residual = true;
  residual.bias = true;
  EXPECT_TRUE(can_implement(cudnn, residual, {512, 256, 512, 1}).is_ok());
}

TEST(GemmKernelKey, NegativeTwinCudnnRefusesWhatItsGraphCannotExpress) {
  const GemmCandidate cudnn{GemmPrecision::kFp8E4M3, ScaleGranularity::kTensor, 0, false, 0, 0, 0, GemmLibrary::kCudnn};
  const GemmKey q = quantized(ScaleGranularity::kTensor);
  GemmKey gelu = q;
  gelu.epilogue = cuda::GemmEpilogue::kGelu;
  EXPECT_NE(can_implement(cudnn, gelu, {512, 256, 512, 1}).message().find("GELU"), std::string::npos);
  GemmCandidate row = cudnn;
  row.granularity = ScaleGranularity::kRow;
  EXPECT_NE(can_implement(row, quantized(ScaleGranularity::kRow), {512, 256, 512, 1}).message().find("per-tensor"),
            std::string::npos);
  EXPECT_FALSE(can_implement(cudnn, quantized(ScaleGranularity::kRow), {512, 256, 512, 1}).is_ok());
  EXPECT_FALSE(can_implement(cudnn, q, {512, 256, 24, 1}).is_ok());  // K % 16
  EXPECT_FALSE(can_implement(cudnn, fp32_gemm(), {512, 256, 512, 1}).is_ok());
  GemmCandidate tiled = cudnn;
  tiled.tile = 20;
  EXPECT_FALSE(can_implement(tiled, q, {512, 256, 512, 1}).is_ok());
  GemmCandidate bf16 = cudnn;
  bf16.precision = GemmPrecision::kBf16;
  bf16.granularity = ScaleGranularity::kNone;
  EXPECT_FALSE(can_implement(bf16, q, {512, 256, 512, 1}).is_ok());
}

TEST(GemmKernelKey, ExplicitTilesAreCublasLtConfigurationsOfTheirOwn) {
  const GemmCandidate tiled{GemmPrecision::kBf16, ScaleGranularity::kNone, 0, false, 0, 20, 8};
  EXPECT_TRUE(can_implement(tiled, fp32_gemm(), {512, 256, 512, 1}).is_ok());
  GemmCandidate stages_alone = tiled;
  stages_alone.tile = 0;
  EXPECT_NE(can_implement(stages_alone, fp32_gemm(), {512, 256, 512, 1}).message().find("with a tile"), std::string::npos);
  GemmCandidate with_split_k = tiled;
  with_split_k.split_k = 2;
  EXPECT_NE(can_implement(with_split_k, fp32_gemm(), {512, 256, 512, 1}).message().find("split-K"), std::string::npos);
  const GemmCandidate emulated{GemmPrecision::kFp8Emulated, ScaleGranularity::kNone, 0, false, 0, 20};
  EXPECT_FALSE(can_implement(emulated, quantized(ScaleGranularity::kTensor), {512, 256, 512, 1}).is_ok());
}

const GemmCandidate kSmallMTensor{GemmPrecision::kFp8E4M3, ScaleGranularity::kTensor, 0, false, 0, 0, 0, GemmLibrary::kLoka};
const GemmCandidate kSmallMRow{GemmPrecision::kFp8E4M3, ScaleGranularity::kRow, 0, false, 0, 0, 0, GemmLibrary::kLoka};

TEST(GemmKernelKey, SmallMTakesAnyKAndNUpToItsRowLimit) {
  // No multiple-of-16 rule: K = 17, N = 1, one row; and exactly kSmallMMaxRows rows.
  const GemmKey tensor = quantized(ScaleGranularity::kTensor);
  for (const GemmShape shape : {GemmShape{1, 1, 17, 1}, GemmShape{3, 129, 100, 1}, GemmShape{64, 24, 1000, 1},
                                GemmShape{cuda::kSmallMMaxRows, 512, 512, 1}, GemmShape{1, 1, 1, 1}})
    EXPECT_TRUE(can_implement(kSmallMTensor, tensor, shape).is_ok()) << shape.to_string();
  EXPECT_TRUE(can_implement(kSmallMRow, quantized(ScaleGranularity::kRow), {5, 24, 17, 1}).is_ok());
  // An E4M3 activation carries its per-tensor scale; bias, GELU, a residual, a computed W.
  GemmKey everything = quantized(ScaleGranularity::kTensor, DType::kFloat8E4M3FN);
  everything.bias = true;
  everything.epilogue = cuda::GemmEpilogue::kGelu;
  everything.residual = true;
  everything.constant_weight = false;
  EXPECT_TRUE(can_implement(kSmallMTensor, everything, {7, 33, 17, 1}).is_ok());
}

TEST(GemmKernelKey, NegativeTwinSmallMRefusesWithReasons) {
  const GemmKey tensor = quantized(ScaleGranularity::kTensor);
  const auto refusal = [](const GemmCandidate& c, const GemmKey& key, const GemmShape& shape) {
    const Status status = can_implement(c, key, shape);
    EXPECT_FALSE(status.is_ok()) << c.name() << " " << key.to_string() << " " << shape.to_string();
    return status.message();
  };
  // One row past the limit, with the limit and the shape in the reason.
  const std::string rows = refusal(kSmallMTensor, tensor, {cuda::kSmallMMaxRows + 1, 512, 512, 1});
  EXPECT_NE(rows.find("up to " + std::to_string(cuda::kSmallMMaxRows) + " rows"), std::string::npos) << rows;
  EXPECT_NE(rows.find("m=257"), std::string::npos) << rows;
  EXPECT_NE(refusal(kSmallMTensor, testing::fp32_gemm_key(), {4, 16, 16, 1}).find("E4M3 weights"), std::string::npos);
  GemmKey nn = tensor;
  nn.layout = GemmLayout::kNN;
  EXPECT_NE(refusal(kSmallMTensor, nn, {4, 16, 16, 1}).find("TN"), std::string::npos);
  EXPECT_NE(refusal(kSmallMTensor, tensor, {4, 16, 16, 2}).find("unbatched"), std::string::npos);
  // The node's scale granularity: a row key is no tensor candidate, an E4M3 input has a tensor scale.
  EXPECT_NE(refusal(kSmallMTensor, quantized(ScaleGranularity::kRow), {4, 16, 16, 1}).find("per row"), std::string::npos);
  EXPECT_NE(refusal(kSmallMRow, quantized(ScaleGranularity::kRow, DType::kFloat8E4M3FN), {4, 16, 16, 1}).find("per-tensor"),
            std::string::npos);
  // One configuration: no algorithm index, FAST_ACCUM, split-K or tile; no tanh GELU (cuBLASLt's).
  GemmCandidate configured[4] = {kSmallMTensor, kSmallMTensor, kSmallMTensor, kSmallMTensor};
  configured[0].algorithm = 1;
  configured[1].fast_accum = true;
  configured[2].split_k = 2;
  configured[3].tile = 20;
  for (const GemmCandidate& c : configured)
    EXPECT_NE(refusal(c, tensor, {4, 16, 16, 1}).find("one configuration"), std::string::npos) << c.name();
  GemmKey gelu = tensor;
  gelu.epilogue = cuda::GemmEpilogue::kGelu;
  GemmCandidate tanh_gelu = kSmallMTensor;
  tanh_gelu.tanh_gelu = true;
  EXPECT_NE(refusal(tanh_gelu, gelu, {4, 16, 16, 1}).find("cuBLASLt"), std::string::npos);
  GemmCandidate bf16 = kSmallMTensor;
  bf16.precision = GemmPrecision::kBf16;
  bf16.granularity = ScaleGranularity::kNone;
  EXPECT_NE(refusal(bf16, tensor, {4, 16, 16, 1}).find("FP8 E4M3"), std::string::npos);
}

/// The candidates' names, in the registry's order.
std::vector<std::string> names(const std::vector<GemmCandidate>& candidates) {
  std::vector<std::string> out;
  for (const GemmCandidate& c : candidates) out.push_back(c.name());
  return out;
}

TEST(KernelRegistry, OffersSmallMLastForFewRowsOfAnyShape) {
  const CandidateOptions options{1, false, true};
  // K = 17, N = 1: no cuBLASLt FP8 kernel, the small-M kernel after the families before it.
  EXPECT_EQ(names(gemm_candidates(quantized(ScaleGranularity::kRow), {1, 1, 17, 1}, options)),
            (std::vector<std::string>{"cublaslt.bf16.algo0", "loka.fp8_emulated_fp32", "loka.fp8.e4m3.row.small_m"}));
  EXPECT_EQ(names(gemm_candidates(quantized(ScaleGranularity::kTensor), {cuda::kSmallMMaxRows, 256, 512, 1}, options)),
            (std::vector<std::string>{"cublaslt.fp8.e4m3.tensor.algo0", "cublaslt.bf16.algo0", "loka.fp8_emulated_fp32",
                                      "loka.fp8.e4m3.tensor.small_m"}));
  // An E4M3 activation: its per-tensor scale.
  EXPECT_EQ(names(gemm_candidates(quantized(ScaleGranularity::kTensor, DType::kFloat8E4M3FN), {3, 24, 100, 1},
                                  {1, false, false})),
            (std::vector<std::string>{"loka.fp8_emulated_fp32", "loka.fp8.e4m3.tensor.small_m"}));
  // After cuDNN's engines (families added later come last).
  CandidateOptions with_cudnn{1, false, false, true, {}, 0, 1};
  EXPECT_EQ(names(gemm_candidates(quantized(ScaleGranularity::kTensor), {64, 256, 512, 1}, with_cudnn)),
            (std::vector<std::string>{"cublaslt.fp8.e4m3.tensor.algo0", "loka.fp8_emulated_fp32",
                                      "cudnn.fp8.e4m3.tensor.engine0", "loka.fp8.e4m3.tensor.small_m"}));
}

TEST(KernelRegistry, NegativeTwinNoSmallMAboveItsRowsForFp32NodesOrWhenTurnedOff) {
  const CandidateOptions options{1, false, true};
  const auto has_small_m = [](const std::vector<GemmCandidate>& candidates) {
    for (const GemmCandidate& c : candidates)
      if (c.library == GemmLibrary::kLoka) return true;
    return false;
  };
  EXPECT_TRUE(has_small_m(gemm_candidates(quantized(ScaleGranularity::kRow), {cuda::kSmallMMaxRows, 256, 512, 1}, options)));
  EXPECT_FALSE(has_small_m(gemm_candidates(quantized(ScaleGranularity::kRow), {cuda::kSmallMMaxRows + 1, 256, 512, 1}, options)));
  EXPECT_FALSE(has_small_m(gemm_candidates(fp32_gemm(), {1, 256, 512, 1}, options)));
  CandidateOptions off = options;
  off.small_m = false;
  EXPECT_FALSE(has_small_m(gemm_candidates(quantized(ScaleGranularity::kRow), {1, 256, 512, 1}, off)));
}

using testing::activation_matmul_key;

const GemmCandidate kTf32{GemmPrecision::kTf32, ScaleGranularity::kNone, 0, false};
const GemmCandidate kBf16{GemmPrecision::kBf16, ScaleGranularity::kNone, 0, false};

TEST(GemmKernelKey, ActivationMatMulsRunTf32AndBf16) {
  // BF16 casts both operands on the device; TF32 reads FP32 as it is: any layout, any K.
  for (const GemmLayout layout : {GemmLayout::kBatched, GemmLayout::kNN}) {
    const GemmKey key = activation_matmul_key(layout);
    const GemmShape shape{64, 64, 37, layout == GemmLayout::kBatched ? 8 : 1};
    EXPECT_TRUE(can_implement(kTf32, key, shape).is_ok()) << key.to_string();
    EXPECT_TRUE(can_implement(kBf16, key, shape).is_ok()) << key.to_string();
  }
  // Batched MatMul over a constant [B,K,N] weight: converted once, when planned.
  GemmKey constant = activation_matmul_key(GemmLayout::kBatched);
  constant.constant_weight = true;
  EXPECT_TRUE(can_implement(kBf16, constant, {64, 64, 64, 8}).is_ok());
  EXPECT_TRUE(can_implement(kTf32, fp32_gemm(), {1, 256, 37, 1}).is_ok());
}

TEST(GemmKernelKey, NegativeTwinNoTf32OrBf16WithoutFp32Operands) {
  // TF32 takes FP32 operands only: E4M3 weights run exactly in BF16, and say so.
  const Status fp8_weights = can_implement(kTf32, quantized(ScaleGranularity::kTensor), {512, 256, 512, 1});
  ASSERT_FALSE(fp8_weights.is_ok());
  EXPECT_NE(fp8_weights.message().find("BF16"), std::string::npos) << fp8_weights.message();
  EXPECT_FALSE(can_implement(kTf32, quantized(ScaleGranularity::kTensor, DType::kFloat8E4M3FN), {512, 256, 512, 1}).is_ok());
  // A computed E4M3 weight has no constant to convert; an FP8 activation has no BF16 cast.
  GemmKey computed_fp8 = quantized(ScaleGranularity::kTensor);
  computed_fp8.constant_weight = false;
  EXPECT_FALSE(can_implement(kBf16, computed_fp8, {512, 256, 512, 1}).is_ok());
  EXPECT_FALSE(can_implement(kTf32, activation_matmul_key(GemmLayout::kBatched), {64, 64, 0, 8}).is_ok());
  GemmCandidate fast = kTf32;
  fast.fast_accum = true;
  EXPECT_FALSE(can_implement(fast, fp32_gemm(), {512, 256, 512, 1}).is_ok());
}

using testing::bf16_activation_gemm_key;

const GemmCandidate kBf16x2{GemmPrecision::kBf16x2, ScaleGranularity::kNone, 0, false};

TEST(GemmKernelKey, ABf16ActivationRunsFp32Tf32Bf16AndSplitWeightBf16) {
  // FusedGemm's X stored in BF16: the FP32 op on the widened values (FP32 and TF32 widen it, BF16
  // reads it as it is). Any K, one row or many, a GELU, a residual, a batched computed W.
  const GemmCandidate kFp32{GemmPrecision::kFp32, ScaleGranularity::kNone, 0, false};
  GemmKey everything = bf16_activation_gemm_key();
  everything.epilogue = cuda::GemmEpilogue::kGelu;
  everything.residual = true;
  GemmKey batched = bf16_activation_gemm_key(false);
  batched.layout = GemmLayout::kBatchedNT;
  batched.constant_weight = false;
  for (const GemmCandidate& c : {kFp32, kTf32, kBf16, kBf16x2}) {
    for (const GemmShape shape : {GemmShape{1, 64, 37, 1}, GemmShape{4099, 48, 37, 1}, GemmShape{512, 256, 512, 1}}) {
      EXPECT_TRUE(can_implement(c, bf16_activation_gemm_key(), shape).is_ok()) << c.name() << " " << shape.to_string();
      EXPECT_TRUE(can_implement(c, everything, shape).is_ok()) << c.name() << " " << shape.to_string();
    }
  }
  for (const GemmCandidate& c : {kFp32, kTf32, kBf16})
    EXPECT_TRUE(can_implement(c, batched, {34, 34, 13, 9}).is_ok()) << c.name();
  // The split weights are made once, when planned: a computed W has none to split.
  const Status computed = can_implement(kBf16x2, batched, {34, 34, 13, 9});
  ASSERT_FALSE(computed.is_ok());
  EXPECT_NE(computed.message().find("constant FP32 weights"), std::string::npos) << computed.message();
  GemmKey batched_constant = batched;
  batched_constant.constant_weight = true;
  EXPECT_TRUE(can_implement(kBf16x2, batched_constant, {34, 34, 13, 9}).is_ok());
  EXPECT_EQ(bf16_activation_gemm_key().to_string(), "FusedGemm:bf16*f32->f32:none:nt:bias+none");
  // The registry offers exactly those families, small-M and cuDNN asked for or not; the
  // split-weight one last (plans measured before it keep their order).
  CandidateOptions everything_asked{1, true, true, true, {}, 0, 2};
  EXPECT_EQ(names(gemm_candidates(bf16_activation_gemm_key(), {16, 256, 512, 1}, everything_asked)),
            (std::vector<std::string>{"cublaslt.fp32.algo0", "cublaslt.tf32.algo0", "cublaslt.bf16.algo0",
                                      "cublaslt.bf16x2.algo0"}));
}

TEST(GemmKernelKey, NegativeTwinSplitWeightBf16ReadsOnlyABf16Activation) {
  // An FP32 X is not exact in BF16 (it would need splitting too), and E4M3 weights are
  // QuantizedGemm's: refused with the reason, and never offered.
  const GemmShape shape{512, 256, 512, 1};
  const Status fp32_x = can_implement(kBf16x2, fp32_gemm(), shape);
  ASSERT_FALSE(fp32_x.is_ok());
  EXPECT_NE(fp32_x.message().find("reads a BF16 activation"), std::string::npos) << fp32_x.message();
  EXPECT_FALSE(can_implement(kBf16x2, quantized(ScaleGranularity::kTensor), shape).is_ok());
  EXPECT_FALSE(can_implement(kBf16x2, activation_matmul_key(GemmLayout::kBatched), {64, 64, 64, 8}).is_ok());
  for (const GemmCandidate& c : gemm_candidates(fp32_gemm(), shape, {2, true, true, true, {2}, 2}))
    EXPECT_NE(c.precision, GemmPrecision::kBf16x2) << c.name();
}

TEST(GemmKernelKey, NegativeTwinNoFp8CandidateReadsABf16Activation) {
  // Quantizing a BF16 X to E4M3 is QuantizedGemm's arithmetic, not the FP32 op's: every FP8 family
  // refuses, naming the BF16 activation; the same candidates take its FP8 twin.
  const GemmKey key = bf16_activation_gemm_key();
  const GemmShape shape{16, 256, 512, 1};
  const GemmCandidate fp8{GemmPrecision::kFp8E4M3, ScaleGranularity::kTensor, 0, false};
  GemmCandidate fast = fp8;
  fast.fast_accum = true;
  const GemmCandidate emulated{GemmPrecision::kFp8Emulated, ScaleGranularity::kNone, 0, false};
  GemmCandidate cudnn = fp8;
  cudnn.library = GemmLibrary::kCudnn;
  for (const GemmCandidate& c : {fp8, fast, emulated, kSmallMTensor, kSmallMRow, cudnn}) {
    const Status refused = can_implement(c, key, shape);
    ASSERT_FALSE(refused.is_ok()) << c.name();
    EXPECT_NE(refused.message().find("BF16 activation"), std::string::npos) << refused.message();
    const bool row = c.granularity == ScaleGranularity::kRow;
    EXPECT_TRUE(can_implement(c, quantized(row ? ScaleGranularity::kRow : ScaleGranularity::kTensor), shape).is_ok())
        << c.name();
  }
}

TEST(GemmKernelKey, AQuantizedGemmHoldingBf16ActivationsRunsOnCublasLtFp8Only) {
  // store-activations-bf16's QuantizedGemm: a BF16 X is quantized by cuBLASLt's FP8 family as an
  // FP32 one is, and its BF16 Y is cuBLASLt's D (or its scale epilogue's output); both recipes, with
  // FAST_ACCUM, a residual (in Y's dtype) or an exact GELU. Every other family reads FP32 or E4M3
  // and writes FP32: refused, saying so, and never offered.
  const GemmShape shape{512, 256, 512, 1};
  GemmKey bf16_x = quantized(ScaleGranularity::kTensor, DType::kBFloat16);
  GemmKey bf16_y = quantized(ScaleGranularity::kRow);
  bf16_y.output = DType::kBFloat16;
  bf16_y.epilogue = cuda::GemmEpilogue::kNone;
  bf16_y.residual = true;  // cuBLASLt's C, in BF16
  GemmKey both = quantized(ScaleGranularity::kRow, DType::kBFloat16);
  both.output = DType::kBFloat16;
  EXPECT_EQ(both.to_string(), "QuantizedGemm:bf16*f8e4m3fn->bf16:row:nt:nobias+relu");
  const GemmCandidate fp32{GemmPrecision::kFp32, ScaleGranularity::kNone, 0, false};
  const GemmCandidate emulated{GemmPrecision::kFp8Emulated, ScaleGranularity::kNone, 0, false};
  for (const GemmKey& key : {bf16_x, bf16_y, both}) {
    SCOPED_TRACE(key.to_string());
    GemmCandidate fp8{GemmPrecision::kFp8E4M3, key.activation_scale, 1, false};
    GemmCandidate fast = fp8;
    fast.fast_accum = true;
    for (const GemmCandidate& c : {fp8, fast}) EXPECT_TRUE(can_implement(c, key, shape).is_ok()) << c.name();
    GemmCandidate cudnn{GemmPrecision::kFp8E4M3, ScaleGranularity::kTensor, 0, false};
    cudnn.library = GemmLibrary::kCudnn;
    const GemmCandidate small_m = key.activation_scale == ScaleGranularity::kRow ? kSmallMRow : kSmallMTensor;
    for (const GemmCandidate& c : {fp32, kTf32, kBf16, emulated, small_m, cudnn}) {
      const Status refused = can_implement(c, key, {64, 256, 512, 1});
      ASSERT_FALSE(refused.is_ok()) << c.name();
      EXPECT_TRUE(refused.message().find("BF16 activation") != std::string::npos ||
                  refused.message().find("write a BF16 Y") != std::string::npos)
          << refused.message();
    }
    CandidateOptions everything{2, true, true, true, {}, 0, 2, true, true};
    for (const GemmCandidate& c : gemm_candidates(key, {64, 256, 512, 1}, everything)) {
      EXPECT_EQ(c.precision, GemmPrecision::kFp8E4M3) << c.name();
      EXPECT_EQ(c.library, GemmLibrary::kCublasLt) << c.name();
    }
  }
  // Negative twins: a BF16 Y cuBLASLt cannot write in one pass (after the exact GELU; with a
  // residual after its activation) is the node's own op's, which sums in BF16: refused, saying so.
  // cuBLASLt's tanh GELU writes it in one pass, with no residual after it.
  GemmKey exact_gelu = both;
  exact_gelu.epilogue = cuda::GemmEpilogue::kGelu;
  GemmKey residual_after_relu = both;
  residual_after_relu.residual = true;
  GemmCandidate fp8_row{GemmPrecision::kFp8E4M3, ScaleGranularity::kRow, 0, false};
  GemmCandidate tanh_row = fp8_row;
  tanh_row.tanh_gelu = true;
  for (const auto& [key, c] : {std::pair{exact_gelu, fp8_row}, std::pair{residual_after_relu, fp8_row}}) {
    const Status refused = can_implement(c, key, shape);
    ASSERT_FALSE(refused.is_ok()) << key.to_string();
    EXPECT_NE(refused.message().find("node's own op"), std::string::npos) << refused.message();
    EXPECT_TRUE(gemm_candidates(key, shape, {2, true}).empty()) << key.to_string();
  }
  EXPECT_TRUE(can_implement(tanh_row, exact_gelu, shape).is_ok());
  GemmKey tanh_with_residual = exact_gelu;
  tanh_with_residual.residual = true;
  EXPECT_FALSE(can_implement(tanh_row, tanh_with_residual, shape).is_ok());
  GemmKey fp32_twin = exact_gelu;  // an FP32 Y: cuBLASLt's unit scales and the scale epilogue, as ever
  fp32_twin.output = DType::kFloat32;
  EXPECT_TRUE(can_implement(fp8_row, fp32_twin, shape).is_ok());
  // A BF16 Y is QuantizedGemm's alone: a float op's (FusedGemm's) is refused by every family.
  GemmKey fused_bf16_y = bf16_activation_gemm_key();
  fused_bf16_y.output = DType::kBFloat16;
  for (const GemmCandidate& c : {fp32, kTf32, kBf16, kBf16x2}) {
    const Status refused = can_implement(c, fused_bf16_y, shape);
    ASSERT_FALSE(refused.is_ok()) << c.name();
    EXPECT_NE(refused.message().find("only QuantizedGemm's Y may be BF16"), std::string::npos) << refused.message();
  }
}

TEST(KernelRegistry, ExpandsFamiliesInAFixedOrder) {
  EXPECT_EQ(names(gemm_candidates(fp32_gemm(), {512, 256, 512, 1}, {2, true, true})),
            (std::vector<std::string>{"cublaslt.fp32.algo0", "cublaslt.fp32.algo1", "cublaslt.tf32.algo0",
                                      "cublaslt.tf32.algo1", "cublaslt.bf16.algo0", "cublaslt.bf16.algo1"}));
  // Activation x activation: FP32, TF32 and BF16 (both operands cast); none of them when turned off.
  EXPECT_EQ(names(gemm_candidates(activation_matmul_key(GemmLayout::kBatched), {64, 64, 64, 8}, {1, false, true})),
            (std::vector<std::string>{"cublaslt.fp32.algo0", "cublaslt.tf32.algo0", "cublaslt.bf16.algo0"}));
  EXPECT_EQ(names(gemm_candidates(activation_matmul_key(GemmLayout::kBatched), {64, 64, 64, 8}, {1, false, false, false})),
            (std::vector<std::string>{"cublaslt.fp32.algo0"}));
  EXPECT_EQ(names(gemm_candidates(quantized(ScaleGranularity::kRow), {512, 256, 512, 1}, {1, true, true})),
            (std::vector<std::string>{"cublaslt.fp8.e4m3.row.algo0", "cublaslt.bf16.algo0",
                                      "cublaslt.fp8.e4m3.row.fast_accum.algo0", "loka.fp8_emulated_fp32"}));
  // K = 24: no FP8 tensor-core kernel; BF16 and the emulation remain.
  EXPECT_EQ(names(gemm_candidates(quantized(ScaleGranularity::kTensor), {512, 256, 24, 1}, {1, false, true})),
            (std::vector<std::string>{"cublaslt.bf16.algo0", "loka.fp8_emulated_fp32"}));
  // An FP8 activation: the per-tensor scale it carries, no BF16 cast path.
  EXPECT_EQ(names(gemm_candidates(quantized(ScaleGranularity::kTensor, DType::kFloat8E4M3FN), {512, 256, 512, 1},
                                  {1, false, false})),
            (std::vector<std::string>{"cublaslt.fp8.e4m3.tensor.algo0", "loka.fp8_emulated_fp32"}));
  // Explicit split-K configurations follow each cuBLASLt family's heuristic algorithms; the emulation has none.
  EXPECT_EQ(names(gemm_candidates(quantized(ScaleGranularity::kTensor, DType::kFloat8E4M3FN), {512, 256, 512, 1},
                                  {1, false, false, true, {2, 4}})),
            (std::vector<std::string>{"cublaslt.fp8.e4m3.tensor.algo0", "cublaslt.fp8.e4m3.tensor.algo0.splitk2",
                                      "cublaslt.fp8.e4m3.tensor.algo0.splitk4", "loka.fp8_emulated_fp32"}));
  EXPECT_FALSE(can_implement({GemmPrecision::kFp8Emulated, ScaleGranularity::kNone, 0, false, 2},
                             quantized(ScaleGranularity::kTensor), {512, 256, 512, 1}));
  // Explicit tiles likewise (those cublaslt_tiles.h ranks best: 64x16, 64x32, 64x64 at 512x256).
  EXPECT_EQ(names(gemm_candidates(quantized(ScaleGranularity::kTensor, DType::kFloat8E4M3FN), {512, 256, 512, 1},
                                  {1, false, false, true, {}, 3})),
            (std::vector<std::string>{"cublaslt.fp8.e4m3.tensor.algo0", "cublaslt.fp8.e4m3.tensor.algo0.tile312",
                                      "cublaslt.fp8.e4m3.tensor.algo0.tile13", "cublaslt.fp8.e4m3.tensor.algo0.tile15",
                                      "loka.fp8_emulated_fp32"}));
  EXPECT_EQ(names(gemm_candidates(fp32_gemm(), {4096, 1024, 1024, 1}, {1, false, false, true, {2}, 1})),
            (std::vector<std::string>{"cublaslt.fp32.algo0", "cublaslt.fp32.algo0.splitk2", "cublaslt.fp32.algo0.tile20",
                                      "cublaslt.tf32.algo0", "cublaslt.tf32.algo0.splitk2", "cublaslt.tf32.algo0.tile20"}));
  // cuDNN engines come last (plans measured before them keep their order), FP8 tensor keys only.
  CandidateOptions with_cudnn{1, false, false, true, {}, 0, 2};
  EXPECT_EQ(names(gemm_candidates(quantized(ScaleGranularity::kTensor), {512, 256, 512, 1}, with_cudnn)),
            (std::vector<std::string>{"cublaslt.fp8.e4m3.tensor.algo0", "loka.fp8_emulated_fp32",
                                      "cudnn.fp8.e4m3.tensor.engine0", "cudnn.fp8.e4m3.tensor.engine1"}));
  EXPECT_EQ(names(gemm_candidates(quantized(ScaleGranularity::kRow), {512, 256, 512, 1}, with_cudnn)),
            (std::vector<std::string>{"cublaslt.fp8.e4m3.row.algo0", "loka.fp8_emulated_fp32"}));
  // GELU nodes: with tanh_gelu each cuBLASLt family's algorithms again with cuBLASLt's tanh GELU;
  // nodes without GELU, and the emulation, get none.
  GemmKey gelu = fp32_gemm();
  gelu.epilogue = cuda::GemmEpilogue::kGelu;
  CandidateOptions with_tanh{1, false, false, true};
  with_tanh.tanh_gelu = true;
  EXPECT_EQ(names(gemm_candidates(gelu, {512, 256, 512, 1}, with_tanh)),
            (std::vector<std::string>{"cublaslt.fp32.algo0", "cublaslt.fp32.tanh_gelu.algo0", "cublaslt.tf32.algo0",
                                      "cublaslt.tf32.tanh_gelu.algo0"}));
  GemmKey q_gelu = quantized(ScaleGranularity::kTensor, DType::kFloat8E4M3FN);
  q_gelu.epilogue = cuda::GemmEpilogue::kGelu;
  EXPECT_EQ(names(gemm_candidates(q_gelu, {512, 256, 512, 1}, with_tanh)),
            (std::vector<std::string>{"cublaslt.fp8.e4m3.tensor.algo0", "cublaslt.fp8.e4m3.tensor.tanh_gelu.algo0",
                                      "loka.fp8_emulated_fp32"}));
  EXPECT_EQ(names(gemm_candidates(fp32_gemm(), {512, 256, 512, 1}, with_tanh)),
            (std::vector<std::string>{"cublaslt.fp32.algo0", "cublaslt.tf32.algo0"}));
  EXPECT_EQ(reference_precision(fp32_gemm()), GemmPrecision::kFp32);
  EXPECT_EQ(reference_precision(quantized(ScaleGranularity::kRow)), GemmPrecision::kFp8E4M3);
}

}  // namespace
}  // namespace loka::kernels
