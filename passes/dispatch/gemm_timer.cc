// ============================================================================
// passes/dispatch/gemm_timer.cc — the cost-model and perf-DB timers.
// ============================================================================
#include "passes/dispatch/gemm_timer.h"

#include <cmath>

#include "kernels/registry/cost_model.h"
#include "kernels/registry/cublaslt_tiles.h"
#include "kernels/registry/kernel_plan.h"
#include "kernels/registry/kernel_registry.h"

namespace loka::dispatch {
namespace {

using kernels::GemmCandidate;
using kernels::GemmKey;
using kernels::GemmPrecision;
using kernels::GemmShape;

/// Relative L2 error of a dot product whose operands carry independent
/// relative rounding errors of RMS u/√3 each (round to nearest, unit roundoff u).
double rounding_error(double x_unit_roundoff, double w_unit_roundoff) {
  return std::sqrt((x_unit_roundoff * x_unit_roundoff + w_unit_roundoff * w_unit_roundoff) / 3.0);
}

constexpr double kE4M3 = 1.0 / 16;   // 3 mantissa bits: u = 2^-4
constexpr double kBf16 = 1.0 / 256;  // 8-bit significand (7 stored): u = 2^-8
constexpr double kTf32 = 1.0 / 2048; // 11-bit significand (10 stored): u = 2^-11

class CostModelTimer final : public GemmTimer {
 public:
  std::string source() const override { return "cost_model"; }
  std::string device() const override { return kernels::kCostModelDevice; }
  Result<std::vector<CandidateTiming>> time(const GemmKey& key, const GemmShape& shape) override {
    std::vector<CandidateTiming> out;
    kernels::CandidateOptions modelled;  // algorithm 0 of each family, no FAST_ACCUM (see the header)
    modelled.algorithms = 1;
    modelled.fast_accum = false;
    for (const GemmCandidate& c : kernels::gemm_candidates(key, shape, modelled))
      out.push_back({c, kernels::model_gemm_time(c, key, shape).total_us, expected_rel_error(c, key)});
    return out;
  }
};

class PerfDbTimer final : public GemmTimer {
 public:
  PerfDbTimer(PerfDb& db, DeviceFingerprint device, MeasureFn measure, PerfDbUse& use,
              const kernels::CandidateOptions& offered)
      : db_(db), device_(std::move(device)), measure_(std::move(measure)), use_(use), offered_(offered) {}
  std::string source() const override { return "measured"; }
  std::string device() const override { return device_.to_string(); }
  Result<std::vector<CandidateTiming>> time(const GemmKey& key, const GemmShape& shape) override {
    return answer_or_measure<CandidateTiming>(db_, device_, problem_key(key, shape),
                                              kernels::gemm_candidates(key, shape, offered_),
                                              [&] { return measure_(key, shape); }, use_);
  }

 private:
  PerfDb& db_;
  DeviceFingerprint device_;
  MeasureFn measure_;
  PerfDbUse& use_;
  kernels::CandidateOptions offered_;
};

}  // namespace

double expected_rel_error(const GemmCandidate& c, const GemmKey& key) {
  const bool fp8_weights = key.weight == DType::kFloat8E4M3FN;
  // A BF16 X (BF16 activation storage) is exact in TF32 and BF16: only W rounds there.
  const bool bf16_x = key.input == DType::kBFloat16;
  switch (c.precision) {
    case GemmPrecision::kFp32: return 0.0;
    case GemmPrecision::kTf32: return rounding_error(bf16_x ? 0.0 : kTf32, kTf32);
    case GemmPrecision::kBf16: return rounding_error(bf16_x ? 0.0 : kBf16, fp8_weights ? kE4M3 : kBf16);
    // A BF16 X exact, W carried by two BF16 terms: the second rounds the first's remainder (at
    // most 2^-8 of W, and exact when it is that large: a power of two) to 2^-8 of itself, so
    // 2^-17 of W (the most seen on normal weights).
    case GemmPrecision::kBf16x2: return rounding_error(0.0, kBf16 * kBf16 / 2);
    case GemmPrecision::kFp8E4M3:
    case GemmPrecision::kFp8Emulated: return rounding_error(kE4M3, kE4M3);
  }
  return 0.0;
}

std::unique_ptr<GemmTimer> make_cost_model_timer() { return std::make_unique<CostModelTimer>(); }

kernels::CandidateOptions all_candidates() {
  constexpr int kMaxAlgorithms = 64;  // above any heuristic count a measurement records
  return kernels::CandidateOptions{kMaxAlgorithms, true, true, true, {2, 4}, kernels::kOfferedTilesPerFamily,
                                   kernels::kOfferedCudnnEngines, /*tanh_gelu=*/true, /*small_m=*/true};
}

std::unique_ptr<GemmTimer> make_perf_db_timer(PerfDb& db, DeviceFingerprint device, MeasureFn measure, PerfDbUse& use,
                                              const kernels::CandidateOptions& offered) {
  return std::make_unique<PerfDbTimer>(db, std::move(device), std::move(measure), use, offered);
}

std::string problem_key(const GemmKey& key, const GemmShape& shape) { return key.to_string() + "|" + shape.to_string(); }

}  // namespace loka::dispatch
