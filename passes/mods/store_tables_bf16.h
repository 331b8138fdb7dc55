// ============================================================================
// passes/mods/store_tables_bf16.h — `store-tables-bf16`: embedding tables that
// stayed FP32 are stored in BF16 where the error budget allows.
//
// Why: pin-precision takes embedding tables into FP8 last (they have no GEMM
// FLOPs), from what the GEMM sites left of the budget, so on a model whose
// budget is tight some tables stay FP32: 7 of full-size DLRM-DCNv2's 26, 107
// of its 205 MB of weights (H200 benchmark, 2026-11-28). BF16 halves their
// bytes at rest and in every gathered row, and its rounding (7 mantissa bits,
// relative error up to 2^-8) is about 1/16 of E4M3's.
//
// Does: takes the float32 tables of every ai.loka::EmbeddingBags whose lookup
// site pin-precision did not pin (a user's bf16 pin stores a table whatever
// it costs; an fp32 pin keeps it), largest first, and measures what storing
// them in BF16 moves the model by on the calibration data: the model as it
// stands against a trial with the tables in BF16, every calibration set, in
// the budget's metric (logloss: the pooled drift plus the eval-set noise
// bound pin-precision uses). All of them at once first (one trial when they
// fit), else one more table at a time, kept when the set still fits the
// headroom pin-precision left (its reserve when it measured its selection,
// else the budget less its prediction). The trials run on the GPU when there
// is one, else on the CPU runtime; option max_rows caps the rows of each set.
// A stored table's initializer becomes BFLOAT16 (a new one when another node
// also reads the FP32 one); its lookup's annotation gets precision "bf16" and
// "table_storage": "bf16", a table left FP32 a "storage_reason"; the
// EmbeddingBags annotation counts its tables per format; the measured cost
// goes to model.precision.storage_error, and dispatch's headroom is that much
// smaller.
//
// Measured, not predicted: pricing a table from its Probe FP8 error scaled by
// the BF16/FP8 rounding ratio (squared for logloss, as dispatch prices
// TF32/BF16 GEMMs) stored full-size DHEN's 7 FP32 tables at a price of
// 7.3e-8 and moved its eval drift by 2.1e-5 (0.0196% -> 0.0217%, over the
// 0.02% budget; H200, 2026-11-28).
// Requires: fuse-embedding-bags has run; pin-precision's annotations; --calib
// data (without it only pinned tables are stored).
// Guarantees: by the triangle inequality, the model's measured error stays
// within the selection's plus the headroom; the CPU and CUDA runtimes read
// BF16 tables exactly (docs/loka_ops.md), so both compute with the same
// stored values.
// Does not: touch tables read by plain Gathers (their output would become
// BF16) or FP8 tables.
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
