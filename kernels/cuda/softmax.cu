// ============================================================================
// kernels/cuda/softmax.cu — Softmax / LogSoftmax kernels.
//
// Three passes over each row (max, sum, write): the row is re-read from cache,
// and every pass is a plain strided loop, which keeps the NaN rule and the
// double evaluation identical across the row and column kernels.
// ============================================================================
#include <string>
#include <type_traits>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/row_reduce.cuh"
#include "kernels/cuda/softmax.h"

namespace loka::cuda {
namespace {

/// Max that ignores NaN (as fmax) plus whether a NaN was seen: NaN rows become NaN.
struct RowMax {
  float max;
  bool nan;
};

__device__ __forceinline__ RowMax combine(RowMax a, RowMax b) { return {fmaxf(a.max, b.max), a.nan || b.nan}; }

__device__ __forceinline__ float softmax_value(float x, float max, double sum, double log_sum, bool log) {
  if (log) return (x - max) - static_cast<float>(log_sum);
  return static_cast<float>(exp(static_cast<double>(x - max)) / sum);
}

/// Lets row_reduce exchange RowMax values between lanes.
__device__ __forceinline__ RowMax shuffle_xor(RowMax value, int offset) {
  return {__shfl_xor_sync(0xFFFFFFFFu, value.max, offset),
          __shfl_xor_sync(0xFFFFFFFFu, static_cast<int>(value.nan), offset) != 0};
}

/// One row of the last axis per kThreads threads (kThreads = 32: a warp, rows_per_block per block).
template <int kThreads>
__global__ void softmax_rows_kernel(const float* x, float* y, int64_t rows, int64_t n, bool log) {
  __shared__ RowMax shared_max[kThreads / 32];
  __shared__ double shared_sum[kThreads / 32];
  constexpr int kRowsPerBlock = kThreadsPerBlock / kThreads;
  const int lane = static_cast<int>(threadIdx.x) % kThreads;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kThreads;
  if (row >= rows) return;  // whole rows (warps, or the whole block) leave together
  const float* in = x + row * n;
  float* out = y + row * n;
  RowMax partial{-INFINITY, false};
  for (int64_t j = lane; j < n; j += kThreads) partial = combine(partial, RowMax{in[j], isnan(in[j])});
  const RowMax reduced = row_reduce<kThreads>(partial, combine, shared_max);
  const float max = reduced.nan ? NAN : reduced.max;
  double sum = 0.0;
  for (int64_t j = lane; j < n; j += kThreads) sum += exp(static_cast<double>(in[j] - max));
  sum = row_reduce<kThreads>(sum, [](double a, double b) { return a + b; }, shared_sum);
  const double log_sum = log ? ::log(sum) : 0.0;
  for (int64_t j = lane; j < n; j += kThreads) out[j] = softmax_value(in[j], max, sum, log_sum, log);
}

/// One thread per (outer, inner) pair, walking the axis with stride `inner`.
__global__ void softmax_columns_kernel(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, bool log) {
  for (int64_t column = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; column < outer * inner;
       column += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t base = (column / inner) * n * inner + column % inner;
    const float* in = x + base;
    float* out = y + base;
    RowMax reduced{-INFINITY, false};
    for (int64_t j = 0; j < n; ++j) reduced = combine(reduced, RowMax{in[j * inner], isnan(in[j * inner])});
    const float max = reduced.nan ? NAN : reduced.max;
    double sum = 0.0;
    for (int64_t j = 0; j < n; ++j) sum += exp(static_cast<double>(in[j * inner] - max));
    const double log_sum = log ? ::log(sum) : 0.0;
    for (int64_t j = 0; j < n; ++j) out[j * inner] = softmax_value(in[j * inner], max, sum, log_sum, log);
  }
}

}  // namespace

Status launch_softmax(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, bool log,
                      cudaStream_t stream) {
  if (outer < 0 || n < 0 || inner < 0)
    return Status::error("softmax: dims must be >= 0, got [" + std::to_string(outer) + "," + std::to_string(n) + "," +
                         std::to_string(inner) + "]");
  if (outer == 0 || n == 0 || inner == 0) return Status::ok();
  if (inner == 1 && n <= 1024) {
    constexpr int kRowsPerBlock = kThreadsPerBlock / 32;
    const int64_t blocks = (outer + kRowsPerBlock - 1) / kRowsPerBlock;
    softmax_rows_kernel<32><<<static_cast<unsigned>(blocks), kThreadsPerBlock, 0, stream>>>(x, y, outer, n, log);
  } else if (inner == 1) {
    softmax_rows_kernel<kThreadsPerBlock><<<static_cast<unsigned>(outer), kThreadsPerBlock, 0, stream>>>(x, y, outer, n, log);
  } else {
    softmax_columns_kernel<<<blocks_for(outer * inner), kThreadsPerBlock, 0, stream>>>(x, y, outer, n, inner, log);
  }
  return launch_status("softmax");
}

}  // namespace loka::cuda
