// ============================================================================
// runtime/ops/register_all.cc — registers every op family.
// ============================================================================
#include "runtime/ops/register_all.h"

namespace loka {

void register_all_ops(OpRegistry& registry) {
  register_elementwise_ops(registry);
  register_matmul_ops(registry);
  register_normalization_ops(registry);
  register_reduction_ops(registry);
  register_shape_ops(registry);
  register_data_movement_ops(registry);
  register_quantization_ops(registry);
  register_loka_ops(registry);
  register_probe_ops(registry);
  register_attention_ops(registry);
}

}  // namespace loka
