// ============================================================================
// kernels/cuda/layer_norm.cu — LayerNorm (FP32 or E4M3 output) kernels.
//
// Rows of at most 128 columns (the zoo's tokens), float4-aligned, stay in
// registers, a float4 a lane and two rows a warp (layer_norm_narrow_kernel).
// Other rows up to 8192 are read from memory once: the threads that own a row
// (a warp up to 1024 columns, eight rows to a block; a block of 256 beyond)
// stage it in shared memory with cp.async, each thread reading back only what
// it copied, and reduce the double sums from there; only wider rows re-read
// memory (three passes, as the CPU reference). Shared memory rather than
// registers for those: a 1024-column row kept in registers (32 values per thread) took 192
// registers, one block per SM, and ran 3.5x slower on an H100 than re-reading
// memory (measured 2026-11-24). Measured and not kept (2026-11-26): a block of
// 128 per 4096-column row (137 vs 122 us on an H100 at 16384x4096), four warp
// rows to a block (no gain), and a persistent grid copying each slot's next
// row while it computes (24 resident warps per SM instead of 48 starved the
// compute passes: 119 vs 106 us at 65536x1024 on an H200).
//
// The kernels these replaced were bound by instruction issue (Nsight Compute,
// H200, 2026-11-26: IPC 3.4, 79 instructions an element, 42% of the copy rate
// at 65536x1024 to FP8), so an element's work is kept to what its result needs
// (about 26 instructions an element in the warp-row FP8 kernel's SASS):
//  - the statistics convert each float to double once per pass and add in
//    double as before; the mean multiplies by 1/cols and inv_std is rsqrt, each
//    within an ulp or two of the reference's double, far below the float
//    rounding that follows;
//  - QuantizeLinear's v / y_scale is v · (1/y_scale): the same float when
//    y_scale is a power of two, and otherwise the same E4M3 code except within
//    a few float steps of a code's rounding boundary, where the kernel divides
//    (e4m3_code_needs_division in fp8_codec.cuh says why that is exact for every v);
//  - scale and bias load as float4 beside x; row offsets are 64-bit once per
//    row, column indices 32-bit; two codes convert per instruction;
//  - |v| for amax is one FMA that makes infinities NaN, which fmaxf skips.
// With cp.async staging (below), on an H200 (2026-11-26) FP32 -> FP8 runs at
// 81% of the copy rate at 65536x1024 (106 us, was 203) and 74% at 16384x4096
// (113 us, was 218); a power-of-two y_scale 3-4% faster; FP32 output 96%.
// Explicit _rn intrinsics keep nvcc from contracting the element formula into
// an FMA, which would change bits. The optional amax is reduced per block
// first, so a batch of 65536 rows makes a few thousand atomics on one address,
// not 65536.
// ============================================================================
#include <cuda_fp8.h>
#include <cuda_pipeline.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/fp8_codec.cuh"
#include "kernels/cuda/layer_norm.h"
#include "kernels/cuda/row_reduce.cuh"

