// ============================================================================
// passes/probe/annotations.cc — reading and writing the annotation document.
// ============================================================================
#include "passes/probe/annotations.h"

namespace loka {

Result<nlohmann::json> read_annotations(const ir::Graph& graph) {
  auto it = graph.metadata.find(kAnnotationsKey);
  if (it == graph.metadata.end())
    return nlohmann::json{{"version", kAnnotationsVersion}, {"model", nlohmann::json::object()},
                          {"nodes", nlohmann::json::object()}};
  nlohmann::json document = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded() || !document.is_object())
    return Status::error(std::string("metadata '") + kAnnotationsKey + "' is not valid JSON");
  if (document.value("version", 0) != kAnnotationsVersion)
    return Status::error(std::string("metadata '") + kAnnotationsKey + "' has version " +
                         std::to_string(document.value("version", 0)) + "; this LoKA reads version " +
                         std::to_string(kAnnotationsVersion));
  if (!document.contains("nodes") || !document["nodes"].is_object()) document["nodes"] = nlohmann::json::object();
  if (!document.contains("model") || !document["model"].is_object()) document["model"] = nlohmann::json::object();
  return document;
}

void write_annotations(ir::Graph& graph, const nlohmann::json& document) {
  graph.metadata[kAnnotationsKey] = document.dump();
}

}  // namespace loka
