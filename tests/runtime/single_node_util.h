// ============================================================================
// tests/runtime/single_node_util.h — run one ONNX node through the Engine, and
// the dtype-agnostic reference helpers the op tests compare it with.
//
// Op tests build a one-node model (every input a graph input, so the kernel
// sees runtime tensors exactly as in a real model), run it on the CPU and
// compare with reference loops written over coordinates. Tensors are compared
// byte for byte: data-movement ops must move bits, not values.
// ============================================================================
#pragma once

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "loka/tensor.h"
#include "model_builder.h"

namespace loka::testing {

/// Runs `op_type` at `opset` on `inputs` (an undefined Tensor is an omitted optional
/// input) with `attributes`; returns its `output_count` outputs. Outputs are declared
/// without shape, of type `output_dtype` (default: the first defined input's type).
Result<std::vector<Tensor>> run_single_node(const std::string& op_type, int opset, const std::vector<Tensor>& inputs,
                                            const std::vector<std::pair<std::string, TestAttribute>>& attributes = {},
                                            size_t output_count = 1, DType output_dtype = DType::kUndefined);

/// A tensor of `dtype` with random bytes (random 0/1 for BOOL).
Tensor random_bytes_tensor(std::mt19937& rng, DType dtype, const Shape& shape);
/// An INT64 (or INT32) 1-D tensor holding `values`.
Tensor int_tensor(const std::vector<int64_t>& values, DType dtype = DType::kInt64);
/// A random shape of `rank` with dims in [low, high].
Shape random_shape(std::mt19937& rng, int rank, int64_t low = 1, int64_t high = 4);

/// Coordinates of row-major `index` in `shape`.
std::vector<int64_t> unravel(int64_t index, const Shape& shape);
/// Row-major index of `coord` in `shape`.
int64_t ravel(const std::vector<int64_t>& coord, const Shape& shape);
/// True when element `i` of `a` and element `j` of `b` have the same bytes.
bool same_element(const Tensor& a, int64_t i, const Tensor& b, int64_t j);

}  // namespace loka::testing
