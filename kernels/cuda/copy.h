// ============================================================================
// kernels/cuda/copy.h — data movement on the GPU: Transpose, Concat, Slice,
// Expand, Tile and Gather along axis 0, for any element type (by size).
//
// All but Gather are one strided copy (the CPU runtime's runtime/ops/
// index_map_copy.h, on the device): output element (o_0..o_{r-1}) reads the
// source at Σ o_d·src_stride_d, so a transpose permutes strides, a slice
// scales them by its steps (negative steps walk backwards from the start),
// Expand gives broadcast dims stride 0, and Tile splits each dim into
// [repeats, dim] with strides [0, stride]. The plan is coalesced and moved in
// the widest unit (up to 16 bytes) the layout and alignment allow
// (shape_plan.h). A transpose whose two innermost (coalesced) dims swap goes
// through shared memory so both its reads and writes coalesce, in 32×32 tiles;
// batches (32 or more) of packed matrices of up to 48 KiB that leave the tiles
// under 85% full (DHEN's and Wukong's first [B, 34, 128] token transpose: half
// of every second tile empty) are staged whole instead, one per block.
// Concat copies each input into its slice of the output: one launch per input.
//
// Slice takes normalised arguments (per dim: first index read, step ≠ 0, and
// output extent); ONNX's clamping of starts/ends belongs to the caller's plan.
// Gather rows resolve ids with an IndexPolicy (index_policy.h): kError
// zero-fills the row and sets *error_flag, kClamp clamps.
//
// Enqueue only (no allocation, no synchronisation): graph-capturable. Shapes
// are checked (rank <= 6, dims >= 0, arguments consistent) before any launch.
// ============================================================================
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cuda/index_policy.h"
#include "kernels/cuda/shape_plan.h"
#include "loka/status.h"

namespace loka::cuda {

/// The kernels a simplified plan can run on (copy_kernel_for says which; tests check the choice).
enum class CopyKernel {
  kStrided,               ///< one thread per element, coordinates by division
  kTiledTranspose,        ///< the two innermost dims swap: 32×32 tiles through shared memory
  kWholeMatrixTranspose,  ///< ≥ 32 packed matrices of ≤ 48 KiB the tiles fill < 85%: one whole matrix per block
};
/// The kernel launch_strided_copy runs for `plan` once simplified (simplify_copy).
CopyKernel copy_kernel_for(const CopyPlan& plan);

/// The core: runs `plan` (element strides in units of plan.unit_bytes, which must be
/// 1, 2, 4, 8 or 16) after simplifying it. src and dst must not overlap.
Status launch_strided_copy(const void* src, void* dst, CopyPlan plan, cudaStream_t stream);

/// dst = transpose(src, perm): dst dim d is src dim perm[d].
Status launch_transpose(const void* src, const std::vector<int64_t>& shape, const std::vector<int64_t>& perm,
                        size_t element_size, void* dst, cudaStream_t stream);

/// dst = concat(inputs, axis); every input has `shapes[i]`, equal except along `axis` (normalised).
/// `in_place` (empty, or one flag per input): inputs already in their place in dst (their
/// producer wrote them there), not copied; their pointer is not read.
Status launch_concat(const std::vector<const void*>& inputs, const std::vector<std::vector<int64_t>>& shapes, int axis,
                     size_t element_size, void* dst, cudaStream_t stream, const std::vector<bool>& in_place = {});

/// dst[o] = src[start_d + o_d·step_d for each dim d], o over `out_shape`. Every index
/// read must lie inside `shape` (checked).
Status launch_slice(const void* src, const std::vector<int64_t>& shape, const std::vector<int64_t>& starts,
                    const std::vector<int64_t>& steps, const std::vector<int64_t>& out_shape, size_t element_size,
                    void* dst, cudaStream_t stream);

/// dst = src broadcast to `out_shape` (ONNX Expand once the output shape is known).
Status launch_expand(const void* src, const std::vector<int64_t>& shape, const std::vector<int64_t>& out_shape,
                     size_t element_size, void* dst, cudaStream_t stream);

/// dst = tile(src, repeats): dim d of the output is repeats[d]·shape[d].
Status launch_tile(const void* src, const std::vector<int64_t>& shape, const std::vector<int64_t>& repeats,
                   size_t element_size, void* dst, cudaStream_t stream);

/// dst[o, i, :] = data[o, resolve(ids[i]), :] for `outer` slabs of `rows` rows of `row_bytes`
/// bytes and `count` ids: ONNX Gather on any axis (outer = the product of the dims before it;
/// on axis 0 it is 1 and the ids' shape prefixes the output's).
Status launch_gather_rows(const void* data, int64_t rows, size_t row_bytes, const void* ids, bool ids_int64,
                          int64_t count, void* dst, IndexPolicy policy, int* error_flag, cudaStream_t stream,
                          int64_t outer = 1);

}  // namespace loka::cuda
