// ============================================================================
// passes/probe/tapped_run.h — the FP32 model run over calibration data, with
// chosen intermediate values brought back to the host batch by batch.
//
// Calibration (the Probe's amax phase, migrate-outliers' channel amax) needs
// the values some nodes read. An Observer sees them only on the CPU runtime (a
// GPU run has no per-node host hooks), and a CPU run of a full-size model over
// the calibration data took most of loka-opt's Probe and migrate-outliers time
// even on the GPU machine. So the values are tapped instead: a copy of the
// graph lists them as extra graph outputs, one Engine runs it on the device
// asked for, and each batch brings back only the tapped outputs. The same code
// runs on both devices, so the CPU tests check what the GPU runs.
//
// Requires: value names of `graph` that are computed by a node or are graph
// inputs (handed over from the batch itself, nothing runs for them).
// Initializers are refused: they are the same every batch, callers read them
// from the graph.
// Guarantees: a value asked for twice is one graph output, handed over twice;
// the values are exactly what the model's readers of them read on that device.
// On CUDA the Engine has one batch bucket of exactly the batch's rows, so no
// padded rows reach a tapped value (one whose leading dim is not the batch,
// [batch*heads, ...], would carry them); a batch of another size loads the
// model again at that size (calibration sets usually share one).
// Does not: keep batches or tapped values beyond the callback (memory is one
// batch's), or run anything but the FP32 model.
// ============================================================================
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "loka/engine.h"
#include "loka/status.h"
#include "loka/tensor.h"
#include "loka/test_data.h"
#include "passes/ir/graph.h"

namespace loka::probe {

/// The graph inputs a data set provides, in graph order (initializers listed as inputs excluded),
/// which is the order the runtime's Engine::inputs() has for the exported graph.
std::vector<std::string> data_input_names(const ir::Graph& graph);

/// Data set `index` of `reader`, its inputs arranged in `input_names` order. With
/// `refuse_non_finite`, a float input holding NaN or infinity is an error naming the data set
/// and the input (the Probe's rule: its statistics and error estimates would be meaningless).
Result<std::pair<DataSet, std::vector<Tensor>>> read_calibration_batch(const DataSetReader& reader, size_t index,
                                                                       const std::vector<std::string>& input_names,
                                                                       bool refuse_non_finite);

/// A model serialized in `bytes` loaded on `device` to run batches of exactly `rows` rows: on CUDA
/// with that single bucket (no padded rows, no larger arenas), on the CPU as is. Every model the
/// calibration-time passes run (tapped, switched) is loaded this way; `name` names it in errors.
Result<std::shared_ptr<const Engine>> load_for_rows(const std::string& bytes, Device device, int64_t rows,
                                                    const std::string& name);

/// One calibration batch's tapped values.
struct TappedBatch {
  size_t index = 0;                ///< the data set's index in the reader
  const DataSet& data;             ///< where it came from (location, labels)
  std::span<const Tensor> values;  ///< one per requested name, in request order
};

struct TappedRunOptions {
  Device device = Device::kCpu;
  bool refuse_non_finite_inputs = false;  ///< see read_calibration_batch
  std::string model_name = "tapped model";  ///< names the model in load errors
  /// > 0: run only the first this many rows of each batch (every input's leading dim, when all
  /// inputs share it; a batch whose inputs do not is run whole). 0: every row.
  int64_t max_rows = 0;
};

/// Runs the FP32 `graph` on data sets [0, batches) of `reader` (fewer when it has fewer) and
/// calls `consume` once per batch, in order, with the values named `values`. Errors name the
/// value, the data set ("calibration batch <location>: ...") or the model.
Status run_tapped(const ir::Graph& graph, std::span<const std::string> values, const DataSetReader& reader,
                  size_t batches, const TappedRunOptions& options,
                  const std::function<Status(const TappedBatch&)>& consume);

}  // namespace loka::probe
