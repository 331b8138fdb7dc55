// ============================================================================
// runtime/cuda/ops/register_all.cc — every op family with a CUDA kernel.
// ============================================================================
#include "runtime/cuda/device_op.h"

namespace loka::cuda {

void register_view_ops(DeviceOpRegistry& registry);

void register_device_ops(DeviceOpRegistry& registry) { register_view_ops(registry); }

}  // namespace loka::cuda
