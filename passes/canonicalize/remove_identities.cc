// ============================================================================
// passes/canonicalize/remove_identities.cc — `remove-identities` (see header).
// ============================================================================
#include "passes/canonicalize/remove_identities.h"

#include "passes/canonicalize/rewrite_utils.h"

namespace loka {
namespace {

/// Dropout computes its input unchanged: not in training mode (or dropping nothing), mask unread.
bool is_inference_dropout(const ir::Node& node) {
  if (node.outputs().size() > 1 && (node.output(1)->has_uses() || node.output(1)->is_graph_output())) return false;
  const ir::Value* training = node.input(2);
  if (training == nullptr) return true;
  if (auto flag = canonicalize::scalar_constant(training); flag && *flag == 0) return true;
  const Tensor* mode = canonicalize::constant_data(training);
  if (mode && mode->dtype() == DType::kBool && mode->element_count() == 1 && mode->to_int64s()[0] == 0) return true;
  auto ratio = canonicalize::scalar_constant(node.input(1));
  return ratio && *ratio == 0;
}

class RemoveIdentitiesPass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    bool changed = false;
    for (ir::Node* node : graph.nodes()) {
      const bool identity = node->is("Identity") && node->inputs().size() == 1;
      const bool dropout = node->is("Dropout") && is_inference_dropout(*node);
      if ((!identity && !dropout) || node->input(0) == nullptr) continue;
      ir::Value* output = node->output(0);
      if (output->is_graph_output()) {
        context.add_statistic("kept-for-graph-output");
        continue;
      }
      graph.replace_all_uses_with(output, node->input(0));
      graph.erase_node(node);
      context.add_statistic(identity ? "identities-removed" : "dropouts-removed");
      changed = true;
    }
    return changed;
  }
};

}  // namespace

PassInfo remove_identities_pass_info() {
  return PassInfo{"remove-identities", "remove Identity and inference-mode Dropout nodes (graph outputs keep their names)",
                  {},
                  {"identities-removed", "dropouts-removed", "kept-for-graph-output"}};
}

std::unique_ptr<Pass> make_remove_identities_pass() { return std::make_unique<RemoveIdentitiesPass>(); }

}  // namespace loka
