// ============================================================================
// passes/ir/graph.cc — IR storage and the mutation API that keeps use-lists exact.
// ============================================================================
#include "passes/ir/graph.h"

#include <algorithm>
#include <cassert>

namespace loka::ir {

bool TensorType::is_static() const {
  if (!shape) return false;
  return std::all_of(shape->begin(), shape->end(), [](const Dim& d) { return d.is_known(); });
}

Shape TensorType::static_shape() const {
  Shape dims;
  if (shape)
    for (const Dim& d : *shape) dims.push_back(d.value);
  return dims;
}

TensorType TensorType::of(DType dtype, const Shape& dims) {
  TensorType type{dtype, std::vector<Dim>{}};
  for (int64_t d : dims) type.shape->push_back(Dim::known(d));
  return type;
}

namespace {

/// `stem`, or `stem_<k>` for the first free k. `next_suffix` remembers where the
/// last search for a stem ended, so naming n nodes "Relu" costs O(n log n), not O(n^2).
template <typename Map>
std::string first_free_name(const std::string& stem, const Map& taken, std::map<std::string, size_t>& next_suffix) {
  if (!taken.count(stem)) return stem;
  size_t& k = next_suffix[stem];
  for (;;) {
    std::string candidate = stem + "_" + std::to_string(++k);
    if (!taken.count(candidate)) return candidate;
  }
}

}  // namespace

std::string Graph::unique_value_name(const std::string& base) const {
  return first_free_name(base.empty() ? "v" : base, value_names_, next_value_suffix_);
}

std::string Graph::unique_node_name(const std::string& base) const {
  return first_free_name(base.empty() ? "node" : base, node_names_, next_node_suffix_);
}

Value* Graph::add_value(const std::string& name, TensorType type) {
  auto value = std::make_unique<Value>();
  value->id_ = static_cast<uint32_t>(values_.size());
  value->name_ = unique_value_name(name);
  value->type_ = std::move(type);
  Value* raw = value.get();
  value_names_[raw->name_] = raw;
  values_.push_back(std::move(value));
  return raw;
}

Value* Graph::add_initializer(const std::string& name, Tensor tensor) {
  Value* value = add_value(name, TensorType::of(tensor.dtype(), tensor.shape()));
  value->initializer_ = std::move(tensor);
  return value;
}

void Graph::set_initializer(Value* value, Tensor tensor) {
  value->type_ = TensorType::of(tensor.dtype(), tensor.shape());
  value->initializer_ = std::move(tensor);
}

void Graph::add_input(Value* value) {
  value->graph_input_ = true;
  inputs_.push_back(value);
}

void Graph::add_output(Value* value) {
  value->graph_output_ = true;
  outputs_.push_back(value);
}

void Graph::remove_input(Value* value) {
  inputs_.erase(std::remove(inputs_.begin(), inputs_.end(), value), inputs_.end());
  value->graph_input_ = false;
}

void Graph::remove_output(Value* value) {
  outputs_.erase(std::remove(outputs_.begin(), outputs_.end(), value), outputs_.end());
  value->graph_output_ = std::find(outputs_.begin(), outputs_.end(), value) != outputs_.end();
}

Node* Graph::add_node(const std::string& op_type, const std::vector<Value*>& inputs, size_t output_count,
                      const std::string& name, const std::string& domain) {
  const std::string node_name = unique_node_name(name.empty() ? op_type : name);
  std::vector<Value*> outputs;
  for (size_t i = 0; i < output_count; ++i)
    outputs.push_back(add_value(output_count == 1 ? node_name : node_name + "_" + std::to_string(i)));
  return add_node_with_outputs(op_type, inputs, outputs, node_name, domain);
}

Node* Graph::add_node_with_outputs(const std::string& op_type, const std::vector<Value*>& inputs,
                                   const std::vector<Value*>& outputs, const std::string& name,
                                   const std::string& domain) {
  auto node = std::make_unique<Node>();
  node->id_ = static_cast<uint32_t>(nodes_.size());
  node->name_ = unique_node_name(name.empty() ? op_type : name);
  node->op_type_ = op_type;
  node->domain_ = domain == "ai.onnx" ? "" : domain;
  Node* raw = node.get();
  node_names_[raw->name_] = raw;
  nodes_.push_back(std::move(node));
  ++live_nodes_;
  raw->inputs_ = inputs;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i]) add_use(inputs[i], raw, i);
  raw->outputs_ = outputs;
  for (size_t i = 0; i < outputs.size(); ++i) {
    assert(outputs[i] && outputs[i]->producer_ == nullptr && "value already has a producer");
    outputs[i]->producer_ = raw;
    outputs[i]->producer_output_ = i;
  }
  return raw;
}

