// ============================================================================
// passes/mods/fuse_residual_layernorm.cc — `fuse-residual-layernorm`.
// ============================================================================
#include "passes/mods/fuse_residual_layernorm.h"

#include "passes/canonicalize/rewrite_utils.h"
#include "passes/mods/rewrite_helpers.h"
#include "passes/probe/annotations.h"

namespace loka {
namespace {

using mods::kLokaDomain;

/// Whether `a` and `b` are float32 tensors of one shape for every input: the same rank and, dim by
/// dim, the same known size or the same named (batch) dim.
bool same_float32_shape(const ir::Value* a, const ir::Value* b) {
  if (a == nullptr || b == nullptr || a->type().dtype != DType::kFloat32 || b->type().dtype != DType::kFloat32)
    return false;
  if (!a->type().has_rank() || a->type().shape != b->type().shape) return false;
  for (const ir::Dim& dim : *a->type().shape)
    if (!dim.is_known() && dim.symbol.empty()) return false;  // an unknown dim may differ between them
  return true;
}

/// The Add feeding `norm` when the pair qualifies (see the header), else null.
ir::Node* fusable_add(const ir::Node& norm) {
  if (!mods::normalizes_last_axis_only(norm) || !mods::norm_affine_is_per_channel(norm)) return nullptr;
  auto stash = norm.attributes().get_int("stash_type", 1);
  if (!stash || *stash != 1 || !norm.attributes().get_float("epsilon", 1e-5f)) return nullptr;
  for (size_t i = 1; i < norm.outputs().size(); ++i)  // Mean / InvStdDev: ResidualLayerNorm has no such outputs
    if (norm.output(i)->has_uses() || norm.output(i)->is_graph_output()) return nullptr;
  ir::Value* sum = norm.input(0);
  if (sum == nullptr || mods::sole_reader(sum) != &norm) return nullptr;
  ir::Node* add = sum->producer();
  if (add == nullptr || !add->is("Add") || add->inputs().size() != 2) return nullptr;
  const ir::Value* a = add->input(0);
  const ir::Value* b = add->input(1);
  if (!same_float32_shape(a, b) || !same_float32_shape(a, sum)) return nullptr;
  return add;
}

class FuseResidualLayerNormPass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    std::vector<std::pair<ir::Node*, ir::Node*>> matches;  // (add, norm)
    for (ir::Node* node : graph.nodes())
      if (node->is("LayerNormalization"))
        if (ir::Node* add = fusable_add(*node)) matches.emplace_back(add, node);
    if (matches.empty()) return false;
    LOKA_ASSIGN_OR_RETURN(nlohmann::json document, read_annotations(graph));
    for (auto& [add, norm] : matches) {
      const std::string name = norm->name(), add_name = add->name();
      Attributes attributes;
      attributes.set("epsilon", norm->attributes().get_float("epsilon", 1e-5f).value());  // checked by fusable_add()
      std::vector<ir::Value*> inputs{add->input(0), add->input(1), norm->input(1)};
      if (norm->input(2) != nullptr) inputs.push_back(norm->input(2));
      LOKA_RETURN_IF_ERROR(canonicalize::replace_with_node(
                               graph, norm->output(0), {norm, add},
                               canonicalize::NodeSpec{"ResidualLayerNorm", inputs, std::move(attributes), name, kLokaDomain})
                               .status());
      nlohmann::json& nodes = document["nodes"];
      nlohmann::json from = nlohmann::json::array({add_name});
      if (nodes.contains(add_name) && nodes[add_name].contains("from")) from = nodes[add_name]["from"];
      nlohmann::json& entry = nodes[name];
      for (const auto& absorbed : entry.contains("from") ? entry["from"] : nlohmann::json::array({name}))
        from.push_back(absorbed);
      nodes.erase(add_name);  // the Add is gone: its entry would name a node that no longer exists
      entry["name"] = name;
      entry["op"] = "ResidualLayerNorm";
      entry["from"] = std::move(from);
      entry["precision"] = "fp32";
      context.add_statistic("norms-fused");
    }
    mods::import_loka_domain(graph);
    write_annotations(graph, document);
    return true;
  }
};

}  // namespace

PassInfo fuse_residual_layernorm_pass_info() {
  return PassInfo{"fuse-residual-layernorm",
                  "fuse a residual Add read only by a last-axis LayerNormalization into one ResidualLayerNorm",
                  {},
                  {"norms-fused"}};
}

std::unique_ptr<Pass> make_fuse_residual_layernorm_pass() { return std::make_unique<FuseResidualLayerNormPass>(); }

}  // namespace loka
