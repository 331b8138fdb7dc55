// ============================================================================
// passes/mods/store_tables_bf16.h — `store-tables-bf16`: embedding tables that
// stayed FP32 are stored in BF16 where the error budget allows.
//
// Why: pin-precision takes embedding tables into FP8 last (they have no GEMM
// FLOPs), from what the GEMM sites left of the budget, so on a model whose
// budget is tight some tables stay FP32: 7 of full-size DLRM-DCNv2's 26, 179
// of its 205 MB of weights (H200 benchmark, 2026-11-28). BF16 halves their
// bytes at rest and in every gathered row, and its rounding (7 mantissa bits,
// relative error up to 2^-8) is about 1/16 of E4M3's.
//
// Does: for each float32 table of an ai.loka::EmbeddingBags whose lookup site
// pin-precision left fp32 (not by a user pin), prices BF16 as the site's
// Probe-measured FP8 model error (its best E4M3 recipe) scaled by the ratio of
// the table's BF16 rounding error to that recipe's quantization error, both
// relative L2 over the whole table (squared for a logloss budget:
// passes/dispatch/budget_use.h). Tables are taken largest first while the
// priced errors fit the headroom pin-precision left (its reserve when it
// measured its selection); a table the user pinned bf16 is stored in BF16
// whatever it costs. The table's initializer becomes BFLOAT16 (a new one when
// another node also reads it); the lookup's annotation gets precision "bf16",
// "table_storage": "bf16" and the priced "storage_error"; the EmbeddingBags
// annotation counts its tables per format; model.precision.storage_error
// records what was spent, and dispatch's headroom is that much smaller.
// Not in the default pipeline yet: name it after fuse-embedding-bags in --pipeline. On the
// full-size benchmark models (H200, 2026-11-28, logloss budget 0.02%) it stored DLRM-DCNv2's 7
// FP32 tables (weights 205 -> 154 MB, device memory at 4096 442 -> 390 MB, eval drift -0.0006%
// -> -0.0004%), but DHEN's 7 tables, priced at 7.3e-8, moved its eval drift by 2.1e-5 (0.0196%
// -> 0.0217%, over the budget): the squared ratio under-prices a logloss budget there (linear
// would still be 18x low). Pricing from pin-precision's measured rejections of the tables is
// the next step.
// Requires: fuse-embedding-bags has run; pin-precision's annotations.
// Guarantees: the model stays within what pin-precision's budget use allows
// (by the summed prediction); the CPU and CUDA runtimes read BF16 tables
// exactly (docs/loka_ops.md), so both compute with the same stored values.
// Does not: touch tables read by plain Gathers (their output would become
// BF16), FP8 tables, or anything without a known budget ("auto" unresolved).
// ============================================================================
#pragma once

#include <memory>

#include "passes/pass.h"

namespace loka {

/// Name, summary, options and statistics of `store-tables-bf16`.
PassInfo store_tables_bf16_pass_info();
/// A fresh `store-tables-bf16` pass.
std::unique_ptr<Pass> make_store_tables_bf16_pass();

}  // namespace loka