namespace loka::cuda {
namespace {

/// Staged bytes per block: 8 warp rows of 1024 floats, or one row of 8192, leaving room under the
/// 48 KiB a block gets without opting in for the static reductions' slots and two blocks per SM.
constexpr size_t kMaxStagedBytes = 32 * 1024;

/// What a kernel writes, and how an E4M3 code divides by y_scale; chosen once per launch on the host.
enum class Output {
  kFloat,            ///< y = v
  kCodesExactScale,  ///< y_scale a power of two: v · (1/y_scale) is the float v / y_scale
  kCodes,            ///< any other y_scale: v · (1/y_scale), divided where the code could differ
};

/// What the host derives from LayerNormArgs once per launch.
struct Derived {
  double inv_cols = 0.0;    ///< 1 / cols: the means multiply
  float inv_y_scale = 0.0f; ///< 1 / y_scale rounded to float; NaN where that or y_scale is not a normal float
};

/// The statistics the element formula uses, rounded to float once.
struct RowStats {
  float mean;
  float inv_std;
};

/// The element formula (x - mean) · inv_std · scale (+ bias), in float, as the CPU reference rounds it.
__device__ __forceinline__ float normalized(float x, RowStats stats, float scale, bool has_bias, float bias) {
  const float v = __fmul_rn(__fmul_rn(__fsub_rn(x, stats.mean), stats.inv_std), scale);
  return has_bias ? __fadd_rn(v, bias) : v;
}

/// |v| when v is finite, else NaN, which fmaxf skips: v · 0 is ±0 for a finite v (and ±0 + |v| is
/// |v|) but NaN for an infinity, so one FMA does the work of isfinite, a select and fabsf.
__device__ __forceinline__ float finite_abs_or_nan(float v) { return __fmaf_rn(v, 0.0f, fabsf(v)); }

/// The quotients v[e] / y_scale as QuantizeLinear rounds them, or values with the same E4M3 codes:
/// products with the reciprocal, exact for a power-of-two y_scale, else e4m3_quotients.
template <Output kOut, int kN>
__device__ __forceinline__ void quotients(const float (&v)[kN], float y_scale, float inv_y_scale, float (&q)[kN]) {
  if constexpr (kOut == Output::kCodes) {
    e4m3_quotients(v, y_scale, inv_y_scale, q);
  } else {
#pragma unroll
    for (int e = 0; e < kN; ++e) q[e] = __fmul_rn(v[e], inv_y_scale);
  }
}

/// E4M3 codes of a and b (nearest even, saturating as QuantizeLinear does), a in the low byte.
__device__ __forceinline__ uint32_t e4m3_pair(float a, float b) {
  return __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
}

/// Raises *target to the block's largest |v|: one atomic per block. Every thread calls it.
__device__ __forceinline__ void publish_amax(float* target, float amax) {
  __shared__ float warp_max[32];
  amax = row_reduce<32>(amax, [](float a, float b) { return fmaxf(a, b); }, static_cast<float*>(nullptr));
  __syncthreads();
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (unsigned w = 1; w < blockDim.x / 32; ++w) amax = fmaxf(amax, warp_max[w]);
    // Non-negative floats order like their bit patterns, so an integer max is a float max.
    if (amax > *target) atomicMax(reinterpret_cast<int*>(target), __float_as_int(amax));
  }
}

/// Copies this thread's columns of a row to `stage` (columns lane·4.. a float4 at a time when kVec:
/// n a multiple of 4, both 16-byte aligned; else lane.. one at a time; kThreads threads to the row)
/// and waits for them. cp.async puts every load of the row in flight at once without holding
/// registers: loaded one float4 per loop step, as the sum consumed them, a warp kept one load in
/// flight and waited on memory latency (65536x1024 to FP8 on an H100, 2026-11-26: 78% of the copy
/// rate with the per-element work below, 88% with cp.async).
template <int kThreads, bool kVec>
__device__ __forceinline__ void stage_row(const float* in, float* stage, int lane, int n) {
  if constexpr (kVec) {
    for (int j = lane * 4; j < n; j += kThreads * 4) __pipeline_memcpy_async(stage + j, in + j, 4 * sizeof(float));
  } else {
    for (int j = lane; j < n; j += kThreads) __pipeline_memcpy_async(stage + j, in + j, sizeof(float));
  }
  __pipeline_commit();
  __pipeline_wait_prior(0);  // this thread's copies only, all it reads back
}

/// Adds this thread's columns of the residual row to its staged columns (the ones stage_row copied
/// for it, so no barrier is needed): the float sum ONNX's Add computes, formed once per element.
template <int kThreads, bool kVec>
__device__ __forceinline__ void add_residual_row(const float* residual, float* stage, int lane, int n) {
  if constexpr (kVec) {
    for (int j = lane * 4; j < n; j += kThreads * 4) {
      const float4 r = __ldg(reinterpret_cast<const float4*>(residual + j));
      float4& x = *reinterpret_cast<float4*>(stage + j);
      x = make_float4(__fadd_rn(x.x, r.x), __fadd_rn(x.y, r.y), __fadd_rn(x.z, r.z), __fadd_rn(x.w, r.w));
    }
  } else {
    for (int j = lane; j < n; j += kThreads) stage[j] = __fadd_rn(stage[j], __ldg(residual + j));
  }
}

/// x + residual in place of x, for rows too wide to stage (the wide kernel then normalizes y).
__global__ void add_rows_kernel(const float* x, const float* residual, float* sum, int64_t count) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    sum[i] = __fadd_rn(x[i], residual[i]);
}

/// Four columns' sum in double, in the one order every kernel adds them.
__device__ __forceinline__ double sum_of(float4 v) {
  return (static_cast<double>(v.x) + static_cast<double>(v.y)) + (static_cast<double>(v.z) + static_cast<double>(v.w));
}

