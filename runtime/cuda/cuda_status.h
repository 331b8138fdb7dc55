// ============================================================================
// runtime/cuda/cuda_status.h — CUDA runtime errors as loka::Status.
// ============================================================================
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "loka/status.h"

namespace loka::cuda {

inline Status cuda_status(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::ok();
  return Status::error(std::string(what) + ": " + cudaGetErrorString(error));
}

}  // namespace loka::cuda

#define LOKA_CUDA_RETURN_IF_ERROR(call) LOKA_RETURN_IF_ERROR(::loka::cuda::cuda_status((call), #call))
