// ============================================================================
// kernels/cuda/elementwise.h — unary and broadcasting binary ops on the GPU.
//
// The float ops the model zoo runs between its GEMMs, with the CPU runtime's
// semantics (runtime/ops/elementwise.cc): FP32, BF16 and FP16 storage, FP32
// arithmetic, one rounding on store. Results match the CPU bit for bit for
// + - * /, Max, Min, comparisons, Neg, Abs, Relu, Sqrt, Reciprocal and casts;
// the transcendental ones (Exp, Log, Tanh, Erf, Sigmoid, Gelu) use CUDA's
// libdevice functions (≤ 2 ulp from the correctly rounded result); Pow runs in
// double and rounds once, as the CPU does. Composite formulas (Gelu) are
// written with explicit roundings so nvcc's FMA contraction cannot change them.
//
// Binary ops broadcast multidirectionally (ONNX/numpy) up to rank 6. The host
// coalesces the broadcast (shape_plan.h) so the common cases run index-light
// kernels: same shape and scalar operands become rank 1, "[M,N] op [N]" and
// "[M,N] op [M,1]" rank 2, and a contiguous innermost dimension moves 4
// elements per thread when aligned. Comparisons write BOOL as one byte 0/1.
// Where is not here: the zoo uses it only on INT64 shape tensors, which the
// runtime computes on the host.
//
// Launchers only enqueue work (no allocation, no synchronisation), so they can
// be captured in CUDA graphs; errors are argument errors or launch failures.
// ============================================================================
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "loka/dtype.h"
#include "loka/status.h"

namespace loka::cuda {

enum class UnaryOp {
  kIdentity,    ///< also Cast between FP32, BF16 and FP16
  kRelu,
  kSigmoid,
  kTanh,
  kErf,
  kGelu,        ///< approximate = "none": 0.5·x·(1 + erf(x/√2))
  kGeluTanh,    ///< approximate = "tanh"
  kNeg,
  kSqrt,
  kExp,
  kLog,
  kAbs,
  kReciprocal,
};

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kPow, kMax, kMin, kEqual, kLess, kGreater, kLessOrEqual, kGreaterOrEqual };

/// True for the ops whose output is BOOL.
bool is_comparison(BinaryOp op);

/// y[i] = op(x[i]) for `count` elements; x and y are FP32, BF16 or FP16 (may differ).
Status launch_unary(UnaryOp op, const void* x, DType x_dtype, void* y, DType y_dtype, int64_t count,
                    cudaStream_t stream);

/// out = a op b, broadcast to broadcast_shape(a_shape, b_shape) and written contiguously.
/// a and b share `dtype` (FP32, BF16 or FP16); out has that dtype, or BOOL for comparisons.
Status launch_binary(BinaryOp op, const void* a, const std::vector<int64_t>& a_shape, const void* b,
                     const std::vector<int64_t>& b_shape, DType dtype, void* out, cudaStream_t stream);

}  // namespace loka::cuda
