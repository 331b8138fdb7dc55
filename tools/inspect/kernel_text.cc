// ============================================================================
// tools/inspect/kernel_text.cc — formatting a node's kernel choice.
// ============================================================================
#include "tools/inspect/kernel_text.h"

#include <cstdio>

namespace loka::inspect {

std::string kernel_text(const nlohmann::json& node) {
  if (!node.is_object() || !node.contains("kernel") || !node["kernel"].is_string()) return "-";
  std::string text = node["kernel"].get<std::string>();
  char buffer[64];
  if (node.contains("kernel_time_us") && node["kernel_time_us"].is_number()) {
    std::snprintf(buffer, sizeof buffer, " %.1fus", node["kernel_time_us"].get<double>());
    text += buffer;
  }
  if (node.contains("kernel_runner_up") && node["kernel_runner_up"].is_string()) {
    text += " (runner-up " + node["kernel_runner_up"].get<std::string>();
    if (node.contains("kernel_runner_up_time_us") && node["kernel_runner_up_time_us"].is_number()) {
      std::snprintf(buffer, sizeof buffer, " %.1fus", node["kernel_runner_up_time_us"].get<double>());
      text += buffer;
    }
    text += ")";
  }
  return text;
}

}  // namespace loka::inspect