void Graph::add_use(Value* value, Node* node, size_t index) { value->uses_.push_back(Use{node, index}); }

void Graph::remove_use(Value* value, Node* node, size_t index) {
  auto& uses = value->uses_;
  auto it = std::find(uses.begin(), uses.end(), Use{node, index});
  assert(it != uses.end() && "use-list out of sync");
  uses.erase(it);
}

void Graph::set_input(Node* node, size_t index, Value* value) {
  if (index >= node->inputs_.size()) node->inputs_.resize(index + 1, nullptr);
  if (Value* old = node->inputs_[index]) remove_use(old, node, index);
  node->inputs_[index] = value;
  if (value) add_use(value, node, index);
}

void Graph::replace_all_uses_with(Value* from, Value* to) {
  assert(from != to);
  const std::vector<Use> uses = from->uses_;  // snapshot: set_input edits the list
  for (const Use& use : uses) set_input(use.node, use.input_index, to);
  if (from->graph_output_) {
    for (Value*& output : outputs_)
      if (output == from) output = to;
    from->graph_output_ = false;
    to->graph_output_ = true;
  }
}

void Graph::erase_node(Node* node) {
  for (Value* output : node->outputs_) {
    assert(!output->has_uses() && !output->graph_output_ && "erasing a node whose output is still used");
    output->producer_ = nullptr;
  }
  for (size_t i = 0; i < node->inputs_.size(); ++i)
    if (node->inputs_[i]) remove_use(node->inputs_[i], node, i);
  const std::vector<Value*> outputs = node->outputs_;
  node_names_.erase(node->name_);
  --live_nodes_;
  nodes_[node->id_].reset();
  for (Value* output : outputs) erase_value(output);
}

void Graph::erase_value(Value* value) {
  assert(!value->has_uses() && value->producer_ == nullptr && !value->graph_input_ && !value->graph_output_ &&
         "erasing a value that is still connected");
  value_names_.erase(value->name_);
  values_[value->id_].reset();
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> live;
  live.reserve(live_nodes_);
  for (const auto& node : nodes_)
    if (node) live.push_back(node.get());
  return live;
}

std::vector<Value*> Graph::values() const {
  std::vector<Value*> live;
  for (const auto& value : values_)
    if (value) live.push_back(value.get());
  return live;
}

Value* Graph::find_value(const std::string& name) const {
  auto it = value_names_.find(name);
  return it == value_names_.end() ? nullptr : it->second;
}

bool Graph::rename_node(Node* node, const std::string& name) {
  if (node->name_ == name) return true;
  if (name.empty() || node_names_.count(name)) return false;
  node_names_.erase(node->name_);
  node->name_ = name;
  node_names_[name] = node;
  return true;
}

Node* Graph::find_node(const std::string& name) const {
  auto it = node_names_.find(name);
  return it == node_names_.end() ? nullptr : it->second;
}

std::unique_ptr<Graph> Graph::clone() const {
  auto copy = std::make_unique<Graph>();
  copy->name = name;
  copy->opsets = opsets;
  copy->metadata = metadata;
  copy->ir_version = ir_version;
  copy->producer_name = producer_name;
  copy->producer_version = producer_version;
  copy->live_nodes_ = live_nodes_;
  copy->values_.resize(values_.size());
  for (size_t i = 0; i < values_.size(); ++i) {
    if (!values_[i]) continue;
    auto value = std::make_unique<Value>(*values_[i]);
    value->producer_ = nullptr;
    value->uses_.clear();
    copy->value_names_[value->name_] = value.get();
    copy->values_[i] = std::move(value);
  }
  const auto map_value = [&](Value* v) { return v ? copy->values_[v->id_].get() : nullptr; };
  copy->nodes_.resize(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i]) continue;
    auto node = std::make_unique<Node>(*nodes_[i]);
    for (auto& input : node->inputs_) input = map_value(input);
    for (auto& output : node->outputs_) output = map_value(output);
    copy->node_names_[node->name_] = node.get();
    copy->nodes_[i] = std::move(node);
  }
  for (const auto& node : copy->nodes_) {
    if (!node) continue;
    for (size_t i = 0; i < node->inputs_.size(); ++i)
      if (node->inputs_[i]) node->inputs_[i]->uses_.push_back(Use{node.get(), i});
    for (size_t i = 0; i < node->outputs_.size(); ++i) {
      node->outputs_[i]->producer_ = node.get();
      node->outputs_[i]->producer_output_ = i;
    }
  }
  for (Value* v : inputs_) copy->inputs_.push_back(map_value(v));
  for (Value* v : outputs_) copy->outputs_.push_back(map_value(v));
  return copy;
}

}  // namespace loka::ir
