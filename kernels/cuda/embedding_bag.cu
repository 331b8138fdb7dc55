// ============================================================================
// kernels/cuda/embedding_bag.cu — embedding gather + sum pooling kernels.
//
// Thread layout: each sample's row of `dim` outputs is split into chunks of
// kVec elements (at most 8: one 16-, 8- or 4-byte load of the table row); `lanes`
// threads (a power of two up to 32) share a sample and stride over its
// chunks, so a 256-thread block covers 256/lanes samples. Tables of one
// launch share the storage type and kVec; blockIdx.y picks the table.
// ============================================================================
#include <cuda_fp8.h>

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/embedding_bag.h"

namespace loka::cuda {
namespace {

/// What the device needs of one table, resolved on the host.
struct TableParams {
  const void* table;
  const float* row_scales;
  int64_t rows;
  int64_t dim;
  const void* ids;
  int64_t ids_row_stride;
  int64_t bag;
  void* out;
  int64_t out_row_stride;
  int* error_flag;
  int lanes;            ///< threads per sample
  bool ids_int64;
  bool per_row_scales;
  bool out_bf16;
  bool vector_store;    ///< output chunks are aligned for packed stores
  IndexPolicy policy;
};

struct LaunchParams {
  TableParams tables[kMaxTablesPerLaunch];
  int64_t batch;
};
static_assert(sizeof(LaunchParams) <= 4096, "kernel parameters must fit the classic 4 KiB limit");

/// Storage of one table element and how it decodes to FP32.
struct Fp8Code {
  uint8_t bits;
};
__device__ __forceinline__ float decode(float v) { return v; }
__device__ __forceinline__ float decode(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float decode(Fp8Code v) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(v.bits, __NV_E4M3)));
}

__device__ __forceinline__ int64_t load_id(const TableParams& t, int64_t sample, int64_t k) {
  const int64_t at = sample * t.ids_row_stride + k;
  return t.ids_int64 ? static_cast<const int64_t*>(t.ids)[at] : static_cast<const int32_t*>(t.ids)[at];
}

/// Writes kVec sums at out element `at`, packed up to 16 bytes when aligned.
template <typename Out, int kVec>
__device__ __forceinline__ void store_chunk(Out* out, int64_t at, const float (&acc)[kVec], bool vector_store) {
  constexpr int kPack = (kVec * sizeof(Out) <= 16) ? kVec : static_cast<int>(16 / sizeof(Out));
  if (vector_store) {
#pragma unroll
    for (int p = 0; p < kVec; p += kPack) {
      Pack<Out, kPack> pack;
#pragma unroll
      for (int j = 0; j < kPack; ++j) pack.v[j] = from_float<Out>(acc[p + j]);
      *reinterpret_cast<Pack<Out, kPack>*>(out + at + p) = pack;
    }
  } else {
#pragma unroll
    for (int j = 0; j < kVec; ++j) out[at + j] = from_float<Out>(acc[j]);
  }
}

/// Ids a thread loads ahead of its sums. A bag's rows are summed one after another; issued one
/// at a time, each id load and then each row load waits out a full memory latency (the 100-id
/// bag of MLPerf DLRMv2 is a chain of 200 round trips a thread). With a window, the loads of
/// kWindow ids, then of their rows, are in flight together; the sums still run in bag order, so
/// results are unchanged to the bit. Two: MLPerf DLRMv2's 26 FP8 tables at batch 4096 went
/// 217 -> 195 us; windows of 4 and 8 took more registers (124 and 208 with 16 codes a thread)
/// than they hid latency, 207 and 265 us (H100, 2026-11-27).
constexpr int kWindow = 2;

template <typename Elem, int kVec>
__device__ __forceinline__ void accumulate_row(const Pack<Elem, kVec>& codes, float scale, float (&acc)[kVec]) {
  if constexpr (std::is_same_v<Elem, Fp8Code>) {
#pragma unroll
    for (int j = 0; j < kVec; ++j) acc[j] = fmaf(decode(codes.v[j]), scale, acc[j]);
  } else {
#pragma unroll
    for (int j = 0; j < kVec; ++j) acc[j] += decode(codes.v[j]);
  }
}

