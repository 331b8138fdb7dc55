// ============================================================================
// kernels/cuda/copy.cu — the strided-copy core, the whole-matrix and tiled
// transposes, the ops expressed through them, and row gathers.
//
// The strided copy turns each linear index into coordinates by dividing by the
// (coalesced) extents: with FastDivmod and 32-bit offsets whenever the plan
// fits (fast_divmod.cuh), since a 64-bit division per dim per element kept it
// far below bandwidth.
// ============================================================================
#include <algorithm>
#include <string>

#include "kernels/cuda/copy.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/fast_divmod.cuh"

namespace loka::cuda {
namespace {

/// The unsigned type that moves kBytes at once (aligned to kBytes).
template <int kBytes>
struct UnitOf;
template <>
struct UnitOf<1> { using type = uint8_t; };
template <>
struct UnitOf<2> { using type = uint16_t; };
template <>
struct UnitOf<4> { using type = uint32_t; };
template <>
struct UnitOf<8> { using type = uint2; };
template <>
struct UnitOf<16> { using type = uint4; };

/// Index arithmetic of the strided copy: FastDivmod and 32-bit offsets when every
/// element index and every offset fits (nearly all copies), 64-bit division beyond.
struct Index32 {
  using Divider = FastDivmod;
  using Linear = uint32_t;
  using Offset = int32_t;
};
struct Index64 {
  using Divider = Divmod64;
  using Linear = int64_t;
  using Offset = int64_t;
};

template <typename Index>
struct CopyIndex {
  int rank;
  typename Index::Divider extent[kMaxCopyRank];
  typename Index::Offset src_stride[kMaxCopyRank];
  typename Index::Offset dst_stride[kMaxCopyRank];
};

template <typename Unit, typename Index>
__global__ void strided_copy_kernel(const Unit* src, Unit* dst, const __grid_constant__ CopyIndex<Index> index,
                                    typename Index::Linear count) {
  using Linear = typename Index::Linear;
  using Offset = typename Index::Offset;
  for (Linear i = blockIdx.x * static_cast<Linear>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<Linear>(gridDim.x) * blockDim.x) {
    Linear rest = i;
    Offset from = 0, to = 0;
    for (int d = index.rank - 1; d > 0; --d) {
      Linear coordinate;
      rest = index.extent[d].divmod(rest, coordinate);
      from += static_cast<Offset>(coordinate) * index.src_stride[d];
      to += static_cast<Offset>(coordinate) * index.dst_stride[d];
    }
    from += static_cast<Offset>(rest) * index.src_stride[0];  // rest < extent[0]: no division
    to += static_cast<Offset>(rest) * index.dst_stride[0];
    dst[to] = src[from];
  }
}

constexpr int kTile = 32;
/// The most blocks a grid's y or z dimension takes.
constexpr int64_t kGridYZLimit = 65535;

constexpr int kTileRows = 8;

/// 32×32 tiles across `extent` elements, the last one ragged.
int64_t tiles_across(int64_t extent) { return (extent + kTile - 1) / kTile; }

/// dst[b, p, q] = src[b, q, p] through a shared tile: p is contiguous in src, q in dst.
/// Batches beyond gridDim.z (65535 at most) are looped over.
template <typename Unit>
__global__ void transpose_tiled_kernel(const Unit* src, Unit* dst, int64_t p_extent, int64_t q_extent,
                                       int64_t src_q_stride, int64_t dst_p_stride, int64_t src_batch_stride,
                                       int64_t dst_batch_stride, int64_t batches) {
  __shared__ Unit tile[kTile][kTile + 1];  // +1: column reads hit distinct banks
  const int64_t p0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int64_t q0 = static_cast<int64_t>(blockIdx.y) * kTile;
  for (int64_t b = blockIdx.z; b < batches; b += gridDim.z) {
    const Unit* in = src + b * src_batch_stride;
    Unit* out = dst + b * dst_batch_stride;
    if (b != blockIdx.z) __syncthreads();  // the previous batch's tile has been read out
    for (int k = 0; k < kTile; k += kTileRows) {
      const int64_t p = p0 + threadIdx.x, q = q0 + threadIdx.y + k;
      if (p < p_extent && q < q_extent) tile[threadIdx.y + k][threadIdx.x] = in[p + q * src_q_stride];
    }
    __syncthreads();
    for (int k = 0; k < kTile; k += kTileRows) {
      const int64_t p = p0 + threadIdx.y + k, q = q0 + threadIdx.x;
      if (p < p_extent && q < q_extent) out[p * dst_p_stride + q] = tile[threadIdx.x][threadIdx.y + k];
    }
  }
}

/// Shared memory a whole-matrix transpose block may take: the default 48 KiB cap, so no opt-in.
constexpr int64_t kWholeMatrixBytes = 48 * 1024;
/// The fewest matrices the whole-matrix kernel takes: it runs one block per matrix, where the tiles
/// spread even a single matrix over several blocks.
constexpr int64_t kWholeMatrixMinBatches = 32;

/// dst[b] = src[b]ᵀ for packed [q_extent, p_extent] matrices (p contiguous in src), one matrix
/// per block at a time, staged whole in shared memory with an odd row pitch (column reads fall
/// in distinct banks). Both sides move as one contiguous run per matrix, where the 32×32 tiles
/// lose a tile's tail at every matrix edge: at DHEN's [34, 128] half of each second tile.
template <typename Unit>
__global__ void transpose_whole_kernel(const Unit* src, Unit* dst, FastDivmod by_p, FastDivmod by_q, int pitch,
                                       int64_t batches) {
  extern __shared__ float4 whole_raw[];
  Unit* const tile = reinterpret_cast<Unit*>(whole_raw);
  const uint32_t count = by_p.divisor * by_q.divisor;
  for (int64_t b = blockIdx.x; b < batches; b += gridDim.x) {
    const Unit* in = src + b * count;
    Unit* out = dst + b * count;
    if (b != blockIdx.x) __syncthreads();  // the previous matrix has been read out
#pragma unroll 4
    for (uint32_t i = threadIdx.x; i < count; i += blockDim.x) {
      uint32_t p;
      const uint32_t q = by_p.divmod(i, p);
      tile[q * pitch + p] = in[i];
    }
    __syncthreads();
#pragma unroll 4
    for (uint32_t j = threadIdx.x; j < count; j += blockDim.x) {
      uint32_t q;
      const uint32_t p = by_q.divmod(j, q);
      out[j] = tile[q * pitch + p];
    }
  }
}

/// The row pitch of a whole-matrix tile: p_extent, made odd.
int64_t whole_matrix_pitch(int64_t p_extent) { return p_extent | 1; }

/// Shared memory staging one [q_extent, p_extent] matrix of `unit_bytes` elements at that pitch.
int64_t whole_matrix_shared_bytes(int64_t p_extent, int64_t q_extent, int64_t unit_bytes) {
  return q_extent * whole_matrix_pitch(p_extent) * unit_bytes;
}

/// The share of the 32×32 tiles' slots a [q_extent, p_extent] matrix fills.
double tile_fill(int64_t p_extent, int64_t q_extent) {
  return static_cast<double>(p_extent * q_extent) /
         static_cast<double>(tiles_across(p_extent) * kTile * tiles_across(q_extent) * kTile);
}

/// Whether a simplified plan transposes a batch of packed matrices that the tiles would fill
/// badly, each small enough to stage whole: "swap the two innermost dims" with both sides packed
/// (a matrix, and a batch of them, is one contiguous run in src and in dst), at least
/// kWholeMatrixMinBatches of them, tiles under 85% full. Where
/// they fill, tiles are faster (H200, 2026-11-27, FP32, batch 4096, against a copy of the
/// bytes): [34, 128] whole 58 us (70%) against 88 us (46%) in tiles; [64, 128] whole 121 us
/// (58%), in tiles 103 us (69%).
bool is_whole_matrix_transpose(const CopyPlan& plan) {
  const auto& dims = plan.dims;
  if (dims.rank != 3 || dims.extent[0] < kWholeMatrixMinBatches) return false;
  const int64_t p_extent = dims.extent[1], q_extent = dims.extent[2], count = p_extent * q_extent;
  const bool packed = dims.stride[0][1] == 1 && dims.stride[0][2] == p_extent && dims.stride[1][2] == 1 &&
                      dims.stride[1][1] == q_extent && dims.stride[0][0] == count && dims.stride[1][0] == count;
  return packed && p_extent > 1 && q_extent > 1 && tile_fill(p_extent, q_extent) < 0.85 &&
         whole_matrix_shared_bytes(p_extent, q_extent, plan.unit_bytes) <= kWholeMatrixBytes;
}

/// Whether a simplified plan is "swap the two innermost dims" (with at most one batch
/// dim, any count) and fits the tiled kernel's grid.
bool is_tiled_transpose(const CopyPlan& plan) {
  const auto& dims = plan.dims;
  if (dims.rank < 2 || dims.rank > 3) return false;
  const size_t q = static_cast<size_t>(dims.rank - 1), p = q - 1;
  return dims.stride[1][q] == 1 && dims.stride[0][p] == 1 && dims.stride[0][q] != 1 &&
         tiles_across(dims.extent[q]) <= kGridYZLimit;
}

/// Whether every element index and every partial offset of `plan` stays below 2^31.
bool fits_index32(const CopyPlan& plan) {
  constexpr int64_t kLimit = (int64_t{1} << 31) - 1;
  const auto& dims = plan.dims;
  if (dims.element_count() > kLimit) return false;
  for (int k = 0; k < 2; ++k) {
    int64_t reach = 0;  // the largest |offset| any partial sum can take
    for (int d = 0; d < dims.rank; ++d) {
      const int64_t stride = dims.stride[static_cast<size_t>(k)][static_cast<size_t>(d)];
      reach += (dims.extent[static_cast<size_t>(d)] - 1) * (stride < 0 ? -stride : stride);
      if (reach > kLimit) return false;
    }
  }
  return true;
}

template <typename Unit, typename Index>
void launch_strided(const Unit* from, Unit* to, const StridedDims<2, kMaxCopyRank>& dims, int64_t count,
                    cudaStream_t stream) {
  CopyIndex<Index> index{};
  index.rank = dims.rank;
  for (int d = 0; d < dims.rank; ++d) {
    index.extent[d] = typename Index::Divider(static_cast<typename Index::Linear>(dims.extent[static_cast<size_t>(d)]));
    index.src_stride[d] = static_cast<typename Index::Offset>(dims.stride[0][static_cast<size_t>(d)]);
    index.dst_stride[d] = static_cast<typename Index::Offset>(dims.stride[1][static_cast<size_t>(d)]);
  }
  strided_copy_kernel<Unit, Index><<<blocks_for(count), kThreadsPerBlock, 0, stream>>>(
      from, to, index, static_cast<typename Index::Linear>(count));
}

template <typename Unit>
void launch_copy_kernel(const void* src, void* dst, const CopyPlan& plan, cudaStream_t stream) {
  const auto* from = static_cast<const Unit*>(src);
  auto* to = static_cast<Unit*>(dst);
  const auto& dims = plan.dims;
  const CopyKernel kernel = copy_kernel_for(plan);
  if (kernel == CopyKernel::kWholeMatrixTranspose) {  // dims: [batches, p, q], p contiguous in src
    const int64_t batches = dims.extent[0];
    const auto shared = static_cast<size_t>(whole_matrix_shared_bytes(dims.extent[1], dims.extent[2], sizeof(Unit)));
    // At most kGridYZLimit blocks, as the tiled kernel's z: each walks its share of the matrices
    // (so the batch-65536 tests run the loop and its barrier too).
    transpose_whole_kernel<Unit><<<static_cast<unsigned>(std::min(batches, kGridYZLimit)), kThreadsPerBlock, shared,
                                   stream>>>(
        from, to, FastDivmod(static_cast<uint32_t>(dims.extent[1])), FastDivmod(static_cast<uint32_t>(dims.extent[2])),
        static_cast<int>(whole_matrix_pitch(dims.extent[1])), batches);
    return;
  }
  if (kernel == CopyKernel::kTiledTranspose) {
    const size_t q = static_cast<size_t>(dims.rank - 1), p = q - 1;
    const bool batched = dims.rank == 3;
    const int64_t batches = batched ? dims.extent[0] : 1;
    const dim3 grid(static_cast<unsigned>(tiles_across(dims.extent[p])), static_cast<unsigned>(tiles_across(dims.extent[q])),
                    static_cast<unsigned>(std::min(batches, kGridYZLimit)));
    transpose_tiled_kernel<Unit><<<grid, dim3(kTile, kTileRows), 0, stream>>>(
        from, to, dims.extent[p], dims.extent[q], dims.stride[0][q], dims.stride[1][p], batched ? dims.stride[0][0] : 0,
        batched ? dims.stride[1][0] : 0, batches);
    return;
  }
  const int64_t count = dims.element_count();
  if (fits_index32(plan)) launch_strided<Unit, Index32>(from, to, dims, count, stream);
  else launch_strided<Unit, Index64>(from, to, dims, count, stream);
}

template <typename Unit>
__global__ void gather_rows_kernel(const Unit* data, int64_t rows, int64_t units_per_row, const void* ids,
                                   bool ids_int64, int64_t count, Unit* dst, IndexPolicy policy, int* error_flag,
                                   int64_t outer) {
  const int64_t per_slab = count * units_per_row;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < outer * per_slab;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t slab = i / per_slab, within = i % per_slab;
    const int64_t k = within / units_per_row, unit = within % units_per_row;
    const int64_t id = ids_int64 ? static_cast<const int64_t*>(ids)[k] : static_cast<const int32_t*>(ids)[k];
    const int64_t row = resolve_index(id, rows, policy);
    if (row < 0) {
      if (error_flag != nullptr) *error_flag = 1;
      dst[i] = Unit{};
    } else {
      dst[i] = data[(slab * rows + row) * units_per_row + unit];
    }
  }
}

Status check_element_size(size_t element_size, const char* op) {
  if (element_size == 1 || element_size == 2 || element_size == 4 || element_size == 8 || element_size == 16)
    return Status::ok();
  return Status::error(std::string(op) + ": element size " + std::to_string(element_size) +
                       " is not 1, 2, 4, 8 or 16 bytes");
}

/// A plan over `out_shape` writing dst contiguously; src strides filled by the caller.
CopyPlan contiguous_output_plan(const std::vector<int64_t>& out_shape, size_t element_size) {
  CopyPlan plan;
  plan.unit_bytes = static_cast<int>(element_size);
  const std::vector<int64_t> dst_strides = contiguous_strides(out_shape);
  for (size_t d = 0; d < out_shape.size(); ++d) plan.dims.push(out_shape[d], {0, dst_strides[d]});
  return plan;
}

}  // namespace

