// ============================================================================
// runtime/ops/op_helpers.cc — shared checks and index math for op kernels.
// ============================================================================
#include "runtime/ops/op_helpers.h"

#include <algorithm>
#include <climits>

namespace loka::ops {

Status require_input(std::span<const Tensor> inputs, size_t index, const char* what) {
  if (index >= inputs.size() || !inputs[index].defined())
    return Status::error(std::string("missing input ") + std::to_string(index) + " (" + what + ")");
  return Status::ok();
}

Status require_float32(const Tensor& tensor, const char* what) {
  if (tensor.dtype() != DType::kFloat32)
    return Status::error(std::string(what) + " must be FLOAT, got " + std::string(dtype_name(tensor.dtype())));
  return Status::ok();
}

Status require_index_type(const Tensor& tensor, const char* what) {
  if (tensor.dtype() != DType::kInt64 && tensor.dtype() != DType::kInt32)
    return Status::error(std::string(what) + " must be INT64 or INT32, got " + std::string(dtype_name(tensor.dtype())));
  return Status::ok();
}

Result<DType> read_output_dtype(const Attributes& attributes) {
  LOKA_ASSIGN_OR_RETURN(const int64_t number, attributes.get_int("output_dtype", 1));
  // DType's values are TensorProto's.
  if (number == static_cast<int64_t>(DType::kFloat32)) return DType::kFloat32;
  if (number == static_cast<int64_t>(DType::kBFloat16)) return DType::kBFloat16;
  return Status::error("attribute 'output_dtype' must be 1 (FLOAT) or 16 (BFLOAT16), got " + std::to_string(number));
}

Result<int> normalize_axis(int64_t axis, int rank) {
  if (axis < -rank || axis >= rank)
    return Status::error("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

Result<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return Status::error("shapes " + shape_to_string(a) + " and " + shape_to_string(b) + " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> contiguous_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

std::vector<int64_t> broadcast_strides(const Shape& shape, const Shape& target) {
  const std::vector<int64_t> own = contiguous_strides(shape);
  std::vector<int64_t> strides(target.size(), 0);
  const size_t offset = target.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) strides[offset + i] = shape[i] == 1 ? 0 : own[i];
  return strides;
}

Result<std::vector<int64_t>> read_int_list(const Tensor& tensor, const char* what) {
  LOKA_RETURN_IF_ERROR(require_index_type(tensor, what));
  if (tensor.rank() > 1) return Status::error(std::string(what) + " must be 1-D, got shape " + shape_to_string(tensor.shape()));
  return tensor.to_int64s();
}

Result<std::vector<SliceWindow>> slice_windows(const Shape& shape, SliceArgs args) {
  const size_t n = args.starts.size();
  const int rank = static_cast<int>(shape.size());
  if (args.ends.size() != n)
    return Status::error("starts has " + std::to_string(n) + " entries, ends " + std::to_string(args.ends.size()));
  if (args.axes.empty())
    for (size_t i = 0; i < n; ++i) args.axes.push_back(static_cast<int64_t>(i));
  if (args.steps.empty()) args.steps.assign(n, 1);
  if (args.axes.size() != n || args.steps.size() != n)
    return Status::error("starts, ends, axes and steps must have the same length, got " + std::to_string(n) + ", " +
                         std::to_string(args.ends.size()) + ", " + std::to_string(args.axes.size()) + ", " +
                         std::to_string(args.steps.size()));
  std::vector<SliceWindow> windows(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) windows[d] = SliceWindow{0, 1, shape[d]};
  std::vector<bool> seen(shape.size(), false);
  for (size_t i = 0; i < n; ++i) {
    LOKA_ASSIGN_OR_RETURN(const int axis, normalize_axis(args.axes[i], rank));
    const size_t a = static_cast<size_t>(axis);
    if (seen[a]) return Status::error("axes repeat axis " + std::to_string(args.axes[i]));
    seen[a] = true;
    const int64_t dim = shape[a];
    const int64_t step = args.steps[i];
    if (step == 0) return Status::error("step for axis " + std::to_string(axis) + " is zero");
    // Negative bounds count from the end; then clamp to [0, dim] (step > 0) or
    // [-1, dim - 1] (step < 0). Counts are computed so that no extreme value overflows.
    int64_t start = args.starts[i], end = args.ends[i];
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    int64_t count = 0;
    if (dim == 0) {
      start = 0;
    } else if (step > 0) {
      start = std::clamp(start, int64_t{0}, dim);
      end = std::clamp(end, int64_t{0}, dim);
      count = end > start ? 1 + (end - start - 1) / step : 0;
    } else {
      start = std::clamp(start, int64_t{0}, dim - 1);
      end = std::clamp(end, int64_t{-1}, dim - 1);
      const int64_t magnitude = step == INT64_MIN ? INT64_MAX : -step;
      count = start > end ? 1 + (start - end - 1) / magnitude : 0;
    }
    windows[a] = SliceWindow{start, step, count};
  }
  return windows;
}

}  // namespace loka::ops
