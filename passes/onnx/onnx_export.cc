// ============================================================================
// passes/onnx/onnx_export.cc — LoKA IR -> ONNX ModelProto.
// ============================================================================
#include "passes/onnx/onnx_export.h"

#include <onnx/onnx_pb.h>

#include <climits>
#include <fstream>
#include <span>

#include "passes/ir/graph_algorithms.h"
#include "runtime/initializer_payloads.h"
#include "runtime/tensor_proto.h"

namespace loka::onnx_io {
namespace {

void fill_value_info(const ir::Value& value, onnx::ValueInfoProto* info) {
  info->set_name(value.name());
  const ir::TensorType& type = value.type();
  if (type.dtype == DType::kUndefined) return;
  auto* tensor_type = info->mutable_type()->mutable_tensor_type();
  tensor_type->set_elem_type(static_cast<int32_t>(type.dtype));
  if (!type.shape) return;
  auto* shape = tensor_type->mutable_shape();
  for (const ir::Dim& dim : *type.shape) {
    auto* d = shape->add_dim();
    if (dim.is_known()) d->set_dim_value(dim.value);
    else if (!dim.symbol.empty()) d->set_dim_param(dim.symbol);
  }
}

/// Whether output `index` of `node` is written with an empty name (ONNX's omitted optional
/// output), so runtimes neither allocate nor compute it: an ai.loka QuantizedGemm's Y that
/// nothing reads beside its Yq (fuse-epilogue-quantize; docs/loka_ops.md makes Y optional then).
bool omitted_output(const ir::Node& node, size_t index) {
  const ir::Value* output = node.output(index);
  return node.is("QuantizedGemm", "ai.loka") && index == 0 && node.outputs().size() == 2 && !output->has_uses() &&
         !output->is_graph_output();
}

Status fill_attribute(const std::string& name, const AttributeValue& value, onnx::AttributeProto* attribute) {
  attribute->set_name(name);
  if (const auto* i = std::get_if<int64_t>(&value)) {
    attribute->set_type(onnx::AttributeProto::INT);
    attribute->set_i(*i);
  } else if (const auto* f = std::get_if<float>(&value)) {
    attribute->set_type(onnx::AttributeProto::FLOAT);
    attribute->set_f(*f);
  } else if (const auto* s = std::get_if<std::string>(&value)) {
    attribute->set_type(onnx::AttributeProto::STRING);
    attribute->set_s(*s);
  } else if (const auto* t = std::get_if<Tensor>(&value)) {
    attribute->set_type(onnx::AttributeProto::TENSOR);
    tensor_to_proto(*t, "", attribute->mutable_t());
  } else if (const auto* ints = std::get_if<std::vector<int64_t>>(&value)) {
    attribute->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : *ints) attribute->add_ints(v);
  } else if (const auto* floats = std::get_if<std::vector<float>>(&value)) {
    attribute->set_type(onnx::AttributeProto::FLOATS);
    for (float v : *floats) attribute->add_floats(v);
  } else if (const auto* strings = std::get_if<std::vector<std::string>>(&value)) {
    attribute->set_type(onnx::AttributeProto::STRINGS);
    for (const auto& v : *strings) attribute->add_strings(v);
  } else {
    return Status::error("attribute '" + name + "' has a type ONNX export does not know");
  }
  return Status::ok();
}

/// Initializers at least this large go from their tensors to the file without a copy in protobuf.
constexpr size_t kMinPayloadBytes = size_t{64} << 10;

/// export_model, leaving the raw_data of initializers of `payloads_from` bytes or more out of
/// `model` and listing them in `payloads` instead (when given).
Status export_model_with_payloads(const ir::Graph& graph, onnx::ModelProto& model, size_t payloads_from,
                                  InitializerPayloads* payloads) {
  model.Clear();
  model.set_ir_version(graph.ir_version);
  model.set_producer_name(graph.producer_name);
  model.set_producer_version(graph.producer_version);
  for (const auto& [domain, version] : graph.opsets) {
    auto* entry = model.add_opset_import();
    entry->set_domain(domain);
    entry->set_version(version);
  }
  for (const auto& [key, value] : graph.metadata) {
    auto* prop = model.add_metadata_props();
    prop->set_key(key);
    prop->set_value(value);
  }
  onnx::GraphProto* proto = model.mutable_graph();
  proto->set_name(graph.name);
  for (ir::Value* value : graph.values()) {
    if (!value->is_initializer()) continue;
    const Tensor& tensor = *value->initializer();
    if (payloads == nullptr || tensor.byte_size() < payloads_from) {
      tensor_to_proto(tensor, value->name(), proto->add_initializer());
      continue;
    }
    payloads->resize(static_cast<size_t>(proto->initializer_size()));
    payloads->emplace_back(std::span(static_cast<const std::byte*>(tensor.raw()), tensor.byte_size()));
    tensor_header_to_proto(tensor, value->name(), proto->add_initializer());
  }
  for (ir::Value* input : graph.inputs()) fill_value_info(*input, proto->add_input());
  for (ir::Value* output : graph.outputs()) fill_value_info(*output, proto->add_output());

  LOKA_ASSIGN_OR_RETURN(const std::vector<ir::Node*> order, ir::topological_order(graph));
  for (ir::Node* node : order) {
    auto* node_proto = proto->add_node();
    node_proto->set_name(node->name());
    node_proto->set_op_type(node->op_type());
    if (!node->domain().empty()) node_proto->set_domain(node->domain());
    for (ir::Value* input : node->inputs()) node_proto->add_input(input ? input->name() : std::string());
    for (size_t index = 0; index < node->outputs().size(); ++index) {
      const ir::Value* output = node->output(index);
      if (omitted_output(*node, index)) {
        node_proto->add_output(std::string());
        continue;
      }
      node_proto->add_output(output->name());
      if (!output->is_graph_output() && output->type().dtype != DType::kUndefined)
        fill_value_info(*output, proto->add_value_info());
    }
    for (const auto& [name, value] : node->attributes().all())
      LOKA_RETURN_IF_ERROR(fill_attribute(name, value, node_proto->add_attribute())
                               .with_context("node '" + node->name() + "': "));
  }
  return Status::ok();
}

}  // namespace

