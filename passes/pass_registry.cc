// ============================================================================
// passes/pass_registry.cc — lookup of passes by name.
// ============================================================================
#include "passes/pass_registry.h"

#include "passes/pipelines.h"

namespace loka {

const PassRegistry& PassRegistry::builtin() {
  static const PassRegistry registry = [] {
    PassRegistry built;
    register_builtin_passes(built);
    return built;
  }();
  return registry;
}

void PassRegistry::add(PassInfo info, PassFactory factory) {
  entries_.push_back(Entry{std::move(info), std::move(factory)});
}

const PassInfo* PassRegistry::find(const std::string& name) const {
  for (const auto& entry : entries_)
    if (entry.info.name == name) return &entry.info;
  return nullptr;
}

std::unique_ptr<Pass> PassRegistry::create(const std::string& name) const {
  for (const auto& entry : entries_)
    if (entry.info.name == name) return entry.factory();
  return nullptr;
}

std::vector<const PassInfo*> PassRegistry::all() const {
  std::vector<const PassInfo*> infos;
  for (const auto& entry : entries_) infos.push_back(&entry.info);
  return infos;
}

}  // namespace loka
