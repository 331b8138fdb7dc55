// ============================================================================
// passes/mods/store_activations_bf16.h — BF16 storage of large activations:
// which sets of activations may be held in BF16 (chosen by pin-precision's
// measured selection), and `store-activations-bf16`, which retypes them in
// the lowered graph.
//
// Why: LoKA's FP8 GEMMs read FP8 codes, but the activations between them that
// something else also reads stay FP32: DLRM-DCNv2's cross-layer stream (x0 and
// each x_l, [B, 3456]) is read as the next layer's Multiplier and Residual and
// written again by every cross layer's epilogue, 15 bytes an element with the
// BF16 sums and the FP8 codes, 60 us a layer at batch 4096 on an H200 and
// 54 MB a tensor (docs/benchmarks.md, 2026-11-28). Held in BF16 they cost
// 9 bytes and 27 MB, for a rounding of 2^-8, 1/16 of E4M3's.
//
// A candidate is a *set*: the activations joined by view ops (Reshape,
// Unsqueeze, Squeeze, Flatten, Identity, Concat) share one storage, so they
// are BF16 together or not at all. Its *sources* are the nodes computing its
// values (rounded there: an activation is rounded once, where it is written);
// each must be the epilogue of a GEMM site (the GEMM itself, or Relu, Gelu,
// Add and Mul nodes after it, which fuse-gemm-epilogue folds into it) or an
// embedding bag (the ReduceSum of a lookup's rows). Its readers must
// be GEMM sites reading it as their activation (in FP8 or not: QuantizedGemm
// quantizes a BF16 X, FusedGemm widens it), or Mul and Add nodes after a GEMM
// site (a fused epilogue's Multiplier and Residual, which only the FP8
// QuantizedGemm's epilogue reads in BF16). A set that is a graph output is left
// alone, and so is a value only the next op of its GEMM's epilogue reads (the
// fusion absorbs it: it is never stored). pin-precision measures a candidate together with the FP8 sites
// (probe::SiteSwitches with the bf16 form on each source), and takes it when the
// GEMMs it names are FP8 and the model still fits the budget.
//
// `store-activations-bf16` then finds each chosen set in the lowered graph and
// retypes it when every source is an ai.loka QuantizedGemm's Y or an
// EmbeddingBags' output (written as BF16: attribute output_dtype) and every
// reader is a QuantizedGemm's X, Multiplier or Residual or a FusedGemm's X
// (docs/loka_ops.md); a
// set that did not lower so (a GEMM left FP32 by dispatch's lowering, an
// epilogue that did not fuse) stays FP32, which is at least as accurate as
// what was measured, and the report says why.
// Requires: pin-precision's model.precision.bf16_activations; the fusion
// passes have run. Guarantees: values are retyped only with every producer and
// reader able to write and read BF16, so the graph stays executable.
// ============================================================================
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "passes/ir/graph.h"
#include "passes/pass.h"
#include "passes/probe/sites.h"

namespace loka {

/// Activations stored in BF16 together (see the header comment).
struct ActivationStorageCandidate {
  std::vector<std::string> values;      ///< every value of the set
  std::vector<std::string> sources;     ///< nodes whose output 0 is a value of the set: the rounding points
  std::vector<std::string> gemm_sites;  ///< GEMM sites that must run in FP8: the sources' and the Mul/Add readers'
                                        ///< (their fused epilogues write or read BF16)
  double elements_per_sample = 0;       ///< of the set's largest value: what one sample stores
};

/// The candidate sets of `graph` (before fusion) whose largest value holds at least
/// `min_elements` per sample, largest first.
std::vector<ActivationStorageCandidate> find_activation_storage_candidates(const ir::Graph& graph,
                                                                          const std::vector<probe::Site>& sites,
                                                                          double min_elements);

PassInfo store_activations_bf16_pass_info();
std::unique_ptr<Pass> make_store_activations_bf16_pass();

}  // namespace loka
