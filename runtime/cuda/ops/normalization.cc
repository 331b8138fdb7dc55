// ============================================================================
// runtime/cuda/ops/normalization.cc — LayerNormalization and ai.loka
// LayerNormQuant and ResidualLayerNorm on the GPU (kernels/cuda/layer_norm.h).
//
// LayerNormalization normalizes over dims [axis, rank), so the kernel sees
// rows × cols with cols their product; Scale and B hold exactly cols values
// (what exporters write; other broadcasts are refused with the reason).
// LayerNormQuant (docs/loka_ops.md) is the same row arithmetic emitting E4M3
// codes divided by its constant Y_scale, read once when the bucket is planned;
// ResidualLayerNorm normalizes X + Residual, the sum formed as each row is staged.
// Only the Y output is computed: Mean / InvStdDev outputs are refused.
// Each runs LoKA's kernel unless Dispatch chose a cuDNN graph for the node at
// exactly these rows (runtime/cuda/ops/kernel_choice.h; other rows run LoKA's
// kernel: a graph compiles kernels when built); a choice that cannot be built
// here falls back to LoKA's kernel, with a warning.
// ============================================================================
#include <cmath>
#include <memory>
#include <span>

#include "kernels/cuda/cudnn_layer_norm.h"
#include "kernels/cuda/layer_norm.h"
#include "kernels/registry/norm_kernel_key.h"
#include "runtime/cuda/ops/kernel_choice.h"
#include "runtime/cuda/ops/op_args.h"

