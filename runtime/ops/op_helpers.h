// ============================================================================
// runtime/ops/op_helpers.h — shared checks and index math for op kernels.
//
// Every kernel validates its inputs with these before touching memory, so an
// ill-formed model or input yields an error instead of an out-of-bounds access.
// ============================================================================
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "loka/status.h"
#include "loka/tensor.h"
#include "runtime/attributes.h"

namespace loka {
class KernelContext;
}

namespace loka::ops {

/// Error unless inputs[index] is present.
Status require_input(std::span<const Tensor> inputs, size_t index, const char* what);
/// Error unless the tensor has dtype float32.
Status require_float32(const Tensor& tensor, const char* what);
/// Error unless the tensor's dtype is one of the integer index types (int32/int64).
Status require_index_type(const Tensor& tensor, const char* what);
/// The `output_dtype` attribute of ai.loka QuantizedGemm and EmbeddingBags (a TensorProto data
/// type): FLOAT (1, the default) or BFLOAT16 (16: BF16 activation storage); any other value is an
/// error naming the attribute. The CPU and CUDA kernels, shape inference and the QDQ export read it here.
Result<DType> read_output_dtype(const Attributes& attributes);

/// ONNX Concat of `in` along `axis` into `out` (allocated from `context`): the Concat kernel's
/// body, which ai.loka ConcatQuant runs before encoding.
Status concatenate(std::span<const Tensor> in, int64_t axis, KernelContext& context, Tensor& out);

/// Axis in [-rank, rank) normalised to [0, rank), or an error naming the axis.
Result<int> normalize_axis(int64_t axis, int rank);

/// Multidirectional (numpy) broadcast of two shapes, or an error naming both.
Result<Shape> broadcast_shapes(const Shape& a, const Shape& b);
/// Strides (in elements) to read a tensor of `shape` as if broadcast to `target`
/// (0 along broadcast dims); `shape` is right-aligned against `target`.
std::vector<int64_t> broadcast_strides(const Shape& shape, const Shape& target);
/// Row-major contiguous strides.
std::vector<int64_t> contiguous_strides(const Shape& shape);

/// Values of a 1-D (or scalar) int32/int64 tensor.
Result<std::vector<int64_t>> read_int_list(const Tensor& tensor, const char* what);

/// ONNX Slice arguments (axes and steps may be empty: all axes, steps of 1).
struct SliceArgs {
  std::vector<int64_t> starts, ends, axes, steps;
};
/// What a slice reads along one axis: `count` elements from `start` by `step`.
struct SliceWindow {
  int64_t start = 0, step = 1, count = 0;
};
/// Per-axis windows of a slice of `shape` under ONNX's clamping rules (axes not
/// sliced take the whole dim); errors name the bad argument. Shared by the CPU
/// and CUDA Slice kernels so both read the same elements.
Result<std::vector<SliceWindow>> slice_windows(const Shape& shape, SliceArgs args);

}  // namespace loka::ops
