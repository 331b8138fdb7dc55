// ============================================================================
// passes/canonicalize/eliminate_dead_code.cc — `eliminate-dead-code` (see header).
// ============================================================================
#include "passes/canonicalize/eliminate_dead_code.h"

#include <algorithm>

#include "passes/ir/graph_algorithms.h"

namespace loka {
namespace {

bool is_dead(const ir::Node& node) {
  return std::none_of(node.outputs().begin(), node.outputs().end(),
                      [](const ir::Value* v) { return v->has_uses() || v->is_graph_output(); });
}

class EliminateDeadCodePass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    LOKA_ASSIGN_OR_RETURN(std::vector<ir::Node*> order, ir::topological_order(graph));
    size_t nodes = 0, initializers = 0;
    // Reverse topological order: a node's readers are visited (and erased) before it.
    for (auto it = order.rbegin(); it != order.rend(); ++it)
      if (is_dead(**it)) {
        graph.erase_node(*it);
        ++nodes;
      }
    for (ir::Value* value : graph.values())
      if (value->is_initializer() && !value->has_uses() && !value->is_graph_input() && !value->is_graph_output()) {
        graph.erase_value(value);
        ++initializers;
      }
    context.add_statistic("nodes-removed", static_cast<double>(nodes));
    context.add_statistic("initializers-removed", static_cast<double>(initializers));
    return nodes + initializers > 0;
  }
};

}  // namespace

PassInfo eliminate_dead_code_pass_info() {
  return PassInfo{"eliminate-dead-code", "remove nodes no graph output depends on and unread initializers", {},
                  {"nodes-removed", "initializers-removed"}};
}

std::unique_ptr<Pass> make_eliminate_dead_code_pass() { return std::make_unique<EliminateDeadCodePass>(); }

}  // namespace loka
