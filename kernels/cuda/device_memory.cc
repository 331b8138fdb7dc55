// ============================================================================
// kernels/cuda/device_memory.cc — counted cudaMalloc/cudaFree.
// ============================================================================
#include "kernels/cuda/device_memory.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>

namespace loka::cuda {
namespace {

/// Sizes by pointer (cudaFree takes no size); allocations are rare (load and plan time).
struct Ledger {
  std::mutex mutex;
  std::unordered_map<void*, size_t> sizes;
  DeviceMemoryUse use;
};

Ledger& ledger() {
  static Ledger* const instance = new Ledger;  // never destroyed: buffers may be freed at exit
  return *instance;
}

}  // namespace

cudaError_t device_malloc(void** data, size_t bytes) {
  const cudaError_t error = cudaMalloc(data, bytes);
  if (error != cudaSuccess) return error;
  Ledger& l = ledger();
  const std::lock_guard<std::mutex> lock(l.mutex);
  l.sizes[*data] = bytes;
  l.use.live_bytes += bytes;
  l.use.peak_bytes = std::max(l.use.peak_bytes, l.use.live_bytes);
  return error;
}

void device_free(void* data) {
  if (data == nullptr) return;
  {
    Ledger& l = ledger();
    const std::lock_guard<std::mutex> lock(l.mutex);
    if (auto it = l.sizes.find(data); it != l.sizes.end()) {
      l.use.live_bytes -= it->second;
      l.sizes.erase(it);
    }
  }
  cudaFree(data);
}

DeviceMemoryUse device_memory_use() {
  Ledger& l = ledger();
  const std::lock_guard<std::mutex> lock(l.mutex);
  return l.use;
}

void reset_device_memory_peak() {
  Ledger& l = ledger();
  const std::lock_guard<std::mutex> lock(l.mutex);
  l.use.peak_bytes = l.use.live_bytes;
}

}  // namespace loka::cuda
