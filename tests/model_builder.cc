// ============================================================================
// tests/model_builder.cc — builds small ONNX ModelProtos in tests.
// ============================================================================
#include "model_builder.h"

#include "loka/session.h"
#include "runtime/tensor_proto.h"

namespace loka::testing {
namespace {

void fill_value_info(onnx::ValueInfoProto* info, const std::string& name, DType dtype, const Shape* dims) {
  info->set_name(name);
  auto* tensor_type = info->mutable_type()->mutable_tensor_type();
  tensor_type->set_elem_type(static_cast<int32_t>(dtype));
  if (dims == nullptr) return;
  auto* shape = tensor_type->mutable_shape();
  for (int64_t dim : *dims) {
    auto* d = shape->add_dim();
    if (dim < 0) d->set_dim_param("batch");
    else d->set_dim_value(dim);
  }
}

}  // namespace

ModelBuilder::ModelBuilder(int opset, const std::string& domain) {
  model_.set_ir_version(8);
  model_.set_producer_name("loka-tests");
  auto* entry = model_.add_opset_import();
  entry->set_domain(domain);
  entry->set_version(opset);
  model_.mutable_graph()->set_name("test_graph");
}

ModelBuilder& ModelBuilder::opset(const std::string& domain, int version) {
  auto* entry = model_.add_opset_import();
  entry->set_domain(domain);
  entry->set_version(version);
  return *this;
}

ModelBuilder& ModelBuilder::input(const std::string& name, DType dtype, const Shape& dims) {
  fill_value_info(model_.mutable_graph()->add_input(), name, dtype, &dims);
  return *this;
}

ModelBuilder& ModelBuilder::output(const std::string& name, DType dtype, const Shape& dims) {
  fill_value_info(model_.mutable_graph()->add_output(), name, dtype, &dims);
  return *this;
}

ModelBuilder& ModelBuilder::output_unshaped(const std::string& name, DType dtype) {
  fill_value_info(model_.mutable_graph()->add_output(), name, dtype, nullptr);
  return *this;
}

ModelBuilder& ModelBuilder::initializer(const std::string& name, const Tensor& tensor) {
  tensor_to_proto(tensor, name, model_.mutable_graph()->add_initializer());
  return *this;
}

ModelBuilder& ModelBuilder::node(const std::string& op_type, const std::vector<std::string>& inputs,
                                 const std::vector<std::string>& outputs,
                                 const std::vector<std::pair<std::string, TestAttribute>>& attributes,
                                 const std::string& name, const std::string& domain) {
  auto* node = model_.mutable_graph()->add_node();
  node->set_op_type(op_type);
  node->set_name(name.empty() ? op_type + "_" + std::to_string(model_.graph().node_size() - 1) : name);
  node->set_domain(domain);
  for (const auto& in : inputs) node->add_input(in);
  for (const auto& out : outputs) node->add_output(out);
  for (const auto& [attr_name, value] : attributes) {
    auto* attr = node->add_attribute();
    attr->set_name(attr_name);
    if (auto* i = std::get_if<int64_t>(&value)) {
      attr->set_type(onnx::AttributeProto::INT);
      attr->set_i(*i);
    } else if (auto* f = std::get_if<float>(&value)) {
      attr->set_type(onnx::AttributeProto::FLOAT);
      attr->set_f(*f);
    } else if (auto* s = std::get_if<std::string>(&value)) {
      attr->set_type(onnx::AttributeProto::STRING);
      attr->set_s(*s);
    } else if (auto* is = std::get_if<std::vector<int64_t>>(&value)) {
      attr->set_type(onnx::AttributeProto::INTS);
      for (int64_t v : *is) attr->add_ints(v);
    } else if (auto* fs = std::get_if<std::vector<float>>(&value)) {
      attr->set_type(onnx::AttributeProto::FLOATS);
      for (float v : *fs) attr->add_floats(v);
    } else if (auto* t = std::get_if<Tensor>(&value)) {
      attr->set_type(onnx::AttributeProto::TENSOR);
      tensor_to_proto(*t, "", attr->mutable_t());
    }
  }
  return *this;
}

std::string ModelBuilder::serialize() const { return model_.SerializeAsString(); }

Result<std::shared_ptr<const Engine>> ModelBuilder::build_engine(EngineOptions options) const {
  const std::string bytes = serialize();
  return Engine::load_bytes(std::as_bytes(std::span(bytes.data(), bytes.size())), options);
}

Result<std::vector<Tensor>> run_once(const Engine& engine, const std::vector<Tensor>& inputs) {
  auto session = engine.new_session();
  return session->run(inputs);
}

ModelBuilder chain_model(int nodes, const Shape& shape) {
  ModelBuilder builder(17);
  builder.input("x", DType::kFloat32, shape);
  onnx::GraphProto* graph = builder.proto().mutable_graph();
  graph->mutable_node()->Reserve(nodes);
  // Names built with += rather than "v" + to_string(n): GCC 12 warns falsely (-Wrestrict) on the latter.
  const auto named = [](const char* prefix, int n) {
    std::string name = prefix;
    name += std::to_string(n);
    return name;
  };
  for (int n = 0; n < nodes; ++n) {
    onnx::NodeProto* node = graph->add_node();
    node->set_op_type(n % 3 == 2 ? "Neg" : "Relu");
    node->set_name(named("n", n));
    node->add_input(n == 0 ? std::string("x") : named("v", n - 1));
    node->add_output(named("v", n));
  }
  builder.output(named("v", nodes - 1), DType::kFloat32, shape);
  return builder;
}

}  // namespace loka::testing
