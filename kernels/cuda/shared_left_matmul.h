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
// K = 34. Two kernels here, both FP32-accurate:
//   * tensor cores (16 to 80 rows at K = 64): 3xTF32 MMAs, A split into its
//     TF32 parts once per block, a warp summing one sample's 16 columns (see
//     the .cu); results the MMAs make inf or NaN are recomputed in FP32 FMAs,
//     so a column with an inf or NaN input is FP32's;
//   * SIMT, for larger A: each thread owns one column n of one sample: it keeps
// X[b][:, n] (K ≤ 64 values) in registers and writes Y[b][:, n] one row at a
// time, with A in shared memory read as a broadcast by the whole warp, four
// values a load. Every X and Y element crosses memory once, coalesced; the
// grid is one wave of resident blocks. Measured at B = 4096, N = 128 on an
// H100 (2026-11-27, kernel_rate_bench shared-left): 84.5 µs on DHEN's
// M = K = 34 (64% of the copy rate; 94.0 µs with float loads and a fixed
// 8 blocks per SM), 109.0 µs on Wukong's M = 32, K = 64 (67%; was 116.7) and
// 141.4 µs on its M = 64, K = 34 (53%; was 159.8). It is issue-bound (FMAs
// and broadcast loads), not waiting on memory, so K tiers are 8 apart (K = 34
// pads to 40, not 48): Wukong's five launches at B = 4096 went from 0.529 to
// 0.494 ms a run in the full benchmark (two H200 runs, 2026-11-28). Measured
// slower or no faster: the next sample cp.async'd into shared memory during
// the sums (at M = 32, K = 64 108 -> 116.5 µs on an H200), four independent
// row sums, A in the kernel's parameters (each FMA reading the constant
// bank). Products accumulate in FP32 with FMA, k ascending
// (the CPU reference rounds mul and add apart: results agree to FP32
// accumulation error, as cuBLASLt's do). Enqueue only: graph-capturable.
// ============================================================================
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "loka/status.h"

namespace loka::cuda {

/// Which kernel runs the product: both are FP32-accurate (see the .cu for how each sums).
enum class SharedLeftPath {
  kAuto,         ///< the tensor cores from 16 rows where A's parts fit (shared_left_fits_tensor_cores), else SIMT
  kSimt,         ///< FP32 FMAs, a column a thread
  kTensorCores,  ///< 3xTF32 MMAs; an error where A's parts do not fit
};

struct SharedLeftMatMulArgs {
  const float* a = nullptr;  ///< [M,K], shared by every sample
  const float* x = nullptr;  ///< [batch,K,N]
  float* y = nullptr;        ///< [batch,M,N]; must not overlap a or x
  int64_t batch = 0, m = 0, k = 0, n = 0;
  /// Elements between consecutive samples of Y (0: M · the row stride, packed). A wider stride
  /// writes each sample's [M,N] into its slice of a Concat's output along the token axis
  /// (Wukong's concat(FMB, LCB)): runtime/concat_placement.h.
  int64_t y_sample_stride = 0;
  /// Elements between consecutive rows of a sample of Y (0: N, packed). A wider stride writes
  /// each row into its slice of a Concat's output along the last axis (DHEN's join of its
  /// modules' outputs).
  int64_t y_row_stride = 0;
  SharedLeftPath path = SharedLeftPath::kAuto;
};

/// The largest K a thread keeps in registers.
inline constexpr int64_t kSharedLeftMaxK = 64;
/// The largest M·K (A padded to the kernel's K tier) held in shared memory: 48 KiB.
inline constexpr int64_t kSharedLeftMaxElements = 12288;

/// The largest shared memory A's TF32 parts take on the tensor-core path ([M rounded up to 16,
/// K rounded up to 8, plus 4] pairs of 4-byte parts): M up to 80 at K = 64.
inline constexpr size_t kSharedLeftTensorCoreBytes = 48 * 1024;

/// True when the tensor-core path can hold A (1 ≤ K ≤ 64 and its parts within the bytes above).
bool shared_left_fits_tensor_cores(int64_t m, int64_t k);

/// Ok when the kernel can run the shape (1 ≤ K ≤ 64, M·K within the shared-memory tile);
/// otherwise why not, so a caller can fall back to a general GEMM.
Status shared_left_matmul_can_implement(int64_t m, int64_t k);

/// Enqueues Y[b] = A · X[b] for every b on `stream`.
Status launch_shared_left_matmul(const SharedLeftMatMulArgs& args, cudaStream_t stream);

}  // namespace loka::cuda
