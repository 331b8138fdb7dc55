// ============================================================================
// passes/onnx/onnx_import.cc — ONNX ModelProto -> LoKA IR.
// ============================================================================
#include "passes/onnx/onnx_import.h"

#include <onnx/onnx_pb.h>

#include <climits>
#include <optional>
#include <set>
#include <span>

#include "runtime/execution_plan.h"
#include "runtime/file_io.h"
#include "runtime/tensor_proto.h"

namespace loka::onnx_io {
namespace {

ir::TensorType type_from_value_info(const onnx::ValueInfoProto& info) {
  ir::TensorType type;
  if (!info.type().has_tensor_type()) return type;
  const auto& tensor_type = info.type().tensor_type();
  type.dtype = static_cast<DType>(tensor_type.elem_type());
  if (!tensor_type.has_shape()) return type;
  type.shape.emplace();
  for (const auto& dim : tensor_type.shape().dim()) {
    if (dim.has_dim_value()) type.shape->push_back(ir::Dim::known(dim.dim_value()));
    else if (dim.has_dim_param() && !dim.dim_param().empty()) type.shape->push_back(ir::Dim::named(dim.dim_param()));
    else type.shape->push_back(ir::Dim::unknown());
  }
  return type;
}

Status check_declared_type(const std::string& what, const ir::TensorType& type) {
  if (type.dtype != DType::kUndefined && !dtype_is_supported(static_cast<int32_t>(type.dtype)))
    return Status::error(what + " has unsupported element type " + std::string(dtype_name(type.dtype)));
  if (type.shape)
    for (const ir::Dim& dim : *type.shape)
      if (dim.value < -1 || dim.value > kMaxTensorElements)
        return Status::error(what + " declares dimension " + std::to_string(dim.value));
  return Status::ok();
}

/// Initializers at least this large bypass protobuf's copy (smaller ones cost nothing to copy).
constexpr size_t kMinPayloadBytes = size_t{64} << 10;

}  // namespace

Result<std::unique_ptr<ir::Graph>> import_model(const onnx::ModelProto& model,
                                                const std::filesystem::path& external_data_dir,
                                                const std::string& source, const InitializerPayloads& payloads) {
  const auto fail = [&source](const std::string& message) { return Status::error(source + ": " + message); };
  const onnx::GraphProto& proto = model.graph();
  auto graph = std::make_unique<ir::Graph>();
  graph->name = proto.name().empty() ? "graph" : proto.name();
  graph->ir_version = model.ir_version();
  graph->producer_name = model.producer_name();
  graph->producer_version = model.producer_version();
  for (const auto& entry : model.opset_import())
    graph->opsets[entry.domain() == "ai.onnx" ? "" : entry.domain()] = entry.version();
  for (const auto& prop : model.metadata_props()) graph->metadata[prop.key()] = prop.value();

  std::set<std::string> function_domains;
  for (const auto& function : model.functions()) function_domains.insert(function.domain() + "::" + function.name());

  std::map<std::string, ir::Value*> by_name;
  for (int i = 0; i < proto.initializer_size(); ++i) {
    const onnx::TensorProto& initializer = proto.initializer(i);
    if (by_name.count(initializer.name())) return fail("initializer '" + initializer.name() + "' is defined twice");
    const size_t index = static_cast<size_t>(i);
    auto tensor = tensor_from_proto(initializer, external_data_dir,
                                    index < payloads.size() ? payloads[index] : std::nullopt);
    if (!tensor) return fail(tensor.status().message());
    by_name[initializer.name()] = graph->add_initializer(initializer.name(), std::move(tensor).value());
  }
  for (const auto& input : proto.input()) {
    const ir::TensorType type = type_from_value_info(input);
    if (auto it = by_name.find(input.name()); it != by_name.end()) {
      if (it->second->is_initializer()) continue;  // IR < 4 lists initializers as inputs too
      return fail("graph input '" + input.name() + "' is declared twice");
    }
    LOKA_RETURN_IF_ERROR(check_declared_type("graph input '" + input.name() + "'", type).with_context(source + ": "));
    ir::Value* value = graph->add_value(input.name(), type);
    by_name[input.name()] = value;
    graph->add_input(value);
  }
  std::map<std::string, ir::TensorType> declared_types;
  for (const auto& info : proto.value_info()) declared_types[info.name()] = type_from_value_info(info);
  for (const auto& output : proto.output()) declared_types[output.name()] = type_from_value_info(output);

  // Node outputs first, so reads can be resolved in any node order.
  for (int n = 0; n < proto.node_size(); ++n) {
    for (const auto& output : proto.node(n).output()) {
      if (output.empty()) continue;
      if (by_name.count(output))
        return fail("value '" + output + "' is written by node '" + proto.node(n).name() +
                    "' but is already defined by another node, input or initializer");
      auto it = declared_types.find(output);
      by_name[output] = graph->add_value(output, it == declared_types.end() ? ir::TensorType{} : it->second);
    }
  }
  // Given node names must be unique (as in the runtime and onnxruntime): annotations are keyed
  // by the input model's node names.
  std::map<std::string, int> named_nodes;
  for (int n = 0; n < proto.node_size(); ++n) {
    const auto& node = proto.node(n);
    if (node.name().empty()) continue;
    auto [it, inserted] = named_nodes.try_emplace(node.name(), n);
    if (!inserted)
      return fail("two nodes are named '" + node.name() + "' (node " + std::to_string(it->second) + ", " +
                  proto.node(it->second).op_type() + ", and node " + std::to_string(n) + ", " + node.op_type() +
                  "); node names must be unique");
  }
  for (int n = 0; n < proto.node_size(); ++n) {
    const auto& node = proto.node(n);
    // Unnamed nodes get "<op>_<index>"; should that clash with a given name, Graph adds a suffix.
    const std::string node_name = node.name().empty() ? node.op_type() + "_" + std::to_string(n) : node.name();
    const std::string where = "node '" + node_name + "' (" + node.op_type() + "): ";
    if (function_domains.count(node.domain() + "::" + node.op_type()))
      return fail(where + "calls a model-local function; inline functions before optimizing (onnx.inliner)");
    std::vector<ir::Value*> inputs;
    for (const auto& input : node.input()) {
      if (input.empty()) {
        inputs.push_back(nullptr);
        continue;
      }
      auto it = by_name.find(input);
      if (it == by_name.end()) return fail(where + "reads '" + input + "', which no node, graph input or initializer defines");
      inputs.push_back(it->second);
    }
    std::vector<ir::Value*> outputs;
    for (const auto& output : node.output()) {
      // An omitted optional output still occupies its slot; give it a private value.
      outputs.push_back(output.empty() ? graph->add_value(node_name + "_unused") : by_name.at(output));
    }
    ir::Node* added = graph->add_node_with_outputs(node.op_type(), inputs, outputs, node_name, node.domain());
    if (Status status = attributes_from_node(node, external_data_dir, added->mutable_attributes()); !status)
      return fail(status.with_context(where).message());
  }
  for (const auto& output : proto.output()) {
    auto it = by_name.find(output.name());
    if (it == by_name.end()) return fail("graph output '" + output.name() + "' is not produced by any node");
    graph->add_output(it->second);
  }
  return graph;
}

Result<std::unique_ptr<ir::Graph>> import_model_file(const std::filesystem::path& path) {
  const std::filesystem::path folder = path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
  // Mapped, not read: the large raw_data are copied from the page cache into their tensors once.
  auto mapped = map_file(path);
  if (!mapped) {  // not a regular file (a pipe, say): read it whole, as before
    LOKA_ASSIGN_OR_RETURN(const std::vector<std::byte> bytes, read_file(path));
    LOKA_ASSIGN_OR_RETURN(auto model, parse_model_bytes(bytes, path.string()));
    return import_model(*model, folder, path.string());
  }
  const std::span<const std::byte> bytes = mapped->bytes();
  std::optional<SplitModel> split;
  if (bytes.size() <= static_cast<size_t>(INT_MAX))  // larger: parse_model_bytes says why not
    split = split_initializer_payloads(bytes, kMinPayloadBytes);
  if (!split) {
    LOKA_ASSIGN_OR_RETURN(auto model, parse_model_bytes(bytes, path.string()));
    return import_model(*model, folder, path.string());
  }
  LOKA_ASSIGN_OR_RETURN(auto model, parse_model_bytes(std::as_bytes(std::span(split->skeleton)), path.string()));
  return import_model(*model, folder, path.string(), split->payloads);
}

}  // namespace loka::onnx_io
