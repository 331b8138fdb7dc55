// ============================================================================
// passes/mods/rewrite_helpers.cc — matching and constant-rewriting helpers of the Mods.
// ============================================================================
#include "passes/mods/rewrite_helpers.h"

#include <bit>
#include <cmath>

#include <nlohmann/json.hpp>

#include "passes/canonicalize/rewrite_utils.h"

namespace loka::mods {

const Tensor* float_constant(const ir::Value* value) {
  if (value == nullptr || !value->is_initializer() || value->is_graph_input()) return nullptr;
  const Tensor& tensor = *value->initializer();
  return tensor.dtype() == DType::kFloat32 && tensor.defined() ? &tensor : nullptr;
}

ir::Node* sole_reader(const ir::Value* value) {
  return value != nullptr && canonicalize::has_exactly_uses(value, 1) ? value->uses()[0].node : nullptr;
}

std::optional<float> tensor_recipe_x_scale(const ir::Use& use) {
  const ir::Node& reader = *use.node;
  if (!reader.is("QuantizedGemm", "ai.loka") || use.input_index != 0) return std::nullopt;
  auto recipe = reader.attributes().get_string("act_recipe", "tensor");
  if (!recipe || *recipe != "tensor") return std::nullopt;
  return positive_scalar_scale(reader.input(4));
}

std::optional<float> positive_scalar_scale(const ir::Value* value) {
  const Tensor* scale = float_constant(value);
  if (scale == nullptr || scale->element_count() != 1 || scale->rank() > 1) return std::nullopt;
  const float v = scale->data<float>()[0];
  if (!(v > 0.0f) || !std::isfinite(v)) return std::nullopt;
  return v;
}

void import_loka_domain(ir::Graph& graph) { graph.opsets.try_emplace(kLokaDomain, 1); }

std::optional<float> e4m3_quantize_scale(const ir::Node& node) {
  if (!node.is("QuantizeLinear") || node.outputs().size() != 1) return std::nullopt;
  if (node.output(0)->is_graph_output()) return std::nullopt;
  const ir::Value* zero_point = node.input(2);
  if (zero_point == nullptr || !zero_point->is_initializer() || zero_point->is_graph_input()) return std::nullopt;
  const Tensor& zero = *zero_point->initializer();
  if (zero.dtype() != DType::kFloat8E4M3FN || zero.element_count() != 1 || zero.data<uint8_t>()[0] != 0)
    return std::nullopt;
  const Result<int64_t> saturate = node.attributes().get_int("saturate", 1);
  if (!saturate || *saturate != 1 || node.attributes().has("block_size") || node.attributes().has("output_dtype"))
    return std::nullopt;
  return positive_scalar_scale(node.input(1));
}

std::optional<QuantizingReaders> quantizing_readers(const ir::Value& value) {
  QuantizingReaders readers;
  std::optional<uint32_t> bits;
  for (const ir::Use& use : value.uses()) {
    std::optional<float> scale;
    if ((scale = tensor_recipe_x_scale(use)) && runs_on_fp8_tensor_cores(*use.node)) {
      readers.gemms.push_back(use.node);
    } else if (use.input_index == 0 && (scale = e4m3_quantize_scale(*use.node))) {
      readers.quantizes.push_back(use.node);
    } else {
      readers.others = true;
      continue;
    }
    if (bits && *bits != std::bit_cast<uint32_t>(*scale)) return std::nullopt;
    bits = std::bit_cast<uint32_t>(*scale);
    readers.scale = *scale;
  }
  if (!bits) return std::nullopt;
  return readers;
}

void move_to_codes(ir::Graph& graph, const QuantizingReaders& readers, ir::Value* codes, nlohmann::json& document) {
  for (ir::Node* gemm : readers.gemms) graph.set_input(gemm, 0, codes);
  for (ir::Node* quantize : readers.quantizes) {
    std::vector<ir::Value*> constants{quantize->input(1), quantize->input(2)};
    if (document.contains("nodes") && document["nodes"].is_object()) document["nodes"].erase(quantize->name());
    graph.replace_all_uses_with(quantize->output(0), codes);
    graph.erase_node(quantize);
    for (ir::Value* constant : constants)
      if (constant && !constant->has_uses() && !constant->is_graph_input() && !constant->is_graph_output())
        graph.erase_value(constant);
  }
}

bool runs_on_fp8_tensor_cores(const ir::Node& gemm) {
  const ir::Value* w = gemm.input(1);
  if (w == nullptr || w->type().rank() != 2 || !w->type().is_static()) return false;
  const Shape shape = w->type().static_shape();
  return shape[0] % 16 == 0 && shape[1] % 16 == 0;
}

bool norm_affine_is_per_channel(const ir::Node& norm) {
  const ir::Value* x = norm.input(0);
  if (x == nullptr || !x->type().has_rank() || x->type().rank() < 1) return false;
  const ir::Dim& channels = x->type().shape->back();
  if (!channels.is_known()) return false;
  for (size_t i : {size_t{1}, size_t{2}}) {
    const ir::Value* vector = norm.input(i);
    if (vector == nullptr) {
      if (i == 1) return false;  // Scale is required
      continue;
    }
    const ir::TensorType& type = vector->type();
    if (type.dtype != DType::kFloat32 || type.rank() != 1 || (*type.shape)[0] != channels) return false;
  }
  return true;
}

std::optional<WeightGemm> as_weight_gemm(const ir::Node& node, bool require_untransposed_activation) {
  const bool is_gemm = node.is("Gemm");
  if (!is_gemm && !node.is("MatMul")) return std::nullopt;
  WeightGemm gemm;
  gemm.weight = float_constant(node.input(1));
  if (gemm.weight == nullptr || gemm.weight->rank() != 2) return std::nullopt;
  if (is_gemm) {
    auto trans_a = node.attributes().get_int("transA", 0);
    auto trans_b = node.attributes().get_int("transB", 0);
    if (!trans_a || !trans_b || (require_untransposed_activation && *trans_a != 0)) return std::nullopt;
    gemm.transposed = *trans_b != 0;
  }
  gemm.k = gemm.weight->dim(gemm.transposed ? 1 : 0);
  gemm.n = gemm.weight->dim(gemm.transposed ? 0 : 1);
  return gemm;
}

bool normalizes_last_axis_only(const ir::Node& node) {
  if (!node.is("LayerNormalization")) return false;
  auto axis = node.attributes().get_int("axis", -1);
  if (!axis) return false;
  if (*axis == -1) return true;
  const ir::Value* x = node.input(0);
  return *axis >= 0 && x != nullptr && x->type().has_rank() && *axis == x->type().rank() - 1;
}

bool same_dim(const ir::Dim& a, const ir::Dim& b) { return a == b && (a.is_known() || !a.symbol.empty()); }

bool swaps_last_two_dims(const ir::Node& node, int rank) {
  if (!node.is("Transpose") || rank < 2) return false;
  const Result<std::vector<int64_t>> perm = node.attributes().get_ints("perm");
  if (!perm.is_ok() || perm->size() != static_cast<size_t>(rank)) return false;
  return *perm == canonicalize::perm_swapping_last_two(rank);
}

void replace_constant(ir::Graph& graph, ir::Node* node, size_t slot, Tensor tensor, const std::string& suffix) {
  ir::Value* old = node->input(slot);
  if (old->uses().size() == 1) {
    graph.set_initializer(old, std::move(tensor));
    return;
  }
  ir::Value* fresh = graph.add_initializer(old->name() + suffix, std::move(tensor));
  graph.set_input(node, slot, fresh);
}

}  // namespace loka::mods
