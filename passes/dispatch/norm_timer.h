// ============================================================================
// passes/dispatch/norm_timer.h — where Dispatch gets each norm candidate's
// time and error: the cost model (no GPU), or measurements through the perf DB
// (kernels/cuda/norm_autotune.h on the GPU, a fake in tests).
//
// The cost model offers LoKA's kernel alone (cuDNN's engines exist only where
// a GPU builds them) at its roofline time, with no error: the plan it writes
// is complete and deterministic. The perf-DB timer shares the GEMM timer's
// rules (passes/dispatch/perf_db.h): answered from this device's records when
// it holds any, else measured and recorded.
// ============================================================================
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/registry/norm_kernel_key.h"
#include "loka/status.h"
#include "passes/dispatch/perf_db.h"

namespace loka::dispatch {

/// One norm candidate's time and error for one problem.
struct NormTiming {
  kernels::NormCandidate candidate;
  double time_us = 0;
  double rel_error = 0;  ///< relative L2 of the output against the FP32 (double-statistics) reference
};

class NormTimer {
 public:
  virtual ~NormTimer() = default;
  virtual std::string source() const = 0;  ///< "cost_model" or "measured"
  /// Every viable candidate of the problem with its time and error, in registry order.
  virtual Result<std::vector<NormTiming>> time(const kernels::NormKey& key, const kernels::NormShape& shape) = 0;
};

std::unique_ptr<NormTimer> make_cost_model_norm_timer();

/// Measures one problem: every viable candidate with its median time and error.
using NormMeasureFn = std::function<Result<std::vector<NormTiming>>(const kernels::NormKey&, const kernels::NormShape&)>;

/// Answers from `db` (entries of `device` only) for LoKA's kernel and cuDNN engines
/// 0..cudnn_engines-1, measuring what is missing and adding it to `db`.
std::unique_ptr<NormTimer> make_perf_db_norm_timer(PerfDb& db, DeviceFingerprint device, NormMeasureFn measure,
                                                   PerfDbUse& use, int cudnn_engines);

/// The problem's perf DB key: "<NormKey>|<NormShape>".
std::string norm_problem_key(const kernels::NormKey& key, const kernels::NormShape& shape);

}  // namespace loka::dispatch
