// ============================================================================
// kernels/cuda/attention_tensor_cores.cu — short-key attention on the tensor
// cores (see attention_tensor_cores.h).
//
// Why: at the zoo's shapes the FP32 kernels issue far more instructions than
// the bytes need. DHEN's single head of 128 over 34 tokens ran at 219 us a
// layer at batch 4096 against a 104 us copy floor (H100, 2026-11-28). Here a
// warp does a row block's 16 x 8 x 8 products in one MMA: 205 us on the
// benchmark's 35-token shape against the FP32 kernel's 233-237, 175 against
// 241-245 at 40 tokens of 2 heads of 64 (attention.cu has the table).
//
// Accuracy (3xTF32): each FP32 operand x is split into hi, its leading TF32
// bits (truncated), and lo = x − hi (exact in FP32, passed as is: the MMA
// uses its leading TF32 bits, within 2^-10 of lo either way), and a·b is summed
// as hi_a·lo_b + lo_a·hi_b + hi_a·hi_b (lo_a·lo_b, below 2^-20·|a·b|, dropped):
// each product is within 3·2^-20 of its FP32 value, and the tensor cores sum
// in FP32. The split takes two instructions, as
// each operand is split at each use. It turns an inf or NaN input into NaN, so
// a warp whose rows come out non-finite (such an input, or a true overflow)
// recomputes them in FP32 FMAs from global memory (exact_rows), with exactly
// attention.h's NaN and inf semantics; finite inputs take that path only where
// a result truly overflows.
//
// Work unit: one (b, h) and up to 64 query rows (longer: balanced query
// blocks). A unit runs on ceil(rows / 16) warps, one MMA row block each, and
// a block holds one or more whole units. The block stages each unit's Q, K
// and V rows in shared memory by cp.async (float4s when every row is 16-byte
// aligned): Q and K in one group, V in the next, so V streams in while the
// scores run. Rows are padded with zeros to the MMA shape (keys to a multiple
// of 8, dims of Q and K to the width, 64 or 128), so padded keys score 0 and
// are masked, and padded dims add nothing to a score. V's padded dims are left
// as they are: column c of Y reads only column c of V, and columns past D are
// neither checked nor stored. Row strides are chosen so the fragment loads hit
// 32 different banks: 4 mod 8 floats for Q, K and the probabilities (a group of
// 8 rows at 4 columns), 8 mod 32 for V (4 rows at 8 columns).
//
// Per warp: S = Q·Kᵀ for its 16 rows in registers (8 keys a tile), times
// scale; the exact softmax over the row (masked keys skipped; max and sum
// across the four lanes that share a row by two xor-shuffles), as
// attention.cu's: p = exp(s − max), Y = Σ p·v · (1 / Σ p), so a NaN or +inf
// score, or a row of −inf, makes the row NaN. The probabilities go to the
// warp's own Q rows, done with once its scores are (the accumulator layout is
// not the operand layout; at most 64 keys fit a row of 64 or 128 dims), then
// Y = P·V in registers and straight to global memory. Blocks are small (one
// unit of DHEN's shape) so an SM holds several whose loads overlap each
// other's math; the staging zeroes only the padding.
// ============================================================================
#include "kernels/cuda/attention_tensor_cores.h"

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/fast_divmod.cuh"
#include "kernels/cuda/kernel_fit.h"
#include "kernels/cuda/tf32_mma.cuh"

