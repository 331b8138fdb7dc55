// ============================================================================
// passes/pass_cache_fingerprints.h — the hashes a pass-store key is made of,
// each computed once per pipeline run.
//
// Why: a key (passes/pass_cache.h) covers the model's bytes and every
// calibration file. Hashing 1.3 GB of DLRM tables anew for each stored pass
// (migrate-outliers' calibration, probe, pin-precision) cost 0.2-0.4 s each,
// most of what was left of a warm loka-opt besides load and write. The
// passes between them rarely touch the tables, so a KeyFingerprints, owned
// by the run's PassCache, remembers:
//  - each initializer's digest, keyed by the storage that holds its bytes.
//    Passes never write through an initializer's storage; they give the value
//    new data (ir::Graph::set_initializer), which is new storage, so a digest
//    stays valid exactly as long as its storage lives (held weakly: a freed
//    storage whose address is reused is never mistaken for the old one);
//  - the calibration fingerprint of each data path (the files do not change
//    during a run);
//  - the GPU line.
// The printed structure (nodes, types, metadata: kilobytes) is hashed on
// every call, so anything a pass changed besides initializer bytes shows.
// Digests are made of fixed 16 MiB chunks hashed on all usable cores and
// combined in order: the same bytes give the same digest on any machine.
// What it does not do: notice a write into an initializer's existing
// storage (a pass doing that would already break the PassManager's
// reproducer, which shares the storage with the input it saves).
// ============================================================================
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "loka/status.h"
#include "loka/tensor.h"
#include "passes/ir/graph.h"

namespace loka {

/// A 64-bit hash of `bytes`, 32 at a time in four lanes. A cache key, not a defence against
/// crafted collisions: the store confirms hits on the full key text.
uint64_t fingerprint_hash(std::string_view bytes, uint64_t seed = 0x6c6f6b61u);

class KeyFingerprints {
 public:
  /// "<hash> (<initializer bytes> bytes)" of the graph as the passes see it: its printed
  /// structure and every initializer's name and bytes.
  std::string model(const ir::Graph& graph);
  /// "<hash> (<n> files, <bytes> bytes)" of every regular file under `root` (or of `root` itself)
  /// by relative name and bytes; "none" for an empty path.
  Result<std::string> calibration(const std::filesystem::path& root);
  /// The GPU's fingerprint, or "none".
  std::string gpu();
  /// The running program's bytes, hashed once per process: a rebuilt LoKA computes its own results.
  static std::string build();

  /// Initializer bytes hashed so far by model() (what a test checks was not hashed twice).
  uint64_t initializer_bytes_hashed() const;

 private:
  struct Digest {
    std::weak_ptr<Storage> storage;
    size_t bytes = 0;
    uint64_t digest = 0;
  };
  /// The digest of `tensor`'s bytes when its storage is the one remembered, else nothing.
  std::optional<uint64_t> remembered(const Tensor& tensor) const;

  mutable std::mutex mutex_;
  std::unordered_map<const Storage*, Digest> digests_;
  std::map<std::filesystem::path, std::string> calibration_;
  std::optional<std::string> gpu_;
  uint64_t initializer_bytes_hashed_ = 0;
};

}  // namespace loka
