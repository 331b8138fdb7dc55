// ============================================================================
// kernels/cuda/attention.cu — ai.loka.Attention, two kernels chosen by shape:
// an exact softmax with every score in registers for short key sets with
// heads past 32 dims (Nk ≤ 64, 32 < D ≤ 128: DHEN's single head of 128), and
// an online softmax over key tiles for the rest (long key sets, D ≤ 32 such as
// the attention ranker's 8 heads of 16, and a unit too large for shared memory).
//
// Measured (kernel_rate_bench attention, B = 4096, packed QKV, H100 SXM,
// 2026-11-27; the copy floor reads Q, K, V and writes Y once):
//   tokens, heads x D       online (before)   short-key    copy floor
//   35, 1x128 (DHEN)           351 us            233 us        104 us
//   40, 2x64                   318 us            246 us        118 us
//   40, 8x16 (ranker)          242 us           (285 us)       119 us   stays online
// For 8 heads of 16 no short-key variant beat the online kernel: one, two or
// four lanes a row, one or two rows a lane group, 32 to 128 registers, 128 to
// 512 threads a block all ran 254-330 us (unaligned rows 376-542 us against
// its 350 us), so D ≤ 16 keeps it; 16 < D ≤ 32 (two lanes a row, whose
// scores spill at the register cap) was not timed, so it keeps it too.
//
// --- The short-key kernel (short_attention_kernel) ---
//
// Work unit: one (b, h) and up to 64 query rows (more: balanced query blocks,
// K and V staged per block). A block holds whole units and walks groups of
// them grid-stride, persistent (grid = the blocks the device holds at once).
// Per unit one shared area each for its Q, K and V rows, filled by cp.async
// (float4s when every row is 16-byte aligned, else single floats) a phase
// ahead: the next group's Q and K stream in during this group's P·V, its V
// during the next group's scores, so one set of areas (not two) hides the
// loads. A row's kG lanes (4 or 8 by head_dim) split the keys for the
// scores (lane g: keys j ≡ g mod kG, each dot over all D dims in increasing e,
// then × scale: no cross-lane sum) and the output columns for P·V (lane g:
// float4 columns c·kG + g, each p_j shuffled from its owner). The softmax is
// exact: max and sum over the lane's scores, then log2(kG) xor-shuffles (every
// lane gets the same bits), p_j = exp(s_j − max) kept in the score registers,
// Y = Σ p_j·v_j · (1 / Σ p_j). A lane group takes two query rows, sharing
// every K and V load from shared memory. Score slots are sized for
// 32, 48 or 64 keys, and a register cap per tier (scores + accumulators + 40)
// keeps two or three blocks on an SM: left alone ptxas took up to 128.
// Global traffic is the minimum: each Q element read once, K and V once per
// query block (once when Nq ≤ 64), each Y element written once.
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

/// Whether every head of Q, K, V and Y starts 16-byte aligned (head_dim, strides and offsets
/// multiples of 4, aligned pointers): then both paths move rows as float4s.
bool rows_aligned(const AttentionArgs& args) {
  const auto aligned = [](const float* pointer, int64_t stride, int64_t offset) {
    return reinterpret_cast<uintptr_t>(pointer) % 16 == 0 && stride % 4 == 0 && offset % 4 == 0;
  };
  return args.head_dim % 4 == 0 && aligned(args.q, args.q_stride, args.q_offset) &&
         aligned(args.k, args.k_stride, args.k_offset) && aligned(args.v, args.v_stride, args.v_offset) &&
         aligned(args.y, args.heads * args.head_dim, 0);
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
  if (rows_aligned(args))
    attention_kernel<kS, kG, true><<<blocks, threads, shared_bytes, stream>>>(args, layout);
  else
    attention_kernel<kS, kG, false><<<blocks, threads, shared_bytes, stream>>>(args, layout);
  return launch_status("attention");
}

// ------------------------------------------------------------------ short key sets ---

