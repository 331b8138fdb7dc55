// ============================================================================
// kernels/cuda/attention.cu — ai.loka.Attention, two kernels chosen by shape:
// short key sets with heads past 32 dims (Nk ≤ 64, 32 < D ≤ 128: DHEN's
// single head of 128) run on the tensor cores at FP32 accuracy
// (attention_tensor_cores.cu: 3xTF32 products, an exact softmax); the rest
// (long key sets, D ≤ 32 such as the attention ranker's 8 heads of 16) run the
// online-softmax kernel below, in FP32 FMAs.
//
// Measured (kernel_rate_bench attention, B = 4096, packed QKV, H100 SXM,
// 2026-11-28, both builds in one call; the copy floor reads Q, K, V and
// writes Y once):
//   tokens, heads x D     tensor cores   FP32 before (kernel)     copy floor
//   35, 1x128 (DHEN)         202 us        233 us (exact, FMA)       103 us
//   40, 2x64                 174 us        245 us (exact, FMA)       117 us
//   40, 8x16 (ranker)       (425 us)       241 us (online)           117 us  stays online
// The exact-softmax FP32 kernel the tensor-core one replaced (scores in
// registers, a row split over 4 or 8 lanes) had beaten the online kernel there
// (351 -> 233 us on DHEN's shape); for 8 heads of 16 no variant of either beat
// the online kernel.
//
// --- The online kernel (attention_kernel): one thread per (query row, slice
// of ≤ 16 head dims) ---
//
// Work unit: one (b, h) and a block of `rows` query rows (all Nq of them up to
// 256 / G rows, else balanced blocks). A team of rows·G threads runs a unit; a
// block of up to 256 threads holds `teams` units side by side and walks groups
// of units grid-stride on gridDim.x alone (no 65535 limit on batch·heads;
// consecutive units are the query blocks of one head, then the heads of one
// sample, so a block's units share K/V rows in L2).
//
// A row's D dims are split into G slices of kS (kS = 4, 8 or 16; G = 1, 2, 4
// or 8; D zero-padded to kS·G ≤ 128): thread (row, g) keeps its q and acc
// slices in registers. Per 32-key tile the block stages every team's K and V
// rows in shared memory (coalesced global reads; slices kSkew floats apart and
// teams skewed by kSkew floats so the lanes' float4 reads fall in different
// banks). Then, 8 keys at a time, each thread forms its partial dot with key j
// (a broadcast read shared by the team's rows), the G slices add theirs with
// xor-shuffles (every lane gets the same sum, so the G copies of the softmax
// state agree bit for bit), keeps the 8 scores in registers, rescales
// (m, l, acc) once and accumulates p_j · v_j. For D ≤ 16 a thread owns its row
// outright: no cross-lane traffic at all.
//
// Q comes in and Y goes out through the same shared area (coalesced global
// accesses, one float4 per 4 dims per thread), which the key tiles reuse in
// between. Global traffic is the minimum: each Q element read once, K and V
// once per query block (once when Nq ≤ 256 / G), each Y element written once:
// 4·B·(2·Nq + 2·Nk)·H·D bytes. At most 64 registers,
// 4 blocks of 256 threads per SM; at most 42 KiB of shared memory per block,
// so no opt-in attribute is needed. Small Nq (decode-like, one query against
// many keys) fills blocks poorly: a team is Nq·G threads and shared memory
// caps the teams per block; it is correct, not tuned, there.
// ============================================================================
#include "kernels/cuda/attention.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/attention_tensor_cores.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/fast_divmod.cuh"
#include "kernels/cuda/kernel_fit.h"