template <typename Elem, int kVec>
__global__ void embedding_bag_kernel(const __grid_constant__ LaunchParams params) {
  const TableParams& t = params.tables[blockIdx.y];
  const int lanes = t.lanes;
  const int lane = static_cast<int>(threadIdx.x) % lanes;
  const int samples_per_block = static_cast<int>(blockDim.x) / lanes;
  const int64_t chunks = t.dim / kVec;
  const auto* table = static_cast<const Elem*>(t.table);
  constexpr bool kScaled = std::is_same_v<Elem, Fp8Code>;
  for (int64_t sample = static_cast<int64_t>(blockIdx.x) * samples_per_block + threadIdx.x / lanes;
       sample < params.batch; sample += static_cast<int64_t>(gridDim.x) * samples_per_block) {
    for (int64_t chunk = lane; chunk < chunks; chunk += lanes) {
      // -0 is the exact additive identity, so bag = 1 reproduces Gather bit for bit (signed zeros too).
      float acc[kVec];
#pragma unroll
      for (int j = 0; j < kVec; ++j) acc[j] = -0.0f;
      for (int64_t first = 0; first < t.bag; first += kWindow) {
        const int in_window = static_cast<int>(t.bag - first < kWindow ? t.bag - first : kWindow);
        int64_t rows[kWindow];
#pragma unroll
        for (int w = 0; w < kWindow; ++w)
          rows[w] = w < in_window ? resolve_index(load_id(t, sample, first + w), t.rows, t.policy) : -1;
        Pack<Elem, kVec> codes[kWindow];
        float scales[kWindow];
#pragma unroll
        for (int w = 0; w < kWindow; ++w) {
          if (rows[w] < 0) continue;
          codes[w] = *reinterpret_cast<const Pack<Elem, kVec>*>(table + rows[w] * t.dim + chunk * kVec);
          if constexpr (kScaled) scales[w] = t.row_scales[t.per_row_scales ? rows[w] : 0];
        }
#pragma unroll
        for (int w = 0; w < kWindow; ++w) {
          if (w >= in_window) break;
          if (rows[w] < 0) {  // out of range under the policy: the row counts as zeros
            if (t.error_flag != nullptr) *t.error_flag = 1;
            continue;
          }
          accumulate_row<Elem, kVec>(codes[w], kScaled ? scales[w] : 1.0f, acc);
        }
      }
      const int64_t at = sample * t.out_row_stride + chunk * kVec;
      if (t.out_bf16) store_chunk(static_cast<__nv_bfloat16*>(t.out), at, acc, t.vector_store);
      else store_chunk(static_cast<float*>(t.out), at, acc, t.vector_store);
    }
  }
}

size_t element_bytes(EmbeddingFormat format) {
  switch (format) {
    case EmbeddingFormat::kFloat32: return 4;
    case EmbeddingFormat::kBFloat16: return 2;
    case EmbeddingFormat::kFp8E4M3: return 1;
  }
  return 0;
}

bool aligned(const void* pointer, size_t bytes) { return reinterpret_cast<uintptr_t>(pointer) % bytes == 0; }

/// Most elements one thread loads from a row at a time. FP8 rows of 128 read 16 codes a thread
/// (8 threads a sample) ran at 60% of the rate of 8 codes (16 threads a sample): MLPerf DLRMv2's
/// 26 tables, both with the window of 2 below, at batch 4096 195 -> 116 us, at 16384 661 -> 381
/// us (H100, 2026-11-27). Four codes a thread (4-byte loads) was slower again (156 us at 4096).
constexpr int64_t kMaxElementsPerLoad = 8;

/// Elements per table load: the widest of 16/8/4 bytes (at least 4 elements, at most
/// kMaxElementsPerLoad) that divides the row and keeps every row start aligned; else 1.
int vector_width(const EmbeddingBagArgs& args) {
  const size_t bytes = element_bytes(args.format);
  for (size_t load = 16; load >= 4 && load / bytes >= 4; load /= 2) {
    const int64_t vec = static_cast<int64_t>(load / bytes);
    if (vec > kMaxElementsPerLoad) continue;
    if (args.dim % vec == 0 && aligned(args.table, load)) return static_cast<int>(vec);
  }
  return 1;
}