constexpr int kShortMaxKeys = 64;      ///< longest key set whose scores a lane group keeps in registers
constexpr int kShortMaxRows = 64;      ///< query rows per unit (more: query blocks, K and V staged per block)
constexpr int kShortMaxUnits = 64;     ///< units per block (per-unit offsets are static shared arrays)
constexpr int kShortMaxThreads = 512;  ///< threads per block: at most 128 registers a thread
constexpr int kShortThreads = 256;     ///< threads a block aims at (whole units, so it may take fewer)
/// Heads of up to 32 dims stay on the online kernel (see the banner: faster at 16, untimed past).
constexpr int64_t kShortMinHeadDim = 32;

/// How a short-key launch lays units over blocks (host-computed, read by every thread).
struct ShortLayout {
  int64_t units = 0;         ///< batch · heads · query_blocks
  int64_t groups = 0;        ///< ceil(units / units_per_block): what the grid walks
  int64_t query_blocks = 1;  ///< query blocks per (b, h)
  int rows = 1;              ///< query rows per unit
  int unit_threads = 1;      ///< ceil(rows / kR) lane groups of kG lanes
  int units_per_block = 1;
  int q_floats = 0;          ///< one unit's staged Q rows, plus a bank skew
  int kv_floats = 0;         ///< one unit's staged K (or V) rows, plus a bank skew
  int shared_floats = 0;     ///< units_per_block · (q_floats + 2 · kv_floats)
  FastDivmod by_rows;        ///< staged Q row -> (unit, row)
  FastDivmod by_keys;        ///< staged K/V row -> (unit, key)
};

/// kG lanes per query row, kC float4s of the output per lane, kR query rows per lane group,
/// up to kKeys keys.
template <int kG_, int kC_, int kR_, int kKeys_>
struct ShortTier {
  static constexpr int kG = kG_, kC = kC_, kR = kR_, kKeys = kKeys_;
  /// Registers a thread may take: its scores and accumulators and 40 more, in steps of 8. Left
  /// alone, ptxas spends up to 128 on hoisted loads and halves the warps an SM holds.
  static constexpr int kRegs = (kR * (kKeys / kG + 4 * kC) + 40 + 7) / 8 * 8;
  static constexpr int kD = 4 * kG * kC;    ///< padded head dim
  static constexpr int kChunks = kD / 4;    ///< float4s per staged row
  /// Floats from one staged row to the next: an odd number of float4s, so the kG different keys
  /// a lane group reads at once (and consecutive query rows) start in different banks.
  static constexpr int kStride = kChunks % 2 == 1 ? kD : kD + 4;
  static constexpr int kSlots = kKeys / kG;  ///< scores per lane: keys j ≡ g (mod kG)
  static_assert(kKeys % kG == 0 && (kG & (kG - 1)) == 0 && kG <= 32);
};

/// Copies kW floats from global to shared memory without passing through registers
/// (cp.async: 16 bytes past L1, 4 bytes through it), so a block's next group streams in
/// while it computes on the current one.
template <int kW>
__device__ __forceinline__ void copy_async(float* to, const float* from) {
  const auto to_shared = static_cast<unsigned>(__cvta_generic_to_shared(to));
  if constexpr (kW == 4)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(to_shared), "l"(from) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(to_shared), "l"(from) : "memory");
}
__device__ __forceinline__ void commit_async() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
/// Waits for this thread's copies of all but the `kPending` most recent commits.
template <int kPending>
__device__ __forceinline__ void wait_async() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