namespace loka::cuda {
namespace {

constexpr int kTileRows = 16;                 ///< query rows a warp holds (the MMA's M)
constexpr int kTileKeys = 8;                  ///< keys (or dims) an MMA tile spans (N and K)
constexpr int kMaxKeyTiles = static_cast<int>(kTensorCoreMaxKeys) / kTileKeys;
constexpr int kMaxUnitRows = 64;              ///< query rows a unit holds: at most four warps
constexpr int kTargetWarps = 8;               ///< warps a block aims at (whole units)
constexpr size_t kBlockSharedTarget = 48 * 1024;  ///< shared memory a block aims at (whole units)
static_assert(kTensorCoreMaxKeys % kTileKeys == 0);

/// How a launch lays units over blocks (host-computed, read by every thread).
struct TensorCoreLayout {
  int64_t units = 0;         ///< batch · heads · query_blocks
  int64_t query_blocks = 1;  ///< query blocks per (b, h)
  int rows = 1;              ///< query rows per unit (the last query block may have fewer)
  int warps_per_unit = 1;    ///< ceil(rows / 16)
  int units_per_block = 1;
  int key_tiles = 1;         ///< ceil(Nk / 8)
  int p_stride = 0;          ///< floats from one probability row to the next
  int q_floats = 0, k_floats = 0, v_floats = 0;  ///< one unit's areas (the probabilities reuse Q's)
  int unit_floats = 0;
  FastDivmod by_query_blocks, by_heads;  ///< unit -> (head, query block), head -> (b, h)
};

/// The padded head width kD (a multiple of 8) and the row strides that keep fragment loads
/// conflict-free (see the banner).
template <int kD>
struct Width {
  static constexpr int kQk = kD + 4;  ///< Q and K rows: 4 mod 8
  static constexpr int kV = kD + 8;   ///< V rows: 8 mod 32
  static_assert(kD % 32 == 0, "the tensor-core widths are 64 and 128");
  static_assert(kTensorCoreMaxKeys + 4 <= kQk, "a warp's probabilities fit its Q rows");
};

/// The A operand at rows (row, row + 8) and columns (col, col + 4) of a row-major area.
__device__ __forceinline__ void load_a(Tf32Parts (&a)[4], const float* area, int stride, int row, int col) {
  const float* at = area + row * stride + col;
  a[0] = split_tf32(at[0]);
  a[1] = split_tf32(at[8 * stride]);
  a[2] = split_tf32(at[4]);
  a[3] = split_tf32(at[8 * stride + 4]);
}

/// Where a unit's rows live: the first element of its head in its first query row (Q, Y) and
/// in key 0 (K, V), and its query rows. 32-bit division by multiplication (the host checks
/// that units stay below 2^31, FastDivmod's exact range): 64-bit division is a long software
/// routine.
struct UnitAt {
  const float *q = nullptr, *k = nullptr, *v = nullptr;
  float* y = nullptr;
  int rows = 0;
};
__device__ __forceinline__ UnitAt locate(const AttentionArgs& a, const TensorCoreLayout& layout, int64_t unit) {
  uint32_t query_block, h;
  const uint32_t head = layout.by_query_blocks.divmod(static_cast<uint32_t>(unit), query_block);
  const int64_t b = layout.by_heads.divmod(head, h);
  const int64_t first = static_cast<int64_t>(query_block) * layout.rows, column = h * a.head_dim;
  UnitAt at;
  at.q = a.q + (b * a.nq + first) * a.q_stride + a.q_offset + column;
  at.k = a.k + b * a.nk * a.k_stride + a.k_offset + column;
  at.v = a.v + b * a.nk * a.v_stride + a.v_offset + column;
  at.y = a.y + (b * a.nq + first) * a.heads * a.head_dim + column;
  at.rows = static_cast<int>(a.nq - first < layout.rows ? a.nq - first : layout.rows);
  return at;
}

/// Issues the copies of `rows` rows of the head's dims < head_dim, row r from source + r·source_stride
/// to area row r (kD / kW moves a row: a power of two, so the index splits by shifts).
template <int kD, int kW>
__device__ __forceinline__ void stage_rows(float* area, int stride, int rows, int head_dim, const float* source,
                                           int64_t source_stride) {
  constexpr int kMoves = kD / kW;
  for (int idx = static_cast<int>(threadIdx.x); idx < rows * kMoves; idx += static_cast<int>(blockDim.x)) {
    const int r = idx / kMoves, e = idx % kMoves * kW;
    if (e < head_dim) copy_async<kW>(area + r * stride + e, source + r * source_stride + e);
  }
}

/// Zeros rows [row_begin, row_end) × columns [column_begin, column_end) of an area.
__device__ __forceinline__ void zero_block(float* area, int stride, int row_begin, int row_end, int column_begin,
                                           int column_end) {
  const int columns = column_end - column_begin;
  if (columns <= 0) return;
  for (int idx = static_cast<int>(threadIdx.x); idx < (row_end - row_begin) * columns;
       idx += static_cast<int>(blockDim.x))
    area[(row_begin + idx / columns) * stride + column_begin + idx % columns] = 0.0f;
}

/// Rows [row0, row0 + 16) of a unit in FP32 FMAs, straight from global memory, with the exact
/// semantics of attention.h: what a warp runs instead when its tensor-core rows come out
/// non-finite (a NaN or inf among the inputs, which the split turns into NaN, or a true
/// overflow). Lane l holds keys l and l + 32, then output dims l, l + 32, ...
__device__ __forceinline__ void exact_rows(const AttentionArgs& a, const UnitAt& at, int row0) {
  const int lane = static_cast<int>(threadIdx.x) % 32, nk = static_cast<int>(a.nk);
  const int row_end = row0 + kTileRows < at.rows ? row0 + kTileRows : at.rows;
  for (int r = row0; r < row_end; ++r) {
    const float* const query = at.q + r * a.q_stride;
    float p[2] = {0.0f, 0.0f}, m = -INFINITY;
    for (int c = 0; c < 2; ++c) {
      const int j = lane + 32 * c;
      if (j >= nk) continue;
      const float* const key = at.k + j * a.k_stride;
      float dot = 0.0f;
      for (int64_t e = 0; e < a.head_dim; ++e) dot = fmaf(query[e], key[e], dot);
      p[c] = dot * a.scale;
      m = fmaxf(m, p[c]);  // skips NaN, which reaches the sum through exp
    }
    for (int offset = 16; offset > 0; offset /= 2) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, offset));
    float l = 0.0f;
    for (int c = 0; c < 2; ++c) {
      if (lane + 32 * c >= nk) continue;
      p[c] = expf(p[c] - m);
      l += p[c];
    }
    for (int offset = 16; offset > 0; offset /= 2) l += __shfl_xor_sync(0xFFFFFFFFu, l, offset);
    const float inverse = 1.0f / l;
    float* const out = at.y + r * a.heads * a.head_dim;
    for (int64_t e0 = 0; e0 < a.head_dim; e0 += 32) {
      const int64_t e = e0 + lane;
      float acc = 0.0f;
      for (int j = 0; j < nk; ++j) {  // every lane shuffles; only dims < D accumulate
        const float weight = __shfl_sync(0xFFFFFFFFu, j < 32 ? p[0] : p[1], j % 32);
        if (e < a.head_dim) acc = fmaf(weight, at.v[j * a.v_stride + e], acc);
      }
      if (e < a.head_dim) out[e] = acc * inverse;
    }
  }
}

