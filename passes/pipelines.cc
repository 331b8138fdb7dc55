// ============================================================================
// passes/pipelines.cc — every built-in pass, and all ordering, in one place.
//
// Ordering constraints (one line of reason each):
//   infer-shapes first   — every later pass reads value types (sites, FLOPs, rewrites).
//   probe after shapes   — it classifies sites and counts FLOPs from shapes.
// ============================================================================
#include "passes/pipelines.h"

#include "passes/infer_shapes_pass.h"
#include "passes/pass_registry.h"
#include "passes/probe/probe_pass.h"

namespace loka {

void register_builtin_passes(PassRegistry& registry) {
  registry.add(infer_shapes_pass_info(), make_infer_shapes_pass);
  registry.add(probe_pass_info(), make_probe_pass);
}

std::string default_pipeline() { return "infer-shapes,probe"; }

}  // namespace loka
