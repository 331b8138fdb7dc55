// ============================================================================
// passes/pass_manager.h — runs a pipeline over the IR, with debugging built in.
//
// Between passes it runs the verifier (always in tests; on by default), times
// each pass and collects its statistics, prints the IR after a named pass or
// after every pass that changed it, and — when a pass fails or breaks an
// invariant — saves the pipeline's input IR and the pipeline string so the
// failure can be reproduced with `loka-opt REPRO.ir --pipeline "$(cat REPRO.pipeline)"`.
// ============================================================================
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "loka/status.h"
#include "passes/pipeline.h"

namespace loka {

struct PassManagerOptions {
  bool verify_each = true;
  std::string print_ir_after;         ///< pass name, or empty
  bool print_ir_after_change = false;
  std::ostream* ir_stream = nullptr;  ///< where printed IR goes (stderr when null)
  std::filesystem::path reproducer_dir = std::filesystem::temp_directory_path();
  /// Where results of result_cacheable passes are stored and reused (passes/pass_cache.h);
  /// empty: every pass runs.
  std::filesystem::path cache_dir;
  std::ostream* log = nullptr;  ///< one line per reused or unstorable result (nothing when null)
};

struct PassRunRecord {
  std::string pass;
  bool changed = false;
  double seconds = 0;
  std::map<std::string, double> statistics;
  bool cached = false;  ///< restored from the pass cache instead of run
};

class PassManager {
 public:
  PassManager(const PassRegistry& registry, PassManagerOptions options)
      : registry_(registry), options_(std::move(options)) {}

  /// Runs every entry in order; stops at the first failure (after saving a reproducer).
  Result<std::vector<PassRunRecord>> run(ir::Graph& graph, const Pipeline& pipeline, const CompileSettings& settings);

 private:
  /// Runs `pass`, or restores its stored result when its PassInfo allows and the cache has one.
  Result<bool> run_or_restore(Pass& pass, const PipelineEntry& entry, ir::Graph& graph, PassContext& context,
                              bool& cached);
  Status save_reproducer(const ir::Graph& input, const Pipeline& pipeline, const Status& failure) const;

  const PassRegistry& registry_;
  PassManagerOptions options_;
};

}  // namespace loka