CopyKernel copy_kernel_for(const CopyPlan& plan) {
  if (is_whole_matrix_transpose(plan)) return CopyKernel::kWholeMatrixTranspose;
  if (is_tiled_transpose(plan)) return CopyKernel::kTiledTranspose;
  return CopyKernel::kStrided;
}

Status launch_strided_copy(const void* src, void* dst, CopyPlan plan, cudaStream_t stream) {
  LOKA_RETURN_IF_ERROR(check_element_size(static_cast<size_t>(plan.unit_bytes), "strided copy"));
  if (plan.dims.element_count() == 0) return Status::ok();
  simplify_copy(plan, src, dst);
  switch (plan.unit_bytes) {
    case 1: launch_copy_kernel<UnitOf<1>::type>(src, dst, plan, stream); break;
    case 2: launch_copy_kernel<UnitOf<2>::type>(src, dst, plan, stream); break;
    case 4: launch_copy_kernel<UnitOf<4>::type>(src, dst, plan, stream); break;
    case 8: launch_copy_kernel<UnitOf<8>::type>(src, dst, plan, stream); break;
    default: launch_copy_kernel<UnitOf<16>::type>(src, dst, plan, stream); break;
  }
  return launch_status("strided copy");
}

Status launch_transpose(const void* src, const std::vector<int64_t>& shape, const std::vector<int64_t>& perm,
                        size_t element_size, void* dst, cudaStream_t stream) {
  LOKA_RETURN_IF_ERROR(check_shape(shape, "transpose: input"));
  LOKA_RETURN_IF_ERROR(check_element_size(element_size, "transpose"));
  std::vector<bool> seen(shape.size(), false);
  bool valid = perm.size() == shape.size();
  for (size_t d = 0; valid && d < perm.size(); ++d) {
    valid = perm[d] >= 0 && perm[d] < static_cast<int64_t>(shape.size()) && !seen[static_cast<size_t>(perm[d])];
    if (valid) seen[static_cast<size_t>(perm[d])] = true;
  }
  if (!valid)
    return Status::error("transpose: perm " + dims_to_string(perm) + " is not a permutation of the axes of " +
                         dims_to_string(shape));
  const std::vector<int64_t> src_strides = contiguous_strides(shape);
  std::vector<int64_t> out_shape(shape.size());
  for (size_t d = 0; d < perm.size(); ++d) out_shape[d] = shape[static_cast<size_t>(perm[d])];
  CopyPlan plan = contiguous_output_plan(out_shape, element_size);
  for (size_t d = 0; d < perm.size(); ++d) plan.dims.stride[0][d] = src_strides[static_cast<size_t>(perm[d])];
  return launch_strided_copy(src, dst, plan, stream);
}