/// Exact softmax for Nk ≤ kKeys. A unit is one (b, h) and a block of `rows` query rows; a
/// block holds units_per_block units and walks groups of them grid-stride, persistent, with one
/// shared area each for their Q, K and V rows, refilled by cp.async a phase ahead (zero-padded
/// to kD dims by zeroing the areas once: staging never writes the padding). Lane g of a row's
/// kG lanes scores keys j ≡ g (mod kG) over all D dims (one FMA chain in increasing e, then
/// × scale), so no score needs a cross-lane sum; max and sum take log2(kG) xor-shuffles per row
/// (every lane gets the same bits); for P·V the lane owns float4 columns c·kG + g of the row
/// (adjacent lanes read adjacent 16 bytes of a V row: no bank conflict) and takes each p_j from
/// its owner with one shuffle. kR rows per lane group share every K and V load from shared
/// memory.
template <typename T, bool kVec>
__global__ void __maxnreg__(T::kRegs) short_attention_kernel(AttentionArgs a, ShortLayout layout) {
  constexpr int kG = T::kG, kC = T::kC, kR = T::kR;
  constexpr int kW = kVec ? 4 : 1;      // floats moved at once while staging
  constexpr int kMoves = T::kD / kW;    // moves per padded staged row (a power of two)
  extern __shared__ float4 short_raw[];
  float* const buffers = reinterpret_cast<float*>(short_raw);
  __shared__ int64_t q_at[2][kShortMaxUnits], k_at[2][kShortMaxUnits];  // element offsets of a unit's
  __shared__ int64_t v_at[2][kShortMaxUnits], y_at[2][kShortMaxUnits];  // first row at its head
  __shared__ int unit_rows[2][kShortMaxUnits];  // `rows`, fewer in a short last query block, 0: no unit

  const int tid = static_cast<int>(threadIdx.x);
  const int units_per_block = layout.units_per_block;
  // Threads past the last unit (blocks are whole warps) shadow its lane groups: they join the
  // shuffles, read clamped rows and write nothing (their rows are past unit_rows).
  const int my_unit = min(tid / layout.unit_threads, units_per_block - 1);
  const int local = tid - my_unit * layout.unit_threads;
  const int g = local % kG;
  const int row0 = local / kG * kR;
  const int nk = static_cast<int>(a.nk);
  const int64_t out_stride = a.heads * a.head_dim;

  for (int i = tid; i < layout.shared_floats; i += static_cast<int>(blockDim.x)) buffers[i] = 0.0f;
  float* const q_area = buffers;
  float* const k_area = q_area + units_per_block * layout.q_floats;
  float* const v_area = k_area + units_per_block * layout.kv_floats;

  // Offsets of group `group`'s units, into slot `slot` (the first units_per_block threads).
  const auto plan = [&](int64_t group, int slot) {
    if (tid >= units_per_block) return;
    const int64_t unit = group * units_per_block + tid;
    int rows = 0;
    int64_t q = 0, k = 0, v = 0, y = 0;
    if (unit < layout.units) {
      const int64_t head = unit / layout.query_blocks, first = unit % layout.query_blocks * layout.rows;
      const int64_t b = head / a.heads, column = head % a.heads * a.head_dim;
      rows = static_cast<int>(a.nq - first < layout.rows ? a.nq - first : layout.rows);
      q = (b * a.nq + first) * a.q_stride + a.q_offset + column;
      k = b * a.nk * a.k_stride + a.k_offset + column;
      v = b * a.nk * a.v_stride + a.v_offset + column;
      y = (b * a.nq + first) * out_stride + column;
    }
    q_at[slot][tid] = q, k_at[slot][tid] = k, v_at[slot][tid] = v, y_at[slot][tid] = y;
    unit_rows[slot][tid] = rows;
  };
  // Issues the copies of one input's rows of the group planned in `slot` (the dims < D only):
  // `rows` staged rows a unit (the Q rows, or every key of K or V), a row's moves spread over
  // kRowThreads threads, kPer each. Unaligned rows move one float at a time, so a thread takes
  // four of a row's floats: the row's index arithmetic is then paid once per four copies.
  constexpr int kPer = kVec || T::kD < 16 ? 1 : 4;
  constexpr int kRowThreads = kMoves / kPer;
  const auto stage_rows = [&](float* area, int unit_floats, const float* source, const int64_t* at, int64_t stride,
                              int rows, const FastDivmod& by_rows, bool queries, int slot) {
    const int tasks = units_per_block * rows * kRowThreads;
    for (int idx = tid; idx < tasks; idx += static_cast<int>(blockDim.x)) {
      const int lane = idx % kRowThreads;
      uint32_t r;
      const int u = static_cast<int>(by_rows.divmod(static_cast<uint32_t>(idx / kRowThreads), r));
      if (queries ? static_cast<int>(r) >= unit_rows[slot][u] : unit_rows[slot][u] == 0) continue;
      float* const to = area + u * unit_floats + static_cast<int>(r) * T::kStride;
      const float* const from = source + at[u] + r * stride;
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int e = (lane + i * kRowThreads) * kW;
        if (e < a.head_dim) copy_async<kW>(to + e, from + e);
      }
    }
  };
  const auto stage_qk = [&](int slot) {
    stage_rows(q_area, layout.q_floats, a.q, q_at[slot], a.q_stride, layout.rows, layout.by_rows, true, slot);
    stage_rows(k_area, layout.kv_floats, a.k, k_at[slot], a.k_stride, nk, layout.by_keys, false, slot);
  };
  const auto stage_v = [&](int slot) {
    stage_rows(v_area, layout.kv_floats, a.v, v_at[slot], a.v_stride, nk, layout.by_keys, false, slot);
  };

  // One area each for Q, K and V, refilled a phase ahead: the next group's Q and K stream in while
  // this group's P·V runs, its V while the next scores run. Commits alternate QK, V, QK, V ...
  // (possibly empty ones at the end), so "all but the latest commit" is always what the next
  // phase needs.
  int slot = 0;
  int64_t group = blockIdx.x;  // the grid never exceeds the groups
  plan(group, 0);
  __syncthreads();  // areas zeroed, offsets written
  stage_qk(0);
  commit_async();
  stage_v(0);
  commit_async();
  for (; group < layout.groups; group += gridDim.x) {
    const bool has_next = group + gridDim.x < layout.groups;  // uniform across the block
    if (has_next) plan(group + gridDim.x, slot ^ 1);
    wait_async<1>();
    __syncthreads();  // this group's Q and K have landed (every thread's copies); next offsets written

    const float* const keys = k_area + my_unit * layout.kv_floats;
    const float* const values = v_area + my_unit * layout.kv_floats;
    const float* q_row[kR];
#pragma unroll
    for (int r = 0; r < kR; ++r)
      q_row[r] = q_area + my_unit * layout.q_floats + min(row0 + r, layout.rows - 1) * T::kStride;

    // Scores: each over all D dims in increasing e (FMA), then one multiply by scale.
    float s[kR][T::kSlots];
#pragma unroll
    for (int r = 0; r < kR; ++r)
#pragma unroll
      for (int jj = 0; jj < T::kSlots; ++jj) s[r][jj] = 0.0f;
    // Chunk-major over the lane's keys: consecutive FMAs belong to different keys (independent
    // chains), and each key's chain still runs in increasing e.
#pragma unroll
    for (int t = 0; t < T::kChunks; ++t) {
      float4 q[kR];
#pragma unroll
      for (int r = 0; r < kR; ++r) q[r] = reinterpret_cast<const float4*>(q_row[r])[t];
#pragma unroll
      for (int jj = 0; jj < T::kSlots; ++jj) {
        if (jj * kG + g < nk) {
          const float4 k4 = reinterpret_cast<const float4*>(keys + (jj * kG + g) * T::kStride)[t];
#pragma unroll
          for (int r = 0; r < kR; ++r) {
            s[r][jj] = fmaf(q[r].x, k4.x, s[r][jj]);
            s[r][jj] = fmaf(q[r].y, k4.y, s[r][jj]);
            s[r][jj] = fmaf(q[r].z, k4.z, s[r][jj]);
            s[r][jj] = fmaf(q[r].w, k4.w, s[r][jj]);
          }
        }
      }
    }

    __syncthreads();  // every thread's scores are done with the Q and K areas
    if (has_next) stage_qk(slot ^ 1);
    commit_async();

    // Exact softmax: p_j = exp(s_j - max) (kept in s), l = Σ p_j. fmaxf skips NaN, which then
    // reaches l (and the row) through its exp; an +inf score gives exp(inf - inf) = NaN and a row
    // of -inf exp(-inf - -inf) = NaN, as ONNX Softmax.
    float inverse[kR];
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      float m = -INFINITY;
#pragma unroll
      for (int jj = 0; jj < T::kSlots; ++jj) {
        if (jj * kG + g < nk) {
          s[r][jj] *= a.scale;
          m = fmaxf(m, s[r][jj]);
        }
      }
#pragma unroll
      for (int offset = 1; offset < kG; offset *= 2) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, offset));
      float l = 0.0f;
