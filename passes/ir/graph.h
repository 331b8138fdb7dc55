// ============================================================================
// passes/ir/graph.h — LoKA's own graph IR: nodes, values, use-lists.
//
// The compiler rewrites this IR, never protobuf. Nodes and values have stable
// ids (never reused, so a pass can hold ids across mutations), each value has
// at most one producer and an ordered use-list, and the mutation API keeps
// producers and uses consistent: `replace_all_uses_with`, `set_input`, and
// erasure that asserts (a programmer error) when a value still has readers.
// Symbolic dims (the batch) are kept by name. Boost.Graph is used as a view
// for ordering and cycle checks (passes/ir/graph_algorithms.h); the IR itself
// is plain vectors of owned objects with tombstones for erased entries.
// ============================================================================
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loka/dtype.h"
#include "loka/tensor.h"
#include "runtime/attributes.h"

namespace loka::ir {

/// A dimension: a known size, a named symbol ("batch"), or unknown (value -1, no name).
struct Dim {
  int64_t value = -1;
  std::string symbol;

  static Dim known(int64_t size) { return Dim{size, {}}; }
  static Dim named(std::string name) { return Dim{-1, std::move(name)}; }
  static Dim unknown() { return Dim{}; }
  bool is_known() const { return value >= 0; }
  bool operator==(const Dim& other) const = default;
};

/// Element type plus an optional shape (absent = rank unknown).
struct TensorType {
  DType dtype = DType::kUndefined;
  std::optional<std::vector<Dim>> shape;

  bool has_rank() const { return shape.has_value(); }
  int rank() const { return shape ? static_cast<int>(shape->size()) : -1; }
  /// True when every dim is a known size.
  bool is_static() const;
  /// The static shape (only when is_static()).
  Shape static_shape() const;
  static TensorType of(DType dtype, const Shape& dims);
  bool operator==(const TensorType& other) const = default;
};

class Node;

/// A (node, input slot) pair reading a value.
struct Use {
  Node* node;
  size_t input_index;
  bool operator==(const Use& other) const = default;
};

class Value {
 public:
  uint32_t id() const { return id_; }
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }
  const TensorType& type() const { return type_; }
  TensorType& mutable_type() { return type_; }
  void set_type(TensorType type) { type_ = std::move(type); }

  /// The node computing this value; null for graph inputs and initializers.
  Node* producer() const { return producer_; }
  size_t producer_output_index() const { return producer_output_; }
  const std::vector<Use>& uses() const { return uses_; }
  bool has_uses() const { return !uses_.empty(); }

  /// Constant data when this value is an initializer.
  const std::optional<Tensor>& initializer() const { return initializer_; }
  bool is_initializer() const { return initializer_.has_value(); }
  bool is_graph_input() const { return graph_input_; }
  bool is_graph_output() const { return graph_output_; }

 private:
  friend class Graph;
  uint32_t id_ = 0;
  std::string name_;
  TensorType type_;
  Node* producer_ = nullptr;
  size_t producer_output_ = 0;
  std::vector<Use> uses_;
  std::optional<Tensor> initializer_;
  bool graph_input_ = false;
  bool graph_output_ = false;
};

class Node {
 public:
  uint32_t id() const { return id_; }
  const std::string& name() const { return name_; }
  const std::string& op_type() const { return op_type_; }
  /// "" for the default ONNX domain.
  const std::string& domain() const { return domain_; }
  bool is(const char* op_type, const char* domain = "") const { return op_type_ == op_type && domain_ == domain; }

  /// Inputs in slot order; null for an omitted optional input.
  const std::vector<Value*>& inputs() const { return inputs_; }
  Value* input(size_t index) const { return index < inputs_.size() ? inputs_[index] : nullptr; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  Value* output(size_t index) const { return outputs_[index]; }

  const Attributes& attributes() const { return attributes_; }
  Attributes& mutable_attributes() { return attributes_; }

 private:
  friend class Graph;
  uint32_t id_ = 0;
  std::string name_;
  std::string op_type_;
  std::string domain_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  Attributes attributes_;
};

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  /// A deep copy with the same ids, names, order and data (tensor storage shared, it is immutable).
  std::unique_ptr<Graph> clone() const;