/// Four columns' squared deviations from `mean` into two FMA chains, so consecutive FMAs do not
/// wait on each other (the chains are added once a thread's columns are done).
__device__ __forceinline__ void add_squares_of(float4 v, double mean, double& even, double& odd) {
  const double d0 = v.x - mean, d1 = v.y - mean, d2 = v.z - mean, d3 = v.w - mean;
  even = fma(d0, d0, even);
  odd = fma(d1, d1, odd);
  even = fma(d2, d2, even);
  odd = fma(d3, d3, odd);
}

/// This thread's share of the row's sum, in double, over the columns stage_row gives it (read from
/// the staged row, or from memory for the widest rows).
template <int kThreads, bool kVec, typename Index>
__device__ __forceinline__ double partial_sum(const float* src, int lane, Index n) {
  double sum = 0.0;
  if constexpr (kVec) {
    for (Index j = lane * 4; j < n; j += kThreads * 4) sum += sum_of(*reinterpret_cast<const float4*>(src + j));
  } else {
    for (Index j = lane; j < n; j += kThreads) sum += src[j];
  }
  return sum;
}

/// This thread's share of the squared deviations from the double mean, over the columns
/// partial_sum reads.
template <int kThreads, bool kVec, typename Index>
__device__ __forceinline__ double partial_squares(const float* src, int lane, Index n, double mean) {
  double even = 0.0, odd = 0.0;
  if constexpr (kVec) {
    for (Index j = lane * 4; j < n; j += kThreads * 4)
      add_squares_of(*reinterpret_cast<const float4*>(src + j), mean, even, odd);
  } else {
    for (Index j = lane; j < n; j += kThreads) {
      const double d = static_cast<double>(src[j]) - mean;
      even = fma(d, d, even);
    }
  }
  return even + odd;
}

/// The double mean from the row's sum. Every kernel derives its statistics through this and
/// stats_of, with intrinsics nvcc cannot contract into an FMA with the code around them, so a row
/// gets the same bits from each kernel.
__device__ __forceinline__ double mean_of(double sum, const Derived& derived) { return __dmul_rn(sum, derived.inv_cols); }

/// mean and 1/sqrt(variance + epsilon), rounded to float once, from the double mean and the sum of
/// squared deviations from it.
__device__ __forceinline__ RowStats stats_of(double mean, double squares, const Derived& derived, float epsilon) {
  const double variance = __dmul_rn(squares, derived.inv_cols);
  return {static_cast<float>(mean), static_cast<float>(rsqrt(__dadd_rn(variance, static_cast<double>(epsilon))))};
}

/// The row's mean and 1/sqrt(variance + epsilon) from this thread's partial sum and its columns
/// in `src`. Every thread of the row calls it (the reductions shuffle and, for block rows, sync).
template <int kThreads, bool kVec, typename Index>
__device__ __forceinline__ RowStats row_stats(double partial, const float* src, int lane, Index n, const Derived& derived,
                                              float epsilon, double* shared) {
  const auto plus = [](double a, double b) { return a + b; };
  const double mean = mean_of(row_reduce<kThreads>(partial, plus, shared), derived);
  const double squares = row_reduce<kThreads>(partial_squares<kThreads, kVec>(src, lane, n, mean), plus, shared);
  return stats_of(mean, squares, derived, epsilon);
}

