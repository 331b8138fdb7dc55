// ============================================================================
// passes/ir/graph_algorithms.h — Boost.Graph views of the IR.
//
// The IR owns its data; these functions build a BGL adjacency list over node
// ids (edge = producer -> consumer) on demand and run BGL's non-recursive
// algorithms on it, so very deep graphs cannot overflow the stack.
// ============================================================================
#pragma once

#include <vector>

#include "loka/status.h"
#include "passes/ir/graph.h"

namespace loka::ir {

/// Nodes so that every producer precedes its consumers; ties keep insertion
/// order (deterministic). An error names a node on a cycle.
Result<std::vector<Node*>> topological_order(const Graph& graph);

/// True when the graph's dataflow has a cycle.
bool has_cycle(const Graph& graph);

}  // namespace loka::ir
