// ============================================================================
// runtime/cuda/ops/dispatched_gemm.cc — the chosen candidate as a device op,
// with its fallbacks (runtime/cuda/ops/kernel_choice.h).
// ============================================================================
#include "runtime/cuda/ops/dispatched_gemm.h"

#include <string>

#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gemm_candidate.h"
#include "runtime/cuda/ops/kernel_choice.h"

namespace loka::cuda {
namespace {

class DispatchedGemmOp final : public DeviceOp {
 public:
  DispatchedGemmOp(std::unique_ptr<GemmKernel> kernel, GemmInputSlots slots, Shape y_shape, Shape addend_shape)
      : kernel_(std::move(kernel)), slots_(slots), y_shape_(std::move(y_shape)), addend_shape_(std::move(addend_shape)) {}
  Status enqueue(std::span<const DeviceTensor> in, std::span<const DeviceTensor> out, const DeviceRunContext& context,
                 int) const override {
    const auto input = [&](int slot) -> const void* { return slot >= 0 ? in[static_cast<size_t>(slot)].data : nullptr; };
    GemmCandidateArgs args;
    args.x = input(slots_.x);
    args.w = input(slots_.w);
    args.w_scale = static_cast<const float*>(input(slots_.w_scale));
    args.x_scale = static_cast<const float*>(input(slots_.x_scale));
    args.bias = static_cast<const float*>(input(slots_.bias));
    args.y = out[0].data;  // key.output's dtype
    args.residual = input(slots_.residual);
    args.run_scratch = context.run_scratch;
    LOKA_RETURN_IF_ERROR(kernel_->run(args, context.workspace, context.stream));
    if (slots_.addend < 0) return Status::ok();
    return launch_binary(BinaryOp::kAdd, out[0].data, y_shape_, input(slots_.addend), addend_shape_, DType::kFloat32,
                         out[0].data, context.stream);
  }

