// ============================================================================
// tests/gemm_test_keys.h — the GEMM registry keys the dispatch and CUDA
// suites describe their problems with (header-only: both binaries use it).
// ============================================================================
#pragma once

#include "kernels/registry/gemm_kernel_key.h"

namespace loka::testing {

/// An FP32 Gemm with a constant weight stored [N,K] (transB = 1).
inline kernels::GemmKey fp32_gemm_key(bool bias = true) {
  kernels::GemmKey key;
  key.op = "Gemm";
  key.layout = kernels::GemmLayout::kNT;
  key.bias = bias;
  return key;
}

/// A FusedGemm reading a BF16 activation (BF16 activation storage) with a constant FP32 weight
/// [N,K]: the FP32 op on the widened values.
inline kernels::GemmKey bf16_activation_gemm_key(bool bias = true) {
  kernels::GemmKey key = fp32_gemm_key(bias);
  key.op = "FusedGemm";
  key.input = DType::kBFloat16;
  return key;
}

/// A QuantizedGemm: E4M3 weights [N,K], the activation scale per `granularity`, ReLU fused.
inline kernels::GemmKey quantized_gemm_key(kernels::ScaleGranularity granularity, DType input = DType::kFloat32) {
  kernels::GemmKey key;
  key.op = "QuantizedGemm";
  key.input = input;
  key.weight = DType::kFloat8E4M3FN;
  key.activation_scale = granularity;
  key.layout = kernels::GemmLayout::kNT;
  key.epilogue = cuda::GemmEpilogue::kRelu;
  return key;
}

/// A MatMul of two computed tensors (attention QK^T, DHEN/Wukong interactions).
inline kernels::GemmKey activation_matmul_key(kernels::GemmLayout layout = kernels::GemmLayout::kBatched) {
  kernels::GemmKey key;
  key.op = "MatMul";
  key.layout = layout;
  key.constant_weight = false;
  return key;
}

}  // namespace loka::testing