#pragma unroll
      for (int jj = 0; jj < T::kSlots; ++jj) {
        if (jj * kG + g < nk) {
          s[r][jj] = expf(s[r][jj] - m);
          l += s[r][jj];
        }
      }
#pragma unroll
      for (int offset = 1; offset < kG; offset *= 2) l += __shfl_xor_sync(0xFFFFFFFFu, l, offset);
      inverse[r] = 1.0f / l;
    }

    wait_async<1>();
    __syncthreads();  // this group's V has landed

    // Y = Σ_j p_j · v_j over every key (a zero p_j still multiplies a non-finite v_j, as the MatMul).
    float4 acc[kR][kC];
#pragma unroll
    for (int r = 0; r < kR; ++r)
#pragma unroll
      for (int c = 0; c < kC; ++c) acc[r][c] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int jj = 0; jj < T::kSlots; ++jj) {
#pragma unroll
      for (int owner = 0; owner < kG; ++owner) {
        const int j = jj * kG + owner;
        if (j < nk) {  // the same for every lane: the shuffles see the whole warp
          float p[kR];
#pragma unroll
          for (int r = 0; r < kR; ++r) p[r] = kG == 1 ? s[r][jj] : __shfl_sync(0xFFFFFFFFu, s[r][jj], owner, kG);
          const float4* value = reinterpret_cast<const float4*>(values + j * T::kStride) + g;
#pragma unroll
          for (int c = 0; c < kC; ++c) {
            const float4 v4 = value[c * kG];
#pragma unroll
            for (int r = 0; r < kR; ++r) {
              acc[r][c].x = fmaf(p[r], v4.x, acc[r][c].x);
              acc[r][c].y = fmaf(p[r], v4.y, acc[r][c].y);
              acc[r][c].z = fmaf(p[r], v4.z, acc[r][c].z);
              acc[r][c].w = fmaf(p[r], v4.w, acc[r][c].w);
            }
          }
        }
      }
    }

    const int rows = unit_rows[slot][my_unit];
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      if (row0 + r >= rows) continue;
      float* const out = a.y + y_at[slot][my_unit] + (row0 + r) * out_stride;