template <int kD, bool kVec>
// A head of 128 keeps 64 accumulators a lane and its blocks are few (shared memory caps them at
// three an SM), so it may take every register; the narrower widths keep to 128.
__global__ void __launch_bounds__(kTargetWarps * 32, kD >= 128 ? 1 : 2)
    tensor_core_attention_kernel(AttentionArgs a, TensorCoreLayout layout) {
  using W = Width<kD>;
  constexpr int kW = kVec ? 4 : 1;
  extern __shared__ float4 shared_raw[];
  float* const shared = reinterpret_cast<float*>(shared_raw);
  const int64_t first_unit = static_cast<int64_t>(blockIdx.x) * layout.units_per_block;
  const int keys = layout.key_tiles * kTileKeys, nk = static_cast<int>(a.nk), dims = static_cast<int>(a.head_dim);

  // Q and K in one group, V in the next; the padding the copies leave (rows past Nq and Nk,
  // Q and K dims past D) zeroed alongside, so padded keys score 0 and padded dims add nothing.
  for (int u = 0; u < layout.units_per_block && first_unit + u < layout.units; ++u) {
    const UnitAt at = locate(a, layout, first_unit + u);
    float* const q_area = shared + u * layout.unit_floats;
    float* const k_area = q_area + layout.q_floats;
    stage_rows<kD, kW>(q_area, W::kQk, at.rows, dims, at.q, a.q_stride);
    stage_rows<kD, kW>(k_area, W::kQk, nk, dims, at.k, a.k_stride);
    zero_block(q_area, W::kQk, at.rows, layout.warps_per_unit * kTileRows, 0, kD);
    zero_block(q_area, W::kQk, 0, at.rows, dims, kD);
    zero_block(k_area, W::kQk, nk, keys, 0, kD);
    zero_block(k_area, W::kQk, 0, nk, dims, kD);
  }
  commit_async();
  for (int u = 0; u < layout.units_per_block && first_unit + u < layout.units; ++u) {
    const UnitAt at = locate(a, layout, first_unit + u);
    float* const v_area = shared + u * layout.unit_floats + layout.q_floats + layout.k_floats;
    stage_rows<kD, kW>(v_area, W::kV, nk, dims, at.v, a.v_stride);
    zero_block(v_area, W::kV, nk, keys, 0, kD);  // a padded key's weight is 0, so its value must be finite
  }
  commit_async();

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int unit_in_block = warp / layout.warps_per_unit;
  const int row0 = warp % layout.warps_per_unit * kTileRows;  // the warp's first row within its unit
  const int64_t unit = first_unit + unit_in_block;
  const bool has_unit = unit < layout.units;  // uniform across the warp
  const UnitAt at = has_unit ? locate(a, layout, unit) : UnitAt{};
  const bool has_rows = has_unit && row0 < at.rows;
  float* const q_area = shared + unit_in_block * layout.unit_floats;
  const float* const k_area = q_area + layout.q_floats;
  const float* const v_area = k_area + layout.k_floats;
  float* const p_area = q_area + row0 * W::kQk;  // the warp's Q rows, once its scores are done
  const int key_tiles = layout.key_tiles;

  wait_async<1>();
  __syncthreads();  // Q and K have landed

  // Scores: s[j] holds keys 8j + 2t, 8j + 2t + 1 of rows g (s[j][0..1]) and g + 8 (s[j][2..3]).
  // The cross terms sum apart from the large one (two independent chains a tile), then join.
  float s[kMaxKeyTiles][4], s_cross[kMaxKeyTiles][4];
#pragma unroll
  for (int j = 0; j < kMaxKeyTiles; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) s[j][i] = s_cross[j][i] = 0.0f;
  if (has_rows) {
#pragma unroll
    for (int k0 = 0; k0 < kD; k0 += kTileKeys) {
      Tf32Parts qa[4];
      load_a(qa, q_area, W::kQk, row0 + g, k0 + t);
#pragma unroll
      for (int j = 0; j < kMaxKeyTiles; ++j) {
        if (j < key_tiles) {
          const float* key = k_area + (j * kTileKeys + g) * W::kQk + k0 + t;
          const Tf32Parts kb[2] = {split_tf32(key[0]), split_tf32(key[4])};
          mma_3xtf32(s_cross[j], s[j], qa, kb);
        }
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kMaxKeyTiles; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) s[j][i] += s_cross[j][i];

  // Exact softmax per row (rows g and g + 8): fmaxf skips NaN, which reaches the sum through exp.
  float inverse[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float m = -INFINITY;
#pragma unroll
    for (int j = 0; j < kMaxKeyTiles; ++j) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        if (j < key_tiles && j * kTileKeys + 2 * t + c < nk) {
          s[j][2 * half + c] *= a.scale;
          m = fmaxf(m, s[j][2 * half + c]);
        }
      }
    }
    m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, 1));
    m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, 2));
    float l = 0.0f;