TableParams table_params(const EmbeddingBagArgs& args, int vec) {
  TableParams t{};
  t.table = args.table;
  t.row_scales = args.row_scales;
  t.rows = args.rows;
  t.dim = args.dim;
  t.ids = args.ids;
  t.ids_row_stride = args.ids_row_stride == 0 ? args.bag : args.ids_row_stride;
  t.bag = args.bag;
  const bool bf16 = args.out_dtype == DType::kBFloat16;
  const size_t out_bytes = bf16 ? 2 : 4;
  t.out = static_cast<char*>(args.out) + args.out_column_offset * static_cast<int64_t>(out_bytes);
  t.out_row_stride = args.out_row_stride == 0 ? args.dim : args.out_row_stride;
  t.error_flag = args.error_flag;
  const int64_t chunks = args.dim / vec;
  int lanes = 1;
  while (lanes < 32 && lanes < chunks) lanes *= 2;
  t.lanes = lanes;
  t.ids_int64 = args.ids_int64;
  t.per_row_scales = args.per_row_scales;
  t.out_bf16 = bf16;
  const int pack = static_cast<int>(std::min<size_t>(static_cast<size_t>(vec) * out_bytes, 16) / out_bytes);
  t.vector_store = vec > 1 && t.out_row_stride % pack == 0 && aligned(t.out, static_cast<size_t>(pack) * out_bytes);
  t.policy = args.policy;
  return t;
}

/// Loads one thread of `t` makes in sequence: a bag's ids times the chunks its lane strides over.
int64_t chain_length(const TableParams& t, int kVec) {
  const int64_t chunks = t.dim / kVec;
  return t.bag * ((chunks + t.lanes - 1) / t.lanes);
}

template <typename Elem, int kVec>
Status launch_group(std::vector<TableParams> tables, int64_t batch, cudaStream_t stream) {
  // Longest chain first: blocks start in blockIdx order (x, then y), so the table whose threads
  // take longest (MLPerf DLRMv2's 100-id bag among bags of 1 to 27) starts in the first wave
  // instead of trailing the others. Measured on those 26 FP8 tables (H100, 2026-11-27): 221 ->
  // 213 us at batch 4096, 719 -> 674 us at 16384. Each table writes its own outputs, so the order
  // changes no result.
  std::stable_sort(tables.begin(), tables.end(), [](const TableParams& a, const TableParams& b) {
    return chain_length(a, kVec) > chain_length(b, kVec);
  });
  for (size_t first = 0; first < tables.size(); first += kMaxTablesPerLaunch) {
    LaunchParams params{};
    params.batch = batch;
    const size_t count = std::min<size_t>(kMaxTablesPerLaunch, tables.size() - first);
    int64_t blocks = 1;
    for (size_t i = 0; i < count; ++i) {
      params.tables[i] = tables[first + i];
      const int64_t samples_per_block = kThreadsPerBlock / params.tables[i].lanes;
      blocks = std::max(blocks, (batch + samples_per_block - 1) / samples_per_block);
    }
    const dim3 grid(static_cast<unsigned>(std::min<int64_t>(blocks, 65536)), static_cast<unsigned>(count));
    embedding_bag_kernel<Elem, kVec><<<grid, kThreadsPerBlock, 0, stream>>>(params);
    LOKA_RETURN_IF_ERROR(launch_status("embedding_bag"));
  }
  return Status::ok();
}

}  // namespace

