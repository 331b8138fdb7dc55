// ============================================================================
// passes/mods/insert_scales.cc — `insert-scales`: FP8 weight and embedding
// sites become ai.loka::QuantizedGemm / QuantizedGather with FP8 initializers.
// ============================================================================
#include "passes/mods/insert_scales.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "kernels/cpu/fp8_quantize.h"
#include "kernels/cpu/parallel_rows.h"
#include "loka/float8.h"
#include "passes/ir/graph_algorithms.h"
#include "passes/probe/annotations.h"

namespace loka {
namespace {

using nlohmann::json;

constexpr const char* kDomain = "ai.loka";

bool is_float_initializer(const ir::Value* value, int rank) {
  return value && value->is_initializer() && value->initializer()->dtype() == DType::kFloat32 &&
         value->initializer()->rank() == rank;
}

/// An integer attribute, its default when absent; null when present with the wrong type.
std::optional<int64_t> int_attribute(const ir::Node& node, const char* name, int64_t fallback) {
  auto value = node.attributes().get_int(name, fallback);
  return value ? std::optional<int64_t>(*value) : std::nullopt;
}

size_t initializer_bytes(const ir::Graph& graph) {
  size_t bytes = 0;
  for (const ir::Value* value : graph.values())
    if (value->is_initializer()) bytes += value->initializer()->byte_size();
  return bytes;
}

// --------------------------------------------------------------- quantize ---

/// A weight's FP8 codes in [N, K] layout and its per-output-channel scales.
struct QuantizedWeight {
  Tensor codes;   ///< FLOAT8E4M3FN [N, K]
  Tensor scales;  ///< float [N]
};

/// `w` is [K, N] (MatMul, Gemm transB=0) or [N, K] (`transposed`); `alpha`
/// (Gemm's) multiplies into the scales, which ONNX-style multiply the codes.
QuantizedWeight quantize_weight(const Tensor& w, bool transposed, float alpha) {
  const int64_t n = transposed ? w.dim(0) : w.dim(1);
  const int64_t k = transposed ? w.dim(1) : w.dim(0);
  const float* data = w.data<float>();
  const auto at = [&](int64_t row, int64_t col) { return transposed ? data[row * k + col] : data[col * n + row]; };
  QuantizedWeight q{Tensor::zeros(DType::kFloat8E4M3FN, {n, k}), Tensor::zeros(DType::kFloat32, {n})};
  auto* codes = q.codes.data<uint8_t>();
  float* scales = q.scales.data<float>();
  cpu::parallel_rows(n, 256, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      float amax = 0;
      for (int64_t col = 0; col < k; ++col)
        if (std::isfinite(at(row, col))) amax = std::max(amax, std::fabs(at(row, col)));
      const float scale = cpu::fp8_scale_for_amax(amax, cpu::Fp8Format::kE4M3FN);
      for (int64_t col = 0; col < k; ++col) codes[row * k + col] = float_to_fp8e4m3fn(at(row, col) / scale);
      scales[row] = scale * alpha;
    }
  });
  return q;
}

/// An embedding table [V, D] as codes with one scale per row, or one for all.
QuantizedWeight quantize_table(const Tensor& table, bool per_row) {
  const int64_t v = table.dim(0), d = table.dim(1);
  const float* data = table.data<float>();
  // Every code is written below: the codes start uninitialized (zeroing 325 MB of full-size DLRM
  // codes first cost a pass over them on one thread).
  const size_t code_bytes = static_cast<size_t>(v * d) * dtype_size(DType::kFloat8E4M3FN);
  QuantizedWeight q{Tensor::on_storage(DType::kFloat8E4M3FN, {v, d}, std::make_shared<Storage>(code_bytes)),
                    Tensor::zeros(DType::kFloat32, {per_row ? v : 1})};
  // One scan of the whole table only when one scale serves it (1.3 GB of full-size DLRM tables).
  const float table_scale =
      per_row ? 1.0f : cpu::fp8_scale_for_amax(cpu::finite_amax(table.values<float>()), cpu::Fp8Format::kE4M3FN);
  uint8_t* codes = q.codes.data<uint8_t>();
  float* scales = q.scales.data<float>();
  cpu::parallel_rows(v, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const std::span<const float> values(data + row * d, static_cast<size_t>(d));
      const float scale =
          per_row ? cpu::fp8_scale_for_amax(cpu::finite_amax(values), cpu::Fp8Format::kE4M3FN) : table_scale;
      cpu::quantize_e4m3fn(values, scale, codes + row * d);
      if (per_row) scales[row] = scale;
    }
  });
  if (!per_row) q.scales.data<float>()[0] = table_scale;
  return q;
}

// ---------------------------------------------------------------- rewrite ---

