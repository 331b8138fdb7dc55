// ============================================================================
// runtime/cuda/device_buffer.h — owning device and pinned host allocations.
//
// Allocated when a Session plans a batch bucket, never inside a run.
// ============================================================================
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "loka/status.h"

namespace loka::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static Result<DeviceBuffer> allocate(size_t bytes);
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept : data_(std::exchange(other.data_, nullptr)), bytes_(other.bytes_) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = other.bytes_;
    }
    return *this;
  }
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void reset();
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

/// Page-locked host memory: asynchronous copies from and to it overlap.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  static Result<PinnedBuffer> allocate(size_t bytes);
  ~PinnedBuffer() { reset(); }
  PinnedBuffer(PinnedBuffer&& other) noexcept : data_(std::exchange(other.data_, nullptr)), bytes_(other.bytes_) {}
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = other.bytes_;
    }
    return *this;
  }
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void reset();
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace loka::cuda
