// ============================================================================
// passes/mods/fuse_embedding_bags.h — `fuse-embedding-bags`: the exporters'
// per-table embedding bags and the Concat stacking them become one
// ai.loka::EmbeddingBags (a table-batched lookup, docs/loka_ops.md).
//
// What: PyTorch exports every sum-pooled embedding bag of a recommendation
// model as four nodes, and stacks the tables' results with a Concat:
//
//        sparse[B,H] ─▶ Slice(axis 1, [o0,o1)) ─▶ Gather(T0) ─▶ ReduceSum(axis 1) ─▶ Unsqueeze(1) ─┐
//        sparse[B,H] ─▶ Slice(axis 1, [o1,o2)) ─▶ QuantizedGather(T1, s1) ─▶ ReduceSum ─▶ Unsqueeze ─┼─▶ Concat(axis 1) ─▶ [B,T,D]
//        ...                                                                                       ─┘
//      becomes
//        sparse[B,H] ─▶ ai.loka::EmbeddingBags(sparse, T0, -, T1, s1, ...){offsets=[o0,o1,o2,...]} ─▶ [B,T,D]
//
// A ReduceSum with keepdims=1 (already [B,1,D]) stands for ReduceSum +
// Unsqueeze, and a Gather reading all of `sparse` for a Slice covering it.
// Each maximal run of consecutive Concat inputs whose bags read contiguous
// column ranges of the same id matrix becomes one EmbeddingBags; other
// Concat inputs stay, in order, around it.
//
// Why: four kernels and an intermediate [B, bag, D] tensor per table, then a
// copy into the Concat, are replaced by one launch that pools every table
// straight into its slot of the output (26 tables: ~130 kernels become one).
// On the CPU the op sums in the same order and precision as ReduceSum over
// Gather/QuantizedGather, so the rewrite is bit-exact there.
//
// Requires: infer-shapes has run (the id matrix's column count must be
// known); Concat over axis 1 of a rank-3 output; Slice over axis 1 with step
// 1 and constant bounds; Gather on axis 0 of a 2-D float32 initializer, or a
// QuantizedGather; every intermediate value read once and not a graph output;
// all tables of a run with the same row width D.
// Guarantees: a Concat replaced whole keeps its name and output value; the
// fused node's annotation lists the absorbed lookups in "from", and each
// lookup's own annotation (the Probe's site) stays, marked "fused_into".
// Does not: fuse mean/max pooling, variable-length bags (offsets inputs),
// bags not stacked by a Concat, or tables with different D in one run.
// ============================================================================
#pragma once

#include <memory>

#include "passes/pass.h"

namespace loka {

/// Name, summary, options and statistics of `fuse-embedding-bags`.
PassInfo fuse_embedding_bags_pass_info();
/// A fresh `fuse-embedding-bags` pass.
std::unique_ptr<Pass> make_fuse_embedding_bags_pass();

}  // namespace loka
