// ============================================================================
// passes/pipelines.h — the built-in passes and the default pipeline.
// ============================================================================
#pragma once

#include <string>

namespace loka {

class PassRegistry;

/// Registers every built-in pass (called once by PassRegistry::builtin()).
void register_builtin_passes(PassRegistry& registry);
/// The pipeline loka-opt runs when --pipeline is not given.
std::string default_pipeline();

}  // namespace loka
