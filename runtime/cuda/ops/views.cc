// ============================================================================
// runtime/cuda/ops/views.cc — ops that only reinterpret bytes.
//
// Their outputs alias their first input in the arena (or the constant they
// view); the planned shapes already say what each reshapes to.
// ============================================================================
#include "runtime/cuda/device_op.h"
#include "runtime/view_ops.h"

namespace loka::cuda {

void register_view_ops(DeviceOpRegistry& registry) {
  for (std::string_view op : kViewOpTypes)
    registry.add("", std::string(op), [](const DeviceOpInit& init) -> Result<DevicePlan> {
      if (init.inputs.empty() || init.outputs.empty() || init.inputs[0].dtype != init.outputs[0].dtype ||
          element_count(init.inputs[0].shape) != element_count(init.outputs[0].shape))
        return Status::error("a view must keep the dtype and element count");
      return device_view(0);
    });
}

}  // namespace loka::cuda
