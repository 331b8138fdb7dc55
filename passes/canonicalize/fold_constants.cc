// ============================================================================
// passes/canonicalize/fold_constants.cc — `fold-constants` (see header).
//
// One walk in topological order suffices for chains: a folded node's outputs
// are initializers by the time its readers are visited.
// ============================================================================
#include "passes/canonicalize/fold_constants.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "passes/canonicalize/rewrite_utils.h"
#include "passes/ir/graph_algorithms.h"
#include "passes/ir/shape_inference.h"
#include "runtime/op_kernel.h"

namespace loka {
namespace {

/// Ops never folded: nondeterministic, or structure later passes must see.
bool never_folded(const ir::Node& node) {
  static constexpr std::array<std::string_view, 8> kKept = {
      "QuantizeLinear", "DequantizeLinear", "RandomNormal", "RandomUniform", "RandomNormalLike",
      "RandomUniformLike", "Multinomial", "Bernoulli"};
  return !node.domain().empty() || std::find(kKept.begin(), kKept.end(), node.op_type()) != kKept.end();
}

bool all_inputs_constant(const ir::Node& node) {
  return std::all_of(node.inputs().begin(), node.inputs().end(), [](const ir::Value* input) {
    return input == nullptr || (input->is_initializer() && !input->is_graph_input());
  });
}

/// True when every output has a statically known type of at most `max_elements` elements.
bool outputs_bounded(const ir::Node& node, int64_t max_elements) {
  auto types = ir::infer_node_types(node);
  if (!types) return false;
  return std::all_of(types->begin(), types->end(), [&](const ir::TensorType& type) {
    if (!type.is_static()) return false;
    auto count = checked_element_count(type.static_shape());
    return count && *count <= max_elements;
  });
}

/// Runs the node's runtime kernel on its constant inputs.
Result<std::vector<Tensor>> evaluate(const ir::Graph& graph, const ir::Node& node) {
  auto opset = graph.opsets.find(node.domain());
  if (opset == graph.opsets.end()) return Status::error("no opset for domain '" + node.domain() + "'");
  LOKA_ASSIGN_OR_RETURN(KernelFactory factory,
                        OpRegistry::builtin().find(node.domain(), node.op_type(), static_cast<int>(opset->second)));
  const KernelInit init{node.name(), node.op_type(), node.domain(), static_cast<int>(opset->second),
                        node.inputs().size(), node.outputs().size(), node.attributes()};
  LOKA_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, factory(init));
  std::vector<Tensor> inputs;
  for (const ir::Value* input : node.inputs()) inputs.push_back(input ? *input->initializer() : Tensor());
  std::vector<Tensor> outputs(node.outputs().size());
  KernelContext context(nullptr);
  LOKA_RETURN_IF_ERROR(kernel->run(inputs, outputs, context));
  return outputs;
}

class FoldConstantsPass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    const int64_t max_elements = context.int_option("max-elements");
    LOKA_ASSIGN_OR_RETURN(const std::vector<ir::Node*> order, ir::topological_order(graph));
    bool changed = false;
    for (ir::Node* node : order) {
      if (never_folded(*node) || !all_inputs_constant(*node)) continue;
      const bool writes_output = std::any_of(node->outputs().begin(), node->outputs().end(),
                                             [](const ir::Value* v) { return v->is_graph_output(); });
      if (writes_output) continue;
      if (!outputs_bounded(*node, max_elements)) {
        context.add_statistic("skipped-unbounded");
        continue;
      }
      auto outputs = evaluate(graph, *node);
      if (!outputs) {
        context.add_statistic("skipped-no-kernel-or-error");
        continue;
      }
      const bool constant_node = node->is("Constant");
      LOKA_RETURN_IF_ERROR(canonicalize::replace_with_initializers(graph, node, std::move(outputs).value()));
      context.add_statistic(constant_node ? "constants-to-initializers" : "nodes-folded");
      changed = true;
    }
    return changed;
  }
};

}  // namespace

PassInfo fold_constants_pass_info() {
  return PassInfo{"fold-constants",
                  "evaluate nodes whose inputs are all constants with the runtime's kernels; Constant nodes become "
                  "initializers",
                  {{"max-elements", OptionType::kInt, std::to_string(kDefaultMaxFoldedElements),
                    "largest folded output (elements); bigger results stay computed at run time"}},
                  {"nodes-folded", "constants-to-initializers", "skipped-unbounded", "skipped-no-kernel-or-error"}};
}

std::unique_ptr<Pass> make_fold_constants_pass() { return std::make_unique<FoldConstantsPass>(); }

}  // namespace loka