Status launch_concat(const std::vector<const void*>& inputs, const std::vector<std::vector<int64_t>>& shapes, int axis,
                     size_t element_size, void* dst, cudaStream_t stream, const std::vector<bool>& in_place) {
  LOKA_RETURN_IF_ERROR(check_element_size(element_size, "concat"));
  if (inputs.size() != shapes.size() || shapes.empty())
    return Status::error("concat: " + std::to_string(inputs.size()) + " inputs with " + std::to_string(shapes.size()) +
                         " shapes; need one shape per input and at least one input");
  if (!in_place.empty() && in_place.size() != inputs.size())
    return Status::error("concat: " + std::to_string(in_place.size()) + " in-place flags for " +
                         std::to_string(inputs.size()) + " inputs");
  std::vector<int64_t> out_shape = shapes[0];
  LOKA_RETURN_IF_ERROR(check_shape(out_shape, "concat: input 0"));
  if (axis < 0 || axis >= static_cast<int>(out_shape.size()))
    return Status::error("concat: axis " + std::to_string(axis) + " is outside the rank of " + dims_to_string(out_shape));
  const size_t a = static_cast<size_t>(axis);
  for (size_t i = 1; i < shapes.size(); ++i) {
    bool compatible = shapes[i].size() == out_shape.size();
    for (size_t d = 0; compatible && d < out_shape.size(); ++d) compatible = d == a || shapes[i][d] == out_shape[d];
    if (!compatible || shapes[i][a] < 0)
      return Status::error("concat: input " + std::to_string(i) + " " + dims_to_string(shapes[i]) +
                           " differs from input 0 " + dims_to_string(shapes[0]) + " outside axis " + std::to_string(axis));
    out_shape[a] += shapes[i][a];
  }
  const std::vector<int64_t> dst_strides = contiguous_strides(out_shape);
  int64_t offset = 0;  // along the axis
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<int64_t> src_strides = contiguous_strides(shapes[i]);
    CopyPlan plan;
    plan.unit_bytes = static_cast<int>(element_size);
    for (size_t d = 0; d < out_shape.size(); ++d) plan.dims.push(shapes[i][d], {src_strides[d], dst_strides[d]});
    char* slice = static_cast<char*>(dst) + offset * dst_strides[a] * static_cast<int64_t>(element_size);
    offset += shapes[i][a];
    if (!in_place.empty() && in_place[i]) continue;
    LOKA_RETURN_IF_ERROR(launch_strided_copy(inputs[i], slice, plan, stream));
  }
  return Status::ok();
}

