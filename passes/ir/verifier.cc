// ============================================================================
// passes/ir/verifier.cc — structural invariants of the IR.
// ============================================================================
#include "passes/ir/verifier.h"

#include <algorithm>

#include "passes/ir/graph_algorithms.h"

namespace loka::ir {
namespace {

bool is_defined(const Graph& graph, const Value* value) {
  if (value->is_graph_input() || value->is_initializer()) return true;
  const Node* producer = value->producer();
  return producer != nullptr && graph.node_by_id(producer->id()) == producer;
}

Status check_type(const Value& value) {
  const TensorType& type = value.type();
  if (type.dtype != DType::kUndefined && !dtype_is_supported(static_cast<int32_t>(type.dtype)))
    return Status::error("value '" + value.name() + "' has unsupported type " + std::string(dtype_name(type.dtype)));
  if (type.shape)
    for (const Dim& dim : *type.shape)
      if (dim.value < -1) return Status::error("value '" + value.name() + "' has a negative dimension");
  return Status::ok();
}

}  // namespace

Status verify_graph(const Graph& graph) {
  for (const Node* node : graph.nodes()) {
    const std::string where = "node '" + node->name() + "' (" + node->op_type() + "): ";
    // A model imports every domain its nodes use; a pass that adds the first node of a domain
    // adds its import (the runtimes refuse the model otherwise).
    const std::string& domain = node->domain() == "ai.onnx" ? std::string() : node->domain();
    if (!graph.opsets.empty() && !graph.opsets.contains(domain))
      return Status::error(where + "its domain '" + (domain.empty() ? "ai.onnx" : domain) +
                           "' has no opset import");
    for (size_t i = 0; i < node->inputs().size(); ++i) {
      const Value* input = node->input(i);
      if (input == nullptr) continue;
      if (graph.value_by_id(input->id()) != input) return Status::error(where + "reads an erased value");
      if (!is_defined(graph, input)) return Status::error(where + "reads '" + input->name() + "', which nothing defines");
      const auto& uses = input->uses();
      if (std::find(uses.begin(), uses.end(), Use{const_cast<Node*>(node), i}) == uses.end())
        return Status::error(where + "input " + std::to_string(i) + " is missing from the use-list of '" +
                             input->name() + "'");
    }
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      const Value* output = node->output(i);
      if (output->producer() != node || output->producer_output_index() != i)
        return Status::error(where + "output '" + output->name() + "' names another producer");
      if (output->is_initializer() || output->is_graph_input())
        return Status::error(where + "writes '" + output->name() + "', which is also an input or initializer");
    }
  }
  for (const Value* value : graph.values()) {
    LOKA_RETURN_IF_ERROR(check_type(*value));
    for (const Use& use : value->uses()) {
      if (graph.node_by_id(use.node->id()) != use.node || use.node->input(use.input_index) != value)
        return Status::error("value '" + value->name() + "' lists a reader that does not read it");
    }
  }
  for (const Value* output : graph.outputs())
    if (!is_defined(graph, output)) return Status::error("graph output '" + output->name() + "' is not defined");
  if (auto order = topological_order(graph); !order) return order.status();
  return Status::ok();
}

}  // namespace loka::ir
