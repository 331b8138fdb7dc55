// ============================================================================
// passes/canonicalize/upgrade_opset.cc — `upgrade-opset` (see header).
//
// A table of steps, each "op X changed at opset V: convert like this"; a node
// goes through every step with current < V <= target, in version order.
// ============================================================================
#include "passes/canonicalize/upgrade_opset.h"

#include <algorithm>
#include <string_view>

#include "passes/canonicalize/rewrite_utils.h"
#include "passes/ir/shape_inference.h"
#include "runtime/op_kernel.h"

namespace loka {
namespace {

using Convert = Status (*)(ir::Graph&, ir::Node&);

struct Step {
  std::vector<std::string_view> ops;
  int64_t version;  ///< the opset that introduced the change
  Convert convert;
};

Status node_error(const ir::Node& node, const std::string& message) {
  return Status::error("node '" + node.name() + "' (" + node.op_type() + "): " + message);
}

/// Moves an ints attribute to input `slot` as an int64 initializer (nothing when absent).
Status ints_to_input(ir::Graph& graph, ir::Node& node, const std::string& attribute, size_t slot) {
  if (!node.attributes().has(attribute)) return Status::ok();
  if (node.input(slot) != nullptr) return node_error(node, "has both attribute '" + attribute + "' and input " + std::to_string(slot));
  auto values = node.attributes().get_ints(attribute);
  if (!values) return node_error(node, values.status().message());
  ir::Value* input = graph.add_initializer(node.name() + "_" + attribute,
                                           Tensor::from_int64s({static_cast<int64_t>(values->size())}, *values));
  graph.set_input(&node, slot, input);
  node.mutable_attributes() = canonicalize::without_attributes(node.attributes(), {attribute});
  return Status::ok();
}

/// Moves a float attribute to input `slot` as a scalar of the data's dtype (input 0).
Status float_to_input(ir::Graph& graph, ir::Node& node, const std::string& attribute, size_t slot) {
  if (!node.attributes().has(attribute)) return Status::ok();
  auto value = node.attributes().get_float(attribute);
  if (!value) return node_error(node, value.status().message());
  const DType dtype = node.input(0) ? node.input(0)->type().dtype : DType::kUndefined;
  Tensor scalar;
  if (dtype == DType::kFloat32) {
    scalar = Tensor::scalar_float(*value);
  } else if (dtype == DType::kFloat64) {
    scalar = Tensor::zeros(DType::kFloat64, {});
    scalar.data<double>()[0] = *value;
  } else {
    return node_error(node, "attribute '" + attribute + "' of a " + std::string(dtype_name(dtype)) +
                                " tensor cannot become an input (FLOAT or DOUBLE data, with inferred types, needed)");
  }
  graph.set_input(&node, slot, graph.add_initializer(node.name() + "_" + attribute, scalar));
  node.mutable_attributes() = canonicalize::without_attributes(node.attributes(), {attribute});
  return Status::ok();
}

Status axes_to_input(ir::Graph& graph, ir::Node& node) { return ints_to_input(graph, node, "axes", 1); }

Status split_to_input(ir::Graph& graph, ir::Node& node) { return ints_to_input(graph, node, "split", 1); }

/// Split-18 needs the split sizes or num_outputs; before it, no sizes meant equal pieces.
Status split_num_outputs(ir::Graph&, ir::Node& node) {
  if (node.input(1) == nullptr && !node.attributes().has("num_outputs"))
    node.mutable_attributes().set("num_outputs", static_cast<int64_t>(node.outputs().size()));
  return Status::ok();
}

Status slice_to_inputs(ir::Graph& graph, ir::Node& node) {
  if (!node.attributes().has("starts") || !node.attributes().has("ends"))
    return node_error(node, "needs attributes 'starts' and 'ends' before opset 10");
  LOKA_RETURN_IF_ERROR(ints_to_input(graph, node, "starts", 1));
  LOKA_RETURN_IF_ERROR(ints_to_input(graph, node, "ends", 2));
  return ints_to_input(graph, node, "axes", 3);
}

Status clip_to_inputs(ir::Graph& graph, ir::Node& node) {
  LOKA_RETURN_IF_ERROR(float_to_input(graph, node, "min", 1));
  return float_to_input(graph, node, "max", 2);
}

Status pad_to_inputs(ir::Graph& graph, ir::Node& node) {
  if (!node.attributes().has("pads")) return node_error(node, "needs attribute 'pads' before opset 11");
  LOKA_RETURN_IF_ERROR(ints_to_input(graph, node, "pads", 1));
  auto value = node.attributes().get_float("value", 0.0f);
  if (value && *value == 0.0f) {  // the default constant_value: no input needed
    node.mutable_attributes() = canonicalize::without_attributes(node.attributes(), {"value"});
    return Status::ok();
  }
  return float_to_input(graph, node, "value", 2);
}

/// Dropout-10 made the mask bool; a read mask would change type.
Status dropout_bool_mask(ir::Graph&, ir::Node& node) {
  if (node.outputs().size() > 1 && (node.output(1)->has_uses() || node.output(1)->is_graph_output()))
    return node_error(node, "its mask is read, and the mask's type changes to bool at opset 10");
  return Status::ok();
}

Status dropout_ratio_to_input(ir::Graph& graph, ir::Node& node) {
  if (!node.attributes().has("ratio")) return Status::ok();
  auto ratio = node.attributes().get_float("ratio");
  if (!ratio) return node_error(node, ratio.status().message());
  graph.set_input(&node, 1, graph.add_initializer(node.name() + "_ratio", Tensor::scalar_float(*ratio)));
  node.mutable_attributes() = canonicalize::without_attributes(node.attributes(), {"ratio"});
  return Status::ok();
}

/// Softmax before 13 normalised the input flattened to 2-D at `axis` (default 1); from 13 it
/// normalises along `axis` (default -1). The same when `axis` is the last dim; else rebuilt.
Status softmax_axis(ir::Graph& graph, ir::Node& node) {
  auto axis = node.attributes().get_int("axis", 1);
  if (!axis) return node_error(node, axis.status().message());
  ir::Value* x = node.input(0);
  if (x == nullptr) return node_error(node, "has no input");
  const int rank = x->type().rank();
  if (rank > 0 && (*axis == -1 || *axis == rank - 1)) {
    node.mutable_attributes().set("axis", *axis);
    return Status::ok();
  }
  // Flatten(x, axis) -> Softmax(axis=1) -> Reshape(·, Shape(x)): exactly the old semantics.
  ir::Node* flatten = graph.add_node("Flatten", {x}, 1, node.name() + "/flatten");
  flatten->mutable_attributes().set("axis", *axis);
  ir::Node* normalize = graph.add_node(node.op_type(), {flatten->output(0)}, 1, node.name() + "/2d");
  normalize->mutable_attributes().set("axis", int64_t{1});
  ir::Node* shape = graph.add_node("Shape", {x}, 1, node.name() + "/shape");
  ir::Value* result = node.output(0);
  const std::string name = node.name();
  return canonicalize::replace_with_node(graph, result, {&node},
                                         canonicalize::NodeSpec{"Reshape", {normalize->output(0), shape->output(0)}, {},
                                                                name, ""})
      .status();
}

const std::vector<Step>& steps() {
  static const std::vector<Step> kSteps = {
      {{"Slice"}, 10, slice_to_inputs},
      {{"Dropout"}, 10, dropout_bool_mask},
      {{"Clip"}, 11, clip_to_inputs},
      {{"Pad"}, 11, pad_to_inputs},
      {{"Dropout"}, 12, dropout_ratio_to_input},
      {{"ReduceSum", "Squeeze", "Unsqueeze"}, 13, axes_to_input},
      {{"Split"}, 13, split_to_input},
      {{"Softmax", "LogSoftmax"}, 13, softmax_axis},
      {{"Split"}, 18, split_num_outputs},
      {{"ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp",
        "ReduceL1", "ReduceL2"},
       18,
       axes_to_input},
  };
  return kSteps;
}

bool has_steps(std::string_view op) {
  return std::any_of(steps().begin(), steps().end(), [&](const Step& step) {
    return std::find(step.ops.begin(), step.ops.end(), op) != step.ops.end();
  });
}

/// Converts every default-domain node of `graph` from `from` to `target`; mutates as it goes.
Result<size_t> convert(ir::Graph& graph, int64_t from, int64_t target) {
  size_t converted = 0;
  for (ir::Node* node : graph.nodes()) {  // a step erases at most the node it converts
    if (!node->domain().empty()) continue;
    if (!has_steps(node->op_type())) {
      if (!OpRegistry::builtin().find("", node->op_type(), static_cast<int>(target)))
        return node_error(*node, "upgrade-opset has no rule for this op and LoKA has no kernel for it at opset " +
                                     std::to_string(target));
      continue;
    }
    bool touched = false;
    const std::string op = node->op_type();  // a Softmax step erases the node
    for (const Step& step : steps()) {
      if (step.version <= from || step.version > target) continue;
      if (std::find(step.ops.begin(), step.ops.end(), op) == step.ops.end()) continue;
      LOKA_RETURN_IF_ERROR(step.convert(graph, *node));
      touched = true;
      if (op == "Softmax" || op == "LogSoftmax") break;  // the node may be gone
    }
    converted += touched;
  }
  graph.opsets[""] = target;
  return converted;
}

Result<int64_t> current_opset(const ir::Graph& graph, int64_t target) {
  if (target > kNewestOpset)
    return Status::error("upgrade-opset: target opset " + std::to_string(target) + " is newer than " +
                         std::to_string(kNewestOpset) + ", the newest LoKA knows");
  auto it = graph.opsets.find("");
  if (it == graph.opsets.end()) return Status::error("upgrade-opset: the graph imports no ai.onnx opset");
  if (it->second < kOldestUpgradableOpset && it->second < target)
    return Status::error("upgrade-opset: opset " + std::to_string(it->second) + " is older than " +
                         std::to_string(kOldestUpgradableOpset) + ", the oldest it converts from");
  return it->second;
}

}  // namespace

Status check_opset_upgrade(const ir::Graph& graph, int64_t target) {
  LOKA_ASSIGN_OR_RETURN(const int64_t from, current_opset(graph, target));
  if (target <= from) return Status::ok();
  std::unique_ptr<ir::Graph> trial = graph.clone();
  return convert(*trial, from, target).status();
}

Result<size_t> upgrade_opset(ir::Graph& graph, int64_t target) {
  LOKA_ASSIGN_OR_RETURN(const int64_t from, current_opset(graph, target));
  if (target <= from) return size_t{0};
  LOKA_RETURN_IF_ERROR(check_opset_upgrade(graph, target));  // all or nothing
  return convert(graph, from, target);
}

Result<FusionOpset> require_opset_for_fusion(ir::Graph& graph, int64_t opset, size_t matches, PassContext& context) {
  auto current = graph.opsets.find("");
  if (current != graph.opsets.end() && current->second >= opset) return FusionOpset::kAlready;
  if (!check_opset_upgrade(graph, opset)) {
    context.add_statistic("skipped-opset-not-upgradable", static_cast<double>(matches));
    return FusionOpset::kNotUpgradable;
  }
  LOKA_ASSIGN_OR_RETURN(const size_t converted, upgrade_opset(graph, opset));
  context.add_statistic("opset-raised-to-" + std::to_string(opset));
  context.add_statistic("nodes-converted-by-upgrade", static_cast<double>(converted));
  return FusionOpset::kRaised;
}

namespace {

class UpgradeOpsetPass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    const int64_t target = context.int_option("target");
    auto it = graph.opsets.find("");
    const bool raises = it == graph.opsets.end() || it->second < target;
    LOKA_ASSIGN_OR_RETURN(const size_t converted, upgrade_opset(graph, target));
    context.add_statistic("nodes-converted", static_cast<double>(converted));
    if (converted > 0) LOKA_RETURN_IF_ERROR(ir::infer_shapes(graph));  // type the nodes a conversion added
    return raises;
  }
};

}  // namespace

PassInfo upgrade_opset_pass_info() {
  return PassInfo{"upgrade-opset",
                  "raise the ai.onnx opset, converting nodes whose signature changed (Reduce axes, Split, Squeeze, "
                  "Softmax, Dropout, Clip, Pad, Slice)",
                  {{"target", OptionType::kInt, "17", "ai.onnx opset to reach (never lowered)"}},
                  {"nodes-converted"}};
}

std::unique_ptr<Pass> make_upgrade_opset_pass() { return std::make_unique<UpgradeOpsetPass>(); }

}  // namespace loka
