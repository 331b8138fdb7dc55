// ============================================================================
// kernels/cuda/layer_norm.cu — LayerNorm (FP32 or E4M3 output) kernels.
//
// Rows up to 8192 wide are read from memory once: the threads that own a row
// (a warp up to 1024 columns, eight rows to a block; a block of 256 beyond)
// stage it in shared memory, each thread reading back only what it loaded, and
// reduce the double sums from there; only wider rows re-read memory (three
// passes, as the CPU reference). Shared memory rather than registers: a row
// kept in registers (32 values per thread) took 192 registers, one block per
// SM, and ran 3.5x slower on an H100 than re-reading memory (measured
// 2026-11-24). Explicit _rn intrinsics keep nvcc from contracting the
// element formula into an FMA, which would change bits. The optional amax is
// reduced per block first, so a batch of 65536 rows makes a few thousand
// atomics on one address, not 65536.
// ============================================================================
#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/layer_norm.h"
#include "kernels/cuda/row_reduce.cuh"

namespace loka::cuda {
namespace {

/// Staged bytes per block: 8 warp rows of 1024 floats, or one row of 8192, leaving room under the
/// 48 KiB a block gets without opting in for the static reductions' slots and two blocks per SM.
constexpr size_t kMaxStagedBytes = 32 * 1024;


/// The element formula: LayerNorm of x at column j, as the CPU reference rounds it.
__device__ __forceinline__ float normalized(const LayerNormArgs& args, int64_t j, float x, float mean, float inv_std) {
  float v = __fmul_rn(__fmul_rn(__fsub_rn(x, mean), inv_std), args.scale[j]);
  if (args.bias) v = __fadd_rn(v, args.bias[j]);
  return v;
}

/// The E4M3 code of v / y_scale (one IEEE division, as QuantizeLinear).
__device__ __forceinline__ uint8_t fp8_code(const LayerNormArgs& args, float v) {
  return __nv_cvt_float_to_fp8(__fdiv_rn(v, args.y_scale), __NV_SATFINITE, __NV_E4M3);
}

__device__ __forceinline__ float finite_abs(float v) { return isfinite(v) ? fabsf(v) : 0.0f; }

/// One element through the formula and stored; returns |v| when finite, else 0.
__device__ __forceinline__ float normalize_and_store(const LayerNormArgs& args, int64_t row, int64_t j, float x,
                                                     float mean, float inv_std) {
  const float v = normalized(args, j, x, mean, inv_std);
  if (args.y_codes) {
    args.y_codes[row * args.cols + j] = fp8_code(args, v);
  } else {
    args.y[row * args.cols + j] = v;
  }
  return finite_abs(v);
}

/// Raises *args.amax to the block's largest |v|: one atomic per block. Every thread calls it.
__device__ __forceinline__ void publish_amax(const LayerNormArgs& args, float amax) {
  __shared__ float warp_max[32];
  amax = row_reduce<32>(amax, [](float a, float b) { return fmaxf(a, b); }, static_cast<float*>(nullptr));
  __syncthreads();
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (unsigned w = 1; w < blockDim.x / 32; ++w) amax = fmaxf(amax, warp_max[w]);
    // Non-negative floats order like their bit patterns, so an integer max is a float max.
    if (amax > *args.amax) atomicMax(reinterpret_cast<int*>(args.amax), __float_as_int(amax));
  }
}

/// Four elements of a row (columns j..j+3) through the element formula, stored together: one
/// 32-bit store of four codes or one float4. Returns the largest finite |v|.
__device__ __forceinline__ float normalize_and_store4(const LayerNormArgs& args, int64_t row, int64_t j, float4 x,
                                                      float mean, float inv_std) {
  const float in[4] = {x.x, x.y, x.z, x.w};
  float v[4];
  float amax = 0.0f;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    v[e] = normalized(args, j + e, in[e], mean, inv_std);
    amax = fmaxf(amax, finite_abs(v[e]));
  }
  if (args.y_codes) {
    uint32_t packed = 0;
#pragma unroll
    for (int e = 0; e < 4; ++e) packed |= static_cast<uint32_t>(fp8_code(args, v[e])) << (8 * e);
    *reinterpret_cast<uint32_t*>(args.y_codes + row * args.cols + j) = packed;
  } else {
    *reinterpret_cast<float4*>(args.y + row * args.cols + j) = make_float4(v[0], v[1], v[2], v[3]);
  }
  return amax;
}