Status check_embedding_bag(const EmbeddingBagArgs& args, int index) {
  const std::string table = "embedding table " + std::to_string(index) + ": ";
  if (args.rows < 0 || args.dim <= 0)
    return Status::error(table + "needs rows >= 0 and dim > 0, got rows " + std::to_string(args.rows) + ", dim " +
                         std::to_string(args.dim));
  if (args.bag < 1) return Status::error(table + "bag must be >= 1, got " + std::to_string(args.bag));
  const int64_t ids_stride = args.ids_row_stride == 0 ? args.bag : args.ids_row_stride;
  if (ids_stride < args.bag)
    return Status::error(table + "ids row stride " + std::to_string(ids_stride) + " is below the bag " +
                         std::to_string(args.bag));
  if (args.out_dtype != DType::kFloat32 && args.out_dtype != DType::kBFloat16)
    return Status::error(table + "output must be FLOAT or BFLOAT16, got " + std::string(dtype_name(args.out_dtype)));
  const int64_t out_stride = args.out_row_stride == 0 ? args.dim : args.out_row_stride;
  if (args.out_column_offset < 0 || out_stride < args.out_column_offset + args.dim)
    return Status::error(table + "output columns [" + std::to_string(args.out_column_offset) + ", " +
                         std::to_string(args.out_column_offset + args.dim) + ") do not fit a row stride of " +
                         std::to_string(out_stride));
  if (args.ids == nullptr || args.out == nullptr || (args.rows > 0 && args.table == nullptr))
    return Status::error(table + "ids, out and (for rows > 0) table must be device pointers, got null");
  if (args.format == EmbeddingFormat::kFp8E4M3 && args.rows > 0 && args.row_scales == nullptr)
    return Status::error(table + "an FP8 table needs its row scales");
  return Status::ok();
}

Status launch_embedding_bag(const EmbeddingBagArgs& args, int64_t batch, cudaStream_t stream) {
  return launch_embedding_bags(&args, 1, batch, stream);
}

Status launch_embedding_bags(const EmbeddingBagArgs* tables, int count, int64_t batch, cudaStream_t stream) {
  if (batch < 0) return Status::error("embedding bag: batch must be >= 0, got " + std::to_string(batch));
  // Groups keyed by (format, vector width): each is one kernel instantiation.
  std::vector<TableParams> f32_4, f32_1, bf16_8, bf16_4, bf16_1, fp8_8, fp8_4, fp8_1;
  for (int i = 0; i < count; ++i) {
    const EmbeddingBagArgs& args = tables[i];
    LOKA_RETURN_IF_ERROR(check_embedding_bag(args, i));
    const int vec = vector_width(args);
    const TableParams params = table_params(args, vec);
    switch (args.format) {
      case EmbeddingFormat::kFloat32: (vec == 4 ? f32_4 : f32_1).push_back(params); break;
      case EmbeddingFormat::kBFloat16: (vec == 8 ? bf16_8 : vec == 4 ? bf16_4 : bf16_1).push_back(params); break;
      case EmbeddingFormat::kFp8E4M3:
        (vec == 8 ? fp8_8 : vec == 4 ? fp8_4 : fp8_1).push_back(params);
        break;
    }
  }
  if (batch == 0) return Status::ok();
  if (!f32_4.empty()) LOKA_RETURN_IF_ERROR((launch_group<float, 4>(f32_4, batch, stream)));
  if (!f32_1.empty()) LOKA_RETURN_IF_ERROR((launch_group<float, 1>(f32_1, batch, stream)));
  if (!bf16_8.empty()) LOKA_RETURN_IF_ERROR((launch_group<__nv_bfloat16, 8>(bf16_8, batch, stream)));
  if (!bf16_4.empty()) LOKA_RETURN_IF_ERROR((launch_group<__nv_bfloat16, 4>(bf16_4, batch, stream)));
  if (!bf16_1.empty()) LOKA_RETURN_IF_ERROR((launch_group<__nv_bfloat16, 1>(bf16_1, batch, stream)));
  if (!fp8_8.empty()) LOKA_RETURN_IF_ERROR((launch_group<Fp8Code, 8>(fp8_8, batch, stream)));
  if (!fp8_4.empty()) LOKA_RETURN_IF_ERROR((launch_group<Fp8Code, 4>(fp8_4, batch, stream)));
  if (!fp8_1.empty()) LOKA_RETURN_IF_ERROR((launch_group<Fp8Code, 1>(fp8_1, batch, stream)));
  return Status::ok();
}

}  // namespace loka::cuda
