// ============================================================================
// kernels/cuda/device_memory.h — LoKA's own device allocations, counted.
//
// The device memory a process holds is LoKA's allocations (weights, arenas,
// workspaces, kernels' scratch) plus what the CUDA context and the libraries
// keep for themselves (module code loaded on first launch, cuDNN's compiled
// kernels). PyTorch's allocator reports only the first kind; counting LoKA's
// allocations here gives the figure that compares with it. Every long-lived
// allocation of the runtime and of its kernels goes through these two calls.
// ============================================================================
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

namespace loka::cuda {

/// The alignment of every buffer carved out of one allocation (workspaces, scratch, arenas):
/// what cuBLASLt and vectorized kernels want.
inline constexpr size_t kDeviceAlignment = 256;
/// `bytes` rounded up to kDeviceAlignment: the offset of the buffer that follows.
constexpr size_t device_aligned(size_t bytes) {
  return (bytes + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment;
}

/// cudaMalloc, counted while it lives.
cudaError_t device_malloc(void** data, size_t bytes);
/// cudaFree of a device_malloc'd pointer (null: nothing).
void device_free(void* data);

struct DeviceMemoryUse {
  size_t live_bytes = 0;  ///< allocated now
  size_t peak_bytes = 0;  ///< the most allocated at once since the last reset_device_memory_peak()
};
DeviceMemoryUse device_memory_use();
/// Starts a new peak from what is allocated now.
void reset_device_memory_peak();

}  // namespace loka::cuda
