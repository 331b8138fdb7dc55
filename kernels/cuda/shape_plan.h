// ============================================================================
// kernels/cuda/shape_plan.h — host-side index planning for the CUDA data kernels.
//
// Every data-movement kernel (copy.cu, elementwise.cu, reduce.cu) reads its
// operands through per-dimension element strides: a broadcast dimension has
// stride 0, a transposed one a permuted stride, a reversed slice a negative
// one. Before a launch these plans are simplified so the device does as
// little index arithmetic as possible:
//   - coalescing drops extent-1 dimensions and merges neighbours that are
//     contiguous in every operand ([B,13,16] + [16] becomes [B*13, 16] + [16]);
//   - widening moves a copy in larger units (2..16 bytes) when the innermost
//     dimension is contiguous in both operands and every address stays aligned.
// The CPU runtime has its own equivalents (runtime/ops/op_helpers.h); kernels/
// sits below runtime/ and cannot include them, so the minimal device-side
// versions live here. Plain C++17 (headers included by .cu files), host only.
// ============================================================================
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "loka/status.h"

namespace loka::cuda {

/// Rank limit of the op-level launchers (ONNX tensors LoKA runs on the GPU).
inline constexpr int kMaxRank = 6;
/// Rank limit of the strided-copy core: Tile splits each dim in two.
inline constexpr int kMaxCopyRank = 2 * kMaxRank;

/// Dims of a multi-operand strided iteration: extent[d] and, per operand,
/// the element stride of dim d. Outermost dim first.
template <int kOperands, int kCapacity>
struct StridedDims {
  int rank = 0;
  std::array<int64_t, kCapacity> extent{};
  std::array<std::array<int64_t, kCapacity>, kOperands> stride{};

  int64_t element_count() const {
    int64_t count = 1;
    for (int d = 0; d < rank; ++d) count *= extent[static_cast<size_t>(d)];
    return count;
  }
  /// Appends a dim (outermost first); the caller keeps rank <= kCapacity.
  void push(int64_t dim_extent, const std::array<int64_t, kOperands>& strides) {
    extent[static_cast<size_t>(rank)] = dim_extent;
    for (int k = 0; k < kOperands; ++k) stride[static_cast<size_t>(k)][static_cast<size_t>(rank)] = strides[static_cast<size_t>(k)];
    ++rank;
  }
};

/// Drops extent-1 dims and merges dim d into d+1 where every operand has
/// stride[d] == stride[d+1] * extent[d+1]. An empty iteration (some extent 0)
/// is left untouched; a scalar iteration ends with rank 0.
template <int kOperands, int kCapacity>
void coalesce(StridedDims<kOperands, kCapacity>& dims) {
  for (int d = 0; d < dims.rank; ++d)
    if (dims.extent[static_cast<size_t>(d)] == 0) return;
  StridedDims<kOperands, kCapacity> out;
  for (int d = 0; d < dims.rank; ++d) {
    const size_t du = static_cast<size_t>(d);
    if (dims.extent[du] == 1) continue;
    std::array<int64_t, kOperands> strides{};
    for (int k = 0; k < kOperands; ++k) strides[static_cast<size_t>(k)] = dims.stride[static_cast<size_t>(k)][du];
    if (out.rank > 0) {
      const size_t last = static_cast<size_t>(out.rank - 1);
      bool mergeable = true;
      for (int k = 0; k < kOperands; ++k)
        mergeable = mergeable && out.stride[static_cast<size_t>(k)][last] == strides[static_cast<size_t>(k)] * dims.extent[du];
      if (mergeable) {
        out.extent[last] *= dims.extent[du];
        for (int k = 0; k < kOperands; ++k) out.stride[static_cast<size_t>(k)][last] = strides[static_cast<size_t>(k)];
        continue;
      }
    }
    out.push(dims.extent[du], strides);
  }
  dims = out;
}

/// Row-major strides of a contiguous tensor of `shape`.
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);
/// Numpy/ONNX multidirectional broadcast of two shapes, or an error naming both.
Result<std::vector<int64_t>> broadcast_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b);
/// Strides that read a contiguous tensor of `shape` as if broadcast to `target`
/// (right-aligned; 0 along broadcast dims). `shape` must broadcast to `target`.
std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& shape, const std::vector<int64_t>& target);
/// "[2,3,4]" for messages.
std::string dims_to_string(const std::vector<int64_t>& dims);
/// Error unless every dim is >= 0 and the rank is at most kMaxRank; `what` names the tensor.
Status check_shape(const std::vector<int64_t>& shape, const char* what);

/// A strided copy dst[Σ o_d·dst_stride_d] = src[Σ o_d·src_stride_d] in units of
/// `unit_bytes`; operand 0 is src, operand 1 is dst. Strides may be negative
/// (reversed slices) or zero in src (broadcast), never zero in dst.
struct CopyPlan {
  StridedDims<2, kMaxCopyRank> dims;
  int unit_bytes = 0;
};

/// Coalesces `plan` and widens its unit to the largest of 16/8/4/2 bytes the
/// innermost dim, every stride and both base addresses allow.
void simplify_copy(CopyPlan& plan, const void* src, const void* dst);

}  // namespace loka::cuda
