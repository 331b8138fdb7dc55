// ============================================================================
// runtime/cuda/device_model.h — an Engine's state on the GPU, shared by its Sessions.
//
// Built once at load: the batch buckets and every value's shape in each
// (runtime/batch_shapes.h), and every initializer uploaded to device memory.
// Immutable afterwards, so any number of Sessions read it concurrently.
// ============================================================================
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/batch_shapes.h"
#include "runtime/cuda/device_buffer.h"
#include "runtime/device_backend.h"

namespace loka::cuda {

class CudaDeviceModel final : public DeviceModel {
 public:
  static Result<std::shared_ptr<const CudaDeviceModel>> create(const Engine& engine);

  int device_index() const { return device_index_; }
  const std::vector<int64_t>& buckets() const { return buckets_; }
  /// The smallest bucket holding `batch`, or an error naming the largest.
  Result<size_t> bucket_for(int64_t batch) const;
  const BucketShapes& shapes(size_t bucket) const { return shapes_[bucket]; }
  /// Device copy of constant value `id` (null for non-constants).
  void* constant(int id) const { return constant_pointers_[static_cast<size_t>(id)]; }

 private:
  int device_index_ = 0;
  std::vector<int64_t> buckets_;
  std::vector<BucketShapes> shapes_;
  DeviceBuffer constants_;               ///< every initializer, packed
  std::vector<void*> constant_pointers_;  ///< per value id
};

/// The buckets for `options`: its own list, or powers of 8 up to max_batch (16384
/// when 0), with max_batch itself last. Sorted, unique, all >= 1.
Result<std::vector<int64_t>> resolve_buckets(const EngineOptions& options);

}  // namespace loka::cuda
