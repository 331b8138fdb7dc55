// ============================================================================
// passes/dispatch/perf_db.h — the kernel performance database: measured time
// and error per (device, problem, candidate), reused across runs and models.
//
// A JSON file (default ~/.cache/loka/perfdb.json, or $LOKA_PERF_DB, or
// loka-opt's dispatch{perf_db=FILE}):
//   {"version": 1, "entries": [{"gpu", "driver", "cublaslt", "problem",
//     "candidate", "median_us", "rel_error", "samples"}, ...]}
// "problem" is GemmKey::to_string() + "|" + GemmShape::to_string() (shapes are
// bucketed: M is the batch bucket's row count). Entries are written sorted, so
// the same measurements give the same bytes. A lookup matches the device
// fingerprint exactly: entries of another GPU, driver or cuBLASLt version are
// kept in the file but never used (the caller re-tunes and says so).
// ============================================================================
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "loka/status.h"

namespace loka::dispatch {

/// What a measurement is valid for: GPU name, driver version, cuBLASLt version.
struct DeviceFingerprint {
  std::string gpu, driver, cublaslt;
  /// "NVIDIA H100 80GB HBM3 / driver 13000 / cuBLASLt 130100".
  std::string to_string() const;
  bool operator==(const DeviceFingerprint&) const = default;
  auto operator<=>(const DeviceFingerprint&) const = default;
};

/// One measurement.
struct PerfRecord {
  double median_us = 0;  ///< median of the timed runs
  double rel_error = 0;  ///< relative L2 error of the output against an FP32 GEMM on the same inputs
  int samples = 0;       ///< timed runs
  bool operator==(const PerfRecord&) const = default;
};

class PerfDb {
 public:
  /// Reads `path`; a missing file is an empty database, a malformed one an error naming it.
  static Result<PerfDb> load(const std::filesystem::path& path);
  /// Writes the database (sorted; via a temporary file renamed into place), creating directories.
  /// Entries another process saved to `path` since this one loaded it are kept (merged under an
  /// flock on PATH.lock; on the same key this database's record wins).
  Status save(const std::filesystem::path& path) const;

  std::optional<PerfRecord> find(const DeviceFingerprint& device, const std::string& problem,
                                 const std::string& candidate) const;
  /// True when no entry of `device` exists for `problem` but another device's does.
  bool problem_only_elsewhere(const DeviceFingerprint& device, const std::string& problem) const;
  void put(const DeviceFingerprint& device, const std::string& problem, const std::string& candidate,
           const PerfRecord& record);
  /// The fingerprints with entries, other than `device`.
  std::set<DeviceFingerprint> other_devices(const DeviceFingerprint& device) const;
  size_t size() const { return entries_.size(); }

 private:
  using Key = std::tuple<DeviceFingerprint, std::string, std::string>;  ///< device, problem, candidate
  std::map<Key, PerfRecord> entries_;
};

/// $LOKA_PERF_DB, else $XDG_CACHE_HOME/loka/perfdb.json, else $HOME/.cache/loka/perfdb.json.
std::filesystem::path default_perf_db_path();

/// Counters of a perf-DB timer (pass statistics and messages).
struct PerfDbUse {
  size_t hits = 0;               ///< problems answered from the database
  size_t tuned = 0;              ///< problems measured
  size_t foreign = 0;            ///< of those, problems the database had for another device only
  size_t timing_waits = 0;       ///< timings that waited for another process's (gpu_timer.cc)
};

/// A perf-DB timer's answer for one problem (GEMM or norm alike): the `offered` candidates'
/// records of `device` when the database holds any, else `measure()`'s timings, recorded and then
/// read back through the database (so the plan is the same whether measured now or read later:
/// the file keeps doubles exactly; the order is `offered`'s). `Timing` is {candidate, time_us,
/// rel_error}; a candidate has name().
template <typename Timing, typename Candidate, typename Measure>
Result<std::vector<Timing>> answer_or_measure(PerfDb& db, const DeviceFingerprint& device, const std::string& problem,
                                              const std::vector<Candidate>& offered, Measure&& measure,
                                              PerfDbUse& use) {
  const auto stored = [&] {
    std::vector<Timing> out;
    for (const Candidate& c : offered)
      if (auto record = db.find(device, problem, c.name())) out.push_back(Timing{c, record->median_us, record->rel_error});
    return out;
  };
  if (std::vector<Timing> out = stored(); !out.empty()) {
    ++use.hits;
    return out;
  }
  use.foreign += db.problem_only_elsewhere(device, problem);
  ++use.tuned;
  LOKA_ASSIGN_OR_RETURN(const std::vector<Timing> measured, measure());
  if (measured.empty()) return Status::error("no kernel candidate ran for " + problem);
  for (const Timing& t : measured) db.put(device, problem, t.candidate.name(), PerfRecord{t.time_us, t.rel_error, 1});
  return stored();
}

}  // namespace loka::dispatch
