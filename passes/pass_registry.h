// ============================================================================
// passes/pass_registry.h — every pass by name, with its declared options.
//
// Registration is explicit, in passes/pipelines.cc (the one file that knows
// every pass and their order), so nothing depends on static initialisation.
// ============================================================================
#pragma once

#include <string>
#include <vector>

#include "loka/status.h"
#include "passes/pass.h"

namespace loka {

class PassRegistry {
 public:
  /// The registry of built-in passes.
  static const PassRegistry& builtin();

  void add(PassInfo info, PassFactory factory);
  const PassInfo* find(const std::string& name) const;
  std::unique_ptr<Pass> create(const std::string& name) const;
  std::vector<const PassInfo*> all() const;

 private:
  struct Entry {
    PassInfo info;
    PassFactory factory;
  };
  std::vector<Entry> entries_;
};

}  // namespace loka