Status export_model(const ir::Graph& graph, onnx::ModelProto& model) {
  return export_model_with_payloads(graph, model, 0, nullptr);
}

Result<std::string> export_model_bytes(const ir::Graph& graph) {
  onnx::ModelProto model;
  LOKA_RETURN_IF_ERROR(export_model(graph, model));
  std::string bytes;
  if (!model.SerializeToString(&bytes)) return Status::error("the model is too large to serialize (over 2 GiB)");
  return bytes;
}

Status write_model_file(const ir::Graph& graph, const std::filesystem::path& path) {
  // The model less its large initializers' bytes, which then go from the tensors to the file:
  // the same bytes as serializing the whole model, without two copies of the weights first.
  onnx::ModelProto model;
  InitializerPayloads payloads;
  LOKA_RETURN_IF_ERROR(export_model_with_payloads(graph, model, kMinPayloadBytes, &payloads));
  std::string skeleton;
  if (!model.SerializeToString(&skeleton)) return Status::error("the model is too large to serialize (over 2 GiB)");
  LOKA_ASSIGN_OR_RETURN(const size_t size, joined_model_size(skeleton, payloads));
  if (size > static_cast<size_t>(INT_MAX)) return Status::error("the model is too large to serialize (over 2 GiB)");
  std::ofstream out(path, std::ios::binary);
  if (!out || !write_with_initializer_payloads(skeleton, payloads, out) || !out.flush())
    return Status::error("cannot write '" + path.string() + "'");
  return Status::ok();
}

}  // namespace loka::onnx_io
