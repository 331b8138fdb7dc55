// ============================================================================
// kernels/cuda/device.cc — CUDA device discovery.
// ============================================================================
#include "kernels/cuda/device.h"

#include <cuda_runtime_api.h>

namespace loka::cuda {

std::string device_unavailable_reason() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) return std::string("no usable CUDA device: ") + cudaGetErrorString(error);
  if (count == 0) return "no CUDA device on this machine";
  return {};
}

std::string device_description() {
  if (std::string reason = device_unavailable_reason(); !reason.empty()) return reason;
  cudaDeviceProp properties{};
  if (cudaGetDeviceProperties(&properties, 0) != cudaSuccess) return "device 0 did not answer";
  int driver = 0;
  cudaDriverGetVersion(&driver);
  return std::string(properties.name) + " (sm_" + std::to_string(properties.major * 10 + properties.minor) +
         ", driver " + std::to_string(driver) + ")";
}

}  // namespace loka::cuda
