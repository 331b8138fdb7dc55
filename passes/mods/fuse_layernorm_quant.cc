// ============================================================================
// passes/mods/fuse_layernorm_quant.cc — `fuse-layernorm-quant`.
// ============================================================================
#include "passes/mods/fuse_layernorm_quant.h"

#include <algorithm>
#include <optional>

#include "passes/mods/rewrite_helpers.h"
#include "passes/probe/annotations.h"

namespace loka {
namespace {

using mods::kLokaDomain;

/// The shared Y_scale when `norm` qualifies for fusion (see the header), else nothing.
std::optional<float> fusable(const ir::Node& norm) {
  if (!mods::normalizes_last_axis_only(norm) || !mods::norm_affine_is_per_channel(norm)) return std::nullopt;
  auto stash = norm.attributes().get_int("stash_type", 1);
  if (!stash || *stash != 1 || !norm.attributes().get_float("epsilon", 1e-5f)) return std::nullopt;
  const ir::Value* x = norm.input(0);
  if (x == nullptr || x->type().dtype != DType::kFloat32) return std::nullopt;
  for (size_t i = 1; i < norm.outputs().size(); ++i)  // Mean / InvStdDev: LayerNormQuant has no such outputs
    if (norm.output(i)->has_uses() || norm.output(i)->is_graph_output()) return std::nullopt;
  const ir::Value* y = norm.output(0);
  if (y->is_graph_output() || !y->has_uses()) return std::nullopt;
  float shared = 0.0f;
  for (const ir::Use& use : y->uses()) {
    const std::optional<float> scale = mods::tensor_recipe_x_scale(use);
    if (!scale) return std::nullopt;
    shared = std::max(shared, *scale);
  }
  return shared;
}

/// Replaces `norm` and rewires its readers (see the diagram in the header).
void fuse(ir::Graph& graph, ir::Node* norm, float y_scale) {
  const std::string name = norm->name();
  const float epsilon = norm->attributes().get_float("epsilon", 1e-5f).value();  // checked by fusable()
  ir::Value* x = norm->input(0);
  ir::Value* gamma = norm->input(1);
  ir::Value* beta = norm->input(2);
  ir::Value* y = norm->output(0);
  ir::Value* scale = graph.add_initializer(name + "_y_scale", Tensor::scalar_float(y_scale));
  ir::Value* codes = graph.add_value(y->name() + "_fp8", ir::TensorType{DType::kFloat8E4M3FN, y->type().shape});
  const std::vector<ir::Use> uses = y->uses();
  for (const ir::Use& use : uses) {
    ir::Value* old_scale = use.node->input(4);
    graph.set_input(use.node, 0, codes);
    graph.set_input(use.node, 4, scale);
    if (!old_scale->has_uses() && !old_scale->is_graph_input() && !old_scale->is_graph_output())
      graph.erase_value(old_scale);
  }
  graph.erase_node(norm);
  ir::Node* fused = graph.add_node_with_outputs("LayerNormQuant", {x, gamma, beta, scale}, {codes}, name, kLokaDomain);
  fused->mutable_attributes().set("epsilon", epsilon);
}

class FuseLayerNormQuantPass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    std::vector<std::pair<ir::Node*, float>> matches;
    for (ir::Node* node : graph.nodes())
      if (auto scale = fusable(*node)) matches.emplace_back(node, *scale);
    if (matches.empty()) return false;
    LOKA_ASSIGN_OR_RETURN(nlohmann::json document, read_annotations(graph));
    for (auto& [norm, y_scale] : matches) {
      const std::string name = norm->name();
      context.add_statistic("gemms-fed", static_cast<double>(norm->output(0)->uses().size()));
      fuse(graph, norm, y_scale);
      nlohmann::json& entry = document["nodes"][name];
      entry["name"] = name;
      entry["op"] = "LayerNormQuant";
      entry["from"] = nlohmann::json::array({name});
      entry["precision"] = "fp8_e4m3";
      entry["y_scale"] = y_scale;
      context.add_statistic("norms-fused");
    }
    mods::import_loka_domain(graph);
    write_annotations(graph, document);
    return true;
  }
};

}  // namespace

PassInfo fuse_layernorm_quant_pass_info() {
  return PassInfo{"fuse-layernorm-quant",
                  "fuse a last-axis LayerNorm read only by per-tensor QuantizedGemms into one LayerNormQuant emitting "
                  "FP8 with a shared static scale",
                  {},
                  {"norms-fused", "gemms-fed"}};
}

std::unique_ptr<Pass> make_fuse_layernorm_quant_pass() { return std::make_unique<FuseLayerNormQuantPass>(); }

}  // namespace loka
