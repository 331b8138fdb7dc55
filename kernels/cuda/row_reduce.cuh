// ============================================================================
// kernels/cuda/row_reduce.cuh — reduce one value across the threads that own a
// row: a warp (kThreads = 32, several rows per block) or a whole block.
//
// Row kernels (Softmax, LayerNorm, per-row quantization) share this so each
// reduces the same way. The value type needs `shuffle_xor(T, int)`; float,
// double and int are here, kernels add their own (found by argument lookup).
// Included by .cu files only.
// ============================================================================
#pragma once

#include <cuda_runtime.h>

namespace loka::cuda {

__device__ __forceinline__ float shuffle_xor(float value, int offset) { return __shfl_xor_sync(0xFFFFFFFFu, value, offset); }
__device__ __forceinline__ double shuffle_xor(double value, int offset) { return __shfl_xor_sync(0xFFFFFFFFu, value, offset); }
__device__ __forceinline__ int shuffle_xor(int value, int offset) { return __shfl_xor_sync(0xFFFFFFFFu, value, offset); }

/// Block size of a row kernel with kThreads threads per row: eight warp-rows to a
/// block (kThreadsPerBlock), or one row per block when a row takes more than a warp
/// (row_reduce's shared slots are then the block's warps).
template <int kThreads>
inline constexpr int kRowBlockThreads = kThreads == 32 ? 256 : kThreads;

/// Reduces `value` with `op` over the kThreads threads of a row; every thread gets the result.
/// `shared` holds kThreads / 32 values (unused when kThreads = 32). All threads of the row call it.
template <int kThreads, typename T, typename Op>
__device__ __forceinline__ T row_reduce(T value, Op op, T* shared) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value = op(value, shuffle_xor(value, offset));
  if constexpr (kThreads > 32) {
    const int warp = static_cast<int>(threadIdx.x) / 32;
    __syncthreads();  // `shared` may still be read by the previous reduction
    if (threadIdx.x % 32 == 0) shared[warp] = value;
    __syncthreads();
    value = shared[0];
    for (int w = 1; w < kThreads / 32; ++w) value = op(value, shared[w]);
  }
  return value;
}

/// Reduces each of `values` with `op` over a warp, as row_reduce<32> would one at a time, the
/// kN reductions interleaved so that one's shuffle waits while the others' run (a warp holding
/// several rows); every lane gets the results.
template <int kN, typename T, typename Op>
__device__ __forceinline__ void warp_reduce_each(T (&values)[kN], Op op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
#pragma unroll
    for (int i = 0; i < kN; ++i) values[i] = op(values[i], shuffle_xor(values[i], offset));
}

}  // namespace loka::cuda
