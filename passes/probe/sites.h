// ============================================================================
// passes/probe/sites.h — where FP8 could be used: the Probe's candidate sites.
//
// A site is a node whose math could run in FP8:
//   * weight GEMM   — Gemm, or MatMul with a 2-D constant right operand:
//                     activation x weight, weights scaled per output channel;
//   * activation MatMul — MatMul between two computed tensors (interactions,
//                     attention): both operands are activations;
//   * embedding     — Gather from a 2-D constant table (FP8 rows, per-row scale).
// Sites are found on shape-inferred IR; FLOPs are per sample (per unit of the
// leading batch dim).
// ============================================================================
#pragma once

#include <string>
#include <vector>

#include "passes/ir/graph.h"

namespace loka::probe {

enum class SiteKind { kWeightGemm, kActivationMatMul, kEmbedding };

const char* site_kind_name(SiteKind kind);

struct Site {
  std::string node;           ///< node name (stable across export/import)
  std::string op;
  SiteKind kind;
  size_t activation_input = 0;  ///< input slot of the (first) activation
  size_t weight_input = 1;      ///< input slot of the weight / table / second activation
  bool weight_transposed = false;  ///< Gemm transB: weight stored [N, K]
  bool activation_transposed = false;  ///< Gemm transA: activation stored [K, M]
  double flops_per_sample = 0;
  // Embedding sites only (0 elsewhere): what an FP8 table saves, in elements, at rest and per
  // sample read (ids per sample x row width). They have no GEMM FLOPs, so these rank them.
  double table_elements = 0;
  double gathered_per_sample = 0;
  std::string shape = {};      ///< e.g. "[batch,512]x[512,256]" for reports
};

/// Candidate sites of `graph`, in topological order.
std::vector<Site> find_sites(const ir::Graph& graph);

}  // namespace loka::probe
