// ============================================================================
// passes/ir/text_format.h — the IR's textual form, which parses back.
//
// Used by golden tests (input IR, pipeline, expected IR) and --print-ir-after.
// Example:
//
//   graph "tiny" {
//     opset "" 17
//     meta "loka.version" "1"
//     input %x : f32[batch,4]
//     init %w : f32[3,4] = [0.5, -1, ...]
//     %y = Gemm(%x, %w, _) {alpha = 1f, transB = 1} : f32[batch,3] @"gemm_0"
//     %q = ai.loka::LayerNormQuant(%y) : f8e4m3fn[batch,3] @"ln_0"
//     output %q
//   }
//
// Values are `%name` (quoted when not [A-Za-z0-9_.:/-]); `_` is an omitted
// input; dims are sizes, symbols or `?`; `[*]` is an unknown rank. Floats
// print with 9 significant digits and an `f` suffix so they read back
// exactly; 16- and 8-bit float tensors print their codes in hex.
// ============================================================================
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "loka/status.h"
#include "passes/ir/graph.h"

namespace loka::ir {

/// The textual form of `graph`, nodes in topological order.
std::string print_graph(const Graph& graph);
/// The same text with each initializer's values left out ("= ..."): the graph's structure, types
/// and metadata, for fingerprints that hash the values separately (passes/pass_cache.cc).
std::string print_graph_structure(const Graph& graph);
/// The textual form of one type, e.g. "f32[batch,4]".
std::string print_type(const TensorType& type);
/// Parses the textual form; errors give the line and what was expected.
Result<std::unique_ptr<Graph>> parse_graph(std::string_view text);

}  // namespace loka::ir
