// ============================================================================
// passes/dispatch/budget_use.h — what of the model error budget pin-precision
// spent, and what it left for choices that add error.
//
// pin-precision fills the budget with FP8 sites and leaves a headroom (see
// BudgetUse). Two later passes spend it on choices that add a little error for
// memory or speed: store-tables-bf16 (embedding tables FP8 could not carry,
// stored in BF16, their cost measured on the calibration data) and dispatch
// (TF32/BF16 kernels for FP32 nodes, priced as the site's Probe-measured FP8
// model error scaled by the ratio of the kernel's GEMM error to FP8's, squared
// for a logloss budget). What store-tables-bf16 spends is recorded in
// model.precision.storage_error and comes off dispatch's headroom.
// ============================================================================
#pragma once

#include <algorithm>

#include <nlohmann/json.hpp>

#include "loka/status.h"
#include "passes/probe/budget.h"

namespace loka::dispatch {

/// The model budget pin-precision spent, and what is left for error-adding choices.
///
/// A predicted selection spends `predicted` of the budget (the sites' errors summed): the rest
/// is headroom. A measured selection (pin-precision{measure}, on the GPU by default) admits
/// sites while the *measured* calibration error stays within margin x (budget less the
/// reserve), so its summed prediction may well exceed the budget, and `limit - predicted`
/// would leave dispatch nothing: every FP32 node then ran SIMT FP32 (0.5 ms a launch on
/// full-size DHEN's 640x128 combine MatMuls, H200, 2026-11-26). Such a selection's headroom
/// is what it promised to leave, the reserve; the rest of its margin stays unspent, as room
/// for the eval data to differ from the calibration data (on full-size models the eval drift
/// has come out above the calibration figure, never below).
struct BudgetUse {
  bool known = false;
  probe::BudgetMetric metric = probe::BudgetMetric::kRelL2;
  double limit = 0, predicted = 0;
  bool measured = false;
  double reserve = 0;        ///< measured: the share of the budget pin-precision left
  double storage_error = 0;  ///< spent already by store-tables-bf16 (model.precision.storage_error)
  double headroom() const {
    if (!known) return 0.0;
    const double left = measured ? limit * reserve : limit - predicted;
    return std::max(0.0, left - storage_error);
  }
  /// What pin-precision's selection and the tables stored in BF16 are taken to spend.
  double spent() const { return (measured ? limit * (1.0 - reserve) : predicted) + storage_error; }
};

/// The budget use recorded in the annotation document's model.precision (unknown without one,
/// or with an "auto" budget); an error for a malformed budget string.
Result<BudgetUse> budget_use(const nlohmann::json& document);

}  // namespace loka::dispatch
