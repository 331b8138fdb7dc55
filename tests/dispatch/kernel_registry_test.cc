// ============================================================================
// tests/dispatch/kernel_registry_test.cc — GEMM keys, candidate names,
// can_implement and the registry's expansion (kernels/registry).
// ============================================================================
#include <gtest/gtest.h>

#include "kernels/registry/gemm_kernel_key.h"
#include "kernels/registry/kernel_registry.h"

namespace loka::kernels {
namespace {

GemmKey fp32_gemm() {
  GemmKey key;
  key.op = "Gemm";
  key.layout = GemmLayout::kNT;
  key.bias = true;
  return key;
}

GemmKey quantized(ScaleGranularity granularity, DType input = DType::kFloat32) {
  GemmKey key;
  key.op = "QuantizedGemm";
  key.input = input;
  key.weight = DType::kFloat8E4M3FN;
  key.activation_scale = granularity;
  key.layout = GemmLayout::kNT;
  key.epilogue = cuda::GemmEpilogue::kRelu;
  return key;
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
      {{GemmPrecision::kBf16, ScaleGranularity::kNone, 2, false}, "cublaslt.bf16.algo2"},
      {{GemmPrecision::kFp8E4M3, ScaleGranularity::kTensor, 3, false}, "cublaslt.fp8.e4m3.tensor.algo3"},
      {{GemmPrecision::kFp8E4M3, ScaleGranularity::kRow, 1, true}, "cublaslt.fp8.e4m3.row.fast_accum.algo1"},
      {{GemmPrecision::kFp8Emulated, ScaleGranularity::kNone, 0, false}, "loka.fp8_emulated_fp32"},
  };
  for (const auto& [candidate, name] : cases) {
    EXPECT_EQ(candidate.name(), name);
    auto parsed = parse_gemm_candidate(name);
    ASSERT_TRUE(parsed.is_ok()) << parsed.status().message();
    EXPECT_EQ(*parsed, candidate) << name;
  }
  EXPECT_EQ((GemmCandidate{GemmPrecision::kBf16, ScaleGranularity::kNone, 5, false}).family_default().name(),
            "cublaslt.bf16.algo0");
}

TEST(GemmKernelKey, BadNamesAreErrorsQuotingThem) {
  for (const char* name : {"", "cublaslt", "cublaslt.fp16.algo0", "cublaslt.fp32.algoX", "cublaslt.fp32.algo-1",
                           "cublaslt.fp8.e4m3.block.algo0", "cublaslt.fp8.e4m3.tensor.slow.algo0",
                           "cutlass.fp8.algo0", "cublaslt.fp32.extra.algo0"}) {
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
  GemmKey batched = fp32_gemm();
  batched.op = "MatMul";
  batched.layout = GemmLayout::kBatched;
  EXPECT_FALSE(can_implement(bf16, batched, {64, 64, 64, 8}).is_ok());
  EXPECT_TRUE(can_implement(fp32, batched, {64, 64, 64, 8}).is_ok());
  GemmKey computed_w = fp32_gemm();
  computed_w.constant_weight = false;  // activation x activation: nothing to convert when planned
  EXPECT_FALSE(can_implement(bf16, computed_w, {512, 256, 512, 1}).is_ok());
  EXPECT_TRUE(can_implement(fp32, computed_w, {512, 256, 512, 1}).is_ok());
  EXPECT_EQ(computed_w.to_string(), "Gemm:f32*f32->f32:none:nt~act:bias+none");
  EXPECT_FALSE(can_implement(fp32, fp32_gemm(), {0, 256, 512, 1}).is_ok());
  GemmCandidate fast = fp32;
  fast.fast_accum = true;
  EXPECT_FALSE(can_implement(fast, fp32_gemm(), {512, 256, 512, 1}).is_ok());
}

TEST(KernelRegistry, ExpandsFamiliesInAFixedOrder) {
  const auto names = [](const std::vector<GemmCandidate>& candidates) {
    std::vector<std::string> out;
    for (const GemmCandidate& c : candidates) out.push_back(c.name());
    return out;
  };
  EXPECT_EQ(names(gemm_candidates(fp32_gemm(), {512, 256, 512, 1}, {2, true, true})),
            (std::vector<std::string>{"cublaslt.fp32.algo0", "cublaslt.fp32.algo1", "cublaslt.bf16.algo0",
                                      "cublaslt.bf16.algo1"}));
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
  EXPECT_EQ(reference_precision(fp32_gemm()), GemmPrecision::kFp32);
  EXPECT_EQ(reference_precision(quantized(ScaleGranularity::kRow)), GemmPrecision::kFp8E4M3);
}

}  // namespace
}  // namespace loka::kernels
