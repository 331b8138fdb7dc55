// ============================================================================
// passes/dispatch/norm_problems.h — the norm nodes Dispatch chooses kernels
// for, with their functional key and their rows at each batch bucket.
//
// LayerNormalization (FP32, stash_type 1, normalized over dims [axis, rank)),
// ai.loka LayerNormQuant and ai.loka ResidualLayerNorm (the last axis). The
// CUDA runtime runs a norm whose Scale and B hold exactly the normalized width
// and whose Mean / InvStdDev outputs are unused; others (and norms whose shape
// cannot be evaluated at a bucket) are returned with the reason, so the plan
// says why they have no kernel.
// ============================================================================
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernels/registry/norm_kernel_key.h"
#include "passes/ir/graph.h"

namespace loka::dispatch {

struct NormProblem {
  const ir::Node* node = nullptr;
  kernels::NormKey key;
  std::vector<std::pair<int64_t, kernels::NormShape>> shapes;  ///< (bucket, shape), buckets ascending
  std::string reason;  ///< non-empty: no shapes (why)
};

/// The node's problem, or nothing when it is not a norm Dispatch handles.
std::optional<NormProblem> describe_norm(const ir::Node& node, const std::vector<int64_t>& buckets);

}  // namespace loka::dispatch
