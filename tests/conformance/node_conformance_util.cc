// ============================================================================
// tests/conformance/node_conformance_util.cc — discovery, classification,
// running and comparison of ONNX backend node tests (see node_conformance.h).
// ============================================================================
#include "conformance/node_conformance.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "loka/engine.h"
#include "loka/session.h"
#include "runtime/op_kernel.h"
#include "runtime/test_data.h"

namespace loka::conformance {
namespace fs = std::filesystem;

namespace {

std::string trim(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

/// "" for the default ONNX domain under either of its spellings.
std::string normalized_domain(const std::string& domain) { return domain == "ai.onnx" ? "" : domain; }

/// Every (domain, op_type) a graph uses, including those inside If/Loop/Scan bodies.
void collect_ops(const onnx::GraphProto& graph, std::set<std::pair<std::string, std::string>>& ops) {
  for (const auto& node : graph.node()) {
    ops.emplace(normalized_domain(node.domain()), node.op_type());
    for (const auto& attribute : node.attribute()) {
      if (attribute.has_g()) collect_ops(attribute.g(), ops);
      for (const auto& subgraph : attribute.graphs()) collect_ops(subgraph, ops);
    }
  }
}

/// Why the registry cannot run `model` ("" when it can); fills `missing` with what it lacks.
std::string unsupported_ops(const onnx::ModelProto& model, std::vector<std::string>& missing) {
  static const std::vector<std::string> known = OpRegistry::builtin().op_names();
  std::map<std::string, int> opsets;
  for (const auto& entry : model.opset_import()) opsets[normalized_domain(entry.domain())] = int(entry.version());
  std::set<std::pair<std::string, std::string>> ops;
  collect_ops(model.graph(), ops);
  std::string reason;
  for (const auto& [domain, op_type] : ops) {
    const std::string name = domain.empty() ? op_type : domain + "::" + op_type;
    const int opset = opsets.count(domain) ? opsets[domain] : 0;
    if (!std::binary_search(known.begin(), known.end(), name)) {
      missing.push_back(name);
      reason += (reason.empty() ? "" : "; ") + std::string("op ") + name + " is not implemented";
    } else if (!OpRegistry::builtin().find(domain, op_type, opset)) {
      missing.push_back(name + "@" + std::to_string(opset));
      reason += (reason.empty() ? "" : "; ") + std::string("op ") + name + " is not registered at opset " +
                std::to_string(opset);
    }
  }
  return reason;
}

/// ONNX spelling of a TensorProto type number, including those newer than LoKA's enum.
std::string type_name(int32_t number) {
  switch (number) {
    case 14: return "COMPLEX64";
    case 15: return "COMPLEX128";
    case 21: return "UINT4";
    case 22: return "INT4";
    case 23: return "FLOAT4E2M1";
    case 24: return "FLOAT8E8M0";
    case 25: return "UINT2";
    case 26: return "INT2";
    default: return std::string(dtype_name(static_cast<DType>(number)));
  }
}

/// Records in `types` every element type of `graph` (values, initializers, Cast targets,
/// subgraphs) that LoKA cannot hold densely, and "sequence"/"optional"/"map" values.
void collect_unsupported_types(const onnx::GraphProto& graph, std::set<std::string>& types) {
  const auto check_value = [&](const onnx::ValueInfoProto& value) {
    const auto& type = value.type();
    if (type.has_sequence_type()) types.insert("sequence");
    else if (type.has_optional_type()) types.insert("optional");
    else if (type.has_map_type()) types.insert("map");
    else if (type.has_tensor_type() && !dtype_is_supported(type.tensor_type().elem_type()))
      types.insert(type_name(type.tensor_type().elem_type()));
  };
  for (const auto& value : graph.input()) check_value(value);
  for (const auto& value : graph.output()) check_value(value);
  for (const auto& value : graph.value_info()) check_value(value);
  for (const auto& initializer : graph.initializer())
    if (!dtype_is_supported(initializer.data_type())) types.insert(type_name(initializer.data_type()));
  for (const auto& node : graph.node())
    for (const auto& attribute : node.attribute()) {
      if ((attribute.name() == "to" || attribute.name() == "output_dtype") &&
          attribute.type() == onnx::AttributeProto::INT && attribute.i() != 0 &&
          !dtype_is_supported(static_cast<int32_t>(attribute.i())))
        types.insert(type_name(static_cast<int32_t>(attribute.i())));
      if (attribute.has_t() && !dtype_is_supported(attribute.t().data_type()))
        types.insert(type_name(attribute.t().data_type()));
      if (attribute.has_g()) collect_unsupported_types(attribute.g(), types);
      for (const auto& subgraph : attribute.graphs()) collect_unsupported_types(subgraph, types);
    }
}

/// onnx <= 1.12 wrote bfloat16 test tensors as UINT16 arrays of the same bits (numpy has no
/// bfloat16); read such a tensor as the BFLOAT16 the model declares. Anything else is left alone.
Tensor as_declared(const Tensor& tensor, DType declared) {
  if (declared == DType::kBFloat16 && tensor.dtype() == DType::kUInt16)
    return Tensor::on_storage(DType::kBFloat16, tensor.shape(), tensor.storage());
  return tensor;
}

std::string format_value(double value) {
  std::ostringstream out;
  out.precision(9);
  out << value;
  return out.str();
}

/// An FP8 element as "0x7e(448)": the code decides equality, the value helps the reader.
std::string format_code(uint8_t code, float value) {
  std::ostringstream out;
  out << "0x" << std::hex << int(code) << "(" << format_value(value) << ")";
  return out.str();
}

/// Lists the first few mismatching elements and how many there are.
class MismatchLog {
 public:
  void add(int64_t index, const std::string& got, const std::string& want) {
    if (count_++ < 5) details_ += " [" + std::to_string(index) + "] got " + got + " want " + want + ";";
  }
  std::string summary(const std::string& name, int64_t total) const {
    if (count_ == 0) return "";
    return "output '" + name + "': " + std::to_string(count_) + " of " + std::to_string(total) +
           " elements differ:" + details_;
  }

 private:
  int64_t count_ = 0;
  std::string details_;
};

}  // namespace

Result<ExclusionList> read_exclusions(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return Status::error("cannot read the exclusion file " + path.string());
  ExclusionList list;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    const size_t space = line.find_first_of(" \t");
    const std::string where = path.filename().string() + ":" + std::to_string(number);
    if (space == std::string::npos) return Status::error(where + ": '" + line + "' has no reason");
    const std::string name = line.substr(0, space);
    if (!list.reasons.emplace(name, trim(line.substr(space))).second)
      return Status::error(where + ": '" + name + "' is listed twice");
  }
  return list;
}

Result<std::vector<NodeCase>> discover_cases(const fs::path& root, const std::string& source,
                                             const ExclusionList& exclusions) {
  std::error_code error;
  std::vector<fs::path> folders;
  for (fs::directory_iterator it(root, error), end; !error && it != end; it.increment(error))
    if (fs::is_regular_file(it->path() / "model.onnx")) folders.push_back(it->path());
  if (error) return Status::error("cannot list node tests in " + root.string() + ": " + error.message());
  std::sort(folders.begin(), folders.end());

  std::vector<NodeCase> cases;
  for (const fs::path& folder : folders) {
    NodeCase node_case{folder.filename().string(), source, folder, CaseKind::kApplicable};
    onnx::ModelProto model;
    std::ifstream in(folder / "model.onnx", std::ios::binary);
    if (!model.ParseFromIstream(&in)) {
      node_case.kind = CaseKind::kApplicable;  // running it reports the unreadable model by name
    } else if (std::string reason = unsupported_ops(model, node_case.missing_ops); !reason.empty()) {
      node_case.kind = CaseKind::kUnsupportedOp;
      node_case.reason = std::move(reason);
    } else if (std::set<std::string> types; collect_unsupported_types(model.graph(), types), !types.empty()) {
      node_case.kind = CaseKind::kUnsupportedType;
      node_case.missing_types.assign(types.begin(), types.end());
      node_case.reason = "uses types LoKA cannot hold:";
      for (const std::string& type : types) node_case.reason += " " + type;
    } else if (auto it = exclusions.reasons.find(node_case.name); it != exclusions.reasons.end()) {
      node_case.kind = CaseKind::kExcluded;
      node_case.reason = it->second;
    } else {
      node_case.kind = CaseKind::kApplicable;
    }
    cases.push_back(std::move(node_case));
  }
  return cases;
}

std::string compare_output(const std::string& name, const Tensor& got, const Tensor& want, double rtol,
                           double atol) {
  if (got.dtype() != want.dtype())
    return "output '" + name + "': dtype " + std::string(dtype_name(got.dtype())) + ", expected " +
           std::string(dtype_name(want.dtype()));
  if (got.shape() != want.shape())
    return "output '" + name + "': shape " + shape_to_string(got.shape()) + ", expected " +
           shape_to_string(want.shape());
  const int64_t count = want.element_count();
  MismatchLog log;
  if (dtype_is_fp8(want.dtype())) {
    const auto* got_codes = got.data<uint8_t>();
    const auto* want_codes = want.data<uint8_t>();
    const std::vector<float> got_values = got.to_floats(), want_values = want.to_floats();
    for (int64_t i = 0; i < count; ++i) {
      const bool both_nan = std::isnan(got_values[i]) && std::isnan(want_values[i]);
      if (got_codes[i] != want_codes[i] && !both_nan)
        log.add(i, format_code(got_codes[i], got_values[i]), format_code(want_codes[i], want_values[i]));
    }
  } else if (dtype_is_float(want.dtype())) {
    const std::vector<float> got_values = got.to_floats(), want_values = want.to_floats();
    for (int64_t i = 0; i < count; ++i) {
      const double g = got_values[i], w = want_values[i];
      const bool match = (std::isnan(g) && std::isnan(w)) || g == w ||
                         (std::isfinite(g) && std::isfinite(w) && std::fabs(g - w) <= atol + rtol * std::fabs(w));
      if (!match) log.add(i, format_value(g), format_value(w));
    }
  } else if (dtype_size(want.dtype()) != 0) {
    const std::vector<int64_t> got_values = got.to_int64s(), want_values = want.to_int64s();
    for (int64_t i = 0; i < count; ++i)
      if (got_values[i] != want_values[i])
        log.add(i, std::to_string(got_values[i]), std::to_string(want_values[i]));
  } else {
    return "output '" + name + "': dtype " + std::string(dtype_name(want.dtype())) + " cannot be compared";
  }
  return log.summary(name, count);
}

std::string run_case(const NodeCase& node_case) {
  auto engine = Engine::load_file(node_case.folder / "model.onnx");
  if (!engine) return "load: " + engine.status().message();
  auto reader = DataSetReader::open(node_case.folder);
  if (!reader) return "data: " + reader.status().message();
  if (reader->size() == 0) return "no test_data_set_<k> folder in " + node_case.folder.string();

  std::vector<std::string> input_names, output_names;
  for (const TensorInfo& info : (*engine)->inputs()) input_names.push_back(info.name);
  for (const TensorInfo& info : (*engine)->outputs()) output_names.push_back(info.name);
  const auto declared = [](const std::vector<TensorInfo>& infos, std::vector<Tensor>& tensors) {
    for (size_t i = 0; i < tensors.size() && i < infos.size(); ++i) tensors[i] = as_declared(tensors[i], infos[i].dtype);
  };
  auto session = (*engine)->new_session();
  std::string failures;
  for (size_t k = 0; k < reader->size(); ++k) {
    auto data = reader->read(k);
    if (!data) return "data: " + data.status().message();
    auto inputs = order_inputs(*data, input_names);
    if (!inputs) return "inputs: " + inputs.status().message();
    auto expected = order_outputs(*data, output_names);
    if (!expected) return "outputs: " + expected.status().message();
    declared((*engine)->inputs(), *inputs);
    declared((*engine)->outputs(), *expected);
    auto outputs = session->run(*inputs);
    if (!outputs) {
      failures += data->label + ": run: " + outputs.status().message() + "\n";
      continue;
    }
    for (size_t i = 0; i < expected->size(); ++i)
      if (std::string difference = compare_output(output_names[i], (*outputs)[i], (*expected)[i]);
          !difference.empty())
        failures += data->label + ": " + difference + "\n";
  }
  return failures;
}

}  // namespace loka::conformance