 private:
  std::unique_ptr<GemmKernel> kernel_;
  GemmInputSlots slots_;
  Shape y_shape_, addend_shape_;
};

}  // namespace

Result<std::optional<DevicePlan>> plan_dispatched_gemm(const DeviceOpInit& init, const kernels::GemmKey& key,
                                                       const kernels::GemmShape& shape, const GemmInputSlots& slots) {
  LOKA_ASSIGN_OR_RETURN(const std::optional<PlannedKernelChoice> choice, planned_kernel_choice(init, shape.rows()));
  if (!choice) return std::optional<DevicePlan>();
  const std::string node(init.node_name);
  auto parsed = kernels::parse_gemm_candidate(choice->candidate);
  if (!parsed) return fall_back(node, parsed.status().message() + ": running the default kernel", std::optional<DevicePlan>());
  kernels::GemmCandidate candidate = *parsed;
  // An algorithm index is a position in cuBLASLt's list for one problem on one device.
  if (candidate.algorithm != 0 && !choice->same_device) {
    LOKA_ASSIGN_OR_RETURN(candidate, fall_back(node,
                                               "kernels were tuned on " + choice->device + ", this is " +
                                                   this_tuning_device() + ": running " +
                                                   candidate.family_default().name() + " instead of " +
                                                   candidate.name() + " (re-run loka-opt here to re-tune)",
                                               candidate.family_default()));
  } else if (candidate.algorithm != 0 && !choice->same_rows) {
    candidate = candidate.family_default();  // another problem size: its own heuristic best
  }
  // LoKA's small-M kernel chosen at a bucket of few rows, planned here for more rows than it
  // takes: the same arithmetic through cuBLASLt's FP8 GEMM, silently (a nearest-bucket choice).
  // Where cuBLASLt refuses the shape (K or N not a multiple of 16) the fallback below warns.
  if (candidate.library == kernels::GemmLibrary::kLoka && !choice->same_rows &&
      !kernels::can_implement(candidate, key, shape).is_ok()) {
    kernels::GemmCandidate cublaslt;
    cublaslt.precision = candidate.precision;
    cublaslt.granularity = candidate.granularity;
    candidate = cublaslt;
  }
  // A static activation scale is a planning input (the quantize kernel takes it by value);
  // without a constant one the op's default path reports what is missing.
  const bool needs_static_scale = key.weight == DType::kFloat8E4M3FN &&
                                  (key.input == DType::kFloat8E4M3FN || key.activation_scale == kernels::ScaleGranularity::kTensor);
  if (needs_static_scale &&
      (slots.x_scale < 0 || !init.inputs[static_cast<size_t>(slots.x_scale)].host.defined()))
    return std::optional<DevicePlan>();
  GemmCandidatePlanInputs inputs;
  if (slots.w >= 0) inputs.host_w = &init.inputs[static_cast<size_t>(slots.w)].host;
  if (slots.w_scale >= 0) inputs.host_w_scale = &init.inputs[static_cast<size_t>(slots.w_scale)].host;
  if (slots.bias >= 0 && init.inputs[static_cast<size_t>(slots.bias)].host.defined())
    inputs.host_bias = &init.inputs[static_cast<size_t>(slots.bias)].host;
  if (slots.x_scale >= 0 && init.inputs[static_cast<size_t>(slots.x_scale)].host.defined())
    inputs.x_scale = init.inputs[static_cast<size_t>(slots.x_scale)].host.to_floats().at(0);
  auto kernel = create_gemm_kernel(candidate, key, shape, inputs, init, slots);
  if (!kernel && candidate.algorithm != 0) {
    LOKA_ASSIGN_OR_RETURN(candidate, fall_back(node, kernel.status().message() + ": running " +
                                                         candidate.family_default().name() + " instead",
                                               candidate.family_default()));
    kernel = create_gemm_kernel(candidate, key, shape, inputs, init, slots);
  }
  if (!kernel)
    return fall_back(node, "cannot run the dispatched " + candidate.name() + ": " + kernel.status().message() +
                               "; running the default kernel",
                     std::optional<DevicePlan>());
  return std::optional<DevicePlan>(gemm_kernel_plan(std::move(kernel).value(), slots, init));
}

Result<std::unique_ptr<GemmKernel>> create_gemm_kernel(const kernels::GemmCandidate& candidate,
                                                       const kernels::GemmKey& key, const kernels::GemmShape& shape,
                                                       GemmCandidatePlanInputs inputs, const DeviceOpInit& init,
                                                       const GemmInputSlots& slots) {
  // The pitch asked for output 0, unless the broadcast addend's pass reads it packed. A positional
  // algorithm (algoN, N > 0) indexes cuBLASLt's list for the packed layout it was timed with; a
  // pitched layout may list others: such a choice keeps packed rows.
  const bool may_pitch = slots.addend < 0 && candidate.algorithm == 0 && !init.outputs.empty();
  inputs.lent_run_scratch = true;  // gemm_kernel_plan asks the bucket's arena for it
  return plan_pitched_or_packed(may_pitch ? init.outputs[0].row_pitch : 0, [&](int64_t pitch) {
    inputs.y_row_pitch = pitch;
    return GemmKernel::create(candidate, key, shape, inputs);
  });
}

DevicePlan gemm_kernel_plan(std::unique_ptr<GemmKernel> kernel, const GemmInputSlots& slots, const DeviceOpInit& init) {
  Shape addend_shape;
  if (slots.addend >= 0) addend_shape = init.inputs[static_cast<size_t>(slots.addend)].shape;
  const bool pitched = kernel->output_row_pitch() != 0;
  const size_t run_scratch = kernel->run_scratch_bytes();
  return DevicePlan{std::make_unique<DispatchedGemmOp>(std::move(kernel), slots, init.outputs[0].shape, addend_shape), -1,
                    pitched, run_scratch};
}

}  // namespace loka::cuda
