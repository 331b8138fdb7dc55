// ============================================================================
// kernels/cuda/small_m_gemm.cu — the fused quantize + E4M3 GEMM for a few rows.
//
// One CTA: 8 warps, 32 output columns, kRows output rows (1-16,
// small_m_tiling.h); the grid covers N in 32-column blocks and M in kRows
// tiles. Per K-tile of the CTA's rows (8192 values of shared memory, 32 KiB):
//   1. every thread stages X: each value quantized here (or its code read),
//      decoded to FP32 once, and stored where the reading lanes want it;
//   2. each warp streams its 4 weight rows: lane l takes codes
//      [l·kVec, (l+1)·kVec) of every 32·kVec step (one 16-, 4- or 1-byte
//      load a row, coalesced across the warp), decodes them 4 at a time, and
//      for each of the tile's rows reads 4 staged activations (one float4,
//      conflict-free) and does 4x4 FMAs into its kRows x 4 partial sums.
// At the end a warp reduce-scatters its partial sums (each lane keeps one or
// two totals, or shares one), and applies scales, bias, activation and
// residual to what it keeps: one write of Y, no second pass.
// Products of E4M3 values are exact in FP32, so each FMA rounds only its sum.
// The order of the sums is fixed (lane, then the reduction tree): results are
// the same run to run.
// ============================================================================
#include "kernels/cuda/small_m_gemm.h"

#include <climits>
#include <string>
#include <type_traits>

#include "kernels/cuda/dequant_value.cuh"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/fp8_codec.cuh"
#include "kernels/cuda/row_reduce.cuh"

namespace loka::cuda {
namespace {

constexpr int kWarps = kSmallMWarps;
constexpr int kThreads = 32 * kWarps;
constexpr int kColumns = kSmallMColumnsPerWarp;
/// Decoded activation values a CTA stages at once (32 KiB of static shared memory): kRows rows
/// of kStagedValues / kRows columns, a whole number of warp steps (32 lanes x 16 codes) for
/// every kRows up to 16.
constexpr int kStagedValues = 8192;
static_assert(kStagedValues % (16 * 32 * 16) == 0, "a K-tile of 16 rows must hold whole warp steps");

/// kVec consecutive codes of one weight row, moved by one aligned load (kVec = 16, 4 or 1).
template <int kVec>
struct WeightCodes {
  static constexpr int kPack = kVec < 4 ? kVec : 4;  ///< codes decoded (and activations read) together
  static constexpr int kPacks = kVec / kPack;
  using Word = std::conditional_t<(kVec >= 4), uint32_t, uint8_t>;
  Pack<Word, kPacks> words;

