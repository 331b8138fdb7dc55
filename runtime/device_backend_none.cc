// ============================================================================
// runtime/device_backend_none.cc — the device backend of a CPU-only build.
// ============================================================================
#include "runtime/device_backend.h"

namespace loka {

Result<std::shared_ptr<const DeviceModel>> create_device_model(const Engine&) {
  return Status::error("this build of LoKA has no CUDA support (nvcc was not found when it was built); use --device cpu");
}

Result<std::unique_ptr<DeviceSession>> create_device_session(const Engine&, const DeviceModel&) {
  return Status::error("this build of LoKA has no CUDA support; use --device cpu");
}

}  // namespace loka
