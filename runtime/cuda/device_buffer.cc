// ============================================================================
// runtime/cuda/device_buffer.cc
// ============================================================================
#include "runtime/cuda/device_buffer.h"

#include "kernels/cuda/device_memory.h"
#include "runtime/cuda/cuda_status.h"

namespace loka::cuda {

Result<DeviceBuffer> DeviceBuffer::allocate(size_t bytes) {
  DeviceBuffer buffer;
  if (bytes == 0) return buffer;
  LOKA_RETURN_IF_ERROR(cuda_status(device_malloc(&buffer.data_, bytes),
                                   ("allocating " + std::to_string(bytes) + " device bytes").c_str()));
  buffer.bytes_ = bytes;
  return buffer;
}

void DeviceBuffer::reset() {
  device_free(data_);
  data_ = nullptr;
  bytes_ = 0;
}

Result<PinnedBuffer> PinnedBuffer::allocate(size_t bytes) {
  PinnedBuffer buffer;
  if (bytes == 0) return buffer;
  LOKA_RETURN_IF_ERROR(cuda_status(cudaMallocHost(&buffer.data_, bytes),
                                   ("allocating " + std::to_string(bytes) + " pinned host bytes").c_str()));
  buffer.bytes_ = bytes;
  return buffer;
}

void PinnedBuffer::reset() {
  if (data_) cudaFreeHost(data_);
  data_ = nullptr;
  bytes_ = 0;
}

}  // namespace loka::cuda