  // ---- construction -------------------------------------------------------
  /// A new value with a unique name (a suffix is added when `name` is taken or empty).
  Value* add_value(const std::string& name, TensorType type = {});
  Value* add_initializer(const std::string& name, Tensor tensor);
  /// Marks `value` as the next graph input / output.
  void add_input(Value* value);
  void add_output(Value* value);
  /// A node computing `output_count` fresh values named after `name`, or the given outputs.
  Node* add_node(const std::string& op_type, const std::vector<Value*>& inputs, size_t output_count,
                 const std::string& name = "", const std::string& domain = "");
  /// A node writing existing values, which must have no producer yet.
  Node* add_node_with_outputs(const std::string& op_type, const std::vector<Value*>& inputs,
                              const std::vector<Value*>& outputs, const std::string& name = "",
                              const std::string& domain = "");

  // ---- mutation -----------------------------------------------------------
  void set_input(Node* node, size_t index, Value* value);
  /// Every reader of `from` (and the graph outputs list) reads `to` instead.
  void replace_all_uses_with(Value* from, Value* to);
  /// Erases a node whose outputs have no uses and are not graph outputs (asserts otherwise).
  void erase_node(Node* node);
  /// Gives `node` the name `name` (find_node follows); false, changing nothing, when another
  /// live node has it. Node names are how annotations and kernel plans find a node.
  bool rename_node(Node* node, const std::string& name);
  /// Erases a value with no producer, no uses and not a graph input/output (asserts otherwise).
  void erase_value(Value* value);
  /// Replaces the constant data of an initializer (same name, new type from the tensor).
  void set_initializer(Value* value, Tensor tensor);
  /// Turns a value into a non-input (e.g. an input folded to a constant).
  void remove_input(Value* value);
  void remove_output(Value* value);

  // ---- queries ------------------------------------------------------------
  /// Live nodes in insertion order (use graph_algorithms.h for a topological order).
  std::vector<Node*> nodes() const;
  std::vector<Value*> values() const;
  size_t node_count() const { return live_nodes_; }
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  Node* node_by_id(uint32_t id) const { return id < nodes_.size() ? nodes_[id].get() : nullptr; }
  Value* value_by_id(uint32_t id) const { return id < values_.size() ? values_[id].get() : nullptr; }
  Value* find_value(const std::string& name) const;
  Node* find_node(const std::string& name) const;
  /// Upper bound (exclusive) of node/value ids, for id-indexed side tables.
  uint32_t node_id_bound() const { return static_cast<uint32_t>(nodes_.size()); }
  uint32_t value_id_bound() const { return static_cast<uint32_t>(values_.size()); }

  // ---- model-level data ---------------------------------------------------
  std::string name = "graph";
  /// Opset per domain ("" = ai.onnx).
  std::map<std::string, int64_t> opsets;
  /// Model metadata_props (annotations live here, see ARCHITECTURE.md).
  std::map<std::string, std::string> metadata;
  int64_t ir_version = 8;
  std::string producer_name;
  std::string producer_version;
  /// Unique name derived from `base` (used for synthesized values and nodes).
  std::string unique_value_name(const std::string& base) const;
  std::string unique_node_name(const std::string& base) const;

 private:
  void add_use(Value* value, Node* node, size_t index);
  void remove_use(Value* value, Node* node, size_t index);

  std::vector<std::unique_ptr<Node>> nodes_;    // index = id; null once erased
  std::vector<std::unique_ptr<Value>> values_;  // index = id; null once erased
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  std::map<std::string, Value*> value_names_;
  std::map<std::string, Node*> node_names_;
  size_t live_nodes_ = 0;
  // Naming caches (see first_free_name); not part of the graph's value.
  mutable std::map<std::string, size_t> next_value_suffix_;
  mutable std::map<std::string, size_t> next_node_suffix_;
};

}  // namespace loka::ir
