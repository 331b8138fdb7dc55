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
// The float/double overloads beside it (this one hides them from unqualified calls here).
using ::loka::cuda::shuffle_xor;

/// One row of the last axis per kThreads threads: a block per row for rows wider than 1024
/// (kThreads = 32, a warp per row, is the reference softmax_short_rows_kernel reproduces).
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

/// row_reduce<32>'s butterfly over 32 / kGroup virtual lanes per thread (see
/// softmax_short_rows_kernel): offsets >= kGroup combine inside the thread, the
/// smaller ones shuffle within the kGroup lanes of the row.
template <int kGroup, typename T, int kVirtual, typename Op>
__device__ __forceinline__ T reduce_virtual_lanes(T (&part)[kVirtual], Op op) {
#pragma unroll
  for (int offset = 16; offset >= kGroup; offset /= 2) {
#pragma unroll
    for (int k = 0; k < kVirtual; ++k)
      if ((k & (offset / kGroup)) == 0) part[k] = op(part[k], part[k + offset / kGroup]);
  }
  T result = part[0];
#pragma unroll
  for (int offset = kGroup / 2; offset > 0; offset /= 2) result = op(result, shuffle_xor(result, offset));
  return result;
}

/// Rows of the last axis up to 1024 wide, bit-identical to softmax_rows_kernel<32>
/// (a whole warp per row) but without its waste on short rows: kGroup lanes take
/// a row (32 / kGroup rows per warp) and keep its values (j = lane + kGroup·s) and
/// their exps in registers, so each value is read once and exp evaluated once.
///
/// Same results, not just close: thread `lane` stands for the kVirtual = 32/kGroup
/// warp lanes vl = lane + kGroup·k of the whole-warp kernel. Slot s belongs to
/// virtual lane k = s % kVirtual and holds j = vl + 32·(s / kVirtual), so each
/// virtual lane accumulates the same elements in the same order; the butterfly's
/// offsets >= kGroup pair virtual lanes inside the thread (k with k ^ offset/kGroup),
/// the smaller ones shuffle, so the double sum is added in exactly the same tree.
template <int kGroup, int kSlots>
__global__ void __launch_bounds__(kThreadsPerBlock) softmax_short_rows_kernel(const float* x, float* y, int64_t rows,
                                                                             int n, bool log) {
  constexpr int kVirtual = 32 / kGroup;
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t row = thread / kGroup;
  const int lane = static_cast<int>(thread % kGroup);
  if (row - (threadIdx.x % 32) / kGroup >= rows) return;  // the warp's first row: whole warps leave
  const bool active = row < rows;  // a group past the end still shuffles with its warp
  const float* in = x + (active ? row * n : 0);
  float* out = y + (active ? row * n : 0);

  float value[kSlots];
  RowMax max_part[kVirtual];
  double sum_part[kVirtual];
#pragma unroll
  for (int k = 0; k < kVirtual; ++k) {
    max_part[k] = RowMax{-INFINITY, false};
    sum_part[k] = 0.0;
  }
#pragma unroll
  for (int s = 0; s < kSlots; ++s) {
    const int j = lane + kGroup * s;
    value[s] = active && j < n ? in[j] : 0.0f;
    if (active && j < n) max_part[s % kVirtual] = combine(max_part[s % kVirtual], RowMax{value[s], isnan(value[s])});
  }
  const RowMax reduced = reduce_virtual_lanes<kGroup>(max_part, combine);
  const float max = reduced.nan ? NAN : reduced.max;

  double e[kSlots];
#pragma unroll
  for (int s = 0; s < kSlots; ++s) {
    const int j = lane + kGroup * s;
    e[s] = 0.0;
    if (active && j < n) {
      e[s] = exp(static_cast<double>(value[s] - max));
      sum_part[s % kVirtual] += e[s];
    }
  }
  const double sum = reduce_virtual_lanes<kGroup>(sum_part, [](double a, double b) { return a + b; });
  const double log_sum = log ? ::log(sum) : 0.0;
#pragma unroll
  for (int s = 0; s < kSlots; ++s) {
    const int j = lane + kGroup * s;
    if (active && j < n)
      out[j] = log ? (value[s] - max) - static_cast<float>(log_sum) : static_cast<float>(e[s] / sum);
  }
}

template <int kGroup, int kSlots>
void launch_short_rows(const float* x, float* y, int64_t rows, int64_t n, bool log, cudaStream_t stream) {
  constexpr int kRowsPerBlock = kThreadsPerBlock / kGroup;
  const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  softmax_short_rows_kernel<kGroup, kSlots>
      <<<static_cast<unsigned>(blocks), kThreadsPerBlock, 0, stream>>>(x, y, rows, static_cast<int>(n), log);
}

/// Lanes per row and slots per lane for a row of n <= 1024: 8 lanes up to 64 wide
/// (attention scores over ~27-64 keys: 4 rows per warp, few idle lanes), 16 up to
/// 128, a warp beyond; slots cover n.
void launch_rows_up_to_1024(const float* x, float* y, int64_t rows, int64_t n, bool log, cudaStream_t stream) {
  if (n <= 8) launch_short_rows<8, 1>(x, y, rows, n, log, stream);
  else if (n <= 16) launch_short_rows<8, 2>(x, y, rows, n, log, stream);
  else if (n <= 32) launch_short_rows<8, 4>(x, y, rows, n, log, stream);
  else if (n <= 64) launch_short_rows<8, 8>(x, y, rows, n, log, stream);
  else if (n <= 128) launch_short_rows<16, 8>(x, y, rows, n, log, stream);
  else if (n <= 256) launch_short_rows<32, 8>(x, y, rows, n, log, stream);
  else if (n <= 512) launch_short_rows<32, 16>(x, y, rows, n, log, stream);
  else launch_short_rows<32, 32>(x, y, rows, n, log, stream);
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
    launch_rows_up_to_1024(x, y, outer, n, log, stream);
  } else if (inner == 1) {
    softmax_rows_kernel<kThreadsPerBlock><<<static_cast<unsigned>(outer), kThreadsPerBlock, 0, stream>>>(x, y, outer, n, log);
  } else {
    softmax_columns_kernel<<<blocks_for(outer * inner), kThreadsPerBlock, 0, stream>>>(x, y, outer, n, inner, log);
  }
  return launch_status("softmax");
}

}  // namespace loka::cuda
