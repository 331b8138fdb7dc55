// ============================================================================
// kernels/cuda/layer_norm.cu — LayerNorm (FP32 or E4M3 output) kernels.
//
// Rows up to 8192 wide are read from memory once: the threads that own a row
// (a warp up to 256 columns, eight rows to a block; a block of up to 1024
// threads beyond) keep it in registers, 8 values each at a stride of
// kThreads (coalesced), and reduce the double sums from there; only wider rows
// re-read memory (three passes, as the CPU reference). Few values per thread
// keep registers low (measured on an H100: 32 values per thread took 192
// registers, one block per SM, and ran 3.5x slower than re-reading memory). Explicit _rn intrinsics keep nvcc from contracting the
// element formula into an FMA, which would change bits. The optional amax is
// reduced per block first, so a batch of 65536 rows makes a few thousand
// atomics on one address, not 65536.
// ============================================================================
#include <cuda_fp8.h>

#include <cmath>
#include <string>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/layer_norm.h"
#include "kernels/cuda/row_reduce.cuh"

namespace loka::cuda {
namespace {


/// The element formula and its store, shared by both kernels; returns |v| when finite, else 0.
__device__ __forceinline__ float normalize_and_store(const LayerNormArgs& args, int64_t row, int64_t j, float x,
                                                     float mean, float inv_std) {
  float v = __fmul_rn(__fmul_rn(__fsub_rn(x, mean), inv_std), args.scale[j]);
  if (args.bias) v = __fadd_rn(v, args.bias[j]);
  if (args.y_codes) {
    args.y_codes[row * args.cols + j] = __nv_cvt_float_to_fp8(__fdiv_rn(v, args.y_scale), __NV_SATFINITE, __NV_E4M3);
  } else {
    args.y[row * args.cols + j] = v;
  }
  return isfinite(v) ? fabsf(v) : 0.0f;
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

/// A row of up to kThreads·kPerThread columns held in registers.
template <int kThreads, int kPerThread>
__global__ void __launch_bounds__(kRowBlockThreads<kThreads>) layer_norm_registers_kernel(LayerNormArgs args) {
  __shared__ double shared_sum[kThreads / 32];
  constexpr int kRowsPerBlock = kRowBlockThreads<kThreads> / kThreads;
  const int lane = static_cast<int>(threadIdx.x) % kThreads;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kThreads;
  const bool active = row < args.rows;  // inactive rows still join the block's amax reduction
  const int64_t n = args.cols;
  const float* in = args.x + (active ? row : 0) * n;
  const auto plus = [](double a, double b) { return a + b; };

  float values[kPerThread];
  double sum = 0.0;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int64_t j = lane + static_cast<int64_t>(i) * kThreads;
    values[i] = active && j < n ? in[j] : 0.0f;
    sum += values[i];
  }
  const double mean = row_reduce<kThreads>(sum, plus, shared_sum) / static_cast<double>(n);
  double squares = 0.0;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int64_t j = lane + static_cast<int64_t>(i) * kThreads;
    const double d = static_cast<double>(values[i]) - mean;
    if (j < n) squares += d * d;
  }
  const double variance = row_reduce<kThreads>(squares, plus, shared_sum) / static_cast<double>(n);
  const float mean_f = static_cast<float>(mean);
  const float inv_std = static_cast<float>(1.0 / sqrt(variance + static_cast<double>(args.epsilon)));

  float amax = 0.0f;
  if (active) {
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int64_t j = lane + static_cast<int64_t>(i) * kThreads;
      if (j < n) amax = fmaxf(amax, normalize_and_store(args, row, j, values[i], mean_f, inv_std));
    }
  }
  if (args.amax) publish_amax(args, amax);
}

/// Rows too wide for registers: one block per row, three passes over memory.
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

template <int kThreads, int kPerThread>
void launch_registers(const LayerNormArgs& args, cudaStream_t stream) {
  constexpr int kBlock = kRowBlockThreads<kThreads>;
  constexpr int kRowsPerBlock = kBlock / kThreads;
  const int64_t blocks = (args.rows + kRowsPerBlock - 1) / kRowsPerBlock;
  layer_norm_registers_kernel<kThreads, kPerThread><<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(args);
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
  const int64_t cols = args.cols;
  if (cols <= 128) launch_registers<32, 4>(args, stream);
  else if (cols <= 256) launch_registers<32, 8>(args, stream);
  else if (cols <= 512) launch_registers<64, 8>(args, stream);
  else if (cols <= 1024) launch_registers<128, 8>(args, stream);
  else if (cols <= 2048) launch_registers<256, 8>(args, stream);
  else if (cols <= 4096) launch_registers<512, 8>(args, stream);
  else if (cols <= 8192) launch_registers<1024, 8>(args, stream);
  else layer_norm_wide_kernel<<<static_cast<unsigned>(args.rows), kThreadsPerBlock, 0, stream>>>(args);
  return launch_status("layer_norm");
}

}  // namespace loka::cuda
