// ============================================================================
// kernels/cuda/kernel_fit.cc — kernel_fit (see header).
// ============================================================================
#include "kernels/cuda/kernel_fit.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

namespace loka::cuda {

Result<KernelFit> kernel_fit(const void* kernel, int threads, size_t shared_bytes, const char* what) {
  static std::mutex mutex;
  static std::map<std::tuple<const void*, int, int, size_t>, KernelFit> known;
  int device = 0;
  cudaError_t error = cudaGetDevice(&device);
  if (error != cudaSuccess) return Status::error(std::string(what) + ": " + cudaGetErrorString(error));
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(kernel, device, threads, shared_bytes);
  if (const auto found = known.find(key); found != known.end()) return found->second;
  KernelFit fit;
  int optin = 0, sms = 0, per_sm = 0;
  cudaFuncAttributes attributes{};
  error = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  if (error == cudaSuccess) error = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (error == cudaSuccess) error = cudaFuncGetAttributes(&attributes, kernel);
  if (error == cudaSuccess) {
    fit.max_dynamic = static_cast<size_t>(optin) > attributes.sharedSizeBytes ? optin - attributes.sharedSizeBytes : 0;
    error = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(fit.max_dynamic));
  }
  if (error == cudaSuccess && threads > 0)
    error = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, shared_bytes);
  if (error != cudaSuccess) return Status::error(std::string(what) + ": " + cudaGetErrorString(error));
  fit.resident = static_cast<int64_t>(std::max(per_sm, 1)) * sms;
  known.emplace(key, fit);
  return fit;
}

}  // namespace loka::cuda
