// ============================================================================
// loka/observer.h — hooks on every node of a running Session.
//
// The Probe measures FP8 error through these hooks instead of owning an
// executor: it reads a node's inputs and outputs, and may substitute either
// (for example with FP8-quantized copies) to measure what a precision change
// would do to the rest of the model. Hooks run on the Session's thread.
// ============================================================================
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "loka/tensor.h"

namespace loka {

/// Identity of the node an observer is called for.
struct NodeInfo {
  size_t index;               ///< position in the execution order
  std::string_view name;      ///< node name (a stable synthesized one when the model has none)
  std::string_view op_type;
  std::string_view domain;
};

class Observer {
 public:
  virtual ~Observer() = default;
  /// Before the node runs. Entries of `inputs` may be replaced (an undefined
  /// entry is an omitted optional input); the replacement is what the node reads.
  virtual void before_node(const NodeInfo& /*node*/, std::span<Tensor> /*inputs*/) {}
  /// After the node ran. Entries of `outputs` may be replaced; the replacement
  /// is what later nodes and the caller see.
  virtual void after_node(const NodeInfo& /*node*/, std::span<Tensor> /*outputs*/) {}
  /// Asked first, for every node: return true, with every entry of `outputs` filled, to skip
  /// running the node (and its before_node/after_node hooks) and use those outputs instead.
  /// The Probe replays the unchanged prefix of a model this way: the nodes before the site it
  /// quantizes compute what the reference run already computed from the same inputs.
  virtual bool replay_node(const NodeInfo& /*node*/, std::span<Tensor> /*outputs*/) { return false; }
};

}  // namespace loka
