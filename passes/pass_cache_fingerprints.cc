// ============================================================================
// passes/pass_cache_fingerprints.cc — the hashes a pass-store key is made of
// (see the header).
// ============================================================================
#include "passes/pass_cache_fingerprints.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "kernels/cpu/parallel_rows.h"
#include "passes/dispatch/gpu_timer.h"
#include "passes/ir/text_format.h"
#include "runtime/file_io.h"

namespace loka {
namespace {

namespace fs = std::filesystem;

/// Bytes per independently hashed piece of an initializer: small enough that one large table
/// spreads over every core, large enough that combining the pieces costs nothing.
constexpr size_t kChunkBytes = size_t{16} << 20;

std::string_view as_chars(const std::vector<std::byte>& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

std::string_view bytes_of(const Tensor& tensor) {
  return {static_cast<const char*>(tensor.raw()), tensor.raw() ? tensor.byte_size() : 0};
}

std::string_view bytes_of(const uint64_t& word) { return {reinterpret_cast<const char*>(&word), sizeof word}; }

size_t chunk_count(size_t bytes) { return std::max<size_t>(1, (bytes + kChunkBytes - 1) / kChunkBytes); }

/// The digest of bytes whose chunks hashed to `chunks`: their hashes in order, seeded by the size.
uint64_t combine_chunks(const uint64_t* chunks, size_t count, size_t bytes) {
  return fingerprint_hash(std::string_view(reinterpret_cast<const char*>(chunks), count * sizeof(uint64_t)), bytes);
}

uint64_t hash_chunk(std::string_view bytes, size_t index) {
  return fingerprint_hash(bytes.substr(std::min(bytes.size(), index * kChunkBytes), kChunkBytes), index);
}

}  // namespace

uint64_t fingerprint_hash(std::string_view bytes, uint64_t seed) {
  constexpr uint64_t k1 = 0x9E3779B97F4A7C15ull, k2 = 0xC2B2AE3D27D4EB4Full;
  const auto mix = [](uint64_t h, uint64_t word) { return std::rotl(h ^ (word * k2), 31) * k1; };
  const auto word_at = [&bytes](size_t i) {
    uint64_t word;
    std::memcpy(&word, bytes.data() + i, 8);
    return word;
  };
  uint64_t h = seed ^ (bytes.size() * k1);
  size_t i = 0;
  // Four independent lanes of 8 bytes: one chain waits on its multiply every 8 bytes (about
  // 5 GB/s); four keep the multiplier busy.
  if (bytes.size() >= 32) {
    uint64_t lanes[4] = {h, h ^ k2, std::rotl(h, 17) ^ k1, ~h};
    for (; i + 32 <= bytes.size(); i += 32)
      for (size_t lane = 0; lane < 4; ++lane) lanes[lane] = mix(lanes[lane], word_at(i + 8 * lane));
    for (const uint64_t lane : lanes) h = mix(h, lane);
  }
  for (; i + 8 <= bytes.size(); i += 8) h = mix(h, word_at(i));
  uint64_t tail = 0;
  if (i < bytes.size()) std::memcpy(&tail, bytes.data() + i, bytes.size() - i);
  h = mix(h, tail);
  // SplitMix64's finalizer: every input bit reaches every output bit.
  h ^= h >> 30, h *= 0xBF58476D1CE4E5B9ull, h ^= h >> 27, h *= 0x94D049BB133111EBull, h ^= h >> 31;
  return h;
}

std::optional<uint64_t> KeyFingerprints::remembered(const Tensor& tensor) const {
  const auto it = digests_.find(tensor.storage().get());
  if (it == digests_.end() || it->second.bytes != tensor.byte_size()) return std::nullopt;
  // A live weak reference to this address is this very storage; an expired one is a storage
  // that was freed, whose address a new one may now have.
  if (it->second.storage.lock() != tensor.storage()) return std::nullopt;
  return it->second.digest;
}

std::string KeyFingerprints::model(const ir::Graph& graph) {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::erase_if(digests_, [](const auto& entry) { return entry.second.storage.expired(); });

  // The initializers in the graph's order, and the chunks of those whose storage is new.
  struct Entry {
    const ir::Value* value;
    std::optional<uint64_t> digest;
    size_t first_chunk = 0;
  };
  std::vector<Entry> entries;
  std::vector<std::pair<const Tensor*, size_t>> chunks;  // (tensor, chunk index) to hash
  for (const ir::Value* value : graph.values()) {
    if (!value->is_initializer()) continue;
    const Tensor& tensor = *value->initializer();
    Entry entry{value, tensor.storage() ? remembered(tensor) : std::nullopt, chunks.size()};
    if (!entry.digest)
      for (size_t c = 0; c < chunk_count(bytes_of(tensor).size()); ++c) chunks.emplace_back(&tensor, c);
    entries.push_back(entry);
  }
  // Worker w takes chunks w, w + workers, ...: tables and small initializers come in runs, and
  // interleaving spreads both over every worker.
  std::vector<uint64_t> chunk_hashes(chunks.size());
  const size_t workers = std::min(chunks.size(), cpu::usable_cores());
  cpu::parallel_rows(static_cast<int64_t>(workers), 1, [&](int64_t begin, int64_t end) {
    for (auto worker = static_cast<size_t>(begin); worker < static_cast<size_t>(end); ++worker)
      for (size_t i = worker; i < chunks.size(); i += workers)
        chunk_hashes[i] = hash_chunk(bytes_of(*chunks[i].first), chunks[i].second);
  });

  const std::string structure = ir::print_graph_structure(graph);
  uint64_t h = fingerprint_hash(structure);
  uint64_t bytes = structure.size();
  for (Entry& entry : entries) {
    const Tensor& tensor = *entry.value->initializer();
    const size_t size = bytes_of(tensor).size();
    if (!entry.digest) {
      entry.digest = combine_chunks(chunk_hashes.data() + entry.first_chunk, chunk_count(size), size);
      initializer_bytes_hashed_ += size;
      if (tensor.storage()) digests_[tensor.storage().get()] = Digest{tensor.storage(), tensor.byte_size(), *entry.digest};
    }
    h = fingerprint_hash(entry.value->name(), h);
    h = fingerprint_hash(bytes_of(*entry.digest), h);
    bytes += tensor.byte_size();
  }
  return fmt::format("{:016x} ({} bytes)", h, bytes);
}

Result<std::string> KeyFingerprints::calibration(const fs::path& root) {
  if (root.empty()) return std::string("none");
  const std::lock_guard<std::mutex> lock(mutex_);
  if (const auto it = calibration_.find(root); it != calibration_.end()) return it->second;
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
  uint64_t h = fingerprint_hash("calibration");
  uint64_t total = 0;
  const bool single_file = files.size() == 1 && files[0] == root;
  for (const fs::path& file : files) {
    LOKA_ASSIGN_OR_RETURN(const std::vector<std::byte> bytes, read_file(file));
    h = fingerprint_hash(single_file ? file.filename().string() : fs::relative(file, root).string(), h);
    h = fingerprint_hash(as_chars(bytes), h);
    total += bytes.size();
  }
  return calibration_[root] = fmt::format("{:016x} ({} files, {} bytes)", h, files.size(), total);
}

std::string KeyFingerprints::gpu() {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (!gpu_) {
    auto device = dispatch::gpu_fingerprint();
    gpu_ = device ? device->to_string() : std::string("none");
  }
  return *gpu_;
}

std::string KeyFingerprints::build() {
  static const std::string fingerprint = [] {
    auto bytes = read_file("/proc/self/exe");
    return bytes ? fmt::format("{:016x}", fingerprint_hash(as_chars(*bytes))) : std::string("unknown build");
  }();
  return fingerprint;
}

uint64_t KeyFingerprints::initializer_bytes_hashed() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return initializer_bytes_hashed_;
}

}  // namespace loka
