// ============================================================================
// passes/probe/tapped_run.cc — the calibration run with tapped values.
// ============================================================================
#include "passes/probe/tapped_run.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>

#include "loka/session.h"
#include "passes/onnx/onnx_export.h"

namespace loka::probe {
namespace {

/// Where a requested value comes from in each batch: a graph input of the batch, or an output
/// of the tapped model (a position in the list run_selected brings back).
struct TapSource {
  bool from_input = false;
  size_t position = 0;
};

/// The tapped model loaded for one batch size (CUDA: its only bucket; CPU: any size).
struct LoadedModel {
  std::shared_ptr<const Engine> engine;
  std::unique_ptr<Session> session;
  int64_t rows = 0;
};

/// The first `rows` rows of every input when all of them have more and share their leading dim;
/// the inputs as they are otherwise (a model whose inputs are not all per-sample, e.g. offsets).
std::vector<Tensor> leading_rows(std::vector<Tensor> inputs, int64_t rows) {
  if (rows <= 0 || inputs.empty()) return inputs;
  const int64_t batch = inputs[0].rank() == 0 ? 0 : inputs[0].dim(0);
  if (batch <= rows) return inputs;
  for (const Tensor& input : inputs)
    if (input.rank() == 0 || input.dim(0) != batch) return inputs;
  for (Tensor& input : inputs) {
    Shape shape = input.shape();
    shape[0] = rows;
    Tensor first = Tensor::zeros(input.dtype(), shape);
    std::memcpy(first.raw(), input.raw(), first.byte_size());
    input = std::move(first);
  }
  return inputs;
}

}  // namespace

std::vector<std::string> data_input_names(const ir::Graph& graph) {
  std::vector<std::string> names;
  for (const ir::Value* input : graph.inputs())
    if (!input->is_initializer()) names.push_back(input->name());
  return names;
}

Result<std::pair<DataSet, std::vector<Tensor>>> read_calibration_batch(const DataSetReader& reader, size_t index,
                                                                       const std::vector<std::string>& input_names,
                                                                       bool refuse_non_finite) {
  LOKA_ASSIGN_OR_RETURN(DataSet data, reader.read(index));
  LOKA_ASSIGN_OR_RETURN(std::vector<Tensor> inputs, order_inputs(data, input_names));
  if (refuse_non_finite)
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!dtype_is_float(inputs[i].dtype())) continue;
      for (float v : inputs[i].to_floats())
        if (!std::isfinite(v))
          return Status::error("calibration data " + data.location.string() + ": input '" + input_names[i] +
                               "' contains NaN or infinity");
    }
  return std::make_pair(std::move(data), std::move(inputs));
}

Result<std::shared_ptr<const Engine>> load_for_rows(const std::string& bytes, Device device, int64_t rows,
                                                    const std::string& name) {
  EngineOptions options;
  options.device = device;
  if (device == Device::kCuda) {
    options.max_batch = rows;
    options.batch_buckets = {rows};
  }
  return Engine::load_bytes(std::as_bytes(std::span(bytes.data(), bytes.size())), options, {}, name);
}

Status run_tapped(const ir::Graph& graph, std::span<const std::string> values, const DataSetReader& reader,
                  size_t batches, const TappedRunOptions& options,
                  const std::function<Status(const TappedBatch&)>& consume) {
  const std::vector<std::string> input_names = data_input_names(graph);
  std::unique_ptr<ir::Graph> tapped = graph.clone();
  std::vector<TapSource> sources;
  std::vector<size_t> wanted;  ///< output positions of the tapped model, each once
  for (const std::string& name : values) {
    ir::Value* value = tapped->find_value(name);
    if (value == nullptr) return Status::error(options.model_name + ": no value '" + name + "' to tap");
    if (value->is_initializer())
      return Status::error(options.model_name + ": '" + name + "' is an initializer: read it from the graph");
    if (value->is_graph_input()) {
      const auto it = std::find(input_names.begin(), input_names.end(), name);
      sources.push_back({true, static_cast<size_t>(it - input_names.begin())});
      continue;
    }
    auto output = std::find(tapped->outputs().begin(), tapped->outputs().end(), value);
    if (output == tapped->outputs().end()) {
      tapped->add_output(value);
      output = tapped->outputs().end() - 1;
    }
    const size_t position = static_cast<size_t>(output - tapped->outputs().begin());
    auto slot = std::find(wanted.begin(), wanted.end(), position);
    if (slot == wanted.end()) {
      wanted.push_back(position);
      slot = wanted.end() - 1;
    }
    sources.push_back({false, static_cast<size_t>(slot - wanted.begin())});
  }
  std::string bytes;
  if (!wanted.empty()) {
    LOKA_ASSIGN_OR_RETURN(bytes, onnx_io::export_model_bytes(*tapped));
  }
  tapped.reset();  // the bytes are all the Engine needs; a full-size copy of the weights need not stay

  std::optional<LoadedModel> model;
  const size_t count = std::min(batches, reader.size());
  for (size_t b = 0; b < count; ++b) {
    LOKA_ASSIGN_OR_RETURN(auto batch, read_calibration_batch(reader, b, input_names, options.refuse_non_finite_inputs));
    const DataSet& data = batch.first;
    const std::vector<Tensor> inputs = leading_rows(std::move(batch.second), options.max_rows);
    std::vector<Tensor> outputs;
    if (!wanted.empty()) {
      const int64_t rows = inputs.empty() || inputs[0].rank() == 0 ? 1 : inputs[0].dim(0);
      if (!model || (options.device == Device::kCuda && model->rows != rows)) {
        model.reset();  // one model on the device at a time
        LOKA_ASSIGN_OR_RETURN(auto engine, load_for_rows(bytes, options.device, rows, options.model_name));
        model = LoadedModel{engine, engine->new_session(), rows};
      }
      auto run = model->session->run_selected(inputs, wanted);
      if (!run) return run.status().with_context("calibration batch " + data.location.string() + ": ");
      outputs = std::move(run).value();
    }
    std::vector<Tensor> tensors;
    tensors.reserve(sources.size());
    for (const TapSource& source : sources) tensors.push_back(source.from_input ? inputs[source.position] : outputs[source.position]);
    LOKA_RETURN_IF_ERROR(consume(TappedBatch{b, data, tensors}));
  }
  return Status::ok();
}

}  // namespace loka::probe
