// ============================================================================
// runtime/execution_plan.cc — from ModelProto to ordered kernels.
// ============================================================================
#include "runtime/execution_plan.h"

#include <google/protobuf/io/coded_stream.h>
#include <onnx/onnx_pb.h>

#include <climits>
#include <unordered_map>

#include "kernels/registry/kernel_plan.h"
#include "runtime/node_schedule.h"
#include "runtime/tensor_proto.h"
#include "runtime/view_ops.h"

namespace loka {

Result<std::unique_ptr<onnx::ModelProto>> parse_model_bytes(std::span<const std::byte> bytes,
                                                            const std::string& source) {
  if (bytes.empty()) return Status::error(source + ": empty file, not an ONNX model");
  if (bytes.size() > static_cast<size_t>(INT_MAX)) return Status::error(source + ": larger than 2 GiB; use external data");
  auto model = std::make_unique<onnx::ModelProto>();
  google::protobuf::io::CodedInputStream stream(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                static_cast<int>(bytes.size()));
  stream.SetTotalBytesLimit(INT_MAX);
  stream.SetRecursionLimit(64);
  if (!model->ParseFromCodedStream(&stream) || !stream.ConsumedEntireMessage())
    return Status::error(source + ": not a valid ONNX model (protobuf parse failed: truncated or corrupt)");
  if (!model->has_graph()) return Status::error(source + ": not a valid ONNX model (no graph)");
  return model;
}

int model_opset(const onnx::ModelProto& model, const std::string& domain) {
  const bool default_domain = domain.empty() || domain == "ai.onnx";
  for (const auto& entry : model.opset_import()) {
    const bool entry_default = entry.domain().empty() || entry.domain() == "ai.onnx";
    if (default_domain ? entry_default : entry.domain() == domain) return static_cast<int>(entry.version());
  }
  return 0;
}

Status attributes_from_node(const onnx::NodeProto& node, const std::filesystem::path& external_data_dir,
                            Attributes& attributes) {
  for (const auto& attribute : node.attribute()) {
    const std::string& name = attribute.name();
    switch (attribute.type()) {
      case onnx::AttributeProto::INT: attributes.set(name, attribute.i()); break;
      case onnx::AttributeProto::FLOAT: attributes.set(name, attribute.f()); break;
      case onnx::AttributeProto::STRING: attributes.set(name, attribute.s()); break;
      case onnx::AttributeProto::INTS:
        attributes.set(name, std::vector<int64_t>(attribute.ints().begin(), attribute.ints().end()));
        break;
      case onnx::AttributeProto::FLOATS:
        attributes.set(name, std::vector<float>(attribute.floats().begin(), attribute.floats().end()));
        break;
      case onnx::AttributeProto::STRINGS:
        attributes.set(name, std::vector<std::string>(attribute.strings().begin(), attribute.strings().end()));
        break;
      case onnx::AttributeProto::TENSOR: {
        auto tensor = tensor_from_proto(attribute.t(), external_data_dir);
        if (!tensor) return tensor.status().with_context("attribute '" + name + "': ");
        attributes.set(name, std::move(tensor).value());
        break;
      }
      default:
        return Status::error("attribute '" + name + "' has a type LoKA does not support (graphs, sparse tensors)");
    }
  }
  return Status::ok();
}

namespace {

TensorInfo tensor_info_from(const onnx::ValueInfoProto& info) {
  TensorInfo out;
  out.name = info.name();
  if (!info.type().has_tensor_type()) return out;
  const auto& tensor_type = info.type().tensor_type();
  out.dtype = static_cast<DType>(tensor_type.elem_type());
  if (!tensor_type.has_shape()) return out;
  out.has_shape = true;
  for (const auto& dim : tensor_type.shape().dim()) {
    if (dim.has_dim_value()) {
      out.shape.push_back(dim.dim_value());
      out.dim_names.emplace_back();
    } else {
      out.shape.push_back(-1);
      out.dim_names.push_back(dim.has_dim_param() ? dim.dim_param() : std::string());
    }
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<ExecutionPlan>> ExecutionPlan::build(const onnx::ModelProto& model,
                                                            const std::filesystem::path& external_data_dir,
                                                            const std::string& source) {
  auto plan = std::make_unique<ExecutionPlan>();
  const onnx::GraphProto& graph = model.graph();
  const auto fail = [&source](const std::string& message) { return Status::error(source + ": " + message); };

  std::unordered_map<std::string, int> value_ids;
  const auto intern = [&](const std::string& name) {
    auto [it, inserted] = value_ids.try_emplace(name, static_cast<int>(plan->values_.size()));
    if (inserted) {
      plan->values_.push_back(PlanValue{name});
      plan->constants_.emplace_back();
    }
    return it->second;
  };

  for (const auto& initializer : graph.initializer()) {
    if (value_ids.count(initializer.name())) return fail("initializer '" + initializer.name() + "' is defined twice");
    auto tensor = tensor_from_proto(initializer, external_data_dir);
    if (!tensor) return fail(tensor.status().message());
    const int id = intern(initializer.name());
    plan->values_[id].is_constant = true;
    plan->constants_[id] = std::move(tensor).value();
  }
  for (const auto& input : graph.input()) {
    if (value_ids.count(input.name())) {
      if (plan->values_[value_ids[input.name()]].is_constant) continue;  // IR < 4: initializers listed as inputs
      return fail("graph input '" + input.name() + "' is declared twice");
    }
    TensorInfo info = tensor_info_from(input);
    if (!dtype_is_supported(static_cast<int32_t>(info.dtype)))
      return fail("graph input '" + input.name() + "' has unsupported type " + std::string(dtype_name(info.dtype)));
    Shape static_dims;  // the known dims alone must already make a tensor LoKA could hold
    for (int64_t dim : info.shape) {
      if (dim < -1 || dim > kMaxTensorElements) return fail("graph input '" + input.name() + "' declares dim " + std::to_string(dim));
      if (dim >= 0) static_dims.push_back(dim);
    }
    if (auto count = checked_element_count(static_dims); !count)
      return fail("graph input '" + input.name() + "' declares an impossible shape: " + count.status().message());
    plan->input_ids_.push_back(intern(input.name()));
    plan->inputs_.push_back(std::move(info));
  }

  // Producers: every node output gets exactly one definition.
  const int node_count = graph.node_size();
  // By value id: the producing node, -1 for graph inputs and constants, -2 for none yet.
  std::vector<int> producer_of(plan->values_.size(), -2);
  for (int id : plan->input_ids_) producer_of[id] = -1;
  for (size_t id = 0; id < plan->values_.size(); ++id)
    if (plan->values_[id].is_constant) producer_of[id] = -1;
  std::vector<std::string> node_names(static_cast<size_t>(node_count));
  // Given names must be unique (as onnxruntime requires): kernel choices, observers and
  // annotations find nodes by name. Unnamed nodes are called "<op>_<index>".
  std::unordered_map<std::string, int> named_nodes;
  for (int n = 0; n < node_count; ++n) {
    const auto& node = graph.node(n);
    if (!node.name().empty()) {
      auto [it, inserted] = named_nodes.try_emplace(node.name(), n);
      if (!inserted)
        return fail("two nodes are named '" + node.name() + "' (node " + std::to_string(it->second) + ", " +
                    graph.node(it->second).op_type() + ", and node " + std::to_string(n) + ", " + node.op_type() +
                    "); node names must be unique");
    }
    node_names[n] = node.name().empty() ? node.op_type() + "_" + std::to_string(n) : node.name();
    for (const auto& output : node.output()) {
      if (output.empty()) continue;
      const bool existed = value_ids.count(output) != 0;
      const int id = intern(output);
      producer_of.resize(plan->values_.size(), -2);
      if (existed && producer_of[id] != -2) {
        const std::string other = producer_of[id] >= 0 ? "node '" + node_names[producer_of[id]] + "'" : "a graph input or initializer";
        return fail("value '" + output + "' is written by node '" + node_names[n] + "' and by " + other);
      }
      producer_of[id] = n;
    }
  }
  // Every read must be defined; the order itself is node_schedule.h's.
  std::vector<ScheduledNode> scheduled(static_cast<size_t>(node_count));
  for (int n = 0; n < node_count; ++n) {
    for (const auto& input : graph.node(n).input()) {
      if (input.empty()) continue;
      auto it = value_ids.find(input);
      if (it == value_ids.end() || producer_of[it->second] == -2)
        return fail("node '" + node_names[n] + "' (" + graph.node(n).op_type() + ") reads '" + input +
                    "', which no node, graph input or initializer defines");
      scheduled[static_cast<size_t>(n)].reads.push_back(it->second);
    }
    for (const auto& output : graph.node(n).output())
      if (!output.empty()) scheduled[static_cast<size_t>(n)].writes.push_back(value_ids.at(output));
    scheduled[static_cast<size_t>(n)].is_view = is_view_op(graph.node(n).domain(), graph.node(n).op_type());
  }
  std::vector<bool> held_anyway(plan->values_.size(), false);
  for (size_t id = 0; id < plan->values_.size(); ++id) held_anyway[id] = plan->values_[id].is_constant;
  for (const auto& output : graph.output())
    if (auto it = value_ids.find(output.name()); it != value_ids.end()) held_anyway[static_cast<size_t>(it->second)] = true;
  const std::vector<int> order = schedule_nodes(scheduled, held_anyway);
  if (static_cast<int>(order.size()) != node_count) {
    std::vector<bool> ran(static_cast<size_t>(node_count), false);
    for (int n : order) ran[static_cast<size_t>(n)] = true;
    for (int n = 0; n < node_count; ++n)
      if (!ran[static_cast<size_t>(n)]) return fail("the graph has a cycle through node '" + node_names[n] + "'");
  }

  // Kernel choices of the Dispatch pass (kernels/registry/kernel_plan.h), handed to each
  // node's device op as attributes: standard ONNX nodes cannot carry them in the file.
  kernels::KernelPlan kernel_plan;
  for (const auto& property : model.metadata_props()) {
    if (property.key() != kernels::kKernelPlanKey) continue;
    auto parsed = kernels::parse_kernel_plan(property.value());
    if (!parsed) return fail(parsed.status().message());
    kernel_plan = std::move(parsed).value();
  }

  // Kernels, in execution order.
  const OpRegistry& registry = OpRegistry::builtin();
  for (int n : order) {
    const auto& node = graph.node(n);
    PlanStep step;
    step.name = node_names[n];
    step.op_type = node.op_type();
    step.domain = node.domain() == "ai.onnx" ? "" : node.domain();
    step.opset = model_opset(model, step.domain);
    const std::string where = "node '" + step.name + "' (" + step.op_type + "): ";
    if (step.opset == 0) return fail(where + "the model imports no opset for domain '" + step.domain + "'");
    Attributes attributes;
    if (Status status = attributes_from_node(node, external_data_dir, attributes); !status)
      return fail(status.with_context(where).message());
    if (auto chosen = kernel_plan.nodes.find(step.name); chosen != kernel_plan.nodes.end()) {
      std::vector<std::string> choices;
      for (const kernels::KernelChoice& choice : chosen->second)
        choices.push_back(std::to_string(choice.m) + ":" + choice.candidate);
      attributes.set("loka_kernel", std::move(choices));
      attributes.set("loka_kernel_device", kernel_plan.device);
    }
    auto factory = registry.find(step.domain, step.op_type, step.opset);
    if (!factory) return fail(factory.status().with_context(where).message());
    KernelInit init{step.name, step.op_type, step.domain, step.opset,
                    static_cast<size_t>(node.input_size()), static_cast<size_t>(node.output_size()), attributes};
    auto kernel = (*factory)(init);
    if (!kernel) return fail(kernel.status().with_context(where).message());
    step.kernel = std::move(kernel).value();
    step.attributes = std::move(attributes);
    for (const auto& input : node.input()) step.inputs.push_back(input.empty() ? kNoValue : value_ids.at(input));
    for (const auto& output : node.output()) step.outputs.push_back(output.empty() ? kNoValue : value_ids.at(output));
    const int index = static_cast<int>(plan->steps_.size());
    for (int id : step.inputs)
      if (id != kNoValue) plan->values_[id].last_reader = index;
    plan->steps_.push_back(std::move(step));
  }

  for (const auto& output : graph.output()) {
    auto it = value_ids.find(output.name());
    if (it == value_ids.end() || producer_of[it->second] == -2)
      return fail("graph output '" + output.name() + "' is not produced by any node");
    plan->values_[it->second].is_graph_output = true;
    plan->output_ids_.push_back(it->second);
    plan->outputs_.push_back(tensor_info_from(output));
  }
  return plan;
}

int ExecutionPlan::input_index(const std::string& name) const {
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (inputs_[i].name == name) return static_cast<int>(i);
  return -1;
}

}  // namespace loka