Status launch_slice(const void* src, const std::vector<int64_t>& shape, const std::vector<int64_t>& starts,
                    const std::vector<int64_t>& steps, const std::vector<int64_t>& out_shape, size_t element_size,
                    void* dst, cudaStream_t stream) {
  LOKA_RETURN_IF_ERROR(check_shape(shape, "slice: input"));
  LOKA_RETURN_IF_ERROR(check_shape(out_shape, "slice: output"));
  LOKA_RETURN_IF_ERROR(check_element_size(element_size, "slice"));
  if (starts.size() != shape.size() || steps.size() != shape.size() || out_shape.size() != shape.size())
    return Status::error("slice: starts, steps and output shape need one entry per dim of " + dims_to_string(shape));
  const std::vector<int64_t> in_strides = contiguous_strides(shape);
  CopyPlan plan = contiguous_output_plan(out_shape, element_size);
  int64_t base = 0;
  bool empty = false;
  for (size_t d = 0; d < shape.size(); ++d) {
    empty = empty || out_shape[d] == 0;
    const int64_t last = starts[d] + (out_shape[d] - 1) * steps[d];
    if (out_shape[d] > 0 && (steps[d] == 0 || starts[d] < 0 || starts[d] >= shape[d] || last < 0 || last >= shape[d]))
      return Status::error("slice: dim " + std::to_string(d) + " reads " + std::to_string(out_shape[d]) +
                           " elements from " + std::to_string(starts[d]) + " in steps of " + std::to_string(steps[d]) +
                           ", outside [0, " + std::to_string(shape[d]) + ")");
    base += starts[d] * in_strides[d];
    plan.dims.stride[0][d] = in_strides[d] * steps[d];
  }
  if (empty) return Status::ok();
  return launch_strided_copy(static_cast<const char*>(src) + base * static_cast<int64_t>(element_size), dst, plan,
                             stream);
}

