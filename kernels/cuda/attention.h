// ============================================================================
// kernels/cuda/attention.h — ai.loka.Attention (docs/loka_ops.md): scaled
// dot-product attention over heads read in place from token-major projections.
//
//   Y[b, i, h·D + e] = Σ_j softmax_j(scale · (q(b,i,h) · k(b,j,h))) · v(b,j,h)[e]
//
// q(b,i,h) is the D-vector Q[b, i, q_offset + h·D ...] of a [B, Nq, Cq] input,
// k and v likewise from [B, Nk, Ck] and [B, Nk, Cv]; Q, K and V may be one
// buffer (a fused QKV projection). The unfused chain (Reshape, Transpose,
// MatMul, Mul, Softmax, MatMul, Transpose, Reshape) writes the [B, H, Nq, Nk]
// scores and three transposed copies to memory; here every input element is
// read once from DRAM and Y written once, with no score tensor.
//
// FP32 accuracy throughout: the dot product is summed and then multiplied by
// `scale` once, as the MatMul and Mul it replaces. For Nk ≤ 64 and D > 32 the
// products run on the tensor cores as 3xTF32 (each within 3·2^-20 of FP32's,
// FP32 sums) and the softmax is exact (every score of a row in registers, the
// row maximum subtracted); otherwise FP32 FMAs and a softmax online over key
// tiles (running max m, running sum l, accumulator rescaled by
// exp(m_old − m_new)). Either way it never
// overflows and equals the CPU reference (runtime/ops/attention.cc) up to
// rounding. NaN and ±inf propagate as in the unfused ops: a NaN or +inf score
// makes its row NaN, a row of −inf scores is NaN, a non-finite V element
// reaches every row that multiplies it (even by a zero probability, as the
// MatMul would). Enqueue only: graph-capturable (a shape's first launch asks
// the runtime for occupancy, also inside a capture; no allocation).
// ============================================================================
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "loka/status.h"

namespace loka::cuda {

struct AttentionArgs {
  const float* q = nullptr;  ///< [batch, nq, q_stride]
  const float* k = nullptr;  ///< [batch, nk, k_stride]; may be the same buffer as q and v
  const float* v = nullptr;  ///< [batch, nk, v_stride]
  float* y = nullptr;        ///< [batch, nq, heads·head_dim]; must not overlap q, k or v
  int64_t batch = 0, nq = 0, nk = 0, heads = 0, head_dim = 0;
  int64_t q_stride = 0, k_stride = 0, v_stride = 0;  ///< each input's last dim (Cq, Ck, Cv)
  int64_t q_offset = 0, k_offset = 0, v_offset = 0;  ///< first column of head 0 in each input
  float scale = 1.0f;                                ///< multiplies each dot product
};

/// The largest head the kernel keeps in registers (a thread holds a 16-wide slice, 8 per row).
inline constexpr int64_t kAttentionMaxHeadDim = 128;

/// Ok when the kernel can run heads of `head_dim` (1 ≤ D ≤ 128) with `heads` ≥ 1;
/// otherwise why not.
Status attention_can_implement(int64_t heads, int64_t head_dim);

/// Ok when the shape and layout in `args` (pointers aside, so a plan can call it) keep the kernel
/// in bounds: attention_can_implement, batch and nq ≥ 0, nk ≥ 1, offsets ≥ 0 with
/// offset + heads·head_dim within each input's last dim.
Status attention_check_args(const AttentionArgs& args);

/// Whether every head of Q, K, V and Y starts 16-byte aligned (head_dim, strides and offsets
/// multiples of 4, aligned pointers): then the kernels move rows as float4s.
bool attention_rows_aligned(const AttentionArgs& args);

/// Whether launch_attention runs `args` on the tensor cores (Nk ≤ 64 and D > 32: kernels/cuda/
/// attention_tensor_cores.h). Its products are then 3xTF32, each within 3·2^-20 of the FP32
/// product, instead of FP32 FMAs; the sums are FP32 either way, and rows with a non-finite
/// input are recomputed in FP32 FMAs.
bool attention_runs_on_tensor_cores(const AttentionArgs& args);

/// Enqueues Y for every (b, i, h) on `stream` after attention_check_args (nothing when batch
/// or nq is 0; an error for a null pointer otherwise).
Status launch_attention(const AttentionArgs& args, cudaStream_t stream);

}  // namespace loka::cuda
