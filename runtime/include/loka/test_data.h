// ============================================================================
// loka/test_data.h — reading and writing data directories (the contract layout).
//
// Public: serving programs read batches in the layout the tools use (see
// examples/serving/). Only public types appear here.
//
// DATA is one of:
//   * a directory holding input_<i>.pb (and maybe output_<i>.pb, labels.pb): one data set;
//   * a directory of test_data_set_<k>/ folders, each one data set (one batch), ordered by k;
//   * a .npz file (keys = input names; "output_<i>"/"labels" keys are outputs/labels): one data set;
//   * a directory of .npz files: one data set each, in name order.
// Each .pb is a serialized TensorProto whose name is the graph input/output
// name (an empty name means "by position"). Data sets are read lazily, one at
// a time, so calibration can stream more data than fits in memory.
// ============================================================================
#pragma once

#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "loka/status.h"
#include "loka/tensor.h"

namespace loka {

struct NamedTensor {
  std::string name;  ///< TensorProto name or npz key; may be empty
  Tensor tensor;
};

struct DataSet {
  std::string label;                 ///< "test_data_set_3", a file name, ... (for messages)
  std::filesystem::path location;    ///< the folder or .npz it came from
  std::vector<NamedTensor> inputs;   ///< in input_<i> order
  std::vector<NamedTensor> outputs;  ///< in output_<i> order (may be empty)
  std::optional<Tensor> labels;      ///< labels.pb when present
};

class DataSetReader {
 public:
  /// Finds the data sets under `where` (see the layouts above) without reading them.
  static Result<DataSetReader> open(const std::filesystem::path& where);
  size_t size() const { return sources_.size(); }
  /// Reads data set `index` (0-based); errors name the file at fault.
  Result<DataSet> read(size_t index) const;
  /// Where data set `index` lives.
  const std::filesystem::path& location(size_t index) const { return sources_[index]; }
  /// Where data set `index` sits relative to the opened location, so outputs can mirror
  /// the input layout: "" for a single data set, "test_data_set_<k>" for numbered
  /// folders, the file's stem for one .npz of a directory of them.
  std::filesystem::path subfolder(size_t index) const;

 private:
  std::filesystem::path root_;                  ///< what open() was given
  std::vector<std::filesystem::path> sources_;  ///< folders or .npz files
};

/// Arranges a data set's inputs in the order of `input_names`: by name when the
/// tensors are named, else by position. Errors name the missing or unknown input.
Result<std::vector<Tensor>> order_inputs(const DataSet& data, const std::vector<std::string>& input_names);

/// As order_inputs, for the reference outputs of a data set against `output_names`.
Result<std::vector<Tensor>> order_outputs(const DataSet& data, const std::vector<std::string>& output_names);

/// Writes output_<i>.pb files (TensorProto name = output name) into `directory`, creating it.
Status write_outputs(const std::filesystem::path& directory, const std::vector<std::string>& names,
                     const std::vector<Tensor>& tensors);

/// Reads every array of a .npz archive (stored or deflated members; .npy v1-v3,
/// little-endian, C order; bool, int*, uint*, float16/32/64).
Result<std::vector<NamedTensor>> read_npz(const std::filesystem::path& path);
/// As read_npz, from an archive already in memory; `source` names it in errors.
Result<std::vector<NamedTensor>> read_npz_bytes(std::span<const std::byte> bytes, const std::string& source);

/// Writes `tensors` as a .npz archive (keys = names) that numpy.load reads; members are
/// deflated when `compress` is set (as numpy.savez_compressed), else stored (as numpy.savez).
/// Dtypes without a numpy equivalent (bfloat16, FP8) are refused.
Status write_npz(const std::filesystem::path& path, const std::vector<NamedTensor>& tensors, bool compress);

}  // namespace loka