#pragma unroll
    for (int j = 0; j < kMaxKeyTiles; ++j) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        float& p = s[j][2 * half + c];
        p = j < key_tiles && j * kTileKeys + 2 * t + c < nk ? expf(p - m) : 0.0f;
        l += p;
      }
    }
    l += __shfl_xor_sync(0xFFFFFFFFu, l, 1);
    l += __shfl_xor_sync(0xFFFFFFFFu, l, 2);
    inverse[half] = 1.0f / l;
  }
  __syncwarp();  // every lane's score loads from the warp's Q rows are done
  // The probabilities to the warp's rows: the A operand wants columns t and t + 4.
#pragma unroll
  for (int j = 0; j < kMaxKeyTiles; ++j) {
    if (j < key_tiles) {
      float* const at_row = p_area + g * layout.p_stride + j * kTileKeys + 2 * t;
      *reinterpret_cast<float2*>(at_row) = make_float2(s[j][0], s[j][1]);
      *reinterpret_cast<float2*>(at_row + 8 * layout.p_stride) = make_float2(s[j][2], s[j][3]);
    }
  }
  wait_async<0>();
  __syncthreads();  // V has landed; every warp's probabilities are written

  if (!has_rows) return;
  // Y = P·V: acc[n] holds dims 8n + 2t, 8n + 2t + 1 of rows g and g + 8.
  constexpr int kDimTiles = kD / kTileKeys;
  float acc[kDimTiles][4];
#pragma unroll
  for (int n = 0; n < kDimTiles; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
#pragma unroll
  for (int j = 0; j < kMaxKeyTiles; ++j) {
    if (j < key_tiles) {
      Tf32Parts pa[4];
      load_a(pa, p_area, layout.p_stride, g, j * kTileKeys + t);
#pragma unroll
      for (int n = 0; n < kDimTiles; ++n) {
        const float* value = v_area + (j * kTileKeys + t) * W::kV + n * kTileKeys + g;
        const Tf32Parts vb[2] = {split_tf32(value[0]), split_tf32(value[4 * W::kV])};
        mma_3xtf32(acc[n], acc[n], pa, vb);
      }
    }
  }

  // Normalise; a non-finite output in the warp's rows sends them to the exact FP32 path.
  bool finite = true;
#pragma unroll
  for (int n = 0; n < kDimTiles; ++n) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      acc[n][i] *= inverse[i / 2];
      const bool counted = n * kTileKeys + 2 * t + i % 2 < dims && row0 + g + 8 * (i / 2) < at.rows;
      finite = finite && (!counted || isfinite(acc[n][i]));
    }
  }
  if (!__all_sync(0xFFFFFFFFu, finite)) {
    exact_rows(a, at, row0);
    return;
  }
  const int64_t out_stride = a.heads * a.head_dim;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = row0 + g + 8 * half;
    if (row >= at.rows) continue;
    float* const out = at.y + row * out_stride;
