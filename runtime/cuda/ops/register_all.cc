// ============================================================================
// runtime/cuda/ops/register_all.cc — every op family with a CUDA kernel.
// ============================================================================
#include "runtime/cuda/device_op.h"

namespace loka::cuda {

void register_view_ops(DeviceOpRegistry& registry);
void register_elementwise_device_ops(DeviceOpRegistry& registry);
void register_data_movement_device_ops(DeviceOpRegistry& registry);
void register_reduction_device_ops(DeviceOpRegistry& registry);
void register_gemm_device_ops(DeviceOpRegistry& registry);
void register_normalization_device_ops(DeviceOpRegistry& registry);
void register_probe_device_ops(DeviceOpRegistry& registry);
void register_attention_device_ops(DeviceOpRegistry& registry);
void register_quantization_device_ops(DeviceOpRegistry& registry);

void register_device_ops(DeviceOpRegistry& registry) {
  register_view_ops(registry);
  register_elementwise_device_ops(registry);
  register_data_movement_device_ops(registry);
  register_reduction_device_ops(registry);
  register_gemm_device_ops(registry);
  register_normalization_device_ops(registry);
  register_probe_device_ops(registry);
  register_attention_device_ops(registry);
  register_quantization_device_ops(registry);
}

}  // namespace loka::cuda
