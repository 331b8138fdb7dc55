// ============================================================================
// passes/canonicalize/decompose_ops.cc — `decompose-ops` (see header).
// ============================================================================
#include "passes/canonicalize/decompose_ops.h"

#include <algorithm>
#include <cmath>

#include "passes/canonicalize/rewrite_utils.h"

namespace loka {
namespace {

/// A float32 scalar constant.
ir::Value* scalar(ir::Graph& graph, const std::string& name, float value) {
  return graph.add_initializer(graph.unique_value_name(name), Tensor::scalar_float(value));
}

/// Replaces `node` (one output) by `op_type`(inputs) under the node's own name.
Status replace_last(ir::Graph& graph, ir::Node* node, const char* op_type, std::vector<ir::Value*> inputs) {
  // The node is erased before its replacement is named: the name carries over.
  canonicalize::NodeSpec spec{op_type, std::move(inputs), {}, node->name(), ""};
  return canonicalize::replace_with_node(graph, node->output(0), {node}, std::move(spec)).status();
}

/// Clip(x, lo, hi) → Min(Max(x, lo), hi); a missing bound drops its op.
Status decompose_clip(ir::Graph& graph, ir::Node* clip) {
  if (clip->outputs().size() != 1 || clip->input(0) == nullptr) return Status::error("malformed Clip");
  ir::Value* x = clip->input(0);
  ir::Value* lo = clip->input(1);
  ir::Value* hi = clip->input(2);
  for (ir::Value* bound : {lo, hi}) {
    const Tensor* data = bound ? canonicalize::constant_data(bound) : nullptr;
    if (data && data->element_count() != 1) return Status::error("a bound is not a scalar");
  }
  if (canonicalize::default_opset(graph) < 11) {
    // Bounds are float attributes there (opset 6-10 Clip is float-only; LoKA computes in FP32).
    if (x->type().dtype != DType::kFloat32) return Status::error("attribute bounds need a float32 input");
    const Attributes& attributes = clip->attributes();
    LOKA_ASSIGN_OR_RETURN(const float min, attributes.get_float("min", -INFINITY));
    LOKA_ASSIGN_OR_RETURN(const float max, attributes.get_float("max", INFINITY));
    if (attributes.has("min")) lo = scalar(graph, clip->name() + "/min", min);
    if (attributes.has("max")) hi = scalar(graph, clip->name() + "/max", max);
  }
  if (lo && hi) {
    ir::Node* max = graph.add_node("Max", {x, lo}, 1, graph.unique_node_name(clip->name() + "/max"));
    return replace_last(graph, clip, "Min", {max->output(0), hi});
  }
  if (lo) return replace_last(graph, clip, "Max", {x, lo});
  if (hi) return replace_last(graph, clip, "Min", {x, hi});
  return replace_last(graph, clip, "Identity", {x});
}

/// BatchNormalization (inference) → Mul(x, s) → Add(·, t), s and t folded from the constants.
Status decompose_batch_norm(ir::Graph& graph, ir::Node* norm) {
  if (norm->outputs().size() != 1 || norm->inputs().size() != 5) return Status::error("not a one-output inference norm");
  LOKA_ASSIGN_OR_RETURN(const int64_t training, norm->attributes().get_int("training_mode", 0));
  if (training != 0) return Status::error("training mode");
  ir::Value* x = norm->input(0);
  if (x == nullptr || !x->type().has_rank() || x->type().rank() < 2)
    return Status::error("the input's rank is unknown or below 2");
  const Tensor* gamma = canonicalize::constant_data(norm->input(1));
  const Tensor* beta = canonicalize::constant_data(norm->input(2));
  const Tensor* mean = canonicalize::constant_data(norm->input(3));
  const Tensor* variance = canonicalize::constant_data(norm->input(4));
  for (const Tensor* t : {gamma, beta, mean, variance})
    if (t == nullptr || t->dtype() != DType::kFloat32 || t->rank() != 1)
      return Status::error("statistics are not float32 constants [C]");
  const int64_t channels = gamma->dim(0);
  for (const Tensor* t : {beta, mean, variance})
    if (t->dim(0) != channels) return Status::error("statistics differ in length");
  LOKA_ASSIGN_OR_RETURN(const float epsilon_attribute, norm->attributes().get_float("epsilon", 1e-5f));
  const double epsilon = epsilon_attribute;
  const std::vector<float> g = gamma->to_floats(), b = beta->to_floats();
  const std::vector<float> mu = mean->to_floats(), var = variance->to_floats();
  std::vector<float> scale(static_cast<size_t>(channels)), shift(static_cast<size_t>(channels));
  for (size_t c = 0; c < scale.size(); ++c) {
    const double s = static_cast<double>(g[c]) / std::sqrt(static_cast<double>(var[c]) + epsilon);
    scale[c] = static_cast<float>(s);
    shift[c] = static_cast<float>(static_cast<double>(b[c]) - static_cast<double>(mu[c]) * s);
  }
  // [C, 1, ..., 1]: broadcast along axis 1 of [N, C, d1, ...].
  Shape shape = {channels};
  shape.resize(static_cast<size_t>(x->type().rank() - 1), 1);
  const std::string name = norm->name();
  ir::Value* s = graph.add_initializer(graph.unique_value_name(name + "/scale"), Tensor::from_floats(shape, scale));
  ir::Value* t = graph.add_initializer(graph.unique_value_name(name + "/shift"), Tensor::from_floats(shape, shift));
  ir::Node* mul = graph.add_node("Mul", {x, s}, 1, graph.unique_node_name(name + "/scale"));
  return replace_last(graph, norm, "Add", {mul->output(0), t});
}

/// Adds `op`(inputs) named after `node` plus `step` (an intermediate of its decomposition).
ir::Value* step(ir::Graph& graph, const ir::Node& node, const char* op, const std::vector<ir::Value*>& inputs,
                const char* what) {
  return graph.add_node(op, inputs, 1, graph.unique_node_name(node.name() + "/" + what))->output(0);
}

/// max(0, min(1, alpha · x + beta)): ONNX HardSigmoid's own formula, op by op.
ir::Value* hard_sigmoid(ir::Graph& graph, const ir::Node& node, ir::Value* x, float alpha, float beta) {
  ir::Value* scaled = step(graph, node, "Mul", {x, scalar(graph, node.name() + "/alpha", alpha)}, "alpha");
  ir::Value* shifted = step(graph, node, "Add", {scaled, scalar(graph, node.name() + "/beta", beta)}, "beta");
  return step(graph, node, "Min", {shifted, scalar(graph, node.name() + "/one", 1.0f)}, "min");
}

Status require_float32_input(const ir::Node& node) {
  if (node.outputs().size() != 1 || node.input(0) == nullptr || node.input(0)->type().dtype != DType::kFloat32)
    return Status::error("needs one float32 input of known type");
  return Status::ok();
}

/// HardSigmoid → Max(Min(x·α + β, 1), 0).
Status decompose_hard_sigmoid(ir::Graph& graph, ir::Node* node) {
  LOKA_RETURN_IF_ERROR(require_float32_input(*node));
  LOKA_ASSIGN_OR_RETURN(const float alpha, node->attributes().get_float("alpha", 0.2f));
  LOKA_ASSIGN_OR_RETURN(const float beta, node->attributes().get_float("beta", 0.5f));
  ir::Value* clipped = hard_sigmoid(graph, *node, node->input(0), alpha, beta);
  return replace_last(graph, node, "Max", {clipped, scalar(graph, node->name() + "/zero", 0.0f)});
}

/// HardSwish → x · HardSigmoid(x) with α = 1/6, β = 0.5.
Status decompose_hard_swish(ir::Graph& graph, ir::Node* node) {
  LOKA_RETURN_IF_ERROR(require_float32_input(*node));
  ir::Value* x = node->input(0);
  ir::Value* clipped = hard_sigmoid(graph, *node, x, 1.0f / 6.0f, 0.5f);
  ir::Value* gate = step(graph, *node, "Max", {clipped, scalar(graph, node->name() + "/zero", 0.0f)}, "gate");
  return replace_last(graph, node, "Mul", {x, gate});
}

/// Max(x, 0) + Min(x, 0) · slope, the node's replacement: PRelu and LeakyRelu without Where,
/// which the CUDA runtime lacks. A NaN x stays NaN through Max, and x < 0 gives
/// 0 + slope·x = slope·x exactly.
Status replace_with_sloped_relu(ir::Graph& graph, ir::Node* node, ir::Value* slope) {
  ir::Value* x = node->input(0);
  ir::Value* zero = scalar(graph, node->name() + "/zero", 0.0f);
  ir::Value* positive = step(graph, *node, "Max", {x, zero}, "positive");
  ir::Value* negative = step(graph, *node, "Min", {x, zero}, "negative");
  ir::Value* sloped = step(graph, *node, "Mul", {negative, slope}, "slope");
  return replace_last(graph, node, "Add", {positive, sloped});
}

/// PRelu(x, slope): the slope input.
Status decompose_prelu(ir::Graph& graph, ir::Node* node) {
  LOKA_RETURN_IF_ERROR(require_float32_input(*node));
  if (node->input(1) == nullptr) return Status::error("no slope");
  return replace_with_sloped_relu(graph, node, node->input(1));
}

/// LeakyRelu(x; α): the constant α (the CPU runtime runs LeakyRelu itself, the CUDA runtime
/// has no kernel for it).
Status decompose_leaky_relu(ir::Graph& graph, ir::Node* node) {
  LOKA_RETURN_IF_ERROR(require_float32_input(*node));
  LOKA_ASSIGN_OR_RETURN(const float alpha, node->attributes().get_float("alpha", 0.01f));
  return replace_with_sloped_relu(graph, node, scalar(graph, node->name() + "/alpha", alpha));
}

/// Split → one Slice per output (the CUDA runtime slices but has no Split): the piece sizes
/// from the `split` input or attribute, or an even split of a known axis size. Outputs that
/// are graph outputs keep the Split (their names are the model's contract).
Status decompose_split(ir::Graph& graph, ir::Node* node) {
  ir::Value* x = node->input(0);
  if (x == nullptr || !x->type().has_rank()) return Status::error("input rank unknown");
  for (const ir::Value* output : node->outputs())
    if (output->is_graph_output()) return Status::error("an output is a graph output");
  const int64_t opset = canonicalize::default_opset(graph);
  LOKA_ASSIGN_OR_RETURN(int64_t axis, node->attributes().get_int("axis", 0));
  const int rank = x->type().rank();
  if (axis < -rank || axis >= rank) return Status::error("axis out of range");
  if (axis < 0) axis += rank;
  const size_t count = node->outputs().size();
  std::vector<int64_t> sizes;
  if (opset >= 13 && node->input(1) != nullptr) {
    auto split = canonicalize::int_list_constant(node->input(1));
    if (!split) return Status::error("split sizes not constant");
    sizes = *split;
  } else if (opset < 13 && node->attributes().has("split")) {
    LOKA_ASSIGN_OR_RETURN(sizes, node->attributes().get_ints("split"));
  } else {
    // An even split (opset 18: the last piece may be smaller) of a known axis.
    const ir::Dim& dim = (*x->type().shape)[static_cast<size_t>(axis)];
    if (!dim.is_known()) return Status::error("the split axis has no known size");
    const auto n = static_cast<int64_t>(count);
    const int64_t piece = opset >= 18 ? (dim.value + n - 1) / n : dim.value / n;
    sizes.assign(count, piece);
    sizes.back() = dim.value - piece * (n - 1);
    if (sizes.back() < 0 || (opset < 18 && sizes.back() != piece)) return Status::error("uneven split");
  }
  if (sizes.size() != count || std::any_of(sizes.begin(), sizes.end(), [](int64_t v) { return v < 0; }))
    return Status::error("split sizes do not match the outputs");
  const auto ints = [&](const std::string& what, const std::vector<int64_t>& values) {
    return canonicalize::int64_initializer(graph, node->name() + "/" + what, values);
  };
  ir::Value* axes = ints("axes", {axis});
  int64_t start = 0;
  for (size_t i = 0; i < count; ++i) {
    ir::Value* piece = step(graph, *node, "Slice", {x, ints("starts", {start}), ints("ends", {start + sizes[i]}), axes},
                            "slice");
    start += sizes[i];
    graph.replace_all_uses_with(node->output(i), piece);
  }
  graph.erase_node(node);
  return Status::ok();
}

/// Sum(a, b, c, ...) → ((a + b) + c) ...; Mean the same, then / N (ONNX Mean's order).
Status decompose_sum_or_mean(ir::Graph& graph, ir::Node* node, bool mean) {
  const std::vector<ir::Value*> inputs = node->inputs();
  if (inputs.empty() || node->outputs().size() != 1 ||
      std::any_of(inputs.begin(), inputs.end(), [](const ir::Value* v) { return v == nullptr; }))
    return Status::error("malformed variadic op");
  if (mean && (inputs[0]->type().dtype != DType::kFloat32)) return Status::error("Mean needs float32 inputs");
  if (inputs.size() == 1 && !mean) return replace_last(graph, node, "Identity", {inputs[0]});
  ir::Value* total = inputs[0];
  const size_t adds = inputs.size() - (mean ? 1 : 2);
  for (size_t i = 1; i <= adds; ++i) total = step(graph, *node, "Add", {total, inputs[i]}, "add");
  if (!mean) return replace_last(graph, node, "Add", {total, inputs.back()});
  ir::Value* count = scalar(graph, node->name() + "/count", static_cast<float>(inputs.size()));
  return replace_last(graph, node, "Div", {total, count});
}

/// The decompositions by op type, and the statistic each counts under.
struct Decomposition {
  const char* op;
  const char* statistic;
  Status (*apply)(ir::Graph&, ir::Node*);
};

constexpr Decomposition kDecompositions[] = {
    {"Clip", "clips", decompose_clip},
    {"BatchNormalization", "batch-norms", decompose_batch_norm},
    {"PRelu", "prelus", decompose_prelu},
    {"HardSigmoid", "hard-sigmoids", decompose_hard_sigmoid},
    {"HardSwish", "hard-swishes", decompose_hard_swish},
    {"Sum", "sums", [](ir::Graph& g, ir::Node* n) { return decompose_sum_or_mean(g, n, false); }},
    {"Mean", "means", [](ir::Graph& g, ir::Node* n) { return decompose_sum_or_mean(g, n, true); }},
    {"LeakyRelu", "leaky-relus", decompose_leaky_relu},
    {"Split", "splits", decompose_split},
};

class DecomposeOpsPass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    bool changed = false;
    for (uint32_t id = 0; id < graph.node_id_bound(); ++id) {
      ir::Node* node = graph.node_by_id(id);
      if (node == nullptr) continue;
      for (const Decomposition& d : kDecompositions) {
        if (!node->is(d.op)) continue;
        const Status status = d.apply(graph, node);
        context.add_statistic(std::string(d.statistic) + (status.is_ok() ? "-decomposed" : "-kept"));
        changed = changed || status.is_ok();
        break;
      }
    }
    return changed;
  }
};

}  // namespace

PassInfo decompose_ops_pass_info() {
  std::vector<std::string> statistics;
  for (const Decomposition& d : kDecompositions)
    for (const char* outcome : {"-decomposed", "-kept"}) statistics.push_back(std::string(d.statistic) + outcome);
  return PassInfo{"decompose-ops",
                  "rewrite Clip, inference BatchNormalization, PRelu, LeakyRelu, HardSigmoid, HardSwish, Sum and "
                  "Mean into elementwise ops, and Split into Slices, which both runtimes run",
                  {},
                  statistics};
}

std::unique_ptr<Pass> make_decompose_ops_pass() { return std::make_unique<DecomposeOpsPass>(); }

}  // namespace loka