#pragma unroll
      for (int c = 0; c < kC; ++c) {
        const int e = 4 * (c * kG + g);
        const float4 y4 = make_float4(acc[r][c].x * inverse[r], acc[r][c].y * inverse[r], acc[r][c].z * inverse[r],
                                      acc[r][c].w * inverse[r]);
        if constexpr (kVec) {
          if (e < a.head_dim) *reinterpret_cast<float4*>(out + e) = y4;
        } else {
          const float lanes[4] = {y4.x, y4.y, y4.z, y4.w};
#pragma unroll
          for (int i = 0; i < 4; ++i)
            if (e + i < a.head_dim) out[e + i] = lanes[i];
        }
      }
    }
    __syncthreads();  // the V area and this slot's offsets are free
    if (has_next) stage_v(slot ^ 1);
    commit_async();
    slot ^= 1;
  }
}

/// The short-key layout of `args` for kG lanes a row and kR rows a lane group, or units_per_block
/// 0 when a unit's two buffers exceed `max_shared` bytes.
template <typename T>
ShortLayout short_layout(const AttentionArgs& args, int target_threads, size_t max_shared) {
  constexpr int kG = T::kG, kR = T::kR;
  ShortLayout layout;
  const int64_t max_rows = std::min(kShortMaxRows, kShortMaxThreads / kG * kR);
  layout.query_blocks = (args.nq + max_rows - 1) / max_rows;
  layout.rows = static_cast<int>((args.nq + layout.query_blocks - 1) / layout.query_blocks);
  layout.unit_threads = (layout.rows + kR - 1) / kR * kG;
  layout.units = args.batch * args.heads * layout.query_blocks;
  // Four floats of skew per unit: neighbouring units' rows fall in different banks.
  layout.q_floats = layout.rows * T::kStride + 4;
  layout.kv_floats = static_cast<int>(args.nk) * T::kStride + 4;
  const size_t unit_bytes = sizeof(float) * static_cast<size_t>(layout.q_floats + 2 * layout.kv_floats);
  const int64_t per_block = std::min<int64_t>({std::max(1, target_threads / layout.unit_threads),
                                               kShortMaxThreads / layout.unit_threads, kShortMaxUnits,
                                               static_cast<int64_t>(max_shared / unit_bytes), layout.units});
  layout.units_per_block = static_cast<int>(std::max<int64_t>(per_block, 0));
  if (layout.units_per_block == 0) return layout;
  layout.shared_floats = layout.units_per_block * (layout.q_floats + 2 * layout.kv_floats);
  layout.groups = (layout.units + layout.units_per_block - 1) / layout.units_per_block;
  layout.by_rows = FastDivmod(static_cast<uint32_t>(layout.rows));
  layout.by_keys = FastDivmod(static_cast<uint32_t>(args.nk));
  return layout;
}

