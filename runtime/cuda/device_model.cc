// ============================================================================
// runtime/cuda/device_model.cc
// ============================================================================
#include "runtime/cuda/device_model.h"

#include <algorithm>
#include <cstring>

#include "runtime/arena_plan.h"
#include "runtime/cuda/cuda_status.h"
#include "runtime/execution_plan.h"

namespace loka::cuda {

Result<std::vector<int64_t>> resolve_buckets(const EngineOptions& options) {
  std::vector<int64_t> buckets = options.batch_buckets;
  const int64_t max_batch = options.max_batch > 0 ? options.max_batch
                            : buckets.empty()     ? 16384
                                                  : *std::max_element(buckets.begin(), buckets.end());
  if (buckets.empty())
    for (int64_t b = 1; b < max_batch; b *= 8) buckets.push_back(b);
  buckets.push_back(max_batch);
  for (int64_t b : buckets)
    if (b < 1) return Status::error("batch bucket " + std::to_string(b) + " must be >= 1");
  std::sort(buckets.begin(), buckets.end());
  buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());
  while (!buckets.empty() && buckets.back() > max_batch) buckets.pop_back();
  return buckets;
}

Result<size_t> CudaDeviceModel::bucket_for(int64_t batch) const {
  for (size_t i = 0; i < buckets_.size(); ++i)
    if (buckets_[i] >= batch) return i;
  return Status::error("batch " + std::to_string(batch) + " exceeds the engine's largest batch bucket (" +
                       std::to_string(buckets_.back()) + "); raise EngineOptions::max_batch");
}

Result<std::shared_ptr<const CudaDeviceModel>> CudaDeviceModel::create(const Engine& engine) {
  auto model = std::make_shared<CudaDeviceModel>();
  const EngineOptions& options = engine.options();
  int devices = 0;
  LOKA_RETURN_IF_ERROR(cuda_status(cudaGetDeviceCount(&devices), "--device cuda: no usable CUDA device"));
  if (options.device_index < 0 || options.device_index >= devices)
    return Status::error("--device cuda: device index " + std::to_string(options.device_index) + " but " +
                         std::to_string(devices) + " device(s) present");
  model->device_index_ = options.device_index;
  LOKA_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device_index));
  LOKA_ASSIGN_OR_RETURN(model->buckets_, resolve_buckets(options));
  LOKA_ASSIGN_OR_RETURN(BatchShapeModel shapes, BatchShapeModel::trace(engine));
  for (int64_t bucket : model->buckets_) {
    LOKA_ASSIGN_OR_RETURN(BucketShapes at, shapes.at(bucket));
    model->shapes_.push_back(std::move(at));
  }

  // Every initializer in one allocation, each 256-byte aligned.
  const ExecutionPlan& plan = engine.plan();
  const size_t count = plan.values().size();
  std::vector<size_t> offsets(count, 0);
  size_t total = 0;
  for (size_t v = 0; v < count; ++v) {
    if (!plan.values()[v].is_constant) continue;
    offsets[v] = total;
    total += (plan.constant(static_cast<int>(v)).byte_size() + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
  }
  LOKA_ASSIGN_OR_RETURN(model->constants_, DeviceBuffer::allocate(std::max<size_t>(total, 1)));
  model->constant_pointers_.assign(count, nullptr);
  for (size_t v = 0; v < count; ++v) {
    if (!plan.values()[v].is_constant) continue;
    const Tensor& tensor = plan.constant(static_cast<int>(v));
    void* device = static_cast<std::byte*>(model->constants_.data()) + offsets[v];
    model->constant_pointers_[v] = device;
    if (tensor.byte_size() > 0)
      LOKA_CUDA_RETURN_IF_ERROR(cudaMemcpy(device, tensor.raw(), tensor.byte_size(), cudaMemcpyHostToDevice));
  }
  return std::shared_ptr<const CudaDeviceModel>(std::move(model));
}

}  // namespace loka::cuda
