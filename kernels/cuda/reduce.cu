// ============================================================================
// kernels/cuda/reduce.cu — ReduceSum / ReduceMean kernels.
// ============================================================================
#include <string>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/shape_plan.h"

namespace loka::cuda {
namespace {

/// Coalesced kept dims (whose order is the output's) and reduced dims, with x strides.
struct ReduceIndex {
  int kept_rank;
  int64_t kept_extent[kMaxRank];
  int64_t kept_stride[kMaxRank];
  int reduced_rank;
  int64_t reduced_extent[kMaxRank];
  int64_t reduced_stride[kMaxRank];
};

__device__ __forceinline__ int64_t offset_of(int64_t index, int rank, const int64_t* extent, const int64_t* stride) {
  int64_t offset = 0;
  for (int d = rank - 1; d >= 0; --d) {
    offset += (index % extent[d]) * stride[d];
    index /= extent[d];
  }
  return offset;
}

/// One warp per output; the reduced dims are one contiguous innermost run of `n`.
__global__ void reduce_rows_kernel(const float* x, float* y, const ReduceIndex index, int64_t outputs, int64_t n,
                                   float divisor) {
  constexpr int kWarpsPerBlock = kThreadsPerBlock / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; o < outputs;
       o += static_cast<int64_t>(gridDim.x) * kWarpsPerBlock) {
    const float* row = x + offset_of(o, index.kept_rank, index.kept_extent, index.kept_stride);
    float sum = 0.0f;
    for (int64_t j = lane; j < n; j += 32) sum += row[j];
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, offset);
    if (lane == 0) y[o] = sum / divisor;
  }
}

/// One thread per output, walking the reduced dims in input order (the same order, so
/// the same FP32 sum, as a per-element index decomposition). The reduced offset
/// advances like an odometer instead of being divided out of j for every element;
/// a single reduced dim (the zoo's [batch, bag, dim] -> [batch, dim]) is a plain
/// strided loop the compiler unrolls, keeping several loads in flight.
__global__ void reduce_outputs_kernel(const float* x, float* y, const ReduceIndex index, int64_t outputs, int64_t n,
                                      float divisor) {
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < outputs;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float* base = x + offset_of(o, index.kept_rank, index.kept_extent, index.kept_stride);
    float sum = 0.0f;
    if (index.reduced_rank == 1) {
      const int64_t stride = index.reduced_stride[0];
#pragma unroll 4
      for (int64_t j = 0; j < n; ++j) sum += base[j * stride];
    } else {
      int64_t coordinate[kMaxRank] = {};
      int64_t offset = 0;
      for (int64_t j = 0; j < n; ++j) {
        sum += base[offset];
        for (int d = index.reduced_rank - 1; d >= 0; --d) {  // next element, innermost dim first
          offset += index.reduced_stride[d];
          if (++coordinate[d] < index.reduced_extent[d]) break;
          offset -= index.reduced_stride[d] * index.reduced_extent[d];
          coordinate[d] = 0;
        }
      }
    }
    y[o] = sum / divisor;
  }
}

}  // namespace

Status launch_reduce(ReduceOp op, const float* x, const std::vector<int64_t>& shape, const std::vector<int64_t>& axes,
                     float* y, cudaStream_t stream) {
  LOKA_RETURN_IF_ERROR(check_shape(shape, "reduce: input"));
  const int rank = static_cast<int>(shape.size());
  std::vector<bool> reduced(shape.size(), false);
  for (int64_t axis : axes) {
    const int64_t normalized = axis < 0 ? axis + rank : axis;
    if (normalized < 0 || normalized >= rank || reduced[static_cast<size_t>(normalized)])
      return Status::error("reduce: axes " + dims_to_string(axes) + " are not distinct axes of " + dims_to_string(shape));
    reduced[static_cast<size_t>(normalized)] = true;
  }
  const std::vector<int64_t> strides = contiguous_strides(shape);
  StridedDims<1, kMaxRank> kept, summed;
  for (size_t d = 0; d < shape.size(); ++d) (reduced[d] ? summed : kept).push(shape[d], {strides[d]});
  const int64_t outputs = kept.element_count(), n = summed.element_count();
  if (outputs == 0) return Status::ok();
  coalesce(kept);
  coalesce(summed);
  // Mean divides the FP32 sum once (an empty reduction gives 0/0 = NaN, as on the CPU).
  const float divisor = op == ReduceOp::kMean ? static_cast<float>(n) : 1.0f;
  ReduceIndex index{};
  index.kept_rank = kept.rank;
  index.reduced_rank = summed.rank;
  for (int d = 0; d < kept.rank; ++d) {
    index.kept_extent[d] = kept.extent[static_cast<size_t>(d)];
    index.kept_stride[d] = kept.stride[0][static_cast<size_t>(d)];
  }
  for (int d = 0; d < summed.rank; ++d) {
    index.reduced_extent[d] = summed.extent[static_cast<size_t>(d)];
    index.reduced_stride[d] = summed.stride[0][static_cast<size_t>(d)];
  }
  const bool contiguous_rows = summed.rank == 1 && summed.stride[0][0] == 1 && n >= 32;
  if (contiguous_rows)
    reduce_rows_kernel<<<blocks_for(outputs * 32), kThreadsPerBlock, 0, stream>>>(x, y, index, outputs, n, divisor);
  else
    reduce_outputs_kernel<<<blocks_for(outputs), kThreadsPerBlock, 0, stream>>>(x, y, index, outputs, n, divisor);
  return launch_status("reduce");
}

}  // namespace loka::cuda
