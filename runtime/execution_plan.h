// ============================================================================
// runtime/execution_plan.h — a checked, ordered, executable form of a graph.
//
// Built once per Engine from a ModelProto: values get dense ids, initializers
// and Constant-free constants are decoded, nodes are put in dependency order
// (Kahn's algorithm, iterative, so 200 000-node chains cannot overflow the
// stack) and get their kernels, and each value records the last step that
// reads it so Sessions can release it early. Every structural defect is an
// error naming the node or value: undefined inputs, two producers, cycles,
// unsupported ops.
// ============================================================================
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "loka/engine.h"
#include "loka/status.h"
#include "loka/tensor.h"
#include "runtime/op_kernel.h"

namespace onnx {
class ModelProto;
class NodeProto;
}

namespace loka {

inline constexpr int kNoValue = -1;

struct PlanStep {
  std::string name;
  std::string op_type;
  std::string domain;
  int opset = 0;
  std::vector<int> inputs;   ///< value ids; kNoValue for an omitted optional input
  std::vector<int> outputs;  ///< value ids; kNoValue for an unused optional output
  Attributes attributes;     ///< as parsed for the kernel (device backends plan from them too)
  std::unique_ptr<OpKernel> kernel;
};

struct PlanValue {
  std::string name;
  int last_reader = -1;      ///< last step reading it; -1 when none
  bool is_graph_output = false;
  bool is_constant = false;  ///< an initializer: its tensor lives in `constants`
};

class ExecutionPlan {
 public:
  /// Checks and plans `model`; `source` names the model in errors.
  static Result<std::unique_ptr<ExecutionPlan>> build(const onnx::ModelProto& model,
                                                      const std::filesystem::path& external_data_dir,
                                                      const std::string& source);

  const std::vector<PlanStep>& steps() const { return steps_; }
  const std::vector<PlanValue>& values() const { return values_; }
  /// Tensor of a constant value id (undefined for others).
  const Tensor& constant(int value) const { return constants_[static_cast<size_t>(value)]; }
  const std::vector<TensorInfo>& inputs() const { return inputs_; }
  const std::vector<TensorInfo>& outputs() const { return outputs_; }
  const std::vector<int>& input_ids() const { return input_ids_; }
  const std::vector<int>& output_ids() const { return output_ids_; }
  /// Index of `name` in inputs(), or -1.
  int input_index(const std::string& name) const;

 private:
  std::vector<PlanStep> steps_;
  std::vector<PlanValue> values_;
  std::vector<Tensor> constants_;
  std::vector<TensorInfo> inputs_;
  std::vector<TensorInfo> outputs_;
  std::vector<int> input_ids_;
  std::vector<int> output_ids_;
};

/// Parses a serialized model with a one-line error naming `source` when it is not one.
Result<std::unique_ptr<onnx::ModelProto>> parse_model_bytes(std::span<const std::byte> bytes, const std::string& source);
/// Fills `attributes` from a node's AttributeProtos (tensor attributes decoded).
Status attributes_from_node(const onnx::NodeProto& node, const std::filesystem::path& external_data_dir,
                            Attributes& attributes);
/// The opset a model imports for `domain` ("" and "ai.onnx" are the same), or 0.
int model_opset(const onnx::ModelProto& model, const std::string& domain);

}  // namespace loka
