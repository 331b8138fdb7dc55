// ============================================================================
// tests/runtime/single_node_util.cc — one-node models and reference helpers.
// ============================================================================
#include "single_node_util.h"

#include <cstring>

#include "loka/engine.h"

namespace loka::testing {

Result<std::vector<Tensor>> run_single_node(const std::string& op_type, int opset, const std::vector<Tensor>& inputs,
                                            const std::vector<std::pair<std::string, TestAttribute>>& attributes,
                                            size_t output_count, DType output_dtype) {
  ModelBuilder builder(opset);
  std::vector<std::string> input_names;
  std::vector<Tensor> fed;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      input_names.emplace_back();
      continue;
    }
    const std::string name = "in" + std::to_string(i);
    builder.input(name, inputs[i].dtype(), inputs[i].shape());
    input_names.push_back(name);
    fed.push_back(inputs[i]);
    if (output_dtype == DType::kUndefined) output_dtype = inputs[i].dtype();
  }
  if (output_dtype == DType::kUndefined) output_dtype = DType::kFloat32;
  std::vector<std::string> output_names;
  for (size_t i = 0; i < output_count; ++i) {
    output_names.push_back("out" + std::to_string(i));
    builder.output_unshaped(output_names.back(), output_dtype);
  }
  builder.node(op_type, input_names, output_names, attributes, "node_under_test");
  LOKA_ASSIGN_OR_RETURN(auto engine, builder.build_engine());
  return run_once(*engine, fed);
}

Tensor random_bytes_tensor(std::mt19937& rng, DType dtype, const Shape& shape) {
  Tensor tensor = Tensor::zeros(dtype, shape);
  auto* bytes = static_cast<uint8_t*>(tensor.raw());
  std::uniform_int_distribution<int> byte(0, 255);
  for (size_t i = 0; i < tensor.byte_size(); ++i) bytes[i] = static_cast<uint8_t>(dtype == DType::kBool ? byte(rng) & 1 : byte(rng));
  return tensor;
}

Tensor int_tensor(const std::vector<int64_t>& values, DType dtype) {
  Tensor tensor = Tensor::zeros(dtype, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kInt32) tensor.data<int32_t>()[i] = static_cast<int32_t>(values[i]);
    else tensor.data<int64_t>()[i] = values[i];
  }
  return tensor;
}

Shape random_shape(std::mt19937& rng, int rank, int64_t low, int64_t high) {
  std::uniform_int_distribution<int64_t> dim(low, high);
  Shape shape(static_cast<size_t>(rank));
  for (int64_t& d : shape) d = dim(rng);
  return shape;
}

std::vector<int64_t> unravel(int64_t index, const Shape& shape) {
  std::vector<int64_t> coord(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    coord[d] = index % shape[d];
    index /= shape[d];
  }
  return coord;
}

int64_t ravel(const std::vector<int64_t>& coord, const Shape& shape) {
  int64_t index = 0;
  for (size_t d = 0; d < shape.size(); ++d) index = index * shape[d] + coord[d];
  return index;
}

bool same_element(const Tensor& a, int64_t i, const Tensor& b, int64_t j) {
  const size_t size = dtype_size(a.dtype());
  if (size != dtype_size(b.dtype())) return false;
  return std::memcmp(static_cast<const std::byte*>(a.raw()) + i * size,
                     static_cast<const std::byte*>(b.raw()) + j * size, size) == 0;
}

}  // namespace loka::testing
