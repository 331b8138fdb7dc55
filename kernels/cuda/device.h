// ============================================================================
// kernels/cuda/device.h — is a usable CUDA device present, and which one.
//
// Tests that need a GPU ask here and skip with the returned reason otherwise.
// ============================================================================
#pragma once

#include <string>

namespace loka::cuda {

/// Empty when a device is usable; otherwise why not (no driver, no device, ...).
std::string device_unavailable_reason();
/// "NVIDIA H100 80GB HBM3 (sm_90, driver 13000)" or the unavailable reason.
std::string device_description();

}  // namespace loka::cuda