/// Launches the short-key kernel, or sets `launched` false when a unit's two buffers exceed the
/// device's shared memory (the caller then takes the general kernel).
template <typename T>
Status launch_short(const AttentionArgs& args, cudaStream_t stream, bool& launched) {
  launched = false;
  const auto kernel = rows_aligned(args) ? short_attention_kernel<T, true> : short_attention_kernel<T, false>;
  LOKA_ASSIGN_OR_RETURN(const KernelFit limit, kernel_fit(reinterpret_cast<const void*>(kernel), 0, 0, "attention"));
  const ShortLayout layout = short_layout<T>(args, kShortThreads, limit.max_dynamic);
  if (layout.units_per_block == 0) return Status::ok();
  const int threads = (layout.units_per_block * layout.unit_threads + 31) / 32 * 32;
  const size_t shared_bytes = sizeof(float) * static_cast<size_t>(layout.shared_floats);
  LOKA_ASSIGN_OR_RETURN(const KernelFit fit, kernel_fit(reinterpret_cast<const void*>(kernel), threads, shared_bytes, "attention"));
  const auto blocks = static_cast<unsigned>(std::min<int64_t>({layout.groups, fit.resident, INT_MAX}));
  kernel<<<blocks, threads, shared_bytes, stream>>>(args, layout);
  launched = true;
  return launch_status("attention");
}

/// The short-key tier for 32 < head_dim ≤ 128 and Nk ≤ kKeys: 4 or 8 lanes a row, each with
/// 4 float4s of the output, two rows a lane group.
template <int kKeys>
Status launch_short_tier(const AttentionArgs& args, cudaStream_t stream, bool& launched) {
  if (args.head_dim <= 64) return launch_short<ShortTier<4, 4, 2, kKeys>>(args, stream, launched);
  return launch_short<ShortTier<8, 4, 2, kKeys>>(args, stream, launched);
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

Status launch_attention(const AttentionArgs& args, cudaStream_t stream) {
  LOKA_RETURN_IF_ERROR(attention_check_args(args));
  if (args.batch == 0 || args.nq == 0) return Status::ok();
  if (!args.q || !args.k || !args.v || !args.y) return Status::error("attention: null pointer");
  if (args.nk <= kShortMaxKeys && args.head_dim > kShortMinHeadDim) {
    bool launched = false;
    LOKA_RETURN_IF_ERROR(args.nk <= 32   ? launch_short_tier<32>(args, stream, launched)
                         : args.nk <= 48 ? launch_short_tier<48>(args, stream, launched)
                                         : launch_short_tier<kShortMaxKeys>(args, stream, launched));
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
