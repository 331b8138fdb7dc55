// ============================================================================
// tools/inspect/dot_graph.h — the model graph in Graphviz form, for loka-inspect.
//
// One palette colours nodes by precision and Probe verdict, shared by the
// `--dot` file, the SVG drawn into the `--html` report and that report's
// legend. Rendering runs Graphviz's `dot` program (Debian package graphviz)
// as a child process; LoKA does not link Graphviz's libraries, so a missing
// `dot` is a clear one-line error, not a build dependency.
// ============================================================================
#pragma once

#include <nlohmann/json.hpp>

#include <span>
#include <string>

#include "loka/status.h"
#include "passes/ir/graph.h"

namespace loka::inspect {

/// One colour of the palette and what it means.
struct Swatch {
  const char* meaning;
  const char* color;
};

/// The palette in legend order (FP8, safe, unsafe, undecided, bf16, other).
std::span<const Swatch> palette();

/// Fill colour of a node entry (loka-inspect's node list: "precision", "verdict").
std::string node_color(const nlohmann::json& node);

/// `dot` source: one box per entry of `nodes` (named by "name"), edges from `graph`'s dataflow.
std::string to_dot(const ir::Graph& graph, const nlohmann::json& nodes);

/// Runs Graphviz's `dot -Tsvg` on `dot_source` and returns the SVG document;
/// an error when `dot` is not on the PATH or fails.
Result<std::string> render_svg(const std::string& dot_source);

}  // namespace loka::inspect
