// ============================================================================
// passes/dispatch/norm_timer.cc — the cost-model and perf-DB norm timers.
// ============================================================================
#include "passes/dispatch/norm_timer.h"

#include "kernels/registry/cost_model.h"

namespace loka::dispatch {
namespace {

using kernels::NormKey;
using kernels::NormShape;

class CostModelNormTimer final : public NormTimer {
 public:
  std::string source() const override { return "cost_model"; }
  Result<std::vector<NormTiming>> time(const NormKey& key, const NormShape& shape) override {
    std::vector<NormTiming> out;
    for (const kernels::NormCandidate& c : kernels::norm_candidates(key, shape, /*cudnn_engines=*/0))
      out.push_back({c, kernels::model_norm_time_us(key, shape), 0.0});
    return out;
  }
};

class PerfDbNormTimer final : public NormTimer {
 public:
  PerfDbNormTimer(PerfDb& db, DeviceFingerprint device, NormMeasureFn measure, PerfDbUse& use, int cudnn_engines)
      : db_(db), device_(std::move(device)), measure_(std::move(measure)), use_(use), cudnn_engines_(cudnn_engines) {}
  std::string source() const override { return "measured"; }
  Result<std::vector<NormTiming>> time(const NormKey& key, const NormShape& shape) override {
    return answer_or_measure<NormTiming>(db_, device_, norm_problem_key(key, shape),
                                         kernels::norm_candidates(key, shape, cudnn_engines_),
                                         [&] { return measure_(key, shape); }, use_);
  }

 private:
  PerfDb& db_;
  DeviceFingerprint device_;
  NormMeasureFn measure_;
  PerfDbUse& use_;
  int cudnn_engines_;
};

}  // namespace

std::unique_ptr<NormTimer> make_cost_model_norm_timer() { return std::make_unique<CostModelNormTimer>(); }

std::unique_ptr<NormTimer> make_perf_db_norm_timer(PerfDb& db, DeviceFingerprint device, NormMeasureFn measure,
                                                   PerfDbUse& use, int cudnn_engines) {
  return std::make_unique<PerfDbNormTimer>(db, std::move(device), std::move(measure), use, cudnn_engines);
}

std::string norm_problem_key(const NormKey& key, const NormShape& shape) {
  return key.to_string() + "|" + shape.to_string();
}

}  // namespace loka::dispatch
