// ============================================================================
// passes/ir/verifier.h — structural invariants, checked between passes.
//
// Run after every pass in tests and debug builds (and by loka-opt with
// --verify-each): every read value is defined (graph input, initializer or a
// live node's output), producers and use-lists agree both ways, outputs are
// defined, the dataflow is acyclic, types that are known are well formed
// (supported dtype, non-negative dims), and every node's domain has an opset
// import (unless the graph imports none, as bare test graphs). Type *consistency* with each op is
// checked by shape inference (passes/ir/shape_inference.h).
// ============================================================================
#pragma once

#include "loka/status.h"
#include "passes/ir/graph.h"

namespace loka::ir {

/// Ok, or the first violated invariant naming the node or value.
Status verify_graph(const Graph& graph);

}  // namespace loka::ir
