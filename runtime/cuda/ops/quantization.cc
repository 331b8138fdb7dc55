// ============================================================================
// runtime/cuda/ops/quantization.cc — QuantizeLinear to FP8 on the GPU.
//
// The form LoKA's rewrites emit (share-activation-quantize): a float32 input,
// one constant scale for the whole tensor, an E4M3FN (or E5M2) output chosen
// by a zero point of that type (or output_dtype from opset 21), saturating.
// x / scale is the exact FP32 division, as the CPU kernel and ONNX define it.
// Other forms (integer outputs, per-axis or blocked scales, saturate=0) are
// refused when planned, naming what is missing, so the caller sees it before
// any run.
// ============================================================================
#include <cmath>

#include "kernels/cuda/fp8_convert.h"
#include "runtime/cuda/cuda_status.h"
#include "runtime/cuda/ops/op_args.h"

namespace loka::cuda {
namespace {

Result<DevicePlan> plan_quantize_linear(const DeviceOpInit& init) {
  LOKA_RETURN_IF_ERROR(require_float32(init, 0));
  const DType to = init.outputs[0].dtype;
  if (to != DType::kFloat8E4M3FN && to != DType::kFloat8E5M2)
    return Status::error("QuantizeLinear to " + std::string(dtype_name(to)) +
                         " has no CUDA kernel (FLOAT8E4M3FN and FLOAT8E5M2 outputs do)");
  if (!has_input(init, 1) || !init.inputs[1].host.defined() || init.inputs[1].host.element_count() != 1)
    return Status::error("y_scale must be a constant with one element for the CUDA kernel");
  const float scale = init.inputs[1].host.to_floats().front();
  if (!(scale > 0.0f) || !std::isfinite(scale))
    return Status::error("y_scale must be finite and > 0, got " + std::to_string(scale));
  if (has_input(init, 2)) {
    const Tensor& zero_point = init.inputs[2].host;
    if (!zero_point.defined()) return Status::error("y_zero_point must be a constant for the CUDA kernel");
    for (float value : zero_point.to_floats())
      if (value != 0.0f) return Status::error("an FP8 y_zero_point must be 0");
  }
  LOKA_ASSIGN_OR_RETURN(const int64_t saturate, init.attributes.get_int("saturate", 1));
  if (saturate != 1) return Status::error("saturate=0 has no CUDA kernel (the FP8 conversion saturates)");
  const Fp8Kind kind = to == DType::kFloat8E4M3FN ? Fp8Kind::kE4M3FN : Fp8Kind::kE5M2;
  return device_function([=](auto in, auto out, const DeviceRunContext& context, int) {
    return cuda_status(launch_quantize_fp8(static_cast<const float*>(in[0].data), static_cast<uint8_t*>(out[0].data),
                                           in[0].element_count(), scale, kind, context.stream, ScaleDivision::kDivide),
                       "QuantizeLinear kernel");
  });
}

}  // namespace

void register_quantization_device_ops(DeviceOpRegistry& registry) {
  registry.add("", "QuantizeLinear", plan_quantize_linear);
}

}  // namespace loka::cuda