Status launch_expand(const void* src, const std::vector<int64_t>& shape, const std::vector<int64_t>& out_shape,
                     size_t element_size, void* dst, cudaStream_t stream) {
  LOKA_RETURN_IF_ERROR(check_shape(shape, "expand: input"));
  LOKA_RETURN_IF_ERROR(check_shape(out_shape, "expand: output"));
  LOKA_RETURN_IF_ERROR(check_element_size(element_size, "expand"));
  auto broadcast = broadcast_shape(shape, out_shape);
  if (!broadcast || *broadcast != out_shape)
    return Status::error("expand: " + dims_to_string(shape) + " does not broadcast to " + dims_to_string(out_shape));
  const std::vector<int64_t> src_strides = broadcast_strides(shape, out_shape);
  CopyPlan plan = contiguous_output_plan(out_shape, element_size);
  for (size_t d = 0; d < out_shape.size(); ++d) plan.dims.stride[0][d] = src_strides[d];
  return launch_strided_copy(src, dst, plan, stream);
}

Status launch_tile(const void* src, const std::vector<int64_t>& shape, const std::vector<int64_t>& repeats,
                   size_t element_size, void* dst, cudaStream_t stream) {
  LOKA_RETURN_IF_ERROR(check_shape(shape, "tile: input"));
  LOKA_RETURN_IF_ERROR(check_element_size(element_size, "tile"));
  if (repeats.size() != shape.size())
    return Status::error("tile: repeats " + dims_to_string(repeats) + " need one entry per dim of " + dims_to_string(shape));
  const std::vector<int64_t> src_strides = contiguous_strides(shape);
  // Output dim d (repeats·dim elements) is the pair [repeats, dim]: row-major, so dst stays contiguous.
  std::vector<int64_t> split_shape;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (repeats[d] < 0) return Status::error("tile: repeats " + dims_to_string(repeats) + " has a negative entry");
    split_shape.push_back(repeats[d]);
    split_shape.push_back(shape[d]);
  }
  CopyPlan plan = contiguous_output_plan(split_shape, element_size);
  for (size_t d = 0; d < shape.size(); ++d) plan.dims.stride[0][2 * d + 1] = src_strides[d];
  return launch_strided_copy(src, dst, plan, stream);
}