/// Normalizes columns j..j+3 of a row (x) into y or codes (the row's outputs; y 16-byte, codes
/// 4-byte, scale and bias 16-byte aligned) and returns their largest finite |v| (0 if none).
template <Output kOut, typename Index>
__device__ __forceinline__ float normalize_four(const LayerNormArgs& args, const Derived& derived, float4 x, Index j,
                                                float* y, uint8_t* codes, RowStats stats) {
  const bool has_bias = args.bias != nullptr;
  const float4 s = __ldg(reinterpret_cast<const float4*>(args.scale + j));
  const float4 b = has_bias ? __ldg(reinterpret_cast<const float4*>(args.bias + j)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  const float v[4] = {normalized(x.x, stats, s.x, has_bias, b.x), normalized(x.y, stats, s.y, has_bias, b.y),
                      normalized(x.z, stats, s.z, has_bias, b.z), normalized(x.w, stats, s.w, has_bias, b.w)};
  if constexpr (kOut == Output::kFloat) {
    *reinterpret_cast<float4*>(y + j) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
    float q[4];
    quotients<kOut>(v, args.y_scale, derived.inv_y_scale, q);
    *reinterpret_cast<uint32_t*>(codes + j) = e4m3_pair(q[0], q[1]) | e4m3_pair(q[2], q[3]) << 16;
  }
  return fmaxf(fmaxf(finite_abs_or_nan(v[0]), finite_abs_or_nan(v[1])), fmaxf(finite_abs_or_nan(v[2]), finite_abs_or_nan(v[3])));
}

/// Normalizes this thread's columns of row `row` from `src` (the staged row, or the row in memory)
/// and stores them: float4s / four codes in 32 bits when kVec (y 16-byte, codes 4-byte, scale and
/// bias 16-byte aligned), else one at a time. Returns the largest finite |v| (0 if none).
template <int kThreads, bool kVec, Output kOut, typename Index>
__device__ __forceinline__ float normalize_row(const LayerNormArgs& args, const Derived& derived, const float* src,
                                               int64_t row, int lane, Index n, RowStats stats) {
  const int64_t start = row * args.cols;  // 64-bit once; the columns below index from here
  float* const y = kOut == Output::kFloat ? args.y + start : nullptr;
  uint8_t* const codes = kOut == Output::kFloat ? nullptr : args.y_codes + start;
  const bool has_bias = args.bias != nullptr;
  float amax = 0.0f;
  if constexpr (kVec) {
    for (Index j = lane * 4; j < n; j += kThreads * 4)
      amax = fmaxf(amax, normalize_four<kOut>(args, derived, *reinterpret_cast<const float4*>(src + j), j, y, codes, stats));
  } else {
    for (Index j = lane; j < n; j += kThreads) {
      const float v[1] = {normalized(src[j], stats, __ldg(args.scale + j), has_bias, has_bias ? __ldg(args.bias + j) : 0.0f)};
      amax = fmaxf(amax, finite_abs_or_nan(v[0]));
      if constexpr (kOut == Output::kFloat) {
        y[j] = v[0];
      } else {
        float q[1];
        quotients<kOut>(v, args.y_scale, derived.inv_y_scale, q);
        codes[j] = static_cast<uint8_t>(e4m3_pair(q[0], 0.0f));
      }
    }
  }
  return amax;
}

/// Rows staged in shared memory: kThreads threads per row (a warp, eight rows to a block, or the
/// whole block), each reading back only the columns it copied, so no barrier separates the passes.
/// kVec: columns a multiple of 4 and every pointer aligned for float4 (codes 4-byte).
template <int kThreads, bool kVec, Output kOut>
__global__ void __launch_bounds__(kRowBlockThreads<kThreads>) layer_norm_staged_kernel(LayerNormArgs args, Derived derived) {
  extern __shared__ float4 staged_raw[];  // kRowsPerBlock rows of args.cols floats
  __shared__ double shared_sum[kThreads / 32];
  constexpr int kRowsPerBlock = kRowBlockThreads<kThreads> / kThreads;
  const int lane = static_cast<int>(threadIdx.x) % kThreads, slot = static_cast<int>(threadIdx.x) / kThreads;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + slot;
  float amax = 0.0f;  // rows past the end still join the block's amax reduction
  // Only a warp row can lie past the end (a block row's grid has exactly `rows` blocks), and a
  // warp row's reductions have no barrier, so skipping the whole row is safe.
  if (row < args.rows) {
    const int n = static_cast<int>(args.cols);
    float* const mine = reinterpret_cast<float*>(staged_raw) + slot * n;
    stage_row<kThreads, kVec>(args.x + row * args.cols, mine, lane, n);
    if (args.residual) add_residual_row<kThreads, kVec>(args.residual + row * args.cols, mine, lane, n);
    const double partial = partial_sum<kThreads, kVec>(mine, lane, n);
    const RowStats stats = row_stats<kThreads, kVec>(partial, mine, lane, n, derived, args.epsilon, shared_sum);
    amax = normalize_row<kThreads, kVec, kOut>(args, derived, mine, row, lane, n, stats);
  }
  if (args.amax) publish_amax(args.amax, amax);
}

/// Rows of at most kNarrowCols columns, float4-aligned: a float4 a lane, held in registers, and
/// kNarrowRows rows a warp.
constexpr int kNarrowCols = 128;
constexpr int kNarrowRows = 2;

/// Every row's float4s are loaded before any is reduced, and the rows' reductions are
/// interleaved. The staged kernel gave such a row one load a lane and a warp of its own, so each
/// warp waited on one load and then on two serial chains of shuffles: at 163840x128 (the
/// attention ranker's tokens at batch 4096) to FP8 it ran at 34% of the copy rate, this kernel
/// at 64% (H200, 2026-11-28; two rows a warp measured best, against one, four and eight). The
/// same operations in the same order as the staged kernel's (sum_of, add_squares_of, mean_of,
/// stats_of, normalize_four), so the two give the same bits.
template <Output kOut>
__global__ void __launch_bounds__(kThreadsPerBlock) layer_norm_narrow_kernel(LayerNormArgs args, Derived derived) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t first_row = (static_cast<int64_t>(blockIdx.x) * (kThreadsPerBlock / 32) + threadIdx.x / 32) * kNarrowRows;
  const int j = lane * 4;
  const bool owns_columns = j < args.cols;  // a lane past the row's columns adds nothing
  float4 x[kNarrowRows];
  double sum[kNarrowRows], squares[kNarrowRows];
#pragma unroll
  for (int r = 0; r < kNarrowRows; ++r) {
    const bool live = owns_columns && first_row + r < args.rows;
    const int64_t at = (first_row + r) * args.cols + j;
    x[r] = live ? __ldg(reinterpret_cast<const float4*>(args.x + at)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (live && args.residual) {
      const float4 residual = __ldg(reinterpret_cast<const float4*>(args.residual + at));
      x[r] = make_float4(__fadd_rn(x[r].x, residual.x), __fadd_rn(x[r].y, residual.y), __fadd_rn(x[r].z, residual.z),
                         __fadd_rn(x[r].w, residual.w));
    }
    sum[r] = 0.0 + sum_of(x[r]);  // as partial_sum: from +0, so a row of -0 has mean +0; zeros add nothing
  }
  const auto plus = [](double a, double b) { return a + b; };
  warp_reduce_each(sum, plus);
  double mean[kNarrowRows];
#pragma unroll
  for (int r = 0; r < kNarrowRows; ++r) {
    mean[r] = mean_of(sum[r], derived);
    double even = 0.0, odd = 0.0;
    if (owns_columns) add_squares_of(x[r], mean[r], even, odd);
    squares[r] = even + odd;
  }
  warp_reduce_each(squares, plus);
  float amax = 0.0f;  // rows past the end still join the block's amax reduction
#pragma unroll
  for (int r = 0; r < kNarrowRows; ++r) {
    if (!owns_columns || first_row + r >= args.rows) continue;
    const RowStats stats = stats_of(mean[r], squares[r], derived, args.epsilon);
    const int64_t start = (first_row + r) * args.cols;
    amax = fmaxf(amax, normalize_four<kOut>(args, derived, x[r], j, kOut == Output::kFloat ? args.y + start : nullptr,
                                            kOut == Output::kFloat ? nullptr : args.y_codes + start, stats));
  }
  if (args.amax) publish_amax(args.amax, amax);
}

/// Rows too wide for shared memory: one block per row, three passes over memory.
template <bool kVec, Output kOut>
__global__ void __launch_bounds__(kThreadsPerBlock) layer_norm_wide_kernel(LayerNormArgs args, Derived derived) {
  __shared__ double shared_sum[kThreadsPerBlock / 32];
  const int lane = static_cast<int>(threadIdx.x);
  const int64_t row = blockIdx.x;
  const float* const in = args.x + row * args.cols;
  const double partial = partial_sum<kThreadsPerBlock, kVec>(in, lane, args.cols);
  const RowStats stats = row_stats<kThreadsPerBlock, kVec>(partial, in, lane, args.cols, derived, args.epsilon, shared_sum);
  const float amax = normalize_row<kThreadsPerBlock, kVec, kOut>(args, derived, in, row, lane, args.cols, stats);
  if (args.amax) publish_amax(args.amax, amax);
}

/// Enqueues the kernel for the row width: in registers (float4 rows up to 128 columns), staged
/// with a warp (up to 1024 columns) or a block per row, or the three-pass kernel beyond 8192.
template <Output kOut>
void enqueue(const LayerNormArgs& args, const Derived& derived, bool vec, cudaStream_t stream) {
  const size_t row_bytes = static_cast<size_t>(args.cols) * sizeof(float);
  if (row_bytes > kMaxStagedBytes) {
    LayerNormArgs wide = args;
    if (args.residual) {
      // The three passes would each re-add; the sum goes to y first and is normalized in place (each
      // thread reads an element of y before it writes it). FP32 output only (checked).
      const int64_t count = args.rows * args.cols;
      const int64_t blocks = std::min<int64_t>((count + kThreadsPerBlock - 1) / kThreadsPerBlock, 65535);
      add_rows_kernel<<<static_cast<unsigned>(blocks), kThreadsPerBlock, 0, stream>>>(args.x, args.residual, args.y, count);
      wide.x = args.y;
      wide.residual = nullptr;
    }
    const auto kernel = vec ? layer_norm_wide_kernel<true, kOut> : layer_norm_wide_kernel<false, kOut>;
    kernel<<<static_cast<unsigned>(args.rows), kThreadsPerBlock, 0, stream>>>(wide, derived);
    return;
  }
  if (vec && args.cols <= kNarrowCols) {
    constexpr int kRowsPerBlock = kThreadsPerBlock / 32 * kNarrowRows;
    const int64_t blocks = (args.rows + kRowsPerBlock - 1) / kRowsPerBlock;
    layer_norm_narrow_kernel<kOut><<<static_cast<unsigned>(blocks), kThreadsPerBlock, 0, stream>>>(args, derived);
    return;
  }
  const auto staged = [&](auto threads) {
    constexpr int kThreads = decltype(threads)::value;
    constexpr int kRowsPerBlock = kRowBlockThreads<kThreads> / kThreads;
    const int64_t blocks = (args.rows + kRowsPerBlock - 1) / kRowsPerBlock;
    const auto kernel = vec ? layer_norm_staged_kernel<kThreads, true, kOut> : layer_norm_staged_kernel<kThreads, false, kOut>;
    kernel<<<static_cast<unsigned>(blocks), kRowBlockThreads<kThreads>, kRowsPerBlock * row_bytes, stream>>>(args, derived);
  };
  if (args.cols <= 1024) staged(std::integral_constant<int, 32>{});
  else staged(std::integral_constant<int, kThreadsPerBlock>{});
}

/// How the codes divide by y_scale (finite, > 0), with 1/y_scale for Derived::inv_y_scale.
Output fp8_output(float y_scale, float& inv_y_scale) {
  const float reciprocal = 1.0f / y_scale;
  int exponent = 0;
  if (std::frexp(y_scale, &exponent) == 0.5f && std::isfinite(reciprocal)) {
    // y_scale = 2^k with 2^-k a float: v · 2^-k and v / 2^k are one real number, rounded once.
    inv_y_scale = reciprocal;
    return Output::kCodesExactScale;
  }
  inv_y_scale = e4m3_inverse_scale(y_scale);
  return Output::kCodes;
}

}  // namespace

