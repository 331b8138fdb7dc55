// ============================================================================
// runtime/cuda/ops/op_args.h — reading a node's arguments when planning it.
// ============================================================================
#pragma once

#include <string>
#include <vector>

#include "runtime/cuda/device_op.h"
#include "runtime/ops/op_helpers.h"

namespace loka::cuda {

/// The integer list in input `index` (Reshape targets, Slice starts, axes):
/// its contents must be known when the bucket is planned.
inline Result<std::vector<int64_t>> planned_ints(const DeviceOpInit& init, size_t index, const char* what) {
  if (index >= init.inputs.size() || !init.inputs[index].present)
    return Status::error(std::string("input ") + what + " is missing");
  if (!init.inputs[index].host.defined())
    return Status::error(std::string("input ") + what +
                         " is computed from data on the device; the CUDA backend needs it known ahead of the run");
  return ops::read_int_list(init.inputs[index].host, what);
}

inline bool has_input(const DeviceOpInit& init, size_t index) {
  return index < init.inputs.size() && init.inputs[index].present;
}

/// Error unless input `index` is present and has one of the float dtypes the
/// elementwise kernels store (FP32, BF16, FP16).
inline Status require_float_storage(const DeviceOpInit& init, size_t index) {
  if (!has_input(init, index)) return Status::error("input " + std::to_string(index) + " is missing");
  const DType dtype = init.inputs[index].dtype;
  if (dtype == DType::kFloat32 || dtype == DType::kBFloat16 || dtype == DType::kFloat16) return Status::ok();
  return Status::error("input " + std::to_string(index) + " is " + std::string(dtype_name(dtype)) +
                       "; the CUDA kernel takes FLOAT, BFLOAT16 or FLOAT16");
}

inline Status require_float32(const DeviceOpInit& init, size_t index) {
  if (!has_input(init, index)) return Status::error("input " + std::to_string(index) + " is missing");
  if (init.inputs[index].dtype == DType::kFloat32) return Status::ok();
  return Status::error("input " + std::to_string(index) + " is " + std::string(dtype_name(init.inputs[index].dtype)) +
                       "; the CUDA kernel takes FLOAT");
}

/// The dtype ai.loka QuantizedGemm's and EmbeddingBags' `output_dtype` attribute (an ONNX
/// TensorProto type) asks for: FLOAT by default, or BFLOAT16 (the float32 result rounded to
/// nearest even: BF16 activation storage); output 0 must have been planned with it.
inline Result<DType> output_dtype_attribute(const DeviceOpInit& init) {
  LOKA_ASSIGN_OR_RETURN(const DType dtype, ops::read_output_dtype(init.attributes));
  if (!init.outputs.empty() && init.outputs[0].present && init.outputs[0].dtype != dtype)
    return Status::error("output 0 is " + std::string(dtype_name(init.outputs[0].dtype)) +
                         " but attribute 'output_dtype' asks for " + std::string(dtype_name(dtype)));
  return dtype;
}

}  // namespace loka::cuda