/// Rows staged in shared memory: kThreads threads per row (a warp, eight rows to
/// a block, or the whole block), each reading back only the columns it loaded.
/// kVec: columns a multiple of 4 and x, y 16-byte (codes 4-byte) aligned, so each thread moves
/// float4s: a quarter of the memory instructions (the scalar kernel reached 35-38% of the copy
/// rate on 65536x1024 and 16384x4096, H200, 2026-11-26).
template <int kThreads, bool kVec>
__global__ void __launch_bounds__(kThreadsPerBlock) layer_norm_staged_kernel(LayerNormArgs args) {
  extern __shared__ float4 staged_raw[];  // kRowsPerBlock rows of args.cols floats
  float* const staged = reinterpret_cast<float*>(staged_raw);
  __shared__ double shared_sum[kThreads / 32];
  constexpr int kRowsPerBlock = kThreadsPerBlock / kThreads;
  const int lane = static_cast<int>(threadIdx.x) % kThreads, slot = static_cast<int>(threadIdx.x) / kThreads;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + slot;
  const bool active = row < args.rows;  // inactive rows still join the block's amax reduction
  const int n = static_cast<int>(args.cols);
  const float* in = args.x + (active ? row : 0) * args.cols;
  float* mine = staged + static_cast<int64_t>(slot) * n;
  const auto plus = [](double a, double b) { return a + b; };

  double sum = 0.0;
  if (active) {
    if constexpr (kVec) {
      for (int j = lane * 4; j < n; j += kThreads * 4) {
        const float4 v = *reinterpret_cast<const float4*>(in + j);
        *reinterpret_cast<float4*>(mine + j) = v;
        sum += (static_cast<double>(v.x) + static_cast<double>(v.y)) + (static_cast<double>(v.z) + static_cast<double>(v.w));
      }
    } else {
      for (int j = lane; j < n; j += kThreads) {
        const float v = in[j];
        mine[j] = v;
        sum += v;
      }
    }
  }
  const double mean = row_reduce<kThreads>(sum, plus, shared_sum) / static_cast<double>(n);
  double squares = 0.0;
  if (active) {
    // Each thread reads back exactly the columns it staged (no barrier needed).
    if constexpr (kVec) {
      for (int j = lane * 4; j < n; j += kThreads * 4) {
        const float4 v = *reinterpret_cast<const float4*>(mine + j);
        const double d0 = v.x - mean, d1 = v.y - mean, d2 = v.z - mean, d3 = v.w - mean;
        squares += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3);
      }
    } else {
      for (int j = lane; j < n; j += kThreads) {
        const double d = static_cast<double>(mine[j]) - mean;
        squares += d * d;
      }
    }
  }
  const double variance = row_reduce<kThreads>(squares, plus, shared_sum) / static_cast<double>(n);
  const float mean_f = static_cast<float>(mean);
  const float inv_std = static_cast<float>(1.0 / sqrt(variance + static_cast<double>(args.epsilon)));
  float amax = 0.0f;
  if (active) {
    if constexpr (kVec) {
      for (int j = lane * 4; j < n; j += kThreads * 4)
        amax = fmaxf(amax, normalize_and_store4(args, row, j, *reinterpret_cast<const float4*>(mine + j), mean_f, inv_std));
    } else {
      for (int j = lane; j < n; j += kThreads) amax = fmaxf(amax, normalize_and_store(args, row, j, mine[j], mean_f, inv_std));
    }
  }
  if (args.amax) publish_amax(args, amax);
}

/// Rows too wide for shared memory: one block per row, three passes over memory.
__global__ void layer_norm_wide_kernel(LayerNormArgs args) {
  __shared__ double shared_sum[kThreadsPerBlock / 32];
  const int lane = static_cast<int>(threadIdx.x);
  const int64_t row = blockIdx.x;
  const int64_t n = args.cols;
  const float* in = args.x + row * n;
  const auto plus = [](double a, double b) { return a + b; };
  double sum = 0.0;
  for (int64_t j = lane; j < n; j += kThreadsPerBlock) sum += in[j];
  const double mean = row_reduce<kThreadsPerBlock>(sum, plus, shared_sum) / static_cast<double>(n);
  double squares = 0.0;
  for (int64_t j = lane; j < n; j += kThreadsPerBlock) {
    const double d = static_cast<double>(in[j]) - mean;
    squares += d * d;
  }
  const double variance = row_reduce<kThreadsPerBlock>(squares, plus, shared_sum) / static_cast<double>(n);
  const float mean_f = static_cast<float>(mean);
  const float inv_std = static_cast<float>(1.0 / sqrt(variance + static_cast<double>(args.epsilon)));
  float amax = 0.0f;
  for (int64_t j = lane; j < n; j += kThreadsPerBlock)
    amax = fmaxf(amax, normalize_and_store(args, row, j, in[j], mean_f, inv_std));
  if (args.amax) publish_amax(args, amax);
}

}  // namespace

Status launch_layer_norm(const LayerNormArgs& args, cudaStream_t stream) {
  if (args.rows < 0 || args.cols < 0)
    return Status::error("layer_norm: dims must be >= 0, got [" + std::to_string(args.rows) + "," +
                         std::to_string(args.cols) + "]");
  if ((args.y == nullptr) == (args.y_codes == nullptr))
    return Status::error("layer_norm: exactly one of y (FP32) and y_codes (FP8) must be set");
  if (args.y_codes && !(args.y_scale > 0.0f && std::isfinite(args.y_scale)))
    return Status::error("layer_norm: y_scale must be finite and > 0, got " + std::to_string(args.y_scale));
  if (args.rows == 0 || args.cols == 0) return Status::ok();
  const size_t row_bytes = static_cast<size_t>(args.cols) * sizeof(float);
  const auto aligned = [](const void* pointer, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(pointer) % bytes == 0; };
  const bool vec = args.cols % 4 == 0 && aligned(args.x, 16) &&
                   (args.y_codes ? aligned(args.y_codes, 4) : aligned(args.y, 16));
  if (args.cols <= 1024) {
    constexpr int kRowsPerBlock = kThreadsPerBlock / 32;
    const int64_t blocks = (args.rows + kRowsPerBlock - 1) / kRowsPerBlock;
    const auto kernel = vec ? layer_norm_staged_kernel<32, true> : layer_norm_staged_kernel<32, false>;
    kernel<<<static_cast<unsigned>(blocks), kThreadsPerBlock, kRowsPerBlock * row_bytes, stream>>>(args);
  } else if (row_bytes <= kMaxStagedBytes) {
    const auto kernel = vec ? layer_norm_staged_kernel<kThreadsPerBlock, true> : layer_norm_staged_kernel<kThreadsPerBlock, false>;
    kernel<<<static_cast<unsigned>(args.rows), kThreadsPerBlock, row_bytes, stream>>>(args);
  } else layer_norm_wide_kernel<<<static_cast<unsigned>(args.rows), kThreadsPerBlock, 0, stream>>>(args);
  return launch_status("layer_norm");
}

}  // namespace loka::cuda