Status launch_layer_norm(const LayerNormArgs& args, cudaStream_t stream) {
  if (args.rows < 0 || args.cols < 0)
    return Status::error("layer_norm: dims must be >= 0, got [" + std::to_string(args.rows) + "," +
                         std::to_string(args.cols) + "]");
  if ((args.y == nullptr) == (args.y_codes == nullptr))
    return Status::error("layer_norm: exactly one of y (FP32) and y_codes (FP8) must be set");
  if (args.residual && args.y_codes)
    return Status::error("layer_norm: a residual is supported with FP32 output only");
  if (args.y_codes && !(args.y_scale > 0.0f && std::isfinite(args.y_scale)))
    return Status::error("layer_norm: y_scale must be finite and > 0, got " + std::to_string(args.y_scale));
  if (args.rows == 0 || args.cols == 0) return Status::ok();
  const bool vec = args.cols % 4 == 0 && is_aligned(args.x, 16) && is_aligned(args.scale, 16) &&
                   (args.residual == nullptr || is_aligned(args.residual, 16)) &&
                   (args.bias == nullptr || is_aligned(args.bias, 16)) &&
                   (args.y_codes ? is_aligned(args.y_codes, 4) : is_aligned(args.y, 16));
  Derived derived;
  derived.inv_cols = 1.0 / static_cast<double>(args.cols);
  if (!args.y_codes) {
    enqueue<Output::kFloat>(args, derived, vec, stream);
  } else if (fp8_output(args.y_scale, derived.inv_y_scale) == Output::kCodesExactScale) {
    enqueue<Output::kCodesExactScale>(args, derived, vec, stream);
  } else {
    enqueue<Output::kCodes>(args, derived, vec, stream);
  }
  return launch_status("layer_norm");
}

}  // namespace loka::cuda
