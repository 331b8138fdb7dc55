// ============================================================================
// runtime/cuda/device_op_registry.cc
// ============================================================================
#include "runtime/cuda/device_op.h"

namespace loka::cuda {

const DeviceOpRegistry& DeviceOpRegistry::builtin() {
  static const DeviceOpRegistry registry = [] {
    DeviceOpRegistry r;
    register_device_ops(r);
    return r;
  }();
  return registry;
}

void DeviceOpRegistry::add(std::string domain, std::string op_type, DeviceOpFactory factory) {
  entries_.push_back(Entry{std::move(domain), std::move(op_type), std::move(factory)});
}

Result<const DeviceOpFactory*> DeviceOpRegistry::find(std::string_view domain, std::string_view op_type) const {
  for (const Entry& entry : entries_)
    if (entry.domain == domain && entry.op_type == op_type) return &entry.factory;
  return Status::error("op " + std::string(domain.empty() ? "" : std::string(domain) + ".") + std::string(op_type) +
                       " has no CUDA kernel yet; run this model with --device cpu");
}

}  // namespace loka::cuda