class InsertScalesPass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    quantized_.clear();
    LOKA_ASSIGN_OR_RETURN(json document, read_annotations(graph));
    LOKA_ASSIGN_OR_RETURN(const std::vector<ir::Node*> order, ir::topological_order(graph));
    const size_t bytes_before = initializer_bytes(graph);
    json& nodes = document["nodes"];
    size_t gemms = 0, gathers = 0;
    for (ir::Node* node : order) {
      if (!node->domain().empty() || !nodes.contains(node->name())) continue;
      json& annotation = nodes[node->name()];
      if (annotation.value("precision", "") != "fp8_e4m3") continue;
      if (const std::string obstacle = fp8_lowering_obstacle(*node); !obstacle.empty())
        return Status::error("node '" + node->name() + "' is annotated fp8_e4m3 but cannot be lowered: " + obstacle);
      const std::string recipe = annotation.value("recipe", "");
      if (recipe != "e4m3_tensor" && recipe != "e4m3_row")
        return Status::error("node '" + node->name() + "': recipe '" + recipe + "' is not e4m3_tensor or e4m3_row");
      const std::string name = node->name();
      if (node->is("Gather")) {
        lower_gather(graph, node, recipe == "e4m3_row");
        ++gathers;
        annotation["lowered_to"] = std::string(kDomain) + "::QuantizedGather";
      } else {
        LOKA_RETURN_IF_ERROR(lower_gemm(graph, node, recipe == "e4m3_row", annotation));
        ++gemms;
        annotation["lowered_to"] = std::string(kDomain) + "::QuantizedGemm";
      }
      annotation["from"] = json::array({name});
    }
    const size_t bytes_after = initializer_bytes(graph);
    context.add_statistic("gemms-quantized", static_cast<double>(gemms));
    context.add_statistic("gathers-quantized", static_cast<double>(gathers));
    context.add_statistic("weight-bytes-before", static_cast<double>(bytes_before));
    context.add_statistic("weight-bytes-after", static_cast<double>(bytes_after));
    if (gemms + gathers == 0) return false;
    graph.opsets[kDomain] = 1;
    graph.ir_version = std::max<int64_t>(graph.ir_version, 9);  // FLOAT8 initializers need IR version 9
    write_annotations(graph, document);
    return true;
  }

 private:
  /// FP8 copies shared by every site reading the same weight the same way.
  std::map<std::string, std::pair<ir::Value*, ir::Value*>> quantized_;

  std::pair<ir::Value*, ir::Value*> quantized_initializers(ir::Graph& graph, ir::Value* weight, const std::string& key,
                                                           const std::function<QuantizedWeight()>& make) {
    const std::string full_key = std::to_string(weight->id()) + "/" + key;
    if (auto it = quantized_.find(full_key); it != quantized_.end()) return it->second;
    QuantizedWeight q = make();
    ir::Value* codes = graph.add_initializer(weight->name() + ".fp8", std::move(q.codes));
    ir::Value* scales = graph.add_initializer(weight->name() + ".scale", std::move(q.scales));
    return quantized_[full_key] = {codes, scales};
  }

  /// Replaces `old` by a node of `op_type` in ai.loka reading `inputs`, keeping
  /// the node's name and its output value's name, type and readers.
  static void replace_node(ir::Graph& graph, ir::Node* old, const std::string& op_type,
                           const std::vector<ir::Value*>& inputs, Attributes attributes) {
    const std::string name = old->name();
    ir::Value* output = old->output(0);
    const std::string output_name = output->name();
    const ir::TensorType output_type = output->type();
    const std::vector<ir::Value*> old_inputs = old->inputs();
    // Park the readers on a placeholder so the old node (and its names) can go first.
    ir::Value* parked = graph.add_value(output_name + ".parked");
    graph.replace_all_uses_with(output, parked);
    graph.erase_node(old);
    ir::Value* fresh = graph.add_value(output_name, output_type);
    ir::Node* node = graph.add_node_with_outputs(op_type, inputs, {fresh}, name, kDomain);
    node->mutable_attributes() = std::move(attributes);
    graph.replace_all_uses_with(parked, fresh);
    graph.erase_value(parked);
    // The float weights nobody reads any more leave the model.
    for (ir::Value* input : old_inputs)
      if (input && input->is_initializer() && !input->has_uses() && !input->is_graph_input() &&
          !input->is_graph_output())
        graph.erase_value(input);
  }

  Status lower_gemm(ir::Graph& graph, ir::Node* node, bool row_recipe, const json& annotation) {
    const bool gemm = node->is("Gemm");
    const bool transposed = gemm && node->attributes().get_int("transB", 0).value() != 0;
    const float alpha = gemm ? node->attributes().get_float("alpha", 1.0f).value() : 1.0f;
    const float beta = gemm ? node->attributes().get_float("beta", 1.0f).value() : 1.0f;
    ir::Value* x = node->input(0);
    ir::Value* w = node->input(1);
    const auto [codes, scales] =
        quantized_initializers(graph, w, std::string(transposed ? "nk" : "kn") + "/" + std::to_string(alpha),
                               [&] { return quantize_weight(*w->initializer(), transposed, alpha); });
    const int64_t n = codes->initializer()->dim(0);

    ir::Value* bias = gemm ? node->input(2) : nullptr;
    if (bias) {
      const Tensor& c = *bias->initializer();
      if (beta != 1.0f || c.rank() != 1 || c.element_count() != n) {
        std::vector<float> folded(static_cast<size_t>(n));
        const std::vector<float> values = c.to_floats();
        for (int64_t j = 0; j < n; ++j)
          folded[static_cast<size_t>(j)] = beta * values[values.size() == 1 ? 0 : static_cast<size_t>(j)];
        bias = graph.add_initializer(bias->name() + ".folded", Tensor::from_floats({n}, folded));
      }
    }
    std::vector<ir::Value*> inputs = {x, codes, scales, bias};
    Attributes attributes;
    attributes.set("act_recipe", std::string(row_recipe ? "row" : "tensor"));
    attributes.set("activation", std::string("none"));
    if (!row_recipe) {
      const json scale = annotation.contains("stats") && annotation["stats"].contains("activation")
                             ? annotation["stats"]["activation"].value("scale_e4m3", json())
                             : json();
      if (!scale.is_number() || !(scale.get<double>() > 0) || !std::isfinite(scale.get<double>()))
        return Status::error("node '" + node->name() +
                             "': recipe e4m3_tensor needs the Probe's stats.activation.scale_e4m3 (run probe)");
      inputs.push_back(graph.add_initializer(node->name() + ".x_scale", Tensor::scalar_float(scale.get<float>())));
    } else if (!bias) {
      inputs.pop_back();
    }
    replace_node(graph, node, "QuantizedGemm", inputs, std::move(attributes));
    return Status::ok();
  }

  void lower_gather(ir::Graph& graph, ir::Node* node, bool per_row) {
    ir::Value* table = node->input(0);
    ir::Value* ids = node->input(1);
    const auto [codes, scales] = quantized_initializers(graph, table, per_row ? "rows" : "tensor",
                                                        [&] { return quantize_table(*table->initializer(), per_row); });
    replace_node(graph, node, "QuantizedGather", {codes, scales, ids}, Attributes());
  }
};

}  // namespace