  __device__ __forceinline__ void load(const uint8_t* codes) {
    words = *reinterpret_cast<const Pack<Word, kPacks>*>(codes);
  }
  /// Codes [p·kPack, (p + 1)·kPack) as floats (little-endian: the first code is the low byte).
  __device__ __forceinline__ void decode(int p, float (&values)[kPack]) const {
    if constexpr (kPack == 4) {
      const float2 low = e4m3x2_decode(static_cast<uint16_t>(words.v[p] & 0xFFFFu));
      const float2 high = e4m3x2_decode(static_cast<uint16_t>(words.v[p] >> 16));
      values[0] = low.x;
      values[1] = low.y;
      values[2] = high.x;
      values[3] = high.y;
    } else {
      values[0] = fp8_decode(words.v[p], true);
    }
  }
};

/// Where column k of a staged row (counted from the K-tile's start) lives. Lane l of a warp step
/// reads its columns [l·kVec, (l+1)·kVec) as kPacks packs of kPack floats, and pack p of the 32
/// lanes is stored as 32 consecutive packs, so a warp's read of one pack covers consecutive
/// 16-byte slots (no bank conflict; lane-contiguous chunks of 16 would conflict 4 ways).
/// For kVec <= 4 this is the identity.
template <int kVec>
__device__ __forceinline__ int staged_column(int k) {
  constexpr int kPack = WeightCodes<kVec>::kPack;
  constexpr int kStep = 32 * kVec;
  const int within = k % kStep, lane = within / kVec, j = within % kVec;
  return k - within + ((j / kPack) * 32 + lane) * kPack + j % kPack;
}

/// The scale each of the CTA's rows is de-quantized with: X_scale, or for the row recipe the row's
/// own, one warp a row taking the amax of its finite values over all of K, as quantize_rows does.
template <int kRows>
__device__ void find_row_scales(const SmallMGemmArgs& a, int64_t row0, float* row_scale) {
  if (a.input != SmallMInput::kFloatRowScale) {
    if (threadIdx.x < kRows) row_scale[threadIdx.x] = a.x_scale[0];
    return;
  }
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const float* x = static_cast<const float*>(a.x);
  for (int r = warp; r < kRows; r += kWarps) {
    const int64_t row = row0 + r;
    float amax = 0.0f;
    if (row < a.m)
      for (int64_t k = lane; k < a.k; k += 32) {
        const float v = x[row * a.k + k];
        if (isfinite(v)) amax = fmaxf(amax, fabsf(v));
      }
    amax = row_reduce<32>(amax, [](float p, float q) { return fmaxf(p, q); }, static_cast<float*>(nullptr));
    if (lane == 0) row_scale[r] = e4m3_row_scale(amax);
  }
}

/// Stages columns [k0, k0 + count) of the CTA's rows as decoded E4M3 values: FP32 quantized here
/// (each value once per CTA, as the separate quantize kernels would), or X's codes decoded.
/// Rows past M stage zeros.
template <int kRows, int kVec>
__device__ void stage_activation(const SmallMGemmArgs& a, int64_t row0, int64_t k0, int count, float inverse,
                                 const float* row_scale, float* staged) {
  constexpr int kTileK = kStagedValues / kRows;
  for (int r = 0; r < kRows; ++r) {
    const int64_t row = row0 + r;
    float* out = staged + r * kTileK;
    const int64_t first = row * a.k + k0;
    const int k_begin = static_cast<int>(threadIdx.x);
    if (row >= a.m) {
      for (int k = k_begin; k < count; k += kThreads) out[staged_column<kVec>(k)] = 0.0f;
    } else if (a.input == SmallMInput::kE4M3Codes) {
      const uint8_t* codes = static_cast<const uint8_t*>(a.x) + first;
      for (int k = k_begin; k < count; k += kThreads) out[staged_column<kVec>(k)] = fp8_decode(codes[k], true);
    } else if (a.input == SmallMInput::kFloatTensorScale) {
      // x · (1 / X_scale), the reciprocal rounded once: the codes launch_quantize_fp8 writes.
      const float* x = static_cast<const float*>(a.x) + first;
      for (int k = k_begin; k < count; k += kThreads)
        out[staged_column<kVec>(k)] = fp8_decode(fp8_encode(__fmul_rn(x[k], inverse), true), true);
    } else {
      const float* x = static_cast<const float*>(a.x) + first;
      const float scale = row_scale[r];
      for (int k = k_begin; k < count; k += kThreads)
        out[staged_column<kVec>(k)] = fp8_decode(e4m3_encode_divided(x[k], scale), true);
    }
  }
}

/// Sums each of a lane's kCount partial sums over the warp's 32 lanes, halving what a lane keeps
/// at each exchange: at offset o a lane sends the half of its sums that the lane across bit o
/// keeps, and adds what that lane sends to the half it keeps (31 shuffles for 32 sums, where a
/// butterfly per sum takes 160). Once a lane keeps one sum, the remaining offsets are a plain
/// butterfly. On return sums[i] (i < max(kCount / 32, 1)) is the warp's total of sum first + i.
template <int kOffset, int kCount, int kSums>
__device__ __forceinline__ void reduce_scatter(float (&sums)[kSums], int lane, int& first) {
  static_assert((kCount & (kCount - 1)) == 0, "a power of two of sums");
  if constexpr (kCount > 1) {
    constexpr int kHalf = kCount / 2;
    const bool upper = (lane & kOffset) != 0;
#pragma unroll
    for (int i = 0; i < kHalf; ++i) {
      const float send = upper ? sums[i] : sums[i + kHalf];
      const float keep = upper ? sums[i + kHalf] : sums[i];
      sums[i] = keep + __shfl_xor_sync(0xFFFFFFFFu, send, kOffset);
    }
    if (upper) first += kHalf;
  } else {
    sums[0] += __shfl_xor_sync(0xFFFFFFFFu, sums[0], kOffset);
  }
  if constexpr (kOffset > 1) reduce_scatter<kOffset / 2, (kCount > 1 ? kCount / 2 : 1)>(sums, lane, first);
}

template <int kRows, int kVec>
__global__ void __launch_bounds__(kThreads) small_m_gemm_kernel(const SmallMGemmArgs a) {
  constexpr int kTileK = kStagedValues / kRows;
  constexpr int kPack = WeightCodes<kVec>::kPack;
  constexpr int kStep = 32 * kVec;
  constexpr int kSums = kRows * kColumns;
  __shared__ float4 staged_raw[kStagedValues / 4];  // float4: 16-byte aligned pack reads
  __shared__ float row_scale[kRows];
  float* staged = reinterpret_cast<float*>(staged_raw);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kRows;
  const int64_t col0 = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * kColumns;

  find_row_scales<kRows>(a, row0, row_scale);
  // The tensor recipe's reciprocal, rounded once as the host's 1.0f / scale is (fp8_convert.h).
  const float inverse = a.input == SmallMInput::kFloatTensorScale ? __frcp_rn(a.x_scale[0]) : 1.0f;
  __syncthreads();

  // Columns past N read weight row 0 (in bounds, no branch in the loop); their sums are dropped.
  const uint8_t* w_row[kColumns];
#pragma unroll
  for (int c = 0; c < kColumns; ++c) w_row[c] = a.w + (col0 + c < a.n ? col0 + c : 0) * a.k;
  float sums[kSums] = {};  // [row][column] partial sums of this lane
  for (int64_t k0 = 0; k0 < a.k; k0 += kTileK) {
    const int count = a.k - k0 < kTileK ? static_cast<int>(a.k - k0) : kTileK;  // a multiple of kVec
    __syncthreads();  // every warp is done with the previous tile
    stage_activation<kRows, kVec>(a, row0, k0, count, inverse, row_scale, staged);
    __syncthreads();
    if (col0 >= a.n) continue;  // a warp past N only helps staging
    for (int k = lane * kVec; k < count; k += kStep) {
      WeightCodes<kVec> codes[kColumns];
#pragma unroll
      for (int c = 0; c < kColumns; ++c) codes[c].load(w_row[c] + k0 + k);
      const float* x_at = staged + (k - lane * kVec) + lane * kPack;  // pack p of row r: + r·kTileK + p·32·kPack
#pragma unroll
      for (int p = 0; p < WeightCodes<kVec>::kPacks; ++p) {
        float w[kColumns][kPack];
#pragma unroll
        for (int c = 0; c < kColumns; ++c) codes[c].decode(p, w[c]);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          const Pack<float, kPack> x = *reinterpret_cast<const Pack<float, kPack>*>(x_at + r * kTileK + p * 32 * kPack);
#pragma unroll
          for (int c = 0; c < kColumns; ++c)
#pragma unroll
            for (int e = 0; e < kPack; ++e) sums[r * kColumns + c] = fmaf(x.v[e], w[c][e], sums[r * kColumns + c]);
        }
      }
    }
  }
  if (col0 >= a.n) return;

