// ============================================================================
// passes/dispatch/gemm_timer.h — where Dispatch gets each candidate's time
// and error: the cost model (no GPU), or measurements through the perf DB.
//
// The cost-model timer offers algorithm 0 of each family only (an index is
// meaningless without the GPU that orders them) and no FAST_ACCUM variants
// (their error must be measured); its errors are the formats' expected
// rounding errors (docs/dispatch.md). The perf-DB timer answers from the
// database when it holds this device's entries for the problem, and
// otherwise measures (through `measure`, the GPU autotuner in loka-opt,
// a fake in tests) and records the results.
// ============================================================================
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/registry/gemm_kernel_key.h"
#include "kernels/registry/kernel_registry.h"
#include "loka/status.h"
#include "passes/dispatch/perf_db.h"

namespace loka::dispatch {

/// One candidate's time and error for one problem.
struct CandidateTiming {
  kernels::GemmCandidate candidate;
  double time_us = 0;
  double rel_error = 0;  ///< relative L2 of the GEMM output against FP32
};

class GemmTimer {
 public:
  virtual ~GemmTimer() = default;
  /// "cost_model" or "measured".
  virtual std::string source() const = 0;
  /// What the plan's algorithm indices are valid for (kernels::kCostModelDevice for the model).
  virtual std::string device() const = 0;
  /// Every viable candidate of the problem with its time and error, in registry order.
  virtual Result<std::vector<CandidateTiming>> time(const kernels::GemmKey& key, const kernels::GemmShape& shape) = 0;
};

/// The expected relative output error of a candidate's rounding when nothing is measured.
double expected_rel_error(const kernels::GemmCandidate& candidate, const kernels::GemmKey& key);

std::unique_ptr<GemmTimer> make_cost_model_timer();

/// Every candidate a measurement may record: the most heuristic algorithms and every variant.
kernels::CandidateOptions all_candidates();

/// Measures one problem: every viable candidate with its median time and error.
using MeasureFn = std::function<Result<std::vector<CandidateTiming>>(const kernels::GemmKey&, const kernels::GemmShape&)>;

/// Answers from `db` (entries of `device` only), measuring what is missing and adding it to `db`.
/// Only the candidates `offered` expands to are answered: a database filled with FAST_ACCUM
/// variants, or more heuristic algorithms, must not bring them back into a run that turned
/// them off. The default offers every candidate a measurement can record.
std::unique_ptr<GemmTimer> make_perf_db_timer(PerfDb& db, DeviceFingerprint device, MeasureFn measure, PerfDbUse& use,
                                              const kernels::CandidateOptions& offered = all_candidates());

/// The problem's perf DB key: "<GemmKey>|<GemmShape>".
std::string problem_key(const kernels::GemmKey& key, const kernels::GemmShape& shape);

}  // namespace loka::dispatch
