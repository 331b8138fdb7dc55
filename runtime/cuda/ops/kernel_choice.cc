// ============================================================================
// runtime/cuda/ops/kernel_choice.cc — parsing loka_kernel, one-time warnings.
// ============================================================================
#include "runtime/cuda/ops/kernel_choice.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <variant>
#include <vector>

#include "kernels/cuda/gemm_autotune.h"
#include "kernels/registry/kernel_plan.h"

namespace loka::cuda {

const std::string& this_tuning_device() {
  static const std::string device = [] {
    auto found = tuning_device();
    if (!found) return std::string("unknown device");
    return found->gpu + " / driver " + found->driver + " / cuBLASLt " + found->cublaslt;
  }();
  return device;
}

bool strict_kernels() {
  const char* value = std::getenv("LOKA_STRICT_KERNELS");
  return value && *value && std::string(value) != "0";
}

void warn_kernel_once(const std::string& node, const std::string& message) {
  // A Session plans each bucket: say it once.
  static std::mutex mutex;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mutex);
  if (!warned.insert(node).second) return;
  std::fprintf(stderr, "loka: node '%s': %s\n", node.c_str(), message.c_str());
}

Result<std::optional<PlannedKernelChoice>> planned_kernel_choice(const DeviceOpInit& init, int64_t rows) {
  if (!init.attributes.has("loka_kernel")) return std::optional<PlannedKernelChoice>();
  const std::string node(init.node_name);
  const auto* entries = std::get_if<std::vector<std::string>>(&init.attributes.all().at("loka_kernel"));
  if (entries == nullptr) return Status::error("attribute loka_kernel must be a list of strings");
  LOKA_ASSIGN_OR_RETURN(const std::string device, init.attributes.get_string("loka_kernel_device", std::string()));
  kernels::KernelPlan plan;
  for (const std::string& entry : *entries) {
    const size_t colon = entry.find(':');
    int64_t m = 0;
    try {
      m = colon == std::string::npos ? 0 : std::stoll(entry.substr(0, colon));
    } catch (const std::exception&) {
      m = 0;
    }
    if (m <= 0) return Status::error("attribute loka_kernel: '" + entry + "' is not <rows>:<kernel>");
    plan.nodes[node].push_back({m, entry.substr(colon + 1)});
  }
  const kernels::KernelChoice* choice = plan.choose(node, rows);
  if (choice == nullptr) return std::optional<PlannedKernelChoice>();
  return std::optional<PlannedKernelChoice>(PlannedKernelChoice{
      choice->candidate, choice->m == rows, device == kernels::kCostModelDevice || device == this_tuning_device(), device});
}

}  // namespace loka::cuda
