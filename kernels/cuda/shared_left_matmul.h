// ============================================================================
// kernels/cuda/shared_left_matmul.h — one small matrix applied on the left of
// every sample: the token-mixing MatMul of Wukong's linear compression and
// DHEN's linear module.
//
//   Y[b] = A · X[b]      A [M,K] (shared), X [batch,K,N], Y [batch,M,N], FP32
//
// ONNX exports `torch.matmul(W, x)` with W [M,K] and x [B,K,N] as a MatMul
// whose left operand broadcasts over the batch. cuBLASLt runs it as `batch`
// tiny SIMT GEMMs with a stride-0 operand, tiles mostly idle for M = 34,
// K = 34. Here each thread owns one column n of one sample: it keeps
// X[b][:, n] (K ≤ 64 values) in registers and writes Y[b][:, n] one row at a
// time, with A in shared memory read as a broadcast by the whole warp. Every
// X and Y element crosses memory once, coalesced. Measured at B = 4096,
// N = 128 on an H200 (2026-11-26): 0.085 ms a launch on DHEN's M = K = 34
// (cuBLASLt 0.10-0.11 ms), 0.11 ms on Wukong's M = 32, K = 64 — on par with
// cuBLASLt there and 38% of the copy rate, bound by the FMA and shared-memory
// loads of one column per thread. Products accumulate in FP32 with FMA, k ascending
// (the CPU reference rounds mul and add apart: results agree to FP32
// accumulation error, as cuBLASLt's do). Enqueue only: graph-capturable.
// ============================================================================
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "loka/status.h"

namespace loka::cuda {

struct SharedLeftMatMulArgs {
  const float* a = nullptr;  ///< [M,K], shared by every sample
  const float* x = nullptr;  ///< [batch,K,N]
  float* y = nullptr;        ///< [batch,M,N]; must not overlap a or x
  int64_t batch = 0, m = 0, k = 0, n = 0;
};

/// The largest K a thread keeps in registers.
inline constexpr int64_t kSharedLeftMaxK = 64;
/// The largest M·K (A padded to the kernel's K tier) held in shared memory: 48 KiB.
inline constexpr int64_t kSharedLeftMaxElements = 12288;

/// Ok when the kernel can run the shape (1 ≤ K ≤ 64, M·K within the shared-memory tile);
/// otherwise why not, so a caller can fall back to a general GEMM.
Status shared_left_matmul_can_implement(int64_t m, int64_t k);

/// Enqueues Y[b] = A · X[b] for every b on `stream`.
Status launch_shared_left_matmul(const SharedLeftMatMulArgs& args, cudaStream_t stream);

}  // namespace loka::cuda