namespace loka::cuda {
namespace {

constexpr int kMaxThreads = 256;  ///< threads per block, and so query-row slices per block
constexpr int kMaxTeams = 64;     ///< units per block (shared memory caps it lower for every tier)
constexpr int kTile = 32;         ///< keys staged per step
constexpr int kScored = 8;        ///< keys scored per softmax update (scores live in registers)
constexpr int kSkew = 4;          ///< floats between slices and between teams' tiles (banks)
/// Dynamic shared memory a block may take: 48 KiB less the static per-row and per-team offsets.
constexpr size_t kSharedBudget =
    48 * 1024 - 2 * kMaxThreads * sizeof(int64_t) - 4 * kMaxTeams * sizeof(int64_t) - kMaxTeams * sizeof(int);

/// How a launch lays units over blocks (host-computed, read by every thread).
struct AttentionLayout {
  int64_t units = 0;         ///< batch · heads · query_blocks
  int64_t groups = 0;        ///< ceil(units / teams): what the grid walks
  int64_t query_blocks = 1;  ///< query blocks per (b, h)
  int rows = 1;              ///< query rows per unit
  int teams = 1;             ///< units per block
  FastDivmod by_teams;       ///< staged row -> (key, team)
};

template <int kS, int kG>
struct Tier {
  static constexpr int kD = kS * kG;              ///< padded head dim
  static constexpr int kSlice = kS + kSkew;       ///< floats from one slice of a staged row to the next
  static constexpr int kRow = kG * kSlice;        ///< floats per staged row
  static constexpr int kTeamTile = kTile * kRow + kSkew;  ///< floats per team's K (or V) tile
  /// Staged position of dim e of a row.
  static __device__ __forceinline__ int column(int e) { return (e / kS) * kSlice + e % kS; }
};

/// Moves kW consecutive floats (1, or 4 as one float4 when both ends are 16-byte aligned).
template <int kW>
__device__ __forceinline__ void copy_floats(float* to, const float* from) {
  if constexpr (kW == 4) *reinterpret_cast<float4*>(to) = *reinterpret_cast<const float4*>(from);
  else *to = *from;
}
template <int kW>
__device__ __forceinline__ void zero_floats(float* to) {
  if constexpr (kW == 4) *reinterpret_cast<float4*>(to) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  else *to = 0.0f;
}

// Four blocks of 256 per SM and scores 8 keys at a time: ranker shape 246 -> 232 us against three blocks
// and 16 keys (H200, 2026-11-26; two blocks: 313 us). Nsight Compute on the old build: 36% occupancy
// (registers and shared memory), 1.07 TB/s from DRAM, a third of the cycles with no eligible warp.
/// kVec: every row of Q, K, V and Y starts 16-byte aligned at each head (head_dim, strides and
/// offsets multiples of 4, aligned pointers), so staging moves float4s: a quarter of the load
/// instructions and index arithmetic, which the scalar staging spent as much time on as the math.
template <int kS, int kG, bool kVec>
__global__ void __launch_bounds__(kMaxThreads, 4) attention_kernel(AttentionArgs a, AttentionLayout layout) {
  using T = Tier<kS, kG>;
  constexpr int kW = kVec ? 4 : 1;      // floats moved at once while staging
  constexpr int kChunks = T::kD / kW;  // moves per padded row
  extern __shared__ float4 shared_raw[];
  // One area, three uses in turn: queries [teams·rows][kRow], then K and V tiles, then outputs.
  float* const stage = reinterpret_cast<float*>(shared_raw);
  float* const k_tile = stage;
  float* const v_tile = stage + layout.teams * T::kTeamTile;
  __shared__ int64_t q_row_at[kMaxThreads], y_row_at[kMaxThreads];  // element offsets of a row's head; -1: none
  __shared__ int64_t k_team_at[kMaxTeams], v_team_at[kMaxTeams];   // key 0 of a unit's head; -1: no unit
  __shared__ int64_t team_token[kMaxTeams], team_column[kMaxTeams];  // first query token and h·D of a unit
  __shared__ int team_rows[kMaxTeams];  // a unit's query rows: `rows`, fewer in a short last query block

  const int tid = static_cast<int>(threadIdx.x);
  const int block_rows = layout.teams * layout.rows;
  const int block_row = tid / kG;  // rows are team-major: team p holds rows [p·rows, p·rows + rows)
  const int g = tid % kG;
  const bool has_row = block_row < block_rows;  // threads past the last team shadow the last row, write nothing
  const int my_row = has_row ? block_row : block_rows - 1;
  const int team = my_row / layout.rows;
  const int64_t head_dim = a.head_dim, out_stride = a.heads * a.head_dim;
  const float* const my_k = k_tile + team * T::kTeamTile + g * T::kSlice;
  const float* const my_v = v_tile + team * T::kTeamTile + g * T::kSlice;
  float* const my_stage = stage + my_row * T::kRow + g * T::kSlice;

  for (int64_t group = blockIdx.x; group < layout.groups; group += gridDim.x) {
    __syncthreads();  // the previous group's outputs and offsets have been read
    if (tid < layout.teams) {
      const int64_t unit = group * layout.teams + tid;
      int64_t token = -1, column = 0, k_at = -1, v_at = -1;
      int rows = 0;
      if (unit < layout.units) {
        const int64_t head = unit / layout.query_blocks, query_block = unit % layout.query_blocks;
        const int64_t b = head / a.heads, h = head % a.heads;
        const int64_t first = query_block * layout.rows;
        token = b * a.nq + first;
        rows = static_cast<int>(a.nq - first < layout.rows ? a.nq - first : layout.rows);
        column = h * head_dim;
        k_at = b * a.nk * a.k_stride + a.k_offset + column;
        v_at = b * a.nk * a.v_stride + a.v_offset + column;
      }
      team_token[tid] = token, team_column[tid] = column, k_team_at[tid] = k_at, v_team_at[tid] = v_at;
      team_rows[tid] = rows;
    }
    __syncthreads();
    if (tid < block_rows) {
      const int p = tid / layout.rows, r = tid % layout.rows;
      const int64_t token = team_token[p] + r;
      const bool valid = r < team_rows[p];
      q_row_at[tid] = valid ? token * a.q_stride + a.q_offset + team_column[p] : -1;
      y_row_at[tid] = valid ? token * out_stride + team_column[p] : -1;
    }
    __syncthreads();
    for (int idx = tid; idx < block_rows * kChunks; idx += blockDim.x) {
      const int r = idx / kChunks, e = idx % kChunks * kW;
      const int64_t at = q_row_at[r];
      float* to = stage + r * T::kRow + T::column(e);
      if (at >= 0 && e < head_dim) copy_floats<kW>(to, a.q + at + e);
      else zero_floats<kW>(to);
    }
    __syncthreads();
    float q[kS], acc[kS];
#pragma unroll
    for (int d = 0; d < kS; d += 4) {
      const float4 v4 = *reinterpret_cast<const float4*>(my_stage + d);
      q[d] = v4.x, q[d + 1] = v4.y, q[d + 2] = v4.z, q[d + 3] = v4.w;
      acc[d] = acc[d + 1] = acc[d + 2] = acc[d + 3] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;

    for (int64_t j0 = 0; j0 < a.nk; j0 += kTile) {
      const int valid = static_cast<int>(a.nk - j0 < kTile ? a.nk - j0 : kTile);
      __syncthreads();  // the queries (first tile) or the previous tile have been read
      for (int idx = tid; idx < valid * layout.teams * kChunks; idx += blockDim.x) {
        const int e = idx % kChunks * kW;
        uint32_t p;
        const int j = static_cast<int>(layout.by_teams.divmod(static_cast<uint32_t>(idx / kChunks), p));
        const int64_t k_at = k_team_at[p], v_at = v_team_at[p];
        const int at = static_cast<int>(p) * T::kTeamTile + j * T::kRow + T::column(e);
        if (k_at >= 0 && e < head_dim) {
          copy_floats<kW>(k_tile + at, a.k + k_at + (j0 + j) * a.k_stride + e);
          copy_floats<kW>(v_tile + at, a.v + v_at + (j0 + j) * a.v_stride + e);
        } else {
          zero_floats<kW>(k_tile + at);
          zero_floats<kW>(v_tile + at);
        }
      }
      __syncthreads();

      // Scores of kScored keys at a time (fewer live registers than the whole tile): the dot product
      // over D, then one multiply by scale.
      for (int j1 = 0; j1 < valid; j1 += kScored) {
        float s[kScored];
        float chunk_max = -INFINITY;
#pragma unroll
        for (int j = 0; j < kScored; ++j) {
          s[j] = 0.0f;
          if (j1 + j < valid) {  // uniform across the block: the shuffles below see every lane
            const float* key = my_k + (j1 + j) * T::kRow;
            float dot = 0.0f;
#pragma unroll
            for (int d = 0; d < kS; d += 4) {
              const float4 k4 = *reinterpret_cast<const float4*>(key + d);
              dot = fmaf(q[d], k4.x, dot);
              dot = fmaf(q[d + 1], k4.y, dot);
              dot = fmaf(q[d + 2], k4.z, dot);
              dot = fmaf(q[d + 3], k4.w, dot);
            }
#pragma unroll
            for (int offset = 1; offset < kG; offset *= 2) dot += __shfl_xor_sync(0xFFFFFFFFu, dot, offset);
            s[j] = dot * a.scale;
            chunk_max = fmaxf(chunk_max, s[j]);  // ignores NaN: a NaN score reaches the row through exp below
          }
        }

        // Online softmax: rescale what the earlier keys summed to the new maximum. While every
        // score so far is -inf, subtract 0 instead (exp(-inf - -inf) would be NaN where the full
        // softmax gives 0); a row of -inf only ends with l = 0 and so NaN, as ONNX Softmax gives.
        const float m_new = fmaxf(m, chunk_max);
        const float m_sub = m_new == -INFINITY ? 0.0f : m_new;
        const float factor = expf(m - m_sub);
        l *= factor;
#pragma unroll
        for (int d = 0; d < kS; ++d) acc[d] *= factor;
#pragma unroll
        for (int j = 0; j < kScored; ++j) {
          if (j1 + j < valid) {
            const float p = expf(s[j] - m_sub);
            l += p;
            const float* value = my_v + (j1 + j) * T::kRow;
#pragma unroll
            for (int d = 0; d < kS; d += 4) {
              const float4 v4 = *reinterpret_cast<const float4*>(value + d);
              acc[d] = fmaf(p, v4.x, acc[d]);
              acc[d + 1] = fmaf(p, v4.y, acc[d + 1]);
              acc[d + 2] = fmaf(p, v4.z, acc[d + 2]);
              acc[d + 3] = fmaf(p, v4.w, acc[d + 3]);
            }
          }
        }
        m = m_new;
      }
    }

    __syncthreads();  // every thread is done with the last tile: the area takes the outputs
    if (has_row) {
#pragma unroll
      for (int d = 0; d < kS; d += 4)
        *reinterpret_cast<float4*>(my_stage + d) =
            make_float4(acc[d] / l, acc[d + 1] / l, acc[d + 2] / l, acc[d + 3] / l);
    }
    __syncthreads();
    for (int idx = tid; idx < block_rows * kChunks; idx += blockDim.x) {
      const int r = idx / kChunks, e = idx % kChunks * kW;
      const int64_t at = y_row_at[r];
      if (at >= 0 && e < head_dim) copy_floats<kW>(a.y + at + e, stage + r * T::kRow + T::column(e));
    }
  }
}

template <int kS, int kG>
Status launch_tier(const AttentionArgs& args, cudaStream_t stream) {
  using T = Tier<kS, kG>;
  AttentionLayout layout;
  // Query rows per unit: all of them when they fit a block, else balanced blocks of at most 256 / G.
  const int64_t max_rows = kMaxThreads / kG;
  layout.query_blocks = (args.nq + max_rows - 1) / max_rows;
  layout.rows = static_cast<int>((args.nq + layout.query_blocks - 1) / layout.query_blocks);
  layout.units = args.batch * args.heads * layout.query_blocks;
  const int team_threads = layout.rows * kG;
  // Per unit: its query/output rows, or its K and V tiles, whichever is larger (the area is shared).
  const size_t team_floats = std::max<size_t>(static_cast<size_t>(layout.rows) * T::kRow, 2 * size_t{T::kTeamTile});
  const size_t team_bytes = team_floats * sizeof(float);
  const int64_t teams = std::min<int64_t>({kMaxThreads / team_threads, kMaxTeams,
                                           static_cast<int64_t>(kSharedBudget / team_bytes), layout.units});
  layout.teams = static_cast<int>(std::max<int64_t>(1, teams));
  layout.by_teams = FastDivmod(static_cast<uint32_t>(layout.teams));
  layout.groups = (layout.units + layout.teams - 1) / layout.teams;
  const int threads = (layout.teams * team_threads + 31) / 32 * 32;
  const size_t shared_bytes = static_cast<size_t>(layout.teams) * team_bytes;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(layout.groups, INT_MAX));
  if (attention_rows_aligned(args))
    attention_kernel<kS, kG, true><<<blocks, threads, shared_bytes, stream>>>(args, layout);
  else
    attention_kernel<kS, kG, false><<<blocks, threads, shared_bytes, stream>>>(args, layout);
  return launch_status("attention");
}

/// Whether `offset + heads·head_dim` columns fit a row of `stride`, without overflow.
bool heads_fit(int64_t offset, int64_t stride, int64_t heads, int64_t head_dim) {
  return offset >= 0 && offset <= stride && heads <= (stride - offset) / head_dim;
}

}  // namespace

Status attention_can_implement(int64_t heads, int64_t head_dim) {
  if (heads < 1) return Status::error("attention needs at least one head (heads=" + std::to_string(heads) + ")");
  if (head_dim < 1) return Status::error("attention needs head_dim >= 1 (head_dim=" + std::to_string(head_dim) + ")");
  if (head_dim > kAttentionMaxHeadDim)
    return Status::error("the CUDA attention kernel keeps a head of at most " + std::to_string(kAttentionMaxHeadDim) +
                         " dims in registers (head_dim=" + std::to_string(head_dim) + ")");
  return Status::ok();
}

Status attention_check_args(const AttentionArgs& args) {
  LOKA_RETURN_IF_ERROR(attention_can_implement(args.heads, args.head_dim));
  if (args.batch < 0 || args.nq < 0)
    return Status::error("attention: negative shape (batch=" + std::to_string(args.batch) + ", Nq=" +
                         std::to_string(args.nq) + ")");
  if (args.nk < 1)
    return Status::error("attention needs at least one key (Nk=" + std::to_string(args.nk) +
                         "): a softmax over no keys is undefined");
  const struct {
    const char* name;
    int64_t offset, stride;
  } inputs[] = {{"Q", args.q_offset, args.q_stride},
                {"K", args.k_offset, args.k_stride},
                {"V", args.v_offset, args.v_stride}};
  for (const auto& in : inputs)
    if (!heads_fit(in.offset, in.stride, args.heads, args.head_dim))
      return Status::error(std::string("attention: ") + in.name + " offset " + std::to_string(in.offset) + " + " +
                           std::to_string(args.heads) + " heads x " + std::to_string(args.head_dim) +
                           " dims exceeds its last dim " + std::to_string(in.stride));
  return Status::ok();
}

bool attention_rows_aligned(const AttentionArgs& args) {
  const auto aligned = [](const float* pointer, int64_t stride, int64_t offset) {
    return reinterpret_cast<uintptr_t>(pointer) % 16 == 0 && stride % 4 == 0 && offset % 4 == 0;
  };
  return args.head_dim % 4 == 0 && aligned(args.q, args.q_stride, args.q_offset) &&
         aligned(args.k, args.k_stride, args.k_offset) && aligned(args.v, args.v_stride, args.v_offset) &&
         aligned(args.y, args.heads * args.head_dim, 0);
}

bool attention_runs_on_tensor_cores(const AttentionArgs& args) {
  return args.nk <= kTensorCoreMaxKeys && args.head_dim > kTensorCoreMinHeadDim;
}

Status launch_attention(const AttentionArgs& args, cudaStream_t stream) {
  LOKA_RETURN_IF_ERROR(attention_check_args(args));
  if (args.batch == 0 || args.nq == 0) return Status::ok();
  if (!args.q || !args.k || !args.v || !args.y) return Status::error("attention: null pointer");
  if (attention_runs_on_tensor_cores(args)) {
    bool launched = false;
    LOKA_RETURN_IF_ERROR(launch_attention_on_tensor_cores(args, stream, launched));
    if (launched) return Status::ok();
  }
  const int64_t d = args.head_dim;
  if (d <= 4) return launch_tier<4, 1>(args, stream);
  if (d <= 8) return launch_tier<8, 1>(args, stream);
  if (d <= 16) return launch_tier<16, 1>(args, stream);
  if (d <= 32) return launch_tier<16, 2>(args, stream);
  if (d <= 64) return launch_tier<16, 4>(args, stream);
  return launch_tier<16, 8>(args, stream);
}

}  // namespace loka::cuda
