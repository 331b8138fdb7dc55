// ============================================================================
// passes/ir/text_format.cc — printer and recursive-descent parser of the IR text.
// ============================================================================
#include "passes/ir/text_format.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include "passes/ir/graph_algorithms.h"

namespace loka::ir {
namespace {

// ---------------------------------------------------------------- printing --

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == ':' || c == '/' || c == '-';
}

std::string quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string value_ref(const Value* value) {
  if (value == nullptr) return "_";
  const std::string& name = value->name();
  const bool plain = !name.empty() && name != "_" && std::all_of(name.begin(), name.end(), is_name_char);
  return "%" + (plain ? name : quote(name));
}

std::string format_float(double value, int digits) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*g", digits, value);
  return buffer;
}

std::string format_tensor_values(const Tensor& tensor) {
  std::string out = "[";
  const int64_t count = tensor.element_count();
  const auto* bytes = static_cast<const uint8_t*>(tensor.raw());
  for (int64_t i = 0; i < count; ++i) {
    if (i) out += ", ";
    char buffer[32];
    switch (tensor.dtype()) {
      case DType::kFloat32: out += format_float(tensor.data<float>()[i], 9); break;
      case DType::kFloat64: out += format_float(tensor.data<double>()[i], 17); break;
      case DType::kFloat16: case DType::kBFloat16:
        std::snprintf(buffer, sizeof buffer, "0x%04x", tensor.data<uint16_t>()[i]);
        out += buffer;
        break;
      case DType::kFloat8E4M3FN: case DType::kFloat8E5M2:
        std::snprintf(buffer, sizeof buffer, "0x%02x", bytes[i]);
        out += buffer;
        break;
      case DType::kUInt64: out += std::to_string(tensor.data<uint64_t>()[i]); break;
      default: out += std::to_string(tensor.to_int64s()[static_cast<size_t>(i)]); break;
    }
  }
  return out + "]";
}

std::string format_attribute(const AttributeValue& value) {
  if (const auto* i = std::get_if<int64_t>(&value)) return std::to_string(*i);
  if (const auto* f = std::get_if<float>(&value)) return format_float(*f, 9) + "f";
  if (const auto* s = std::get_if<std::string>(&value)) return quote(*s);
  if (const auto* t = std::get_if<Tensor>(&value))
    return "tensor<" + print_type(TensorType::of(t->dtype(), t->shape())) + ">" + format_tensor_values(*t);
  std::string out;
  const auto join = [&out](const auto& items, auto format) {
    out += "[";
    for (size_t k = 0; k < items.size(); ++k) out += (k ? ", " : "") + format(items[k]);
    out += "]";
  };
  if (const auto* ints = std::get_if<std::vector<int64_t>>(&value)) {
    out = "ints";
    join(*ints, [](int64_t v) { return std::to_string(v); });
  } else if (const auto* floats = std::get_if<std::vector<float>>(&value)) {
    out = "floats";
    join(*floats, [](float v) { return format_float(v, 9) + "f"; });
  } else if (const auto* strings = std::get_if<std::vector<std::string>>(&value)) {
    out = "strings";
    join(*strings, [](const std::string& v) { return quote(v); });
  }
  return out;
}

}  // namespace

std::string print_type(const TensorType& type) {
  std::string out(dtype_short_name(type.dtype));
  if (!type.shape) return out + "[*]";
  out += "[";
  for (size_t i = 0; i < type.shape->size(); ++i) {
    const Dim& dim = (*type.shape)[i];
    if (i) out += ",";
    out += dim.is_known() ? std::to_string(dim.value) : (dim.symbol.empty() ? "?" : dim.symbol);
  }
  return out + "]";
}

