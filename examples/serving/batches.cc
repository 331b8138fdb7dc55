// ============================================================================
// examples/serving/batches.cc — reading and generating loka-serve's batches.
// ============================================================================
#include "batches.h"

#include <algorithm>
#include <random>

namespace serving {
namespace {

int64_t leading_rows(const std::vector<loka::Tensor>& inputs) {
  for (const loka::Tensor& tensor : inputs)
    if (tensor.rank() > 0) return tensor.dim(0);
  return 1;
}

/// Fills `tensor` (of an integer or floating dtype T) with draws from `draw`.
template <typename T, typename Draw>
void fill(loka::Tensor& tensor, Draw&& draw) {
  for (T& value : tensor.values<T>()) value = static_cast<T>(draw());
}

/// One random tensor for `info`, or why none can be made.
loka::Result<loka::Tensor> random_tensor(const loka::TensorInfo& info, const RandomSpec& spec, std::mt19937_64& rng) {
  if (!info.has_shape) return loka::Status::error("input '" + info.name + "' declares no shape: serve it with --data");
  loka::Shape shape = info.shape;
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    if (shape[axis] >= 0) continue;
    if (axis != 0) {
      const std::string dim = info.dim_names[axis].empty() ? "?" : info.dim_names[axis];
      return loka::Status::error("input '" + info.name + "' has symbolic dim '" + dim + "' at axis " +
                                 std::to_string(axis) + " besides the batch: serve it with --data");
    }
    shape[axis] = spec.rows;
  }
  LOKA_RETURN_IF_ERROR(loka::checked_element_count(shape).status().with_context("input '" + info.name + "': "));
  loka::Tensor tensor = loka::Tensor::zeros(info.dtype, shape);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int64_t> ids(0, spec.int_range - 1);
  std::bernoulli_distribution coin(0.5);
  auto real = [&] { return normal(rng); };
  auto id = [&] { return ids(rng); };
  switch (info.dtype) {
    case loka::DType::kFloat32: fill<float>(tensor, real); break;
    case loka::DType::kFloat64: fill<double>(tensor, real); break;
    case loka::DType::kInt64: fill<int64_t>(tensor, id); break;
    case loka::DType::kInt32: fill<int32_t>(tensor, id); break;
    case loka::DType::kBool: fill<bool>(tensor, [&] { return coin(rng); }); break;
    default:
      return loka::Status::error("input '" + info.name + "' is " + std::string(loka::dtype_name(info.dtype)) +
                                 ", which loka-serve does not generate: serve it with --data");
  }
  return tensor;
}

}  // namespace

loka::Result<std::vector<loka::DataSet>> read_data_sets(const std::filesystem::path& data, size_t limit) {
  LOKA_ASSIGN_OR_RETURN(loka::DataSetReader reader, loka::DataSetReader::open(data));
  if (reader.size() == 0) return loka::Status::error(data.string() + ": no data sets");
  std::vector<loka::DataSet> data_sets;
  for (size_t k = 0; k < std::min(reader.size(), limit); ++k) {
    LOKA_ASSIGN_OR_RETURN(loka::DataSet data_set, reader.read(k));
    data_sets.push_back(std::move(data_set));
  }
  return data_sets;
}

int64_t largest_rows(const std::vector<loka::DataSet>& data_sets) {
  int64_t largest = 1;
  for (const loka::DataSet& data_set : data_sets)
    for (const loka::NamedTensor& input : data_set.inputs)
      if (input.tensor.rank() > 0) largest = std::max(largest, input.tensor.dim(0));
  return largest;
}

loka::Result<std::vector<Batch>> batches_from_data(const std::vector<loka::DataSet>& data_sets,
                                                   const loka::Engine& engine) {
  std::vector<std::string> names;
  for (const loka::TensorInfo& info : engine.inputs()) names.push_back(info.name);
  std::vector<Batch> batches;
  for (const loka::DataSet& data_set : data_sets) {
    LOKA_ASSIGN_OR_RETURN(std::vector<loka::Tensor> inputs, loka::order_inputs(data_set, names));
    const int64_t rows = leading_rows(inputs);
    batches.push_back({data_set.label, std::move(inputs), rows});
  }
  return batches;
}

loka::Result<std::vector<Batch>> random_batches(const loka::Engine& engine, const RandomSpec& spec) {
  std::mt19937_64 rng(spec.seed);
  std::vector<Batch> batches;
  for (size_t k = 0; k < spec.count; ++k) {
    Batch batch{"random " + std::to_string(k), {}, 1};
    for (const loka::TensorInfo& info : engine.inputs()) {
      LOKA_ASSIGN_OR_RETURN(loka::Tensor tensor, random_tensor(info, spec, rng));
      batch.inputs.push_back(std::move(tensor));
    }
    batch.rows = leading_rows(batch.inputs);
    batches.push_back(std::move(batch));
  }
  return batches;
}

}  // namespace serving
