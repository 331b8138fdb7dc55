// ============================================================================
// passes/mods/measure_candidate.cc — calibration-data measurement of a selection
// of FP8 sites through the switched model (see the header for the metrics).
// ============================================================================
#include "passes/mods/measure_candidate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <string>

#include "passes/probe/drawn_labels.h"
#include "passes/probe/metrics.h"
#include "passes/probe/tapped_run.h"
#include "runtime/test_data.h"

namespace loka {

Result<CandidateMeter> CandidateMeter::create(const ir::Graph& reference, const std::vector<probe::SiteSwitches>& sites,
                                              const std::filesystem::path& calibration, probe::BudgetMetric metric,
                                              Device device) {
  CandidateMeter meter;
  meter.metric_ = metric;
  meter.sites_ = sites.size();
  LOKA_ASSIGN_OR_RETURN(const DataSetReader reader, DataSetReader::open(calibration));
  if (reader.size() == 0) return Status::error("no data sets in " + calibration.string());
  LOKA_ASSIGN_OR_RETURN(const probe::ProbeModel model, probe::build_probe_model(reference, sites));
  const std::vector<std::string> input_names = probe::data_input_names(reference);
  for (size_t o = 0; o < model.model_outputs; ++o) meter.model_outputs_.push_back(o);
  int64_t rows = 1;
  for (size_t b = 0; b < reader.size(); ++b) {
    LOKA_ASSIGN_OR_RETURN(const DataSet data, reader.read(b));
    Batch batch;
    LOKA_ASSIGN_OR_RETURN(batch.inputs, order_inputs(data, input_names));
    if (!batch.inputs.empty() && batch.inputs[0].rank() > 0) rows = std::max(rows, batch.inputs[0].dim(0));
    batch.inputs.push_back(Tensor::zeros(DType::kInt32, {static_cast<int64_t>(sites.size())}));
    if (metric == probe::BudgetMetric::kLogloss) {
      // Without labels.pb, the labels the Probe drew from the FP32 Sigmoid output (same seed per set).
      if (data.labels) batch.labels = data.labels->to_floats();
      else if (probe::first_output_is_probability(reference)) batch.label_seed = probe::drawn_label_seed(b);
      else return Status::error("calibration data " + data.location.string() + ": no labels.pb");
    }
    meter.batches_.push_back(std::move(batch));
  }
  LOKA_ASSIGN_OR_RETURN(meter.engine_, probe::load_for_rows(model.bytes, device, rows, "switched model (pin-precision)"));
  meter.session_ = meter.engine_->new_session();
  double total = 0;
  for (Batch& batch : meter.batches_) {
    LOKA_ASSIGN_OR_RETURN(batch.reference, meter.session_->run_selected(batch.inputs, meter.model_outputs_));
    if (metric == probe::BudgetMetric::kLogloss) {
      if (batch.reference.empty()) return Status::error("reference model: no outputs");
      if (batch.label_seed) batch.labels = probe::draw_labels(batch.reference[0], *batch.label_seed);
      batch.reference_logloss = probe::logloss_terms(batch.reference[0], batch.labels);
      for (double term : batch.reference_logloss) total += term;
    }
  }
  if (metric == probe::BudgetMetric::kLogloss && !(total > 0))
    return Status::error("calibration data " + calibration.string() + ": the FP32 logloss is 0, drift is undefined");
  return meter;
}

Result<SelectionError> CandidateMeter::measure(std::span<const int32_t> mode) {
  if (mode.size() != sites_)
    return Status::error("a selection of " + std::to_string(mode.size()) + " sites for a meter of " + std::to_string(sites_));
  probe::OutputChange change;
  for (Batch& batch : batches_) {
    std::copy(mode.begin(), mode.end(), batch.inputs.back().data<int32_t>());
    LOKA_ASSIGN_OR_RETURN(const std::vector<Tensor> outputs, session_->run_selected(batch.inputs, model_outputs_));
    if (outputs.size() != batch.reference.size())
      return Status::error("candidate model: " + std::to_string(outputs.size()) + " outputs, the reference has " +
                           std::to_string(batch.reference.size()));
    const Status added = metric_ == probe::BudgetMetric::kLogloss
                             ? change.add_logloss(batch.reference_logloss, probe::logloss_terms(outputs[0], batch.labels))
                             : change.add_outputs(batch.reference, outputs);
    if (!added) return Status::error("candidate model: " + added.message());
  }
  if (metric_ == probe::BudgetMetric::kLogloss)
    return SelectionError{change.value(metric_), change.sample_noise(metric_), change.samples};
  return SelectionError{change.value(metric_)};
}

}  // namespace loka
