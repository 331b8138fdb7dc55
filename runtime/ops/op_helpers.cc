// ============================================================================
// runtime/ops/op_helpers.cc — shared checks and index math for op kernels.
// ============================================================================
#include "runtime/ops/op_helpers.h"

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

}  // namespace loka::ops
