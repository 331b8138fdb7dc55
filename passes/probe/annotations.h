// ============================================================================
// passes/probe/annotations.h — the annotation document carried inside a model.
//
// Stored as JSON in the model's metadata_props under "loka.annotations":
//   {"version": 1, "model": {...}, "nodes": {"<node name>": {...}}}
// Node entries follow ARCHITECTURE.md's contract: name, op, flops (per
// sample), precision, verdict, error / local_error ({rel_l2_mean,
// rel_l2_ci95, sqnr_db, batches, ...}), recipes, stats, kernel. Fields may be
// added, never renamed. loka-inspect --json prints the same data with "nodes"
// as a list in graph order.
// ============================================================================
#pragma once

#include <nlohmann/json.hpp>

#include "loka/status.h"
#include "passes/ir/graph.h"

namespace loka {

inline constexpr const char* kAnnotationsKey = "loka.annotations";
inline constexpr int kAnnotationsVersion = 1;

/// The graph's annotation document (an empty versioned one when absent).
Result<nlohmann::json> read_annotations(const ir::Graph& graph);
/// Stores `document` into the graph's metadata.
void write_annotations(ir::Graph& graph, const nlohmann::json& document);

}  // namespace loka
