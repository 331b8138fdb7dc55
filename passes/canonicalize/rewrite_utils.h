// ============================================================================
// passes/canonicalize/rewrite_utils.h — small IR helpers the canonicalization
// passes share: reading constants, replacing a node's outputs with
// initializers or a subgraph with one new node *while keeping the replaced
// value's name*, and 2-D transposes of weight storage.
//
// Names matter: graph outputs are matched by name in data directories and
// annotations are keyed by node name, so a rewrite gives its result the name
// of the value it replaces (the IR renames only through erase + add, hence
// the detach/attach dance in the .cc).
// ============================================================================
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "loka/status.h"
#include "loka/tensor.h"
#include "passes/ir/graph.h"

namespace loka::canonicalize {

/// The data of a value known at compile time: an initializer that is not also a graph input
/// (those can be overridden by the caller), or the `value` tensor of a Constant node. Else null.
const Tensor* constant_data(const ir::Value* value);
/// The single element of a one-element float or integer constant, as a double.
std::optional<double> scalar_constant(const ir::Value* value);
/// A constant of integers (any integer dtype), as int64 values.
std::optional<std::vector<int64_t>> int_list_constant(const ir::Value* value);

/// An integer list operand that moved from an attribute to an input across opsets (axes, Slice
/// starts/ends): the attribute `name` when the node has it, else the constant input `index`.
/// An empty list when neither is present; nothing when the input is not a compile-time constant.
std::optional<std::vector<int64_t>> attribute_or_input_ints(const ir::Node& node, const std::string& name, size_t index);

/// The graph's ai.onnx opset; 0 when it imports none.
int64_t default_opset(const ir::Graph& graph);

/// A new 1-D int64 initializer holding `values` (shapes, axes, Slice bounds), named after `name`
/// (made unique).
ir::Value* int64_initializer(ir::Graph& graph, const std::string& name, const std::vector<int64_t>& values);

/// True when `value` is read by exactly `count` input slots and is not a graph output.
bool has_exactly_uses(const ir::Value* value, size_t count);

/// The only reader of `value` when it has exactly one (and is no graph output), if it is an
/// `op` node of the default domain; null otherwise. Pattern matchers walk chains with it.
ir::Node* sole_reader_of(const ir::Value* value, const char* op);

/// The operand of binary `node` that is not `value`; null when `node` is not binary, does not
/// read `value`, or reads it twice.
ir::Value* other_operand(const ir::Node* node, const ir::Value* value);

/// Replaces every output of `node` by an initializer holding the matching tensor (same name,
/// same readers), then erases the node. Outputs nobody reads are dropped. Fails (changing
/// nothing) when an output is a graph output or the tensor count differs.
Status replace_with_initializers(ir::Graph& graph, ir::Node* node, std::vector<Tensor> tensors);

/// What to build in place of a matched subgraph.
struct NodeSpec {
  std::string op_type;
  std::vector<ir::Value*> inputs;
  Attributes attributes;
  std::string name;  ///< may be the name of one of the absorbed nodes (they are erased first)
  std::string domain;
  /// Outputs after the first, fresh values: (name to make unique, type).
  std::vector<std::pair<std::string, ir::TensorType>> extra_outputs = {};
};

/// Replaces `root` (the matched subgraph's single escaping value) by the output of a new node
/// built from `spec`, erasing `absorbed` (the matched nodes, producers of `root` included).
/// The new output takes `root`'s name, type and graph-output slot. Fails, changing nothing,
/// when an absorbed node has an output other than `root` that is read outside `absorbed`.
Result<ir::Node*> replace_with_node(ir::Graph& graph, ir::Value* root, const std::vector<ir::Node*>& absorbed,
                                    NodeSpec spec);

/// Erases the nodes (all outputs must end up unread), readers before producers.
Status erase_nodes(ir::Graph& graph, const std::vector<ir::Node*>& nodes);

/// The transpose of a 2-D tensor of any dtype (bytes moved, values untouched).
Tensor transpose_2d(const Tensor& tensor);

/// The Transpose perm of `rank` dims that swaps the last two (0, 1, ..., rank-3, rank-1, rank-2):
/// each matrix of a batch transposed.
std::vector<int64_t> perm_swapping_last_two(int64_t rank);

/// A copy of `attributes` without the named entries.
Attributes without_attributes(const Attributes& attributes, const std::vector<std::string>& names);

}  // namespace loka::canonicalize
