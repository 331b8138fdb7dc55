// ============================================================================
// passes/dispatch/perf_db.cc — reading and writing the perf DB file.
// ============================================================================
#include "passes/dispatch/perf_db.h"

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>

#include "passes/dispatch/file_lock.h"

namespace loka::dispatch {

using nlohmann::json;

std::string DeviceFingerprint::to_string() const {
  return gpu + " / driver " + driver + " / cuBLASLt " + cublaslt;
}

Result<PerfDb> PerfDb::load(const std::filesystem::path& path) {
  PerfDb db;
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return db;
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error(path.string() + ": cannot read the perf DB");
  std::stringstream text;
  text << in.rdbuf();
  const json document = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  const std::string where = path.string() + ": perf DB: ";
  if (document.is_discarded() || !document.is_object()) return Status::error(where + "not a JSON object");
  if (document.value("version", 0) != 1) return Status::error(where + "unknown version (expected 1)");
  if (!document.contains("entries") || !document["entries"].is_array()) return Status::error(where + "no \"entries\" list");
  size_t index = 0;
  for (const json& entry : document["entries"]) {
    const auto text_field = [&](const char* name) -> Result<std::string> {
      if (!entry.is_object() || !entry.contains(name) || !entry[name].is_string())
        return Status::error(where + "entry " + std::to_string(index) + " lacks string \"" + name + "\"");
      return entry[name].get<std::string>();
    };
    const auto number_field = [&](const char* name) -> Result<double> {
      if (!entry.contains(name) || !entry[name].is_number())
        return Status::error(where + "entry " + std::to_string(index) + " lacks number \"" + name + "\"");
      return entry[name].get<double>();
    };
    DeviceFingerprint device;
    LOKA_ASSIGN_OR_RETURN(device.gpu, text_field("gpu"));
    LOKA_ASSIGN_OR_RETURN(device.driver, text_field("driver"));
    LOKA_ASSIGN_OR_RETURN(device.cublaslt, text_field("cublaslt"));
    LOKA_ASSIGN_OR_RETURN(const std::string problem, text_field("problem"));
    LOKA_ASSIGN_OR_RETURN(const std::string candidate, text_field("candidate"));
    PerfRecord record;
    LOKA_ASSIGN_OR_RETURN(record.median_us, number_field("median_us"));
    LOKA_ASSIGN_OR_RETURN(record.rel_error, number_field("rel_error"));
    LOKA_ASSIGN_OR_RETURN(const double samples, number_field("samples"));
    record.samples = static_cast<int>(samples);
    if (!(record.median_us >= 0) || !(record.rel_error >= 0))
      return Status::error(where + "entry " + std::to_string(index) + " has a negative or NaN time or error");
    db.entries_[Key{device, problem, candidate}] = record;
    ++index;
  }
  return db;
}

Status PerfDb::save(const std::filesystem::path& path) const {
  std::error_code error;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), error);
  // Several loka-opt runs may tune at once (the benchmark optimizes every model in parallel): each
  // loaded the file when it started, so writing only its own entries would drop the others'. Under
  // the lock, entries saved since then are merged in (this run's own measurements win).
  const FileLock lock(path.string() + ".lock");
  std::map<Key, PerfRecord> merged = entries_;
  if (Result<PerfDb> on_disk = load(path)) merged.insert(on_disk->entries_.begin(), on_disk->entries_.end());
  json entries = json::array();
  for (const auto& [key, record] : merged) {
    const auto& [device, problem, candidate] = key;
    entries.push_back({{"gpu", device.gpu}, {"driver", device.driver}, {"cublaslt", device.cublaslt},
                       {"problem", problem}, {"candidate", candidate}, {"median_us", record.median_us},
                       {"rel_error", record.rel_error}, {"samples", record.samples}});
  }
  const json document = {{"version", 1}, {"entries", std::move(entries)}};
  // A temporary file renamed into place: a concurrent reader never sees half a file.
  const std::filesystem::path temporary = path.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) return Status::error(path.string() + ": cannot write the perf DB");
    out << document.dump(1) << "\n";
    if (!out) return Status::error(path.string() + ": writing the perf DB failed");
  }
  std::filesystem::rename(temporary, path, error);
  if (error) return Status::error(path.string() + ": cannot replace the perf DB: " + error.message());
  return Status::ok();
}

std::optional<PerfRecord> PerfDb::find(const DeviceFingerprint& device, const std::string& problem,
                                       const std::string& candidate) const {
  const auto it = entries_.find(Key{device, problem, candidate});
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

bool PerfDb::problem_only_elsewhere(const DeviceFingerprint& device, const std::string& problem) const {
  bool elsewhere = false;
  for (const auto& [key, record] : entries_) {
    if (std::get<1>(key) != problem) continue;
    if (std::get<0>(key) == device) return false;
    elsewhere = true;
  }
  return elsewhere;
}

void PerfDb::put(const DeviceFingerprint& device, const std::string& problem, const std::string& candidate,
                 const PerfRecord& record) {
  entries_[Key{device, problem, candidate}] = record;
}

std::set<DeviceFingerprint> PerfDb::other_devices(const DeviceFingerprint& device) const {
  std::set<DeviceFingerprint> others;
  for (const auto& [key, record] : entries_)
    if (!(std::get<0>(key) == device)) others.insert(std::get<0>(key));
  return others;
}

std::filesystem::path default_perf_db_path() {
  if (const char* explicit_path = std::getenv("LOKA_PERF_DB"); explicit_path && *explicit_path) return explicit_path;
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache && *cache)
    return std::filesystem::path(cache) / "loka" / "perfdb.json";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::filesystem::path(home) / ".cache" / "loka" / "perfdb.json";
  return std::filesystem::path(".loka-perfdb.json");
}

}  // namespace loka::dispatch
