// ============================================================================
// runtime/cuda/ops/reduction.cc — ReduceSum and ReduceMean on the GPU
// (kernels/cuda/reduce.h). Axes come from the attribute (older opsets) or
// an input known when the bucket is planned; keepdims only changes the
// planned output shape, which the arena already has.
// ============================================================================
#include "kernels/cuda/reduce.h"
#include "runtime/cuda/ops/op_args.h"

namespace loka::cuda {
namespace {

/// `input_since`: the first opset where axes is an input rather than an attribute.
DeviceOpFactory reduce(ReduceOp op, int input_since) {
  return [op, input_since](const DeviceOpInit& init) -> Result<DevicePlan> {
    LOKA_RETURN_IF_ERROR(require_float32(init, 0));
    std::vector<int64_t> axes;
    if (init.opset >= input_since) {
      if (has_input(init, 1)) {
      LOKA_ASSIGN_OR_RETURN(axes, planned_ints(init, 1, "axes"));
    }
    } else {
      LOKA_ASSIGN_OR_RETURN(axes, init.attributes.get_ints("axes", std::vector<int64_t>{}));
    }
    LOKA_ASSIGN_OR_RETURN(const int64_t noop, init.attributes.get_int("noop_with_empty_axes", 0));
    const Shape shape = init.inputs[0].shape;
    if (axes.empty() && noop == 0)
      for (size_t d = 0; d < shape.size(); ++d) axes.push_back(static_cast<int64_t>(d));
    return device_function([=](auto in, auto out, const DeviceRunContext& context, int) {
      return launch_reduce(op, static_cast<const float*>(in[0].data), shape, axes, static_cast<float*>(out[0].data),
                           context.stream);
    });
  };
}

}  // namespace

void register_reduction_device_ops(DeviceOpRegistry& registry) {
  registry.add("", "ReduceSum", reduce(ReduceOp::kSum, 13));
  registry.add("", "ReduceMean", reduce(ReduceOp::kMean, 18));
}

}  // namespace loka::cuda
