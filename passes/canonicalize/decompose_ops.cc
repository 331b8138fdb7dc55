// ============================================================================
// passes/canonicalize/decompose_ops.cc — `decompose-ops` (see header).
// ============================================================================
#include "passes/canonicalize/decompose_ops.h"

#include <cmath>

#include "passes/canonicalize/rewrite_utils.h"

namespace loka {
namespace {

int64_t default_opset(const ir::Graph& graph) {
  const auto opset = graph.opsets.find("");
  return opset == graph.opsets.end() ? 0 : opset->second;
}

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
  if (default_opset(graph) < 11) {
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
    if (t == nullptr || t->dtype() != DType::kFloat32 || t->rank() != 1) return Status::error("statistics are not float32 constants [C]");
  const int64_t channels = gamma->dim(0);
  for (const Tensor* t : {beta, mean, variance})
    if (t->dim(0) != channels) return Status::error("statistics differ in length");
  LOKA_ASSIGN_OR_RETURN(const float epsilon_attribute, norm->attributes().get_float("epsilon", 1e-5f));
  const double epsilon = epsilon_attribute;
  const std::vector<float> g = gamma->to_floats(), b = beta->to_floats(), mu = mean->to_floats(), var = variance->to_floats();
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

class DecomposeOpsPass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    bool changed = false;
    for (uint32_t id = 0; id < graph.node_id_bound(); ++id) {
      ir::Node* node = graph.node_by_id(id);
      if (node == nullptr) continue;
      const bool clip = node->is("Clip"), norm = node->is("BatchNormalization");
      if (!clip && !norm) continue;
      const Status status = clip ? decompose_clip(graph, node) : decompose_batch_norm(graph, node);
      const std::string what = clip ? "clips" : "batch-norms";
      context.add_statistic(what + (status.is_ok() ? "-decomposed" : "-kept"));
      changed = changed || status.is_ok();
    }
    return changed;
  }
};

}  // namespace

PassInfo decompose_ops_pass_info() {
  return PassInfo{"decompose-ops",
                  "rewrite Clip and inference BatchNormalization into Max/Min and Mul/Add, which the runtimes run",
                  {},
                  {"clips-decomposed", "clips-kept", "batch-norms-decomposed", "batch-norms-kept"}};
}

std::unique_ptr<Pass> make_decompose_ops_pass() { return std::make_unique<DecomposeOpsPass>(); }

}  // namespace loka
