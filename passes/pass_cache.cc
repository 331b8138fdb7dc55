// ============================================================================
// passes/pass_cache.cc — stored results of the passes that only annotate (see
// the header).
// ============================================================================
#include "passes/pass_cache.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "passes/dispatch/gpu_timer.h"
#include "passes/ir/text_format.h"
#include "runtime/file_io.h"

namespace loka {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFormat = "loka pass cache v1";

/// A 64-bit hash of `bytes`, eight at a time (gigabytes of weights hash in about a second). A
/// cache key, not a defence against crafted collisions: hits are confirmed on the full key text.
uint64_t hash_bytes(std::string_view bytes, uint64_t seed = 0x6c6f6b61u) {
  constexpr uint64_t k1 = 0x9E3779B97F4A7C15ull, k2 = 0xC2B2AE3D27D4EB4Full;
  uint64_t h = seed ^ (bytes.size() * k1);
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes.data() + i, 8);
    h = std::rotl(h ^ (word * k2), 31) * k1;
  }
  uint64_t tail = 0;
  if (i < bytes.size()) std::memcpy(&tail, bytes.data() + i, bytes.size() - i);
  h = std::rotl(h ^ (tail * k2), 31) * k1;
  // SplitMix64's finalizer: every input bit reaches every output bit.
  h ^= h >> 30, h *= 0xBF58476D1CE4E5B9ull, h ^= h >> 27, h *= 0x94D049BB133111EBull, h ^= h >> 31;
  return h;
}

std::string_view as_chars(const std::vector<std::byte>& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

/// Hash of every regular file under `root` (or of `root` itself), by relative name and bytes.
Result<std::string> data_fingerprint(const fs::path& root) {
  if (root.empty()) return std::string("none");
  std::error_code error;
  std::vector<fs::path> files;
  if (fs::is_regular_file(root, error)) {
    files.push_back(root);
  } else {
    for (fs::recursive_directory_iterator it(root, error), end; !error && it != end; it.increment(error))
      if (it->is_regular_file()) files.push_back(it->path());
    if (error) return Status::error("cannot list calibration data " + root.string() + ": " + error.message());
  }
  std::sort(files.begin(), files.end());
  uint64_t h = hash_bytes("calibration");
  uint64_t total = 0;
  const bool single_file = files.size() == 1 && files[0] == root;
  for (const fs::path& file : files) {
    LOKA_ASSIGN_OR_RETURN(const std::vector<std::byte> bytes, read_file(file));
    h = hash_bytes(single_file ? file.filename().string() : fs::relative(file, root).string(), h);
    h = hash_bytes(as_chars(bytes), h);
    total += bytes.size();
  }
  return fmt::format("{:016x} ({} files, {} bytes)", h, files.size(), total);
}

/// Hash of the graph as the passes see it: its printed structure (nodes, attributes, types,
/// metadata) and every initializer's name and bytes, hashed in place (serializing a model with
/// gigabytes of tables to protobuf first cost 1-2 s per cached pass).
std::string graph_fingerprint(const ir::Graph& graph) {
  const std::string structure = ir::print_graph_structure(graph);
  uint64_t h = hash_bytes(structure);
  uint64_t bytes = structure.size();
  for (const ir::Value* value : graph.values()) {
    if (!value->is_initializer()) continue;
    const Tensor& tensor = *value->initializer();
    h = hash_bytes(value->name(), h);
    h = hash_bytes(std::string_view(static_cast<const char*>(tensor.raw()), tensor.byte_size()), h);
    bytes += tensor.byte_size();
  }
  return fmt::format("{:016x} ({} bytes)", h, bytes);
}

/// The running program's bytes, hashed once: a rebuilt LoKA computes its own results.
std::string build_fingerprint() {
  static const std::string fingerprint = [] {
    auto bytes = read_file("/proc/self/exe");
    return bytes ? fmt::format("{:016x}", hash_bytes(as_chars(*bytes))) : std::string("unknown build");
  }();
  return fingerprint;
}

}  // namespace

Result<std::string> PassCache::key_text(const std::string& pass, const std::map<std::string, std::string>& options,
                                        const CompileSettings& settings, const ir::Graph& graph) {
  LOKA_ASSIGN_OR_RETURN(const std::string calibration, data_fingerprint(settings.calibration_data));
  auto gpu = dispatch::gpu_fingerprint();
  std::string text = std::string(kFormat) + "\npass " + pass + "\noptions";
  for (const auto& [name, value] : options) text += " " + name + "=" + value;
  text += "\nbudget " + settings.budget + "\ndevice " + settings.device + "\npins";
  for (const std::string& pin : settings.pin_rules) text += " " + pin;
  text += "\nmodel " + graph_fingerprint(graph);
  text += "\ncalibration " + calibration;
  text += "\ngpu " + (gpu ? gpu->to_string() : std::string("none"));
  text += "\nbuild " + build_fingerprint() + "\n";
  return text;
}

fs::path PassCache::entry_path(const std::string& name, const std::string& key_text) const {
  return directory_ / fmt::format("{}-{:016x}.json", name, hash_bytes(key_text));
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
