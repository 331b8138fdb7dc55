// ============================================================================
// passes/pipeline.h — text pipelines that parse and print back (as MLIR).
//
//   "canonicalize,probe{batches=64,recipes=e4m3_tensor},pin-precision"
//
// Parsing checks every pass name and option against the registry and fills
// in defaults, so the printed form of a parsed pipeline is the resolved
// pipeline recorded in output models.
// ============================================================================
#pragma once

#include <map>
#include <string>
#include <vector>

#include "loka/status.h"
#include "passes/pass_registry.h"

namespace loka {

struct PipelineEntry {
  std::string pass;
  std::map<std::string, std::string> options;  ///< every declared option, defaults filled in
};

using Pipeline = std::vector<PipelineEntry>;

/// Parses and validates a pipeline string ("" is the empty pipeline).
Result<Pipeline> parse_pipeline(const std::string& text, const PassRegistry& registry);
/// Prints a pipeline; options are printed only where they differ from the default,
/// unless `with_defaults` (the resolved form).
std::string print_pipeline(const Pipeline& pipeline, const PassRegistry& registry, bool with_defaults = false);

}  // namespace loka
