// ============================================================================
// passes/pass.h — the one pass contract (as XLA) and its declarative description.
//
// A pass declares its name (verb-noun, as written in pipeline strings), a
// one-line summary, its options (name, type, default, help) and the statistics
// it reports, all in one PassInfo. `run` returns true exactly when it changed
// the IR; failures are Status values, never exceptions.
// ============================================================================
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "loka/status.h"
#include "passes/ir/graph.h"

namespace loka {

enum class OptionType { kInt, kFloat, kBool, kString };

struct PassOption {
  std::string name;
  OptionType type;
  std::string default_value;
  std::string help;
  /// A string option's accepted values, checked when the pipeline is parsed (empty: any text), so
  /// a typo is refused before the passes ahead of it run.
  std::vector<std::string> choices = {};
};

struct PassInfo {
  std::string name;      ///< pipeline name, e.g. "fuse-layernorm-quant"
  std::string summary;   ///< one line for --help
  std::vector<PassOption> options;
  std::vector<std::string> statistics;  ///< counter names the pass reports
  /// The pass writes nothing but the graph's metadata (the annotation document), as a function of
  /// the model, its options, the settings, the calibration data, the GPU and the build: the
  /// PassManager may restore a stored result instead of running it (passes/pass_cache.h).
  bool result_cacheable = false;
};

/// Settings shared by every pass of one loka-opt invocation.
struct CompileSettings {
  std::filesystem::path calibration_data;  ///< --calib (may be empty)
  std::string budget = "rel_l2=0.01";      ///< --budget
  std::string device = "cpu";              ///< --device
  std::vector<std::string> pin_rules;      ///< --pin REGEX=precision
  bool show_progress = false;              ///< progress bars on stderr
};

class PassCache;

/// What a pass sees besides the graph: its option values, the shared settings,
/// the store of results and measurements (when the PassManager has one), and a
/// place to report statistics.
class PassContext {
 public:
  PassContext(const CompileSettings& settings, std::map<std::string, std::string> options,
              const PassCache* cache = nullptr)
      : settings_(settings), options_(std::move(options)), cache_(cache) {}

  const CompileSettings& settings() const { return settings_; }
  /// Where a pass may keep a measurement it would otherwise repeat (passes/pass_cache.h); null: none.
  const PassCache* cache() const { return cache_; }
  const std::map<std::string, std::string>& options() const { return options_; }
  /// Option values, already validated against the pass's PassInfo and defaulted.
  int64_t int_option(const std::string& name) const { return std::stoll(options_.at(name)); }
  double float_option(const std::string& name) const { return std::stod(options_.at(name)); }
  bool bool_option(const std::string& name) const { return options_.at(name) == "true" || options_.at(name) == "1"; }
  const std::string& string_option(const std::string& name) const { return options_.at(name); }

  void add_statistic(const std::string& name, double amount = 1) { statistics_[name] += amount; }
  const std::map<std::string, double>& statistics() const { return statistics_; }

 private:
  const CompileSettings& settings_;
  std::map<std::string, std::string> options_;
  const PassCache* cache_;
  std::map<std::string, double> statistics_;
};

class Pass {
 public:
  virtual ~Pass() = default;
  /// Runs on `graph`; true exactly when the IR changed.
  virtual Result<bool> run(ir::Graph& graph, PassContext& context) = 0;
};

using PassFactory = std::function<std::unique_ptr<Pass>()>;

}  // namespace loka
