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

void DeviceOpRegistry::add(std::string domain, std::string op_type, DeviceOpFactory factory,
                           PitchedRowRule pitched_rows) {
  entries_.push_back(Entry{std::move(domain), std::move(op_type), std::move(factory), std::move(pitched_rows)});
}

const DeviceOpRegistry::Entry* DeviceOpRegistry::entry(std::string_view domain, std::string_view op_type) const {
  for (const Entry& entry : entries_)
    if (entry.domain == domain && entry.op_type == op_type) return &entry;
  return nullptr;
}

Result<const DeviceOpFactory*> DeviceOpRegistry::find(std::string_view domain, std::string_view op_type) const {
  if (const Entry* found = entry(domain, op_type)) return &found->factory;
  return Status::error("op " + std::string(domain.empty() ? "" : std::string(domain) + ".") + std::string(op_type) +
                       " has no CUDA kernel yet; run this model with --device cpu");
}

std::vector<int64_t> DeviceOpRegistry::pitched_row_widths(const PlanStep& step, const BucketShapes& shapes) const {
  if (step.outputs.empty() || step.outputs[0] == kNoValue) return {};
  const Entry* found = entry(step.domain == "ai.onnx" ? std::string_view() : std::string_view(step.domain), step.op_type);
  return found && found->pitched_rows ? found->pitched_rows(step, shapes) : std::vector<int64_t>{};
}

}  // namespace loka::cuda
