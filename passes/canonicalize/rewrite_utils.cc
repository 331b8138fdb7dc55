// ============================================================================
// passes/canonicalize/rewrite_utils.cc — shared rewrite helpers (see header).
//
// Keeping a name across a replacement: the readers (and graph-output slot)
// of the old value move to a temporary value, the old producers are erased
// (which frees the name), the new value is created under the freed name, and
// the readers move on to it.
// ============================================================================
#include "passes/canonicalize/rewrite_utils.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <set>

namespace loka::canonicalize {

const Tensor* constant_data(const ir::Value* value) {
  if (value == nullptr || value->is_graph_input()) return nullptr;
  if (value->is_initializer()) return &*value->initializer();
  const ir::Node* producer = value->producer();
  if (producer == nullptr || !producer->is("Constant")) return nullptr;
  auto it = producer->attributes().all().find("value");
  return it == producer->attributes().all().end() ? nullptr : std::get_if<Tensor>(&it->second);
}

std::optional<double> scalar_constant(const ir::Value* value) {
  const Tensor* data = constant_data(value);
  if (data == nullptr || data->element_count() != 1) return std::nullopt;
  if (dtype_is_float(data->dtype())) return static_cast<double>(data->to_floats()[0]);
  if (data->dtype() == DType::kInt64 || data->dtype() == DType::kInt32) return static_cast<double>(data->to_int64s()[0]);
  return std::nullopt;
}

std::optional<std::vector<int64_t>> int_list_constant(const ir::Value* value) {
  const Tensor* data = constant_data(value);
  if (data == nullptr || dtype_is_float(data->dtype()) || data->rank() > 1) return std::nullopt;
  return data->to_int64s();
}

std::optional<std::vector<int64_t>> attribute_or_input_ints(const ir::Node& node, const std::string& name, size_t index) {
  if (node.attributes().has(name)) {
    auto listed = node.attributes().get_ints(name);
    return listed ? std::optional<std::vector<int64_t>>(*listed) : std::nullopt;
  }
  if (node.input(index) == nullptr) return std::vector<int64_t>{};
  return int_list_constant(node.input(index));
}

bool has_exactly_uses(const ir::Value* value, size_t count) {
  return value != nullptr && !value->is_graph_output() && value->uses().size() == count;
}

ir::Node* sole_reader_of(const ir::Value* value, const char* op) {
  if (!has_exactly_uses(value, 1)) return nullptr;
  ir::Node* reader = value->uses()[0].node;
  return reader->is(op) ? reader : nullptr;
}

ir::Value* other_operand(const ir::Node* node, const ir::Value* value) {
  if (node->inputs().size() != 2) return nullptr;
  if (node->input(0) == value && node->input(1) != value) return node->input(1);
  if (node->input(1) == value && node->input(0) != value) return node->input(0);
  return nullptr;
}

namespace {

/// Moves the readers and graph-output slot of `value` to a fresh temporary value.
ir::Value* detach(ir::Graph& graph, ir::Value* value) {
  ir::Value* temporary = graph.add_value(graph.unique_value_name("loka.detached"), value->type());
  if (value->has_uses() || value->is_graph_output()) graph.replace_all_uses_with(value, temporary);
  return temporary;
}

/// Moves the readers of `temporary` to `value` and drops the temporary.
void attach(ir::Graph& graph, ir::Value* temporary, ir::Value* value) {
  if (temporary->has_uses() || temporary->is_graph_output()) graph.replace_all_uses_with(temporary, value);
  graph.erase_value(temporary);
}

}  // namespace

Status erase_nodes(ir::Graph& graph, const std::vector<ir::Node*>& nodes) {
  std::vector<ir::Node*> pending = nodes;
  while (!pending.empty()) {
    auto unread = std::find_if(pending.begin(), pending.end(), [](const ir::Node* node) {
      return std::none_of(node->outputs().begin(), node->outputs().end(),
                          [](const ir::Value* v) { return v->has_uses() || v->is_graph_output(); });
    });
    if (unread == pending.end())
      return Status::error("cannot erase node '" + pending.front()->name() + "': its outputs are still read");
    graph.erase_node(*unread);
    pending.erase(unread);
  }
  return Status::ok();
}

Status replace_with_initializers(ir::Graph& graph, ir::Node* node, std::vector<Tensor> tensors) {
  if (tensors.size() != node->outputs().size())
    return Status::error("node '" + node->name() + "': " + std::to_string(tensors.size()) + " tensors for " +
                         std::to_string(node->outputs().size()) + " outputs");
  for (const ir::Value* output : node->outputs())
    if (output->is_graph_output())
      return Status::error("node '" + node->name() + "': output '" + output->name() + "' is a graph output");
  struct Pending {
    std::string name;
    ir::Value* temporary;
    Tensor tensor;
  };
  std::vector<Pending> pending;
  for (size_t i = 0; i < tensors.size(); ++i) {
    ir::Value* output = node->output(i);
    if (output->has_uses()) pending.push_back({output->name(), detach(graph, output), std::move(tensors[i])});
  }
  graph.erase_node(node);
  for (Pending& p : pending) attach(graph, p.temporary, graph.add_initializer(p.name, std::move(p.tensor)));
  return Status::ok();
}

Result<ir::Node*> replace_with_node(ir::Graph& graph, ir::Value* root, const std::vector<ir::Node*>& absorbed,
                                    NodeSpec spec) {
  const std::set<const ir::Node*> members(absorbed.begin(), absorbed.end());
  if (!members.count(root->producer())) return Status::error("value '" + root->name() + "' is not produced by the match");
  for (const ir::Node* node : absorbed)
    for (const ir::Value* output : node->outputs()) {
      if (output == root) continue;
      const bool escapes = output->is_graph_output() ||
                           std::any_of(output->uses().begin(), output->uses().end(),
                                       [&](const ir::Use& use) { return !members.count(use.node); });
      if (escapes) return Status::error("value '" + output->name() + "' of the match is read outside it");
    }
  for (const ir::Value* input : spec.inputs)
    if (input && members.count(input->producer()))
      return Status::error("replacement input '" + input->name() + "' is computed inside the match");

  const std::string name = root->name();
  const ir::TensorType type = root->type();
  ir::Value* temporary = detach(graph, root);
  LOKA_RETURN_IF_ERROR(erase_nodes(graph, absorbed));
  ir::Value* output = graph.add_value(name, type);
  std::vector<ir::Value*> outputs{output};
  for (auto& [extra_name, extra_type] : spec.extra_outputs)
    outputs.push_back(graph.add_value(graph.unique_value_name(extra_name), std::move(extra_type)));
  ir::Node* node = graph.add_node_with_outputs(spec.op_type, spec.inputs, outputs, spec.name, spec.domain);
  node->mutable_attributes() = std::move(spec.attributes);
  attach(graph, temporary, output);
  return node;
}

int64_t default_opset(const ir::Graph& graph) {
  const auto opset = graph.opsets.find("");
  return opset == graph.opsets.end() ? 0 : opset->second;
}

ir::Value* int64_initializer(ir::Graph& graph, const std::string& name, const std::vector<int64_t>& values) {
  return graph.add_initializer(graph.unique_value_name(name),
                               Tensor::from_int64s({static_cast<int64_t>(values.size())}, values));
}

std::vector<int64_t> perm_swapping_last_two(int64_t rank) {
  std::vector<int64_t> perm(static_cast<size_t>(std::max<int64_t>(rank, 2)));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  std::swap(perm[perm.size() - 2], perm.back());
  return perm;
}

Tensor transpose_2d(const Tensor& tensor) {
  const int64_t rows = tensor.dim(0), cols = tensor.dim(1);
  Tensor out = Tensor::zeros(tensor.dtype(), {cols, rows});
  const size_t width = dtype_size(tensor.dtype());
  const auto* src = static_cast<const std::byte*>(tensor.raw());
  auto* dst = static_cast<std::byte*>(out.raw());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) std::memcpy(dst + (c * rows + r) * width, src + (r * cols + c) * width, width);
  return out;
}

Attributes without_attributes(const Attributes& attributes, const std::vector<std::string>& names) {
  Attributes kept;
  for (const auto& [name, value] : attributes.all())
    if (std::find(names.begin(), names.end(), name) == names.end()) kept.set(name, value);
  return kept;
}

}  // namespace loka::canonicalize
