// ============================================================================
// passes/pass_cache.h — stored results of the passes that only annotate.
//
// Why: on a second `loka-opt` of the same model, Dispatch's perf DB makes the
// dispatch pass 50-500x faster, but the Probe (a calibration run per site and
// recipe) and pin-precision's measured selection ran again and took most of
// the time. Both only write the annotation document, and what they write is a
// function of their input: the model (weights and annotations included),
// the pass's options, the compile settings, the calibration data, the GPU and
// the LoKA build. So the PassManager keys a stored result by a hash of all of
// these and, on a hit, restores the metadata the pass wrote instead of
// running it.
//
// Key: a 64-bit hash over the pass name, its resolved options, the settings
// (budget, device, pins), the model (printed structure and initializer bytes), every calibration
// file (relative name and bytes), the GPU fingerprint (or "no GPU") and the
// running executable's bytes (any rebuild invalidates every entry). A hit is
// taken only when the stored key text matches in full, so a hash collision
// cannot return another model's result. The costly parts (gigabytes of
// initializers, the calibration files) are hashed once per PassCache, that is
// once per pipeline run, and an initializer again only when a pass gave it new
// data (passes/pass_cache_fingerprints.h).
// File: <dir>/<name>-<key>.json with the key text and a payload: for a pass,
// the metadata entries after it, its statistics and whether it changed the
// IR; for a measurement a pass stores itself (migrate-outliers' calibration
// run, which precedes a rewrite of weights and so cannot be restored as
// metadata), whatever JSON it chose. Written
// atomically (temp file + rename); an unreadable or stale file is a miss and
// is rewritten; failing to write is a warning, never an error.
// Where: $LOKA_PASS_CACHE if set ("off" disables), else
// $XDG_CACHE_HOME/loka/passes, else $HOME/.cache/loka/passes.
// ============================================================================
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "loka/status.h"
#include "passes/ir/graph.h"
#include "passes/pass.h"
#include "passes/pass_cache_fingerprints.h"

namespace loka {

/// What a cached pass left behind.
struct CachedPassResult {
  std::map<std::string, std::string> metadata;  ///< the graph's metadata after the pass
  std::map<std::string, double> statistics;
  bool changed = false;
};

class PassCache {
 public:
  explicit PassCache(std::filesystem::path directory)
      : directory_(std::move(directory)), fingerprints_(std::make_unique<KeyFingerprints>()) {}

  /// The identity of one run of `pass` on `graph` (the text the stored entry must match). Safe to
  /// call from several threads.
  Result<std::string> key_text(const std::string& pass, const std::map<std::string, std::string>& options,
                               const CompileSettings& settings, const ir::Graph& graph) const;

  /// The stored result for `key_text`, if a valid one exists.
  std::optional<CachedPassResult> load(const std::string& pass, const std::string& key_text) const;
  /// Stores `result` for `key_text`; the error says why it could not (callers warn and go on).
  Status store(const std::string& pass, const std::string& key_text, const CachedPassResult& result) const;

  /// Any JSON a pass stores itself under `name` (a measurement it would otherwise repeat, as
  /// migrate-outliers' calibration run), with the same keys and file rules.
  std::optional<nlohmann::json> load_payload(const std::string& name, const std::string& key_text) const;
  Status store_payload(const std::string& name, const std::string& key_text, const nlohmann::json& payload) const;

  /// The file an entry lives in.
  std::filesystem::path entry_path(const std::string& name, const std::string& key_text) const;
  const std::filesystem::path& directory() const { return directory_; }
  /// What the keys were made of so far (tests check what was hashed once).
  const KeyFingerprints& fingerprints() const { return *fingerprints_; }

 private:
  std::filesystem::path directory_;
  /// Remembered across key_text calls, which are const: the store hands passes a const PassCache.
  std::unique_ptr<KeyFingerprints> fingerprints_;
};

/// $LOKA_PASS_CACHE, else $XDG_CACHE_HOME/loka/passes, else $HOME/.cache/loka/passes; nothing
/// when $LOKA_PASS_CACHE is "off" or no home is known.
std::optional<std::filesystem::path> default_pass_cache_dir();

}  // namespace loka
