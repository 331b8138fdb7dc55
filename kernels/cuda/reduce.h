// ============================================================================
// kernels/cuda/reduce.h — ReduceSum / ReduceMean over a set of axes on the GPU.
//
// FP32 in and out, FP32 accumulation (the CPU runtime accumulates in double,
// so results agree to a few ulps of the sum of magnitudes). The output holds
// the kept dims in order, contiguous; keepdims only changes its shape, which
// is the caller's business. Mean divides the sum by the reduced count (0/0 is
// NaN for an empty reduction, as on the CPU); an empty axis list reduces
// nothing (each output is its input; ONNX's noop_with_empty_axes=0 meaning
// "all axes" is for the caller to spell out).
//
// Kept and reduced dims are coalesced separately (shape_plan.h). When the
// reduced dims form one contiguous innermost run, a warp reduces each output
// (reads coalesce along the row); otherwise one thread per output walks the
// reduced elements, and neighbouring outputs read neighbouring addresses
// (the zoo's [batch, bag, dim] -> [batch, dim] sum). Enqueue only.
// ============================================================================
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "loka/status.h"

namespace loka::cuda {

enum class ReduceOp { kSum, kMean };

/// y = reduce(x over `axes` of `shape`); axes in [-rank, rank), no repeats.
Status launch_reduce(ReduceOp op, const float* x, const std::vector<int64_t>& shape, const std::vector<int64_t>& axes,
                     float* y, cudaStream_t stream);

}  // namespace loka::cuda