namespace loka::cuda {
namespace {

struct NormGeometry {
  int64_t rows = 0, cols = 0;
  size_t scale_index = 1;  ///< Scale's input; B, when present, is the next
  bool has_bias = false;
};

/// rows × cols of X normalized from `axis`, with Scale (input `scale_index`, 1 but for
/// ResidualLayerNorm) and B (the input after it) of cols values.
Result<NormGeometry> plan_geometry(const DeviceOpInit& init, int64_t axis, size_t scale_index = 1) {
  const size_t bias_index = scale_index + 1;
  LOKA_RETURN_IF_ERROR(require_float32(init, 0));
  LOKA_RETURN_IF_ERROR(require_float32(init, scale_index));
  if (has_input(init, bias_index)) LOKA_RETURN_IF_ERROR(require_float32(init, bias_index));
  for (size_t i = 1; i < init.outputs.size(); ++i)
    if (!init.outputs[i].shape.empty() || init.outputs[i].dtype != DType::kUndefined)
      return Status::error("the Mean / InvStdDev outputs have no CUDA kernel yet");
  const Shape& shape = init.inputs[0].shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank)
    return Status::error("axis " + std::to_string(axis) + " out of range for X of rank " + std::to_string(rank));
  NormGeometry geometry;
  geometry.scale_index = scale_index;
  geometry.has_bias = has_input(init, bias_index);
  geometry.cols = element_count(Shape(shape.begin() + axis, shape.end()));
  geometry.rows = geometry.cols == 0 ? 0 : element_count(shape) / geometry.cols;
  for (size_t i : {scale_index, bias_index})
    if (has_input(init, i) && element_count(init.inputs[i].shape) != geometry.cols)
      return Status::error(std::string(i == scale_index ? "Scale" : "B") + " has " +
                           std::to_string(element_count(init.inputs[i].shape)) + " values, the normalized dims " +
                           std::to_string(geometry.cols) + " (broadcast Scale/B have no CUDA kernel yet)");
  return geometry;
}

Result<float> planned_epsilon(const DeviceOpInit& init) {
  LOKA_ASSIGN_OR_RETURN(const float epsilon, init.attributes.get_float("epsilon", 1e-5f));
  if (!(epsilon >= 0.0f) || !std::isfinite(epsilon))
    return Status::error("attribute 'epsilon' must be finite and >= 0, got " + std::to_string(epsilon));
  return epsilon;
}

/// What every norm passes the kernel alike: X (input 0), Scale and B, the shape and epsilon; the
/// caller adds its output (and a residual).
LayerNormArgs norm_args(std::span<const DeviceTensor> in, const NormGeometry& geometry, float epsilon) {
  LayerNormArgs args;
  args.x = static_cast<const float*>(in[0].data);
  args.scale = static_cast<const float*>(in[geometry.scale_index].data);
  args.bias = geometry.has_bias ? static_cast<const float*>(in[geometry.scale_index + 1].data) : nullptr;
  args.rows = geometry.rows;
  args.cols = geometry.cols;
  args.epsilon = epsilon;
  return args;
}

/// The cuDNN graph Dispatch chose for this norm at these rows; null for LoKA's kernel (no choice,
/// LoKA's chosen, or a choice that cannot be built here).
Result<std::shared_ptr<const CudnnLayerNorm>> dispatched_cudnn_norm(const DeviceOpInit& init, const NormGeometry& geometry,
                                                                    float epsilon, bool residual, bool fp8_output) {
  using Graph = std::shared_ptr<const CudnnLayerNorm>;
  if (geometry.rows == 0) return Graph();
  LOKA_ASSIGN_OR_RETURN(const std::optional<PlannedKernelChoice> choice, planned_kernel_choice(init, geometry.rows));
  if (!choice) return Graph();
  const std::string node(init.node_name);
  const std::string instead = "; running LoKA's LayerNorm kernel";
  auto parsed = kernels::parse_norm_candidate(choice->candidate);
  if (!parsed) return fall_back(node, parsed.status().message() + instead, Graph());
  // A cuDNN graph only for the rows it was measured at: building one compiles kernels (tens to
  // hundreds of ms, per node and bucket and Session), and at other rows LoKA's kernel is as
  // good a guess as any.
  if (parsed->library == kernels::NormLibrary::kLoka || !choice->same_rows) return Graph();
  // An engine index is a position in cuDNN's heuristic list for one problem on one device.
  int engine = parsed->engine;
  if (engine != 0 && !choice->same_device) {
    LOKA_ASSIGN_OR_RETURN(engine, fall_back(node,
                                            "kernels were tuned on " + choice->device + ", this is " +
                                                this_tuning_device() + ": running cuDNN's engine 0 instead of " +
                                                choice->candidate + " (re-run loka-opt here to re-tune)",
                                            0));
  }
  CudnnLayerNormProblem problem;
  problem.rows = geometry.rows;
  problem.cols = geometry.cols;
  problem.has_bias = geometry.has_bias;
  problem.has_residual = residual;
  problem.fp8_output = fp8_output;
  problem.epsilon = epsilon;
  auto graph = CudnnLayerNorm::create(problem, engine);
  if (!graph) return fall_back(node, "cannot run the dispatched " + choice->candidate + ": " + graph.status().message() + instead, Graph());
  return Graph(std::move(graph).value());
}

/// Runs `args` with the chosen graph (its workspace need is at most kGemmWorkspaceBytes, what a
/// session lends every step), or LoKA's kernel without one.
Status run_norm(const std::shared_ptr<const CudnnLayerNorm>& graph, const LayerNormArgs& args,
                const DeviceRunContext& context) {
  return graph ? graph->run(args, context.workspace, context.stream) : launch_layer_norm(args, context.stream);
}

Result<DevicePlan> plan_layer_norm(const DeviceOpInit& init) {
  LOKA_ASSIGN_OR_RETURN(const int64_t axis, init.attributes.get_int("axis", -1));
  LOKA_ASSIGN_OR_RETURN(const int64_t stash_type, init.attributes.get_int("stash_type", 1));
  if (stash_type != 1) return Status::error("stash_type must be 1 (FLOAT), got " + std::to_string(stash_type));
  LOKA_ASSIGN_OR_RETURN(const NormGeometry geometry, plan_geometry(init, axis));
  LOKA_ASSIGN_OR_RETURN(const float epsilon, planned_epsilon(init));
  LOKA_ASSIGN_OR_RETURN(auto graph, dispatched_cudnn_norm(init, geometry, epsilon, false, false));
  return device_function([=](auto in, auto out, const DeviceRunContext& context, int) {
    LayerNormArgs args = norm_args(in, geometry, epsilon);
    args.y = static_cast<float*>(out[0].data);
    return run_norm(graph, args, context);
  });
}

Result<DevicePlan> plan_layer_norm_quant(const DeviceOpInit& init) {
  LOKA_ASSIGN_OR_RETURN(const NormGeometry geometry, plan_geometry(init, -1));
  LOKA_ASSIGN_OR_RETURN(const float epsilon, planned_epsilon(init));
  if (!has_input(init, 3) || !init.inputs[3].host.defined() || init.inputs[3].host.element_count() != 1)
    return Status::error("Y_scale must be a constant scalar");
  const float y_scale = init.inputs[3].host.to_floats().front();
  if (!(y_scale > 0.0f) || !std::isfinite(y_scale))
    return Status::error("Y_scale must be finite and > 0, got " + std::to_string(y_scale));
  LOKA_ASSIGN_OR_RETURN(auto graph, dispatched_cudnn_norm(init, geometry, epsilon, false, true));
  return device_function([=](auto in, auto out, const DeviceRunContext& context, int) {
    LayerNormArgs args = norm_args(in, geometry, epsilon);
    args.y_codes = static_cast<uint8_t*>(out[0].data);
    args.y_scale = y_scale;
    return run_norm(graph, args, context);
  });
}

/// ai.loka ResidualLayerNorm: LayerNorm(X + Residual) over the last axis, the sum formed as rows are staged.
Result<DevicePlan> plan_residual_layer_norm(const DeviceOpInit& init) {
  LOKA_ASSIGN_OR_RETURN(const NormGeometry geometry, plan_geometry(init, -1, /*scale_index=*/2));
  LOKA_RETURN_IF_ERROR(require_float32(init, 1));
  if (init.inputs[1].shape != init.inputs[0].shape)
    return Status::error("Residual " + shape_to_string(init.inputs[1].shape) + " must have X's shape " +
                         shape_to_string(init.inputs[0].shape));
  LOKA_ASSIGN_OR_RETURN(const float epsilon, planned_epsilon(init));
  LOKA_ASSIGN_OR_RETURN(auto graph, dispatched_cudnn_norm(init, geometry, epsilon, true, false));
  return device_function([=](auto in, auto out, const DeviceRunContext& context, int) {
    LayerNormArgs args = norm_args(in, geometry, epsilon);
    args.residual = static_cast<const float*>(in[1].data);
    args.y = static_cast<float*>(out[0].data);
    return run_norm(graph, args, context);
  });
}

}  // namespace

void register_normalization_device_ops(DeviceOpRegistry& registry) {
  registry.add("", "LayerNormalization", plan_layer_norm);
  registry.add("ai.loka", "LayerNormQuant", plan_layer_norm_quant);
  registry.add("ai.loka", "ResidualLayerNorm", plan_residual_layer_norm);
}

}  // namespace loka::cuda
