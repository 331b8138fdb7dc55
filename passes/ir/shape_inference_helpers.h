// ============================================================================
// passes/ir/shape_inference_helpers.h — shared pieces of the per-op inference
// rules (private to passes/ir/shape_inference*.cc).
//
// Dim arithmetic that keeps symbols where it can (batch*1 is batch), numpy
// broadcasting over possibly symbolic dims, axis normalisation, the "list
// from an attribute or from an input" lookup used by ops whose arguments
// moved between opsets, and element-wise arithmetic on tracked values.
// Every helper that can fail takes the InferenceContext so its error names
// the node.
// ============================================================================
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "passes/ir/shape_inference.h"

namespace loka::ir::inference {

using Dims = std::vector<Dim>;
using TypeList = std::vector<TensorType>;

// ---- registration of each op family ----------------------------------------
void register_elementwise_rules(ShapeInferenceRegistry& registry);
void register_linalg_rules(ShapeInferenceRegistry& registry);
void register_reduction_rules(ShapeInferenceRegistry& registry);
void register_shape_rules(ShapeInferenceRegistry& registry);
void register_data_movement_rules(ShapeInferenceRegistry& registry);
void register_loka_rules(ShapeInferenceRegistry& registry);  ///< ai.loka ops (shape_inference_loka.cc)

// ---- types and dims --------------------------------------------------------
/// A type with `dtype` and `shape` (nullopt = rank unknown).
TensorType make_type(DType dtype, std::optional<Dims> shape);
/// "f32[batch,4]" for messages.
std::string describe(const TensorType& type);
/// Product of dims: known when all are known; the symbol when exactly one symbol times known 1s; else unknown.
Dim multiply_dims(std::span<const Dim> dims);
/// `dim + delta` (known stays known, a symbol survives +0), unknown otherwise.
Dim add_to_dim(const Dim& dim, int64_t delta);
/// Broadcast of two dims, or nullopt when they provably conflict.
std::optional<Dim> broadcast_dim(const Dim& a, const Dim& b);
/// Numpy broadcast of the given input types' shapes; nullopt when some rank is unknown.
Result<std::optional<Dims>> broadcast_inputs(const InferenceContext& ctx, const std::vector<size_t>& inputs);
/// The dtype shared by the given inputs (undefined when none is known); an error when two known ones differ.
Result<DType> common_dtype(const InferenceContext& ctx, const std::vector<size_t>& inputs);
/// Axis in [-rank, rank) normalised to [0, rank), or an error naming `what`.
Result<int> normalize_axis(const InferenceContext& ctx, int64_t axis, int rank, const char* what);
/// Normalised axes without repeats.
Result<std::vector<int>> normalize_axes(const InferenceContext& ctx, const std::vector<int64_t>& axes, int rank,
                                        const char* what);

// ---- list arguments (attribute before some opset, input after) --------------
struct ListArgument {
  enum class Kind { kAbsent, kKnown, kUnknown } kind = Kind::kAbsent;
  std::vector<int64_t> values;  ///< when kKnown
};
/// Attribute `attribute` when set, else input `input_index` (known when its values are tracked).
Result<ListArgument> list_argument(const InferenceContext& ctx, const char* attribute, size_t input_index);

/// The type of ONNX Concat of inputs `first_input`.. along attribute `axis` (Concat's rule; also
/// ai.loka ConcatQuant's, whose input 0 is its scale).
Result<TypeList> concatenated_type(InferenceContext& ctx, size_t first_input);

// ---- tracked values ----------------------------------------------------------
/// Tracked contents of an integer/bool tensor of rank <= 1 and at most kMaxTrackedElements.
std::optional<TrackedValues> tracked_from_tensor(const Tensor& tensor);
/// Tracked values of a known list.
TrackedValues tracked_from_numbers(const std::vector<int64_t>& numbers, bool scalar = false);
/// Element-wise combination with broadcasting (lengths 1 or equal); nullopt when an input is
/// untracked or the lengths do not broadcast.
using ElementFn = std::function<SymbolicInt(std::span<const SymbolicInt>)>;
std::optional<TrackedValues> combine_tracked(const std::vector<const TrackedValues*>& inputs, const ElementFn& fn);

}  // namespace loka::ir::inference
