// ============================================================================
// passes/pass_cache.cc — stored results of the passes that only annotate (see
// the header).
// ============================================================================
#include "passes/pass_cache.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/file_io.h"

namespace loka {
namespace {

namespace fs = std::filesystem;

// v2: a four-lane hash; initializer bytes enter the model hash as per-initializer digests of
// 16 MiB chunks.
constexpr const char* kFormat = "loka pass cache v2";

std::string_view as_chars(const std::vector<std::byte>& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace

Result<std::string> PassCache::key_text(const std::string& pass, const std::map<std::string, std::string>& options,
                                        const CompileSettings& settings, const ir::Graph& graph) const {
  LOKA_ASSIGN_OR_RETURN(const std::string calibration, fingerprints_->calibration(settings.calibration_data));
  std::string text = std::string(kFormat) + "\npass " + pass + "\noptions";
  for (const auto& [name, value] : options) text += " " + name + "=" + value;
  text += "\nbudget " + settings.budget + "\ndevice " + settings.device + "\npins";
  for (const std::string& pin : settings.pin_rules) text += " " + pin;
  text += "\nmodel " + fingerprints_->model(graph);
  text += "\ncalibration " + calibration;
  text += "\ngpu " + fingerprints_->gpu();
  text += "\nbuild " + KeyFingerprints::build() + "\n";
  return text;
}

fs::path PassCache::entry_path(const std::string& name, const std::string& key_text) const {
  return directory_ / fmt::format("{}-{:016x}.json", name, fingerprint_hash(key_text));
}

std::optional<nlohmann::json> PassCache::load_payload(const std::string& name, const std::string& key_text) const {
  auto bytes = read_file(entry_path(name, key_text));
  if (!bytes) return std::nullopt;
  nlohmann::json entry = nlohmann::json::parse(as_chars(*bytes), nullptr, /*allow_exceptions=*/false);
  if (!entry.is_object() || entry.value("key", std::string()) != key_text || !entry.contains("payload"))
    return std::nullopt;
  return std::move(entry["payload"]);
}

Status PassCache::store_payload(const std::string& name, const std::string& key_text,
                                const nlohmann::json& payload) const {
  std::error_code error;
  fs::create_directories(directory_, error);
  if (error) return Status::error("cannot create " + directory_.string() + ": " + error.message());
  const nlohmann::json entry = {{"key", key_text}, {"name", name}, {"payload", payload}};
  const fs::path path = entry_path(name, key_text);
  const fs::path temporary = path.string() + fmt::format(".tmp{}", static_cast<long>(::getpid()));
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << entry.dump();
    if (!out.flush()) {
      fs::remove(temporary, error);
      return Status::error("cannot write " + temporary.string());
    }
  }
  fs::rename(temporary, path, error);  // atomic: a concurrent reader sees the old entry or the new one
  if (error) {
    fs::remove(temporary, error);
    return Status::error("cannot rename into " + path.string());
  }
  return Status::ok();
}

std::optional<CachedPassResult> PassCache::load(const std::string& pass, const std::string& key_text) const {
  const std::optional<nlohmann::json> payload = load_payload(pass, key_text);
  if (!payload || !payload->is_object() || !payload->contains("metadata") || !(*payload)["metadata"].is_object() ||
      !payload->contains("statistics") || !(*payload)["statistics"].is_object())
    return std::nullopt;
  CachedPassResult result;
  for (const auto& [name, value] : (*payload)["metadata"].items()) {
    if (!value.is_string()) return std::nullopt;
    result.metadata[name] = value.get<std::string>();
  }
  for (const auto& [name, value] : (*payload)["statistics"].items()) {
    if (!value.is_number()) return std::nullopt;
    result.statistics[name] = value.get<double>();
  }
  result.changed = payload->value("changed", false);
  return result;
}

Status PassCache::store(const std::string& pass, const std::string& key_text, const CachedPassResult& result) const {
  return store_payload(pass, key_text,
                       {{"metadata", result.metadata}, {"statistics", result.statistics}, {"changed", result.changed}});
}

std::optional<fs::path> default_pass_cache_dir() {
  if (const char* explicit_dir = std::getenv("LOKA_PASS_CACHE"); explicit_dir && *explicit_dir) {
    if (std::string(explicit_dir) == "off") return std::nullopt;
    return fs::path(explicit_dir);
  }
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache && *cache) return fs::path(cache) / "loka" / "passes";
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache" / "loka" / "passes";
  return std::nullopt;
}

}  // namespace loka
