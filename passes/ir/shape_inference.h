// ============================================================================
// passes/ir/shape_inference.h — LoKA's own shape and dtype inference.
//
// libonnx 1.12 stops at opset 17 and does not know the ai.loka ops, so the
// compiler infers types itself. `infer_shapes` walks the graph in topological
// order and sets every node output's TensorType: the dtype whenever it is
// determinable, the shape with known sizes, symbolic dims carried by name
// ("batch") and unknown dims where nothing better can be said. Types already
// present (value_info, graph outputs, an earlier run) are merged: known beats
// unknown, and a real conflict (dtype, rank, or static dim) is an error naming
// the node. Model errors (Gemm inner dims differ, Concat dims mismatch,
// broadcasting failure, ...) are errors naming the node too.
//
// Shape chains: exporters compute Reshape targets from Shape(x) through
// Gather/Slice/Concat/Unsqueeze/Cast/Mul... The inference tracks the element
// values of such small integer tensors symbolically (TrackedValues), so
// Reshape(x, Concat(Shape(x)[0], [128])) gets [batch,128].
//
// Ops without an inference function (a custom domain's op nobody registered a
// rule for) keep whatever type their outputs already have; that is not an error.
// The ai.loka ops of docs/loka_ops.md have built-in rules (shape_inference_loka.cc).
// Rules are ONNX semantics for opsets 13–21; where an argument moved from an
// attribute to an input across opsets (Reduce* axes, Squeeze/Unsqueeze axes,
// Split sizes, Pad pads) whichever is present is used.
// ============================================================================
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "loka/status.h"
#include "passes/ir/graph.h"

namespace loka::ir {

/// One element of a tracked integer tensor: a number (any sign), a named symbol, or unknown.
struct SymbolicInt {
  std::optional<int64_t> number;
  std::string symbol;

  static SymbolicInt of(int64_t value) { return SymbolicInt{value, {}}; }
  static SymbolicInt named(std::string name) { return SymbolicInt{std::nullopt, std::move(name)}; }
  static SymbolicInt unknown() { return SymbolicInt{}; }
  /// A dim read as a number: known size, its symbol, or unknown.
  static SymbolicInt from_dim(const Dim& dim);
  /// As a dim: a non-negative number is a known size, a symbol stays named, the rest is unknown.
  Dim to_dim() const;
  bool operator==(const SymbolicInt& other) const = default;
};

/// Compile-time contents of a small integer tensor of rank 0 or 1 (a shape chain value).
struct TrackedValues {
  std::vector<SymbolicInt> elements;
  bool scalar = false;  ///< rank 0 (then exactly one element)
  /// The elements as numbers, when every one is known.
  std::optional<std::vector<int64_t>> numbers() const;
};

/// Tensors longer than this are not tracked (shape chains are short).
inline constexpr size_t kMaxTrackedElements = 64;

/// What one node's inference function sees: the node, its input types and tracked values.
class InferenceContext {
 public:
  /// `input_types[i]` / `input_values[i]` may be null (omitted input, nothing known).
  InferenceContext(const Node& node, std::vector<const TensorType*> input_types,
                   std::vector<const TrackedValues*> input_values);

  const Node& node() const { return node_; }
  const Attributes& attributes() const { return node_.attributes(); }
  /// Number of input slots of the node (omitted optional ones included).
  size_t input_count() const { return node_.inputs().size(); }
  size_t output_count() const { return node_.outputs().size(); }
  /// True when slot `index` exists and is not an omitted optional input.
  bool has_input(size_t index) const { return node_.input(index) != nullptr; }
  /// The input's type; an empty (unknown) type when absent or unknown.
  const TensorType& input_type(size_t index) const;
  /// Tracked contents of the input, or null.
  const TrackedValues* input_values(size_t index) const;
  /// The input's data when it is an initializer or a Constant node's `value` tensor, else null.
  const Tensor* input_constant(size_t index) const;

  /// Records the tracked contents of output `index` (ignored past kMaxTrackedElements).
  void set_output_values(size_t index, TrackedValues values);
  std::vector<std::optional<TrackedValues>>& output_values() { return output_values_; }

  /// "node 'NAME' (Op): message".
  Status error(const std::string& message) const;
  /// Error unless inputs 0..count-1 are present.
  Status require_inputs(size_t count) const;

 private:
  const Node& node_;
  std::vector<const TensorType*> input_types_;
  std::vector<const TrackedValues*> input_values_;
  std::vector<std::optional<TrackedValues>> output_values_;
};

/// Computes one type per node output (exactly output_count() of them), or an error from ctx.error().
using InferenceFn = std::function<Result<std::vector<TensorType>>(InferenceContext&)>;

/// (domain, op_type) -> inference function. Later passes add their ai.loka ops here.
class ShapeInferenceRegistry {
 public:
  /// A registry holding every built-in ONNX rule.
  static ShapeInferenceRegistry with_builtins();
  /// The process-wide registry used by default: the built-ins plus what passes add. Add to it
  /// during startup (pass registration), not while another thread runs inference.
  static ShapeInferenceRegistry& global();

  /// Registers (or replaces) the rule for `op_type` in `domain` ("" = ai.onnx).
  void add(std::string domain, std::string op_type, InferenceFn fn);
  /// The rule, or null for an op without one.
  const InferenceFn* find(std::string_view domain, std::string_view op_type) const;

 private:
  std::map<std::pair<std::string, std::string>, InferenceFn, std::less<>> rules_;
};

struct InferenceOptions {
  /// Rules to use; null means ShapeInferenceRegistry::global().
  const ShapeInferenceRegistry* registry = nullptr;
  /// Drop the existing types of outputs of nodes that have a rule before inferring them (for
  /// re-inference after rewrites made them stale). Otherwise existing types are merged and checked.
  bool discard_existing = false;
};

/// Infers and sets the types of every node output; an error names the first node at fault.
Status infer_shapes(Graph& graph, const InferenceOptions& options = {});

/// The output types of one node from the given input types (one per input slot, null = unknown).
/// Existing output types are not consulted; shape-chain values are traced through the node's
/// producers in the graph. For re-inferring one node after a rewrite.
Result<std::vector<TensorType>> infer_node_types(const Node& node, const std::vector<const TensorType*>& input_types,
                                                 const InferenceOptions& options = {});
/// As above with the types the node's inputs currently carry.
Result<std::vector<TensorType>> infer_node_types(const Node& node, const InferenceOptions& options = {});

/// Merges an inferred type with a declared one (known information wins); an error on a dtype,
/// rank or static dim conflict, saying which.
Result<TensorType> merge_types(const TensorType& inferred, const TensorType& declared);

}  // namespace loka::ir
