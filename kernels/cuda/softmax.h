// ============================================================================
// kernels/cuda/softmax.h — Softmax and LogSoftmax over one axis on the GPU.
//
// The input is viewed as [outer, n, inner] (n = the softmax axis; inner = 1
// for the last axis, which ONNX opset >= 13 defaults to; the opset < 13
// "flatten" semantics are [outer, n·inner, 1]). FP32 in and out, computed as
// the CPU runtime does (runtime/ops/normalization.cc), so the two agree to
// about an ulp: the row maximum is subtracted first (no overflow for any
// width), exp and the row sum are evaluated in double, then
//   Softmax:    y = exp(x - max) / Σ exp(x - max)
//   LogSoftmax: y = (x - max) - log(Σ exp(x - max))
// A NaN anywhere in a row makes that whole row NaN. Rows along the last axis
// up to 1024 wide take 8 lanes (up to 64 wide: attention scores), 16 (up to
// 128) or a warp, with the row held in registers, and sum in the same order
// whatever the lane count; wider rows take one 256-thread block; other axes
// take one thread per (outer, inner) pair, reading across threads
// contiguously. Enqueue only: no allocation, no synchronisation.
// ============================================================================
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "loka/status.h"

namespace loka::cuda {

/// y = (log-)softmax(x) over the middle dim of [outer, n, inner]; x and y may alias.
Status launch_softmax(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, bool log,
                      cudaStream_t stream);

}  // namespace loka::cuda
