// ============================================================================
// kernels/cuda/attention_tensor_cores.h — ai.loka.Attention for short key sets
// (Nk ≤ 64, heads of 33 to 128 dims) on the tensor cores, at FP32 accuracy:
// both products (Q·Kᵀ and P·V) run as TF32 MMAs with every FP32 operand split
// into a high and a low TF32 part (three MMAs a product, "3xTF32"). Internal to
// kernels/cuda/attention.cu, which picks the kernel by shape; the contract
// (inputs, NaN and inf behaviour, no score tensor) is attention.h's.
// ============================================================================
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/cuda/attention.h"
#include "loka/status.h"

namespace loka::cuda {

/// The longest key set the tensor-core kernel takes: a warp keeps a row block's scores in
/// registers, eight keys an MMA tile.
inline constexpr int64_t kTensorCoreMaxKeys = 64;

/// Heads of at most this many dims stay on attention.cu's FP32 kernel: at the ranker's 8 heads of
/// 16 over 40 tokens the tensor-core kernel took 425 us against its 241 (batch 4096, H100,
/// 2026-11-28): its units are too small for the per-block staging and barriers.
inline constexpr int64_t kTensorCoreMinHeadDim = 32;

/// Enqueues `args` (checked by attention_check_args) on the tensor-core kernel and sets `launched`;
/// leaves it false, enqueuing nothing, for a shape it does not take (attention_runs_on_tensor_cores
/// false, or 2^31 units or more) or whose unit does not fit the device's shared memory.
Status launch_attention_on_tensor_cores(const AttentionArgs& args, cudaStream_t stream, bool& launched);

}  // namespace loka::cuda
