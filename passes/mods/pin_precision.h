// ============================================================================
// passes/mods/pin_precision.h — `pin-precision`: the Probe's verdicts become
// one precision and recipe per FP8 candidate site.
//
// Does: for every candidate site (passes/probe/sites.h) writes "precision"
// ("fp8_e4m3" | "bf16" | "fp32") and, for FP8, "recipe" into the node's
// annotation; a site decided by a user rule (--pin 'REGEX=fp8|bf16|fp32',
// std::regex searched in the node name, later rules win) also gets
// "pinned_by": the rule. Unpinned sites are chosen greedily by FLOPs gained
// per unit of predicted model error while the prediction stays within the
// budget (--budget; "auto" resolves to what the Probe recorded):
//   rel_l2 / max_abs budgets: sqrt(sum of squares of the selected sites'
//                             end-to-end error means) — independent errors
//                             add in quadrature;
//   logloss budget:           sum of their logloss drift means (conservative).
// Each selected site takes e4m3_tensor (static scale, no quantize kernel)
// when it fits, else e4m3_row. Sites the Probe judged unsafe, sites without
// measurements and sites insert-scales cannot lower are never selected unless
// pinned fp8 (a pin cannot make an unlowerable site FP8: it stays fp32 with
// the reason recorded). Everything else is "fp32" — LoKA's CPU path computes
// in FP32, so bf16 only when pinned. The unpinned selection spends the budget
// less option `reserve` (default 0.02: 2% of it), which stays for `dispatch`
// to run FP32 nodes on TF32/BF16 tensor cores (their added error is small:
// second order for a logloss budget); reserve=0 lets the sites take it all.
// Measured (option measure): each site joins only if the switched model with
// the selection still fits on the calibration data; after the GEMM sites come
// BF16 activation sets (store_activations_bf16.h: model.precision.
// bf16_activations, lowered by store-activations-bf16), then the lookups, then
// BF16 tables for the lookups left out of FP8 (precision "bf16",
// "table_storage_by": "pin-precision", stored by store-tables-bf16) — each one
// more switch of the same run, so its error is measured jointly with the rest.
// Model-level fields go to document["model"]["precision"]: predicted error,
// FP8 FLOP share, FP8 sites, the reserve and the selection limit.
// Requires: shape-inferred IR annotated by `probe`. Guarantees: every
// candidate site has exactly one precision, consistent with insert-scales;
// reports "changed" only when the annotation document changed.
// Does not: rewrite nodes (insert-scales and the storage passes do).
// ============================================================================
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace loka {

/// Pass description: name "pin-precision", its statistics.
PassInfo pin_precision_pass_info();
/// A fresh `pin-precision` pass.
std::unique_ptr<Pass> make_pin_precision_pass();
/// Checks --pin rules ('REGEX=fp8|bf16|fp32') as the pass will read them, so a tool can refuse a
/// bad one before the Probe spends minutes ahead of it.
Status check_pin_rules(const std::vector<std::string>& rules);

}  // namespace loka
