// ============================================================================
// runtime/op_registry.cc — lookup of kernel factories by op, domain and opset.
// ============================================================================
#include <algorithm>
#include <cstring>
#include <new>

#include "runtime/buffer_pool.h"
#include "runtime/op_kernel.h"
#include "runtime/ops/register_all.h"

namespace loka {

const OpRegistry& OpRegistry::builtin() {
  static const OpRegistry registry = [] {
    OpRegistry built;
    register_all_ops(built);
    return built;
  }();
  return registry;
}

void OpRegistry::add(std::string domain, std::string op_type, int min_opset, int max_opset, KernelFactory factory) {
  entries_.push_back(Entry{std::move(domain), std::move(op_type), min_opset, max_opset, std::move(factory)});
}

Result<KernelFactory> OpRegistry::find(std::string_view domain, std::string_view op_type, int opset) const {
  bool op_known = false;
  for (const auto& entry : entries_) {
    if (entry.domain != domain || entry.op_type != op_type) continue;
    op_known = true;
    if (opset >= entry.min_opset && opset <= entry.max_opset) return entry.factory;
  }
  const std::string where = "'" + std::string(op_type) + "' of domain '" +
                            std::string(domain.empty() ? "ai.onnx" : domain) + "' at opset " + std::to_string(opset);
  if (op_known) return Status::error("unsupported opset: LoKA implements " + where + " only for other opsets");
  return Status::error("unsupported op " + where);
}

std::vector<std::string> OpRegistry::op_names() const {
  std::vector<std::string> names;
  for (const auto& entry : entries_) {
    std::string name = entry.domain.empty() ? entry.op_type : entry.domain + "::" + entry.op_type;
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  return names;
}

Result<Tensor> KernelContext::allocate(DType dtype, const Shape& shape) {
  LOKA_ASSIGN_OR_RETURN(const int64_t count, checked_element_count(shape));
  const size_t bytes = static_cast<size_t>(count) * dtype_size(dtype);
  // A valid but enormous shape must fail as a Status, never as an exception
  // escaping into the host program.
  try {
    if (pool_ == nullptr) return Tensor::zeros(dtype, shape);
    return Tensor::on_storage(dtype, shape, pool_->acquire(bytes));
  } catch (const std::bad_alloc&) {
    return Status::error("out of memory allocating " + std::to_string(bytes) + " bytes for a tensor of shape " +
                         shape_to_string(shape));
  }
}

Result<Tensor> KernelContext::allocate_zeros(DType dtype, const Shape& shape) {
  LOKA_ASSIGN_OR_RETURN(Tensor tensor, allocate(dtype, shape));
  if (tensor.byte_size()) std::memset(tensor.raw(), 0, tensor.byte_size());
  return tensor;
}

}  // namespace loka
