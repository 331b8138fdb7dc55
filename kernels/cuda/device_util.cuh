// ============================================================================
// kernels/cuda/device_util.cuh — small device helpers shared by the CUDA
// data kernels: grid sizing, float <-> storage-type conversion, aligned packs.
//
// Half types are stored as FP16/BF16 and computed in FP32 with one rounding
// on store (nearest even), as the CPU runtime does (runtime/ops/elementwise.cc).
// Included by .cu files only.
// ============================================================================
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "loka/dtype.h"
#include "loka/status.h"

namespace loka::cuda {

inline constexpr int kThreadsPerBlock = 256;

/// Blocks for a grid-stride loop over `count` items: enough to fill an H100
/// many times over, few enough that each thread does a handful of items.
inline unsigned blocks_for(int64_t count, int threads = kThreadsPerBlock) {
  const int64_t blocks = (count + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65536 ? 65536 : blocks));
}

/// A 2-D launch over rows of `column_groups` items (a thread's columns fixed, so it loads their
/// per-column data once, then walks rows with no index division): x a warp-multiple of column
/// threads up to a block, y the rest of the block taking more rows; row blocks enough that the
/// grid holds about `max_blocks` (beyond that threads loop over rows), at most 65535 (gridDim.y's
/// limit). The kernel walks rows from blockIdx.y · blockDim.y + threadIdx.y, gridDim.y · blockDim.y
/// apart.
struct RowColumnLaunch {
  dim3 grid, block;
};
inline RowColumnLaunch row_column_launch(int64_t rows, int64_t column_groups, int64_t max_blocks) {
  const int64_t tx = std::min<int64_t>(kThreadsPerBlock, (column_groups + 31) / 32 * 32);
  const int64_t ty = kThreadsPerBlock / tx;
  const int64_t column_blocks = (column_groups + tx - 1) / tx;
  const int64_t row_blocks = std::min<int64_t>({(rows + ty - 1) / ty, std::max<int64_t>(1, max_blocks / column_blocks), 65535});
  return {dim3(static_cast<unsigned>(column_blocks), static_cast<unsigned>(row_blocks)),
          dim3(static_cast<unsigned>(tx), static_cast<unsigned>(ty))};
}

/// Ok, or the launch error of the last kernel, naming `what`.
inline Status launch_status(const char* what) {
  const cudaError_t error = cudaGetLastError();
  if (error == cudaSuccess) return Status::ok();
  return Status::error(std::string(what) + " launch failed: " + cudaGetErrorString(error));
}

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }

/// N elements moved as one aligned load or store (N·sizeof(T) a power of two ≤ 16).
template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

/// Grid-stride loop over `count` elements taken kVec at a time: group(g) for each
/// full group g (elements [g·kVec, g·kVec + kVec)), then single(i) for each of the
/// count % kVec trailing elements, so a vectorized kernel needs no size condition.
template <int kVec, typename Group, typename Single>
__device__ __forceinline__ void grid_stride_groups(int64_t count, Group group, Single single) {
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t groups = count / kVec;
  for (int64_t g = first; g < groups; g += stride) group(g);
  if constexpr (kVec > 1) {
    // Fewer than kVec trailing elements: the first threads of the grid take one each.
    if (groups * kVec + first < count) single(groups * kVec + first);
  }
}

/// y[i] = fn(x[i]) for `count` elements, kVec per access (kVec > 1: both bases aligned
/// to kVec elements), grid-stride: the body of every one-in, one-out map kernel.
template <int kVec, typename In, typename Out, typename Fn>
__device__ __forceinline__ void map_elements(const In* x, Out* y, int64_t count, Fn fn) {
  grid_stride_groups<kVec>(
      count,
      [&](int64_t g) {
        const Pack<In, kVec> in = reinterpret_cast<const Pack<In, kVec>*>(x)[g];
        Pack<Out, kVec> out;
#pragma unroll
        for (int j = 0; j < kVec; ++j) out.v[j] = fn(in.v[j]);
        reinterpret_cast<Pack<Out, kVec>*>(y)[g] = out;
      },
      [&](int64_t i) { y[i] = fn(x[i]); });
}

/// True when `pointer` is aligned to `bytes` (a power of two).
inline bool is_aligned(const void* pointer, size_t bytes) { return reinterpret_cast<uintptr_t>(pointer) % bytes == 0; }

/// Calls fn(T{}) with T the storage type of a float dtype LoKA computes on the
/// GPU (FP32, BF16, FP16); false for any other dtype.
template <typename Fn>
bool visit_float_type(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32: fn(float{}); return true;
    case DType::kBFloat16: fn(__nv_bfloat16{}); return true;
    case DType::kFloat16: fn(__half{}); return true;
    default: return false;
  }
}

}  // namespace loka::cuda