  int first = 0;
  reduce_scatter<16, kSums>(sums, lane, first);
  // Fewer sums than lanes: lanes that differ in the low bits hold the same totals; the lowest writes.
  constexpr int kKept = kSums >= 32 ? kSums / 32 : 1;
  constexpr int kSharers = kSums >= 32 ? 1 : 32 / kSums;
  if (lane % kSharers != 0) return;
#pragma unroll
  for (int i = 0; i < kKept; ++i) {
    const int index = first + i, r = index / kColumns, c = index % kColumns;
    const int64_t row = row0 + r, col = col0 + c;
    if (row >= a.m || col >= a.n) continue;
    float v = dequant_value(sums[i], row_scale[r], a.w_scale[col], a.bias != nullptr,
                            a.bias != nullptr ? a.bias[col] : 0.0f, a.epilogue);
    if (a.residual != nullptr) v = __fadd_rn(v, a.residual[row * a.n + col]);
    a.y[row * a.n + col] = v;
  }
}

/// 16-byte weight loads where every row starts 16-byte aligned (K % 16 == 0, W aligned), else 4, else 1.
template <int kRows>
void launch_rows(const SmallMGemmArgs& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((a.n + kSmallMColumnsPerCta - 1) / kSmallMColumnsPerCta),
                  static_cast<unsigned>((a.m + kRows - 1) / kRows));
  if (a.k % 16 == 0 && is_aligned(a.w, 16))
    small_m_gemm_kernel<kRows, 16><<<grid, kThreads, 0, stream>>>(a);
  else if (a.k % 4 == 0 && is_aligned(a.w, 4))
    small_m_gemm_kernel<kRows, 4><<<grid, kThreads, 0, stream>>>(a);
  else
    small_m_gemm_kernel<kRows, 1><<<grid, kThreads, 0, stream>>>(a);
}

}  // namespace

Status launch_small_m_gemm(const SmallMGemmArgs& args, cudaStream_t stream) {
  const auto bad = [](const std::string& why) { return Status::error("small-M GEMM: " + why); };
  const std::string shape =
      "m=" + std::to_string(args.m) + ",n=" + std::to_string(args.n) + ",k=" + std::to_string(args.k);
  if (args.m < 0 || args.n < 0 || args.k < 1) return bad("needs m, n >= 0 and k >= 1, got " + shape);
  if (args.m > kSmallMMaxRows)
    return bad("takes at most " + std::to_string(kSmallMMaxRows) + " rows, got " + shape);
  if ((args.n + kSmallMColumnsPerCta - 1) / kSmallMColumnsPerCta > INT_MAX) return bad("too many columns: " + shape);
  if (args.m == 0 || args.n == 0) return Status::ok();
  if (!args.x || !args.w || !args.w_scale || !args.y) return bad("X, W, W_scale and Y are required");
  if (args.input != SmallMInput::kFloatRowScale && !args.x_scale)
    return bad("X_scale is required unless the scale is per row");
  switch (small_m_rows_per_cta(args.m)) {
    case 1: launch_rows<1>(args, stream); break;
    case 2: launch_rows<2>(args, stream); break;
    case 4: launch_rows<4>(args, stream); break;
    case 8: launch_rows<8>(args, stream); break;
    default: launch_rows<16>(args, stream); break;
  }
  return launch_status("small-M GEMM");
}

}  // namespace loka::cuda
