// ============================================================================
// runtime/cuda/ops/dispatched_gemm.cc — the chosen candidate as a device op,
// and the fallbacks with their one-time warnings.
// ============================================================================
#include "runtime/cuda/ops/dispatched_gemm.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>
#include <variant>

#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gemm_autotune.h"
#include "kernels/cuda/gemm_candidate.h"
#include "kernels/registry/kernel_plan.h"

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
    args.y = static_cast<float*>(out[0].data);
    args.residual = static_cast<const float*>(input(slots_.residual));
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

bool strict_mode() {
  const char* value = std::getenv("LOKA_STRICT_KERNELS");
  return value && *value && std::string(value) != "0";
}

/// Prints `message` once per node (a Session plans each bucket; say it once).
void warn_once(const std::string& node, const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mutex);
  if (!warned.insert(node).second) return;
  std::fprintf(stderr, "loka: node '%s': %s\n", node.c_str(), message.c_str());
}

/// This device as the perf DB writes it (kernels/cuda/gemm_autotune.h), computed once.
const std::string& this_device() {
  static const std::string device = [] {
    auto found = tuning_device();
    if (!found) return std::string("unknown device");
    return found->gpu + " / driver " + found->driver + " / cuBLASLt " + found->cublaslt;
  }();
  return device;
}

/// A fallback: an error in strict mode, else a warning and `fallback`.
template <typename T>
Result<T> fall_back(const std::string& node, const std::string& message, T fallback) {
  if (strict_mode()) return Status::error(message + " (LOKA_STRICT_KERNELS is set)");
  warn_once(node, message);
  return fallback;
}

}  // namespace

Result<std::optional<DevicePlan>> plan_dispatched_gemm(const DeviceOpInit& init, const kernels::GemmKey& key,
                                                       const kernels::GemmShape& shape, const GemmInputSlots& slots) {
  if (!init.attributes.has("loka_kernel")) return std::optional<DevicePlan>();
  const std::string node(init.node_name);
  const auto* entries_value = std::get_if<std::vector<std::string>>(&init.attributes.all().at("loka_kernel"));
  if (entries_value == nullptr) return Status::error("attribute loka_kernel must be a list of strings");
  const std::vector<std::string>& entries = *entries_value;
  LOKA_ASSIGN_OR_RETURN(const std::string device, init.attributes.get_string("loka_kernel_device", std::string()));
  // The entry for these rows (M × batch), else the nearest.
  kernels::KernelPlan plan;
  for (const std::string& entry : entries) {
    const size_t colon = entry.find(':');
    int64_t m = 0;
    try {
      m = colon == std::string::npos ? 0 : std::stoll(entry.substr(0, colon));
    } catch (const std::exception&) {
      m = 0;
    }
    if (m <= 0) return Status::error("attribute loka_kernel: '" + entry + "' is not <rows>:<kernel>");
    plan.nodes[node].push_back({m, entry.substr(colon + 1)});
  }
  const kernels::KernelChoice* choice = plan.choose(node, shape.rows());
  if (choice == nullptr) return std::optional<DevicePlan>();
  auto parsed = kernels::parse_gemm_candidate(choice->candidate);
  if (!parsed) return fall_back(node, parsed.status().message() + ": running the default kernel", std::optional<DevicePlan>());
  kernels::GemmCandidate candidate = *parsed;
  // An algorithm index is a position in cuBLASLt's list for one problem on one device.
  if (candidate.algorithm != 0 && device != kernels::kCostModelDevice && device != this_device()) {
    LOKA_ASSIGN_OR_RETURN(candidate, fall_back(node,
                                               "kernels were tuned on " + device + ", this is " + this_device() +
                                                   ": running " + candidate.family_default().name() + " instead of " +
                                                   candidate.name() + " (re-run loka-opt here to re-tune)",
                                               candidate.family_default()));
  } else if (candidate.algorithm != 0 && choice->m != shape.rows()) {
    candidate = candidate.family_default();  // another problem size: its own heuristic best
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
  auto kernel = GemmKernel::create(candidate, key, shape, inputs);
  if (!kernel && candidate.algorithm != 0) {
    LOKA_ASSIGN_OR_RETURN(candidate, fall_back(node, kernel.status().message() + ": running " +
                                                         candidate.family_default().name() + " instead",
                                               candidate.family_default()));
    kernel = GemmKernel::create(candidate, key, shape, inputs);
  }
  if (!kernel)
    return fall_back(node, "cannot run the dispatched " + candidate.name() + ": " + kernel.status().message() +
                               "; running the default kernel",
                     std::optional<DevicePlan>());
  return std::optional<DevicePlan>(gemm_kernel_plan(std::move(kernel).value(), slots, init));
}

DevicePlan gemm_kernel_plan(std::unique_ptr<GemmKernel> kernel, const GemmInputSlots& slots, const DeviceOpInit& init) {
  Shape addend_shape;
  if (slots.addend >= 0) addend_shape = init.inputs[static_cast<size_t>(slots.addend)].shape;
  return DevicePlan{std::make_unique<DispatchedGemmOp>(std::move(kernel), slots, init.outputs[0].shape, addend_shape), -1};
}

}  // namespace loka::cuda