Status launch_gather_rows(const void* data, int64_t rows, size_t row_bytes, const void* ids, bool ids_int64,
                          int64_t count, void* dst, IndexPolicy policy, int* error_flag, cudaStream_t stream,
                          int64_t outer) {
  if (rows < 0 || count < 0 || outer < 0)
    return Status::error("gather: rows, id count and outer count must be >= 0, got " + std::to_string(rows) + ", " +
                         std::to_string(count) + " and " + std::to_string(outer));
  if (count == 0 || row_bytes == 0 || outer == 0) return Status::ok();
  size_t unit = 16;
  while (unit > 1 && (row_bytes % unit != 0 || !is_aligned(data, unit) || !is_aligned(dst, unit))) unit /= 2;
  const auto units_per_row = static_cast<int64_t>(row_bytes / unit);
  const unsigned blocks = blocks_for(outer * count * units_per_row);
  const auto run = [&](auto zero) {
    using Unit = decltype(zero);
    gather_rows_kernel<Unit><<<blocks, kThreadsPerBlock, 0, stream>>>(static_cast<const Unit*>(data), rows,
                                                                      units_per_row, ids, ids_int64, count,
                                                                      static_cast<Unit*>(dst), policy, error_flag, outer);
  };
  switch (unit) {
    case 16: run(uint4{}); break;
    case 8: run(uint2{}); break;
    case 4: run(uint32_t{}); break;
    case 2: run(uint16_t{}); break;
    default: run(uint8_t{}); break;
  }
  return launch_status("gather");
}

}  // namespace loka::cuda
