// ============================================================================
// passes/mods/measure_candidate.cc — calibration-data measurement of a lowered
// graph's model error (see the header for the metrics).
// ============================================================================
#include "passes/mods/measure_candidate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <string>

#include "loka/engine.h"
#include "loka/session.h"
#include "passes/onnx/onnx_export.h"
#include "passes/probe/metrics.h"
#include "runtime/test_data.h"

namespace loka {

template <typename Visit>
Status CandidateMeter::run_all(const ir::Graph& graph, const char* what, Visit&& visit) const {
  LOKA_ASSIGN_OR_RETURN(const std::string bytes, onnx_io::export_model_bytes(graph));
  LOKA_ASSIGN_OR_RETURN(auto engine,
                        Engine::load_bytes(std::as_bytes(std::span(bytes.data(), bytes.size())), {}, {}, what));
  std::vector<std::string> names;
  for (const TensorInfo& info : engine->inputs()) names.push_back(info.name);
  if (names != input_names_) return Status::error(std::string(what) + ": its inputs differ from the reference model's");
  auto session = engine->new_session();
  for (const Batch& batch : batches_) {
    auto outputs = session->run(std::span<const Tensor>(batch.inputs));
    if (!outputs) return outputs.status().with_context(std::string(what) + ": ");
    LOKA_RETURN_IF_ERROR(visit(batch, *outputs));
  }
  return Status::ok();
}

Result<CandidateMeter> CandidateMeter::create(const ir::Graph& reference, const std::filesystem::path& calibration,
                                              probe::BudgetMetric metric) {
  CandidateMeter meter;
  meter.metric_ = metric;
  LOKA_ASSIGN_OR_RETURN(const DataSetReader reader, DataSetReader::open(calibration));
  if (reader.size() == 0) return Status::error("no data sets in " + calibration.string());
  // The input order the runtime reports (it may omit initializer-backed inputs).
  {
    LOKA_ASSIGN_OR_RETURN(const std::string bytes, onnx_io::export_model_bytes(reference));
    LOKA_ASSIGN_OR_RETURN(auto engine, Engine::load_bytes(std::as_bytes(std::span(bytes.data(), bytes.size())), {},
                                                          {}, "reference model"));
    for (const TensorInfo& info : engine->inputs()) meter.input_names_.push_back(info.name);
  }
  for (size_t b = 0; b < reader.size(); ++b) {
    LOKA_ASSIGN_OR_RETURN(const DataSet data, reader.read(b));
    Batch batch;
    LOKA_ASSIGN_OR_RETURN(batch.inputs, order_inputs(data, meter.input_names_));
    if (metric == probe::BudgetMetric::kLogloss) {
      if (!data.labels) return Status::error("calibration data " + data.location.string() + ": no labels.pb");
      batch.labels = data.labels->to_floats();
    }
    meter.batches_.push_back(std::move(batch));
  }
  // The reference outputs, by index, filled by one run of the FP32 graph.
  size_t index = 0;
  double total = 0;
  LOKA_RETURN_IF_ERROR(meter.run_all(reference, "reference model", [&](const Batch&, std::vector<Tensor>& outputs) {
    Batch& batch = meter.batches_[index++];
    if (metric == probe::BudgetMetric::kLogloss) {
      if (outputs.empty()) return Status::error("reference model: no outputs");
      batch.reference_logloss = probe::logloss_terms(outputs[0], batch.labels);
      for (double term : batch.reference_logloss) total += term;
    }
    batch.reference = std::move(outputs);
    return Status::ok();
  }));
  meter.reference_logloss_ = total;
  if (metric == probe::BudgetMetric::kLogloss && !(meter.reference_logloss_ > 0))
    return Status::error("calibration data " + calibration.string() + ": the FP32 logloss is 0, drift is undefined");
  return meter;
}

Result<double> CandidateMeter::measure(const ir::Graph& candidate) const {
  double difference = 0, reference = 0, max_abs = 0, drift = 0, worst_set = 0;
  LOKA_RETURN_IF_ERROR(run_all(candidate, "candidate model", [&](const Batch& batch, std::vector<Tensor>& outputs) {
    if (outputs.size() != batch.reference.size())
      return Status::error("candidate model: " + std::to_string(outputs.size()) + " outputs, the reference has " +
                           std::to_string(batch.reference.size()));
    if (metric_ == probe::BudgetMetric::kLogloss) {
      const std::vector<double> terms = probe::logloss_terms(outputs[0], batch.labels);
      if (terms.size() != batch.reference_logloss.size())
        return Status::error("candidate model: first output changed size");
      double set_drift = 0, set_reference = 0;
      for (size_t i = 0; i < terms.size(); ++i) {
        set_drift += terms[i] - batch.reference_logloss[i];
        set_reference += batch.reference_logloss[i];
      }
      drift += set_drift;
      if (set_reference > 0) worst_set = std::max(worst_set, std::fabs(set_drift) / set_reference);
      return Status::ok();
    }
    for (size_t o = 0; o < outputs.size(); ++o) {
      if (!dtype_is_float(batch.reference[o].dtype())) continue;
      const std::vector<float> q = outputs[o].to_floats(), r = batch.reference[o].to_floats();
      if (q.size() != r.size()) return Status::error("candidate model: output " + std::to_string(o) + " changed size");
      for (size_t i = 0; i < q.size(); ++i) {
        const double d = static_cast<double>(q[i]) - r[i];
        if (!std::isfinite(d)) {
          max_abs = difference = std::numeric_limits<double>::infinity();
          continue;
        }
        difference += d * d;
        reference += static_cast<double>(r[i]) * r[i];
        max_abs = std::max(max_abs, std::fabs(d));
      }
    }
    return Status::ok();
  }));
  switch (metric_) {
    case probe::BudgetMetric::kLogloss: {
      // The pooled drift, and the drift of every data set on its own.
      const double relative = std::max(std::fabs(drift) / reference_logloss_, worst_set);
      return std::isfinite(relative) ? relative : std::numeric_limits<double>::infinity();
    }
    case probe::BudgetMetric::kMaxAbs:
      return max_abs;
    default:
      if (reference > 0) return std::sqrt(difference / reference);
      return difference > 0 ? std::numeric_limits<double>::infinity() : 0.0;
  }
}

}  // namespace loka