namespace {

std::string print_graph_text(const Graph& graph, bool with_initializer_values) {
  std::string out = "graph " + quote(graph.name) + " {\n";
  for (const auto& [domain, version] : graph.opsets) out += "  opset " + quote(domain) + " " + std::to_string(version) + "\n";
  for (const auto& [key, value] : graph.metadata) out += "  meta " + quote(key) + " " + quote(value) + "\n";
  for (const Value* input : graph.inputs()) out += "  input " + value_ref(input) + " : " + print_type(input->type()) + "\n";
  for (const Value* value : graph.values())
    if (value->is_initializer())
      out += "  init " + value_ref(value) + " : " + print_type(value->type()) + " = " +
             (with_initializer_values ? format_tensor_values(*value->initializer()) : std::string("...")) + "\n";
  auto order = topological_order(graph);
  const std::vector<Node*> nodes = order ? std::move(order).value() : graph.nodes();  // a cyclic graph still prints
  for (const Node* node : nodes) {
    out += "  ";
    for (size_t i = 0; i < node->outputs().size(); ++i) out += (i ? ", " : "") + value_ref(node->output(i));
    out += " = " + (node->domain().empty() ? "" : node->domain() + "::") + node->op_type() + "(";
    for (size_t i = 0; i < node->inputs().size(); ++i) out += (i ? ", " : "") + value_ref(node->input(i));
    out += ")";
    if (!node->attributes().all().empty()) {
      out += " {";
      bool first = true;
      for (const auto& [name, value] : node->attributes().all()) {
        out += (first ? "" : ", ") + name + " = " + format_attribute(value);
        first = false;
      }
      out += "}";
    }
    out += " :";
    for (size_t i = 0; i < node->outputs().size(); ++i) out += (i ? ", " : " ") + print_type(node->output(i)->type());
    out += " @" + quote(node->name()) + "\n";
  }
  for (const Value* output : graph.outputs()) out += "  output " + value_ref(output) + "\n";
  return out + "}\n";
}

}  // namespace

std::string print_graph(const Graph& graph) { return print_graph_text(graph, true); }

std::string print_graph_structure(const Graph& graph) { return print_graph_text(graph, false); }

