// ============================================================================
// tools/inspect/kernel_text.h — one line for a node's dispatched kernel, as
// the table and the HTML report show it: "NAME TIMEus (runner-up NAME TIMEus)".
// ============================================================================
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace loka::inspect {

/// The node's "kernel" with its time and runner-up (annotations of the dispatch pass), or "-".
std::string kernel_text(const nlohmann::json& node);

}  // namespace loka::inspect