#pragma unroll
    for (int n = 0; n < kDimTiles; ++n) {
      const int e = n * kTileKeys + 2 * t;
      if constexpr (kVec) {
        if (e < dims) *reinterpret_cast<float2*>(out + e) = make_float2(acc[n][2 * half], acc[n][2 * half + 1]);
      } else {
        if (e < dims) out[e] = acc[n][2 * half];
        if (e + 1 < dims) out[e + 1] = acc[n][2 * half + 1];
      }
    }
  }
}

template <int kD>
TensorCoreLayout layout_for(const AttentionArgs& args, size_t max_shared) {
  using W = Width<kD>;
  TensorCoreLayout layout;
  layout.query_blocks = (args.nq + kMaxUnitRows - 1) / kMaxUnitRows;
  layout.rows = static_cast<int>((args.nq + layout.query_blocks - 1) / layout.query_blocks);
  layout.warps_per_unit = (layout.rows + kTileRows - 1) / kTileRows;
  layout.units = args.batch * args.heads * layout.query_blocks;
  layout.by_query_blocks = FastDivmod(static_cast<uint32_t>(layout.query_blocks));
  layout.by_heads = FastDivmod(static_cast<uint32_t>(args.heads));
  layout.key_tiles = static_cast<int>((args.nk + kTileKeys - 1) / kTileKeys);
  const int keys = layout.key_tiles * kTileKeys;
  layout.p_stride = keys + 4;
  // Q holds whole row blocks: a warp's last rows past Nq read zeros, not the K area.
  layout.q_floats = layout.warps_per_unit * kTileRows * W::kQk;
  layout.k_floats = keys * W::kQk;
  layout.v_floats = keys * W::kV;
  layout.unit_floats = layout.q_floats + layout.k_floats + layout.v_floats;
  const size_t unit_bytes = sizeof(float) * static_cast<size_t>(layout.unit_floats);
  // Whole units up to kTargetWarps warps and 48 KiB a block (at least one unit): smaller blocks
  // let an SM hold several, whose loads then overlap each other's math.
  const int64_t per_block = std::min<int64_t>({std::max(1, kTargetWarps / layout.warps_per_unit),
                                               std::max<int64_t>(1, kBlockSharedTarget / unit_bytes),
                                               static_cast<int64_t>(max_shared / unit_bytes), layout.units});
  layout.units_per_block = static_cast<int>(std::max<int64_t>(per_block, 0));
  return layout;
}

template <int kD>
Status launch_width(const AttentionArgs& args, cudaStream_t stream, bool& launched) {
  const auto kernel = attention_rows_aligned(args) ? tensor_core_attention_kernel<kD, true> : tensor_core_attention_kernel<kD, false>;
  LOKA_ASSIGN_OR_RETURN(const KernelFit limit,
                        kernel_fit(reinterpret_cast<const void*>(kernel), 0, 0, "attention (tensor cores)"));
  const TensorCoreLayout layout = layout_for<kD>(args, limit.max_dynamic);
  if (layout.units_per_block == 0) return Status::ok();
  const int threads = layout.units_per_block * layout.warps_per_unit * 32;
  const size_t shared_bytes = sizeof(float) * static_cast<size_t>(layout.units_per_block * layout.unit_floats);
  const int64_t blocks = (layout.units + layout.units_per_block - 1) / layout.units_per_block;  // < 2^31, as units
  kernel<<<static_cast<unsigned>(blocks), threads, shared_bytes, stream>>>(args, layout);
  launched = true;
  return launch_status("attention (tensor cores)");
}

}  // namespace

Status launch_attention_on_tensor_cores(const AttentionArgs& args, cudaStream_t stream, bool& launched) {
  launched = false;
  // Units are indexed below 2^31 on the device (FastDivmod's exact range); larger launches take the
  // FP32 kernels.
  const int64_t units = args.batch * args.heads * ((args.nq + kMaxUnitRows - 1) / kMaxUnitRows);
  if (!attention_runs_on_tensor_cores(args) || units > INT32_MAX) return Status::ok();
  return args.head_dim <= 64 ? launch_width<64>(args, stream, launched) : launch_width<128>(args, stream, launched);
}

}  // namespace loka::cuda