// ----------------------------------------------------------------- parsing --
namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Result<std::unique_ptr<Graph>> parse() {
    graph_ = std::make_unique<Graph>();
    if (!keyword("graph")) return error("expected 'graph'");
    LOKA_ASSIGN_OR_RETURN(graph_->name, string_literal());
    if (!punct('{')) return error("expected '{'");
    while (!punct('}')) {
      if (at_end()) return error("unexpected end of text; expected '}'");
      LOKA_RETURN_IF_ERROR(statement());
    }
    skip_space();
    if (!at_end()) return error("text after the closing '}'");
    for (const auto& [name, value] : pending_)
      return Status::error("value '" + name + "' is read but never defined");
    return std::move(graph_);
  }

 private:
  // -- lexing helpers --
  bool at_end() { skip_space(); return pos_ >= text_.size(); }
  void skip_space() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '\n') ++line_;
      if (c == '#') {  // comment to end of line
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
        continue;
      }
      if (!std::isspace(static_cast<unsigned char>(c))) break;
      ++pos_;
    }
  }
  bool punct(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool keyword(std::string_view word) {
    skip_space();
    if (text_.substr(pos_, word.size()) != word) return false;
    const size_t end = pos_ + word.size();
    if (end < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[end])) || text_[end] == '_')) return false;
    pos_ = end;
    return true;
  }
  Status error(const std::string& message) const {
    return Status::error("IR text line " + std::to_string(line_) + ": " + message);
  }
  std::string identifier() {
    skip_space();
    const size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_' ||
                                   text_[pos_] == '.'))
      ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }
  Result<std::string> string_literal() {
    skip_space();
    if (pos_ >= text_.size() || text_[pos_] != '"') return error("expected a quoted string");
    ++pos_;
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      char c = text_[pos_++];
      if (c == '\\' && pos_ < text_.size()) {
        c = text_[pos_++];
        if (c == 'n') c = '\n';
      }
      out += c;
    }
    if (pos_ >= text_.size()) return error("unterminated string");
    ++pos_;
    return out;
  }
  /// A number token as text (sign, digits, '.', exponent, hex, nan/inf, trailing 'f').
  std::string number_token() {
    skip_space();
    const size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '.' ||
                                   text_[pos_] == '-' || text_[pos_] == '+'))
      ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  // -- grammar --
  Result<std::string> value_name() {
    skip_space();
    if (!punct('%')) return error("expected a value ('%name')");
    if (pos_ < text_.size() && text_[pos_] == '"') return string_literal();
    const size_t start = pos_;
    while (pos_ < text_.size() && is_name_char(text_[pos_])) ++pos_;
    if (pos_ == start) return error("empty value name");
    return std::string(text_.substr(start, pos_ - start));
  }

  Result<TensorType> type() {
    const std::string dtype_name = identifier();
    TensorType type;
    if (dtype_name != "undefined") {
      auto dtype = dtype_from_short_name(dtype_name);
      if (!dtype) return error("unknown element type '" + dtype_name + "'");
      type.dtype = *dtype;
    }
    if (!punct('[')) return error("expected '[' after the element type");
    if (punct('*')) {
      if (!punct(']')) return error("expected ']' after '*'");
      return type;
    }
    type.shape.emplace();
    if (punct(']')) return type;
    do {
      skip_space();
      if (punct('?')) {
        type.shape->push_back(Dim::unknown());
      } else if (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        const std::string digits = number_token();
        type.shape->push_back(Dim::known(std::strtoll(digits.c_str(), nullptr, 10)));
      } else {
        const std::string symbol = identifier();
        if (symbol.empty()) return error("expected a dimension");
        type.shape->push_back(Dim::named(symbol));
      }
    } while (punct(','));
    if (!punct(']')) return error("expected ']' closing the shape");
    return type;
  }

  Result<Tensor> tensor_values(const TensorType& type) {
    if (!type.is_static()) return error("a constant tensor needs a static shape");
    LOKA_ASSIGN_OR_RETURN(const int64_t count, checked_element_count(type.static_shape()));
    // Every value takes at least one character, so a shape the rest of the text cannot fill is
    // refused before allocating it (a typo'd dim would otherwise ask for terabytes).
    if (static_cast<uint64_t>(count) > text_.size() - pos_)
      return error("a constant of " + std::to_string(count) + " values is longer than the rest of the text");
    Tensor tensor = Tensor::zeros(type.dtype, type.static_shape());
    if (!punct('[')) return error("expected '[' opening tensor values");
    auto* bytes = static_cast<uint8_t*>(tensor.raw());
    for (int64_t i = 0; i < count; ++i) {
      if (i && !punct(',')) return error("expected ',' between tensor values");
      const std::string token = number_token();
      if (token.empty()) return error("expected a number");
      const char* c = token.c_str();
      switch (type.dtype) {
        case DType::kFloat32: tensor.data<float>()[i] = std::strtof(c, nullptr); break;
        case DType::kFloat64: tensor.data<double>()[i] = std::strtod(c, nullptr); break;
        case DType::kFloat16: case DType::kBFloat16:
          tensor.data<uint16_t>()[i] = static_cast<uint16_t>(std::strtoul(c, nullptr, 0));
          break;
        case DType::kFloat8E4M3FN: case DType::kFloat8E5M2: case DType::kUInt8: case DType::kBool:
          bytes[i] = static_cast<uint8_t>(std::strtoul(c, nullptr, 0));
          break;
        case DType::kInt8: reinterpret_cast<int8_t*>(bytes)[i] = static_cast<int8_t>(std::strtol(c, nullptr, 0)); break;
        case DType::kInt16: tensor.data<int16_t>()[i] = static_cast<int16_t>(std::strtol(c, nullptr, 0)); break;
        case DType::kUInt16: tensor.data<uint16_t>()[i] = static_cast<uint16_t>(std::strtoul(c, nullptr, 0)); break;
        case DType::kInt32: tensor.data<int32_t>()[i] = static_cast<int32_t>(std::strtol(c, nullptr, 0)); break;
        case DType::kUInt32: tensor.data<uint32_t>()[i] = static_cast<uint32_t>(std::strtoul(c, nullptr, 0)); break;
        case DType::kInt64: tensor.data<int64_t>()[i] = std::strtoll(c, nullptr, 0); break;
        case DType::kUInt64: tensor.data<uint64_t>()[i] = std::strtoull(c, nullptr, 0); break;
        default: return error("cannot hold constants of type " + std::string(dtype_name(type.dtype)));
      }
    }
    if (!punct(']')) return error("expected ']' after " + std::to_string(count) + " tensor values");
    return tensor;
  }

  Result<AttributeValue> attribute_value() {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == '"') {
      LOKA_ASSIGN_OR_RETURN(std::string s, string_literal());
      return AttributeValue(std::move(s));
    }
    if (keyword("tensor")) {
      if (!punct('<')) return error("expected '<' after 'tensor'");
      LOKA_ASSIGN_OR_RETURN(const TensorType tensor_type, type());
      if (!punct('>')) return error("expected '>' closing the tensor type");
      LOKA_ASSIGN_OR_RETURN(Tensor t, tensor_values(tensor_type));
      return AttributeValue(std::move(t));
    }
    for (const char* list_kind : {"ints", "floats", "strings"}) {
      if (!keyword(list_kind)) continue;
      if (!punct('[')) return error(std::string("expected '[' after '") + list_kind + "'");
      std::vector<int64_t> ints;
      std::vector<float> floats;
      std::vector<std::string> strings;
      if (!punct(']')) {
        do {
          if (list_kind[0] == 's') {
            LOKA_ASSIGN_OR_RETURN(std::string s, string_literal());
            strings.push_back(std::move(s));
          } else {
            const std::string token = number_token();
            if (token.empty()) return error("expected a number in the list");
            if (list_kind[0] == 'i') ints.push_back(std::strtoll(token.c_str(), nullptr, 10));
            else floats.push_back(std::strtof(token.c_str(), nullptr));
          }
        } while (punct(','));
        if (!punct(']')) return error("expected ']' closing the list");
      }
      if (list_kind[0] == 'i') return AttributeValue(std::move(ints));
      if (list_kind[0] == 'f') return AttributeValue(std::move(floats));
      return AttributeValue(std::move(strings));
    }
    const std::string token = number_token();
    if (token.empty()) return error("expected an attribute value");
    if (token.back() == 'f' && token != "inf" && token != "-inf") return AttributeValue(std::strtof(token.c_str(), nullptr));
    char* end = nullptr;
    const long long integer = std::strtoll(token.c_str(), &end, 10);
    if (*end != '\0') return error("bad attribute value '" + token + "' (floats end in 'f')");
    return AttributeValue(static_cast<int64_t>(integer));
  }

  /// A value being read: the defined one, or a placeholder resolved when it is defined later.
  Value* reference(const std::string& name) {
    if (Value* value = graph_->find_value(name)) return value;
    auto [it, inserted] = pending_.try_emplace(name, nullptr);
    if (inserted) it->second = graph_->add_value(name);
    return it->second;
  }
  /// A value being defined: takes over a pending placeholder of that name.
  Result<Value*> definition(const std::string& name) {
    if (auto it = pending_.find(name); it != pending_.end()) {
      Value* value = it->second;
      pending_.erase(it);
      return value;
    }
    if (graph_->find_value(name)) return error("value '" + name + "' is defined twice");
    return graph_->add_value(name);
  }

  Status statement() {
    if (keyword("opset")) {
      LOKA_ASSIGN_OR_RETURN(const std::string domain, string_literal());
      graph_->opsets[domain] = std::strtoll(number_token().c_str(), nullptr, 10);
      return Status::ok();
    }
    if (keyword("meta")) {
      LOKA_ASSIGN_OR_RETURN(const std::string key, string_literal());
      LOKA_ASSIGN_OR_RETURN(graph_->metadata[key], string_literal());
      return Status::ok();
    }
    if (keyword("input")) {
      LOKA_ASSIGN_OR_RETURN(const std::string name, value_name());
      if (!punct(':')) return error("expected ':' before the input's type");
      LOKA_ASSIGN_OR_RETURN(Value* value, definition(name));
      LOKA_ASSIGN_OR_RETURN(const TensorType input_type, type());
      value->set_type(input_type);
      graph_->add_input(value);
      return Status::ok();
    }
    if (keyword("init")) {
      LOKA_ASSIGN_OR_RETURN(const std::string name, value_name());
      if (!punct(':')) return error("expected ':' before the initializer's type");
      LOKA_ASSIGN_OR_RETURN(const TensorType init_type, type());
      if (!punct('=')) return error("expected '=' before the initializer's values");
      LOKA_ASSIGN_OR_RETURN(Tensor tensor, tensor_values(init_type));
      LOKA_ASSIGN_OR_RETURN(Value* value, definition(name));
      graph_->set_initializer(value, std::move(tensor));
      return Status::ok();
    }
    if (keyword("output")) {
      LOKA_ASSIGN_OR_RETURN(const std::string name, value_name());
      graph_->add_output(reference(name));
      return Status::ok();
    }
    return node_statement();
  }

  Status node_statement() {
    std::vector<std::string> output_names;
    do {
      LOKA_ASSIGN_OR_RETURN(std::string name, value_name());
      output_names.push_back(std::move(name));
    } while (punct(','));
    if (!punct('=')) return error("expected '=' after the node's outputs");
    std::string op = identifier();
    std::string domain;
    skip_space();
    if (text_.substr(pos_, 2) == "::") {
      pos_ += 2;
      domain = op;
      op = identifier();
    }
    if (op.empty()) return error("expected an op name");
    if (!punct('(')) return error("expected '(' after the op name");
    std::vector<Value*> inputs;
    if (!punct(')')) {
      do {
        if (punct('_')) {
          inputs.push_back(nullptr);
          continue;
        }
        LOKA_ASSIGN_OR_RETURN(const std::string name, value_name());
        inputs.push_back(reference(name));
      } while (punct(','));
      if (!punct(')')) return error("expected ')' closing the inputs");
    }
    Attributes attributes;
    if (punct('{')) {
      do {
        const std::string name = identifier();
        if (name.empty()) return error("expected an attribute name");
        if (!punct('=')) return error("expected '=' after attribute '" + name + "'");
        LOKA_ASSIGN_OR_RETURN(AttributeValue value, attribute_value());
        attributes.set(name, std::move(value));
      } while (punct(','));
      if (!punct('}')) return error("expected '}' closing the attributes");
    }
    std::vector<TensorType> types;
    if (punct(':')) {
      do {
        LOKA_ASSIGN_OR_RETURN(TensorType output_type, type());
        types.push_back(std::move(output_type));
      } while (punct(','));
    }
    std::string node_name;
    if (punct('@')) {
      LOKA_ASSIGN_OR_RETURN(node_name, string_literal());
    }
    if (!types.empty() && types.size() != output_names.size())
      return error("the node has " + std::to_string(output_names.size()) + " outputs but " +
                   std::to_string(types.size()) + " types");
    std::vector<Value*> outputs;
    for (size_t i = 0; i < output_names.size(); ++i) {
      LOKA_ASSIGN_OR_RETURN(Value* value, definition(output_names[i]));
      if (!types.empty()) value->set_type(types[i]);
      outputs.push_back(value);
    }
    if (!node_name.empty() && graph_->find_node(node_name)) return error("node '" + node_name + "' is defined twice");
    Node* node = graph_->add_node_with_outputs(op, inputs, outputs, node_name, domain);
    node->mutable_attributes() = std::move(attributes);
    return Status::ok();
  }

  std::string_view text_;
  size_t pos_ = 0;
  int line_ = 1;
  std::unique_ptr<Graph> graph_;
  std::map<std::string, Value*> pending_;
};

}  // namespace

Result<std::unique_ptr<Graph>> parse_graph(std::string_view text) { return Parser(text).parse(); }

}  // namespace loka::ir
