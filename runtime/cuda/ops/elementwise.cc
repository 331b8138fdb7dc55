// ============================================================================
// runtime/cuda/ops/elementwise.cc — unary, Cast, binary and Softmax on the GPU
// (kernels/cuda/elementwise.h, softmax.h), with the CPU runtime's semantics.
// ============================================================================
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/softmax.h"
#include "runtime/cuda/ops/op_args.h"

namespace loka::cuda {
namespace {

DeviceOpFactory unary(UnaryOp op) {
  return [op](const DeviceOpInit& init) -> Result<DevicePlan> {
    LOKA_RETURN_IF_ERROR(require_float_storage(init, 0));
    return device_function([op](auto in, auto out, const DeviceRunContext& context, int) {
      return launch_unary(op, in[0].data, in[0].dtype, out[0].data, out[0].dtype, out[0].element_count(),
                          context.stream);
    });
  };
}

Result<DevicePlan> plan_cast(const DeviceOpInit& init) {
  LOKA_RETURN_IF_ERROR(require_float_storage(init, 0));
  const DType to = init.outputs[0].dtype;
  if (to != DType::kFloat32 && to != DType::kBFloat16 && to != DType::kFloat16)
    return Status::error("Cast to " + std::string(dtype_name(to)) + " has no CUDA kernel yet");
  return unary(UnaryOp::kIdentity)(init);
}

Result<DevicePlan> plan_gelu(const DeviceOpInit& init) {
  LOKA_ASSIGN_OR_RETURN(const std::string approximate, init.attributes.get_string("approximate", std::string("none")));
  if (approximate != "none" && approximate != "tanh")
    return Status::error("approximate='" + approximate + "': expected none or tanh");
  return unary(approximate == "tanh" ? UnaryOp::kGeluTanh : UnaryOp::kGelu)(init);
}

DeviceOpFactory binary(BinaryOp op) {
  return [op](const DeviceOpInit& init) -> Result<DevicePlan> {
    LOKA_RETURN_IF_ERROR(require_float_storage(init, 0));
    LOKA_RETURN_IF_ERROR(require_float_storage(init, 1));
    if (init.inputs[0].dtype != init.inputs[1].dtype) return Status::error("inputs differ in dtype");
    return device_function([op](auto in, auto out, const DeviceRunContext& context, int) {
      return launch_binary(op, in[0].data, in[0].shape, in[1].data, in[1].shape, in[0].dtype, out[0].data,
                           context.stream);
    });
  };
}

/// Softmax/LogSoftmax: [outer, n, inner] around the axis (opset >= 13), or the
/// flattened [outer, n·inner] of opsets before 13.
DeviceOpFactory softmax(bool log) {
  return [log](const DeviceOpInit& init) -> Result<DevicePlan> {
    LOKA_RETURN_IF_ERROR(require_float32(init, 0));
    const Shape& shape = init.inputs[0].shape;
    const int rank = static_cast<int>(shape.size());
    LOKA_ASSIGN_OR_RETURN(const int64_t axis_attr, init.attributes.get_int("axis", init.opset >= 13 ? -1 : 1));
    LOKA_ASSIGN_OR_RETURN(const int axis, ops::normalize_axis(axis_attr, rank));
    int64_t outer = 1, n = 1, inner = 1;
    for (int d = 0; d < rank; ++d) (d < axis ? outer : d == axis ? n : inner) *= shape[static_cast<size_t>(d)];
    if (init.opset < 13) {
      n *= inner;
      inner = 1;
    }
    return device_function([=](auto in, auto out, const DeviceRunContext& context, int) {
      return launch_softmax(static_cast<const float*>(in[0].data), static_cast<float*>(out[0].data), outer, n, inner,
                            log, context.stream);
    });
  };
}

}  // namespace

void register_elementwise_device_ops(DeviceOpRegistry& registry) {
  const std::pair<const char*, UnaryOp> unaries[] = {
      {"Relu", UnaryOp::kRelu}, {"Sigmoid", UnaryOp::kSigmoid}, {"Tanh", UnaryOp::kTanh},
      {"Erf", UnaryOp::kErf},   {"Neg", UnaryOp::kNeg},         {"Sqrt", UnaryOp::kSqrt},
      {"Exp", UnaryOp::kExp},   {"Log", UnaryOp::kLog},         {"Abs", UnaryOp::kAbs},
      {"Reciprocal", UnaryOp::kReciprocal}};
  for (const auto& [name, op] : unaries) registry.add("", name, unary(op));
  registry.add("", "Cast", plan_cast);
  registry.add("", "Gelu", plan_gelu);
  const std::pair<const char*, BinaryOp> binaries[] = {
      {"Add", BinaryOp::kAdd},         {"Sub", BinaryOp::kSub},
      {"Mul", BinaryOp::kMul},         {"Div", BinaryOp::kDiv},
      {"Pow", BinaryOp::kPow},         {"Equal", BinaryOp::kEqual},
      {"Less", BinaryOp::kLess},       {"Greater", BinaryOp::kGreater},
      {"LessOrEqual", BinaryOp::kLessOrEqual}, {"GreaterOrEqual", BinaryOp::kGreaterOrEqual}};
  for (const auto& [name, op] : binaries) registry.add("", name, binary(op));
  // Max and Min are variadic in ONNX; two inputs cover the zoo.
  for (const auto& [name, op] : {std::pair{"Max", BinaryOp::kMax}, std::pair{"Min", BinaryOp::kMin}})
    registry.add("", name, [op = op](const DeviceOpInit& init) -> Result<DevicePlan> {
      if (init.inputs.size() != 2) return Status::error("only the two-input form has a CUDA kernel");
      return binary(op)(init);
    });
  registry.add("", "Softmax", softmax(false));
  registry.add("", "LogSoftmax", softmax(true));
}

}  // namespace loka::cuda
