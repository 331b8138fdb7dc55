// ============================================================================
// runtime/cuda/ops/quantization.cc — QuantizeLinear and ai.loka ConcatQuant to FP8 on the GPU.
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
#include <string>
#include <vector>

#include "kernels/cuda/fp8_convert.h"
#include "runtime/cuda/cuda_status.h"
#include "runtime/cuda/ops/op_args.h"

namespace loka::cuda {
namespace {

/// The host value of a constant one-element scale the kernels divide by (input `index`, named
/// `name` in errors): present, constant, finite and > 0.
Result<float> constant_scale(const DeviceOpInit& init, size_t index, const std::string& name) {
  if (!has_input(init, index) || !init.inputs[index].host.defined() || init.inputs[index].host.element_count() != 1)
    return Status::error(name + " must be a constant with one element for the CUDA kernel");
  const float scale = init.inputs[index].host.to_floats().front();
  if (!(scale > 0.0f) || !std::isfinite(scale))
    return Status::error(name + " must be finite and > 0, got " + std::to_string(scale));
  return scale;
}

Result<DevicePlan> plan_quantize_linear(const DeviceOpInit& init) {
  LOKA_RETURN_IF_ERROR(require_float32(init, 0));
  const DType to = init.outputs[0].dtype;
  if (to != DType::kFloat8E4M3FN && to != DType::kFloat8E5M2)
    return Status::error("QuantizeLinear to " + std::string(dtype_name(to)) +
                         " has no CUDA kernel (FLOAT8E4M3FN and FLOAT8E5M2 outputs do)");
  LOKA_ASSIGN_OR_RETURN(const float scale, constant_scale(init, 1, "y_scale"));
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

/// ai.loka ConcatQuant: each input's codes written straight into its slice of the output, so the
/// FP32 concatenation is never formed (4 bytes read and 1 written an element, where Concat's copy
/// and a quantize pass moved 13); each input's share is also an input_parts entry, for a session
/// that encodes it as soon as it is made.
Result<DevicePlan> plan_concat_quant(const DeviceOpInit& init) {
  if (init.inputs.size() < 2) return Status::error("needs Y_scale and at least one input");
  LOKA_ASSIGN_OR_RETURN(const float scale, constant_scale(init, 0, "Y_scale"));
  if (init.outputs[0].dtype != DType::kFloat8E4M3FN) return Status::error("the output must be FLOAT8E4M3FN");
  const Shape& out_shape = init.outputs[0].shape;
  LOKA_ASSIGN_OR_RETURN(const int64_t axis_attr, init.attributes.get_int("axis"));
  LOKA_ASSIGN_OR_RETURN(const int axis, ops::normalize_axis(axis_attr, static_cast<int>(out_shape.size())));
  const auto product = [](const Shape& shape, size_t begin) {
    int64_t p = 1;
    for (size_t d = begin; d < shape.size(); ++d) p *= shape[d];
    return p;
  };
  const int64_t row = product(out_shape, static_cast<size_t>(axis));  // codes between consecutive outer rows
  const int64_t rows = row == 0 ? 0 : element_count(out_shape) / row;
  struct Part {
    int64_t cols, offset;
    bool encoded_early;  ///< written by input_parts right after the input was made
  };
  std::vector<Part> parts;
  int64_t offset = 0;
  for (size_t i = 1; i < init.inputs.size(); ++i) {
    LOKA_RETURN_IF_ERROR(require_float32(init, i));
    const Shape& shape = init.inputs[i].shape;
    bool fits = shape.size() == out_shape.size();
    for (size_t d = 0; fits && d < shape.size(); ++d) fits = d == static_cast<size_t>(axis) || shape[d] == out_shape[d];
    if (!fits)
      return Status::error("input " + std::to_string(i) + " " + shape_to_string(shape) + " differs from the output " +
                           shape_to_string(out_shape) + " outside axis " + std::to_string(axis));
    parts.push_back({product(shape, static_cast<size_t>(axis)), offset, init.inputs[i].written_in_place});
    offset += parts.back().cols;
  }
  if (offset != row) return Status::error("the inputs do not add up to the output along the axis");
  // Input i's codes into its slice; a session may enqueue it on its own, right after input i is
  // made, so that input's FP32 buffer is free from then on (runtime/concat_placement.h).
  const auto encode = [=](size_t i, auto in, auto out, cudaStream_t stream) {
    return cuda_status(launch_quantize_e4m3_rows_into(static_cast<const float*>(in[i + 1].data), rows, parts[i].cols,
                                                      scale, static_cast<uint8_t*>(out[0].data) + parts[i].offset, row,
                                                      stream),
                       "ConcatQuant kernel");
  };
  DevicePlan plan = device_function([=](auto in, auto out, const DeviceRunContext& context, int) {
    for (size_t i = 0; i < parts.size(); ++i)
      if (!parts[i].encoded_early) LOKA_RETURN_IF_ERROR(encode(i, in, out, context.stream));
    return Status::ok();
  });
  plan.input_parts.resize(init.inputs.size());
  for (size_t i = 0; i < parts.size(); ++i)
    plan.input_parts[i + 1] = device_op([=](auto in, auto out, const DeviceRunContext& context, int) {
      return encode(i, in, out, context.stream);
    });
  return plan;
}

}  // namespace

void register_quantization_device_ops(DeviceOpRegistry& registry) {
  registry.add("", "QuantizeLinear", plan_quantize_linear);
  registry.add("ai.loka", "ConcatQuant", plan_concat_quant);
}

}  // namespace loka::cuda