std::string fp8_lowering_obstacle(const ir::Node& node) {
  if (!node.domain().empty()) return "op " + node.domain() + "::" + node.op_type() + " has no FP8 lowering";
  const ir::Value* a = node.input(0);
  const ir::Value* b = node.input(1);
  if (!a || !b || node.outputs().size() != 1) return "expects two inputs and one output";
  if (node.is("Gemm")) {
    const std::optional<int64_t> trans_a = int_attribute(node, "transA", 0), trans_b = int_attribute(node, "transB", 0);
    if (!trans_a || !trans_b || !node.attributes().get_float("alpha", 1.0f) ||
        !node.attributes().get_float("beta", 1.0f))
      return "malformed Gemm attributes";
    if (*trans_a != 0) return "Gemm transA=1 (QuantizedGemm reads X as [M, K])";
    if (!is_float_initializer(b, 2)) return "the weight is not a float 2-D initializer";
    const bool transposed = *trans_b != 0;
    const int64_t n = b->initializer()->dim(transposed ? 0 : 1);
    if (const ir::Value* c = node.input(2)) {
      if (!c->is_initializer() || c->initializer()->dtype() != DType::kFloat32)
        return "the bias C is not a float initializer";
      const Tensor& t = *c->initializer();
      const bool row_vector = t.rank() <= 1 || (t.rank() == 2 && t.dim(0) == 1);
      if (!row_vector || (t.element_count() != n && t.element_count() != 1))
        return "the bias C is not a row of N values";
    }
    if (a->type().dtype != DType::kFloat32 && a->type().dtype != DType::kUndefined)
      return "the activation is not float32";
    return "";
  }
  if (node.is("MatMul")) {
    if (!is_float_initializer(b, 2)) return "the right operand is not a float 2-D initializer";
    if (a->type().rank() < 2) return "the activation's rank is unknown or below 2";
    if (a->type().dtype != DType::kFloat32) return "the activation is not float32";
    return "";
  }
  if (node.is("Gather")) {
    if (int_attribute(node, "axis", 0) != std::optional<int64_t>(0)) return "Gather on an axis other than 0";
    if (!is_float_initializer(a, 2)) return "the table is not a float 2-D initializer";
    const DType ids = b->type().dtype;
    if (ids != DType::kInt32 && ids != DType::kInt64) return "the ids are not int32 or int64";
    return "";
  }
  return "op " + node.op_type() + " has no FP8 lowering";
}

PassInfo insert_scales_pass_info() {
  return PassInfo{"insert-scales",
                  "lower FP8 sites to ai.loka QuantizedGemm/QuantizedGather with FP8 weights and calibrated scales",
                  {},
                  {"gemms-quantized", "gathers-quantized", "weight-bytes-before", "weight-bytes-after"}};
}

std::unique_ptr<Pass> make_insert_scales_pass() { return std::make_unique<InsertScalesPass>(); }

}  // namespace loka
