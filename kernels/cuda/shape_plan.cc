// ============================================================================
// kernels/cuda/shape_plan.cc — broadcasting, coalescing and widening plans.
// ============================================================================
#include "kernels/cuda/shape_plan.h"

#include <cstdlib>
#include <string>

namespace loka::cuda {

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

std::string dims_to_string(const std::vector<int64_t>& dims) {
  std::string text = "[";
  for (size_t d = 0; d < dims.size(); ++d) {
    if (d > 0) text += ',';
    text += std::to_string(dims[d]);
  }
  return text + "]";
}

Status check_shape(const std::vector<int64_t>& shape, const char* what) {
  if (shape.size() > static_cast<size_t>(kMaxRank))
    return Status::error(std::string(what) + " " + dims_to_string(shape) + " has rank " + std::to_string(shape.size()) +
                         ", above the CUDA kernels' limit of " + std::to_string(kMaxRank));
  for (int64_t dim : shape)
    if (dim < 0) return Status::error(std::string(what) + " " + dims_to_string(shape) + " has a negative dim");
  return Status::ok();
}

Result<std::vector<int64_t>> broadcast_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const size_t rank = a.size() > b.size() ? a.size() : b.size();
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Right-aligned: dim i from the end of each shape, 1 where a shape is shorter.
    const int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      return Status::error("shapes " + dims_to_string(a) + " and " + dims_to_string(b) + " do not broadcast");
    out[rank - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& shape, const std::vector<int64_t>& target) {
  const std::vector<int64_t> own = contiguous_strides(shape);
  std::vector<int64_t> strides(target.size(), 0);
  const size_t offset = target.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d) strides[offset + d] = shape[d] == 1 ? 0 : own[d];
  return strides;
}

void simplify_copy(CopyPlan& plan, const void* src, const void* dst) {
  coalesce(plan.dims);
  StridedDims<2, kMaxCopyRank>& dims = plan.dims;
  if (dims.rank == 0 || dims.element_count() == 0) return;
  const size_t inner = static_cast<size_t>(dims.rank - 1);
  if (dims.stride[0][inner] != 1 || dims.stride[1][inner] != 1) return;
  const auto src_address = reinterpret_cast<uintptr_t>(src);
  const auto dst_address = reinterpret_cast<uintptr_t>(dst);
  for (int wide = 16; wide > plan.unit_bytes; wide /= 2) {
    if (wide % plan.unit_bytes != 0) continue;
    const int64_t factor = wide / plan.unit_bytes;
    bool fits = dims.extent[inner] % factor == 0 && src_address % static_cast<uintptr_t>(wide) == 0 &&
                dst_address % static_cast<uintptr_t>(wide) == 0;
    for (size_t d = 0; fits && d < inner; ++d) fits = dims.stride[0][d] % factor == 0 && dims.stride[1][d] % factor == 0;
    if (!fits) continue;
    dims.extent[inner] /= factor;
    for (size_t d = 0; d < inner; ++d) {
      dims.stride[0][d] /= factor;
      dims.stride[1][d] /= factor;
    }
    plan.unit_bytes = wide;
    return;
  }
}

}  // namespace loka::cuda
