// ============================================================================
// runtime/cuda/ops/probe_fake_quant.cc — ai.loka.ProbeFakeQuant on the GPU
// (kernels/cuda/probe_fake_quant.h): the switch the Probe's GPU path plants on
// candidate operands. Mode is data, read on the device, so the bucket's CUDA
// graph replays for every (site, recipe) without being captured again.
// ============================================================================
#include "kernels/cuda/probe_fake_quant.h"
#include "runtime/cuda/ops/op_args.h"
#include "runtime/ops/probe_fake_quant_spec.h"

namespace loka::cuda {
namespace {

class ProbeFakeQuantOp final : public DeviceOp {
 public:
  explicit ProbeFakeQuantOp(ProbeFakeQuantArgs args) : args_(args) {}
  Status enqueue(std::span<const DeviceTensor> in, std::span<const DeviceTensor> out, const DeviceRunContext& context,
                 int step) const override {
    ProbeFakeQuantArgs args = args_;
    args.x = static_cast<const float*>(in[0].data);
    args.mode = static_cast<const int32_t*>(in[1].data);
    args.y = static_cast<float*>(out[0].data);
    args.error_flag = context.error_flags ? context.error_flags + step : nullptr;
    const cudaError_t error = launch_probe_fake_quant(args, context.stream);
    if (error != cudaSuccess) return Status::error(std::string("ProbeFakeQuant launch failed: ") + cudaGetErrorString(error));
    return Status::ok();
  }
  std::string error_text(int) const override { return "Mode holds a value outside 0..3 (the operand was copied)"; }

 private:
  ProbeFakeQuantArgs args_;  ///< everything but the pointers
};

Result<DevicePlan> plan_probe_fake_quant(const DeviceOpInit& init) {
  LOKA_RETURN_IF_ERROR(require_float32(init, 0));
  if (!has_input(init, 1) || init.inputs[1].dtype != DType::kInt32 || init.inputs[1].shape.size() != 1)
    return Status::error("Mode must be a 1-D INT32 tensor");
  LOKA_ASSIGN_OR_RETURN(const ProbeFakeQuantSpec spec, parse_probe_fake_quant(init.attributes));
  if (spec.site >= init.inputs[1].shape[0])
    return Status::error("attribute 'site' = " + std::to_string(spec.site) + " is outside Mode's " +
                         std::to_string(init.inputs[1].shape[0]) + " entries");
  const Shape& shape = init.inputs[0].shape;
  ProbeFakeQuantArgs args;
  args.count = element_count(shape);
  args.cols = shape.empty() ? 1 : shape.back();
  args.k = shape.size() < 2 ? 1 : shape[shape.size() - 2];
  args.site = spec.site;
  for (size_t r = 0; r < kProbeRecipes; ++r) {
    if (spec.recipes[r].form == FakeQuantForm::kColumns && shape.size() < 2)
      return Status::error("a columns recipe needs X of rank >= 2");
    args.recipes[r] = FakeQuantRecipeArgs{static_cast<int>(spec.recipes[r].form), spec.recipes[r].e5m2, spec.recipes[r].scale};
  }
  return DevicePlan{std::make_unique<ProbeFakeQuantOp>(args), -1};
}

}  // namespace

void register_probe_device_ops(DeviceOpRegistry& registry) {
  registry.add("ai.loka", "ProbeFakeQuant", plan_probe_fake_quant);
}

}  // namespace loka::cuda
