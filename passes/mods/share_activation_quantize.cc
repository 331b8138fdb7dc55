// ============================================================================
// passes/mods/share_activation_quantize.cc — `share-activation-quantize`.
// ============================================================================
#include "passes/mods/share_activation_quantize.h"

#include <bit>
#include <map>
#include <optional>

#include "passes/canonicalize/upgrade_opset.h"
#include "passes/mods/rewrite_helpers.h"
#include "passes/probe/annotations.h"

namespace loka {
namespace {

/// QuantizeLinear takes an FLOAT8E4M3FN zero point (and so writes E4M3 codes) from opset 19.
constexpr int64_t kFp8QuantizeOpset = 19;

/// Whether the GEMM's W [N, K] fits the FP8 tensor cores (K and N multiples of 16, the rule of
/// kernels/registry/gemm_kernel_key.cc's can_implement). Others run emulated or in BF16, which
/// read a float X as cheaply as codes; an FP8 X would take the BF16 fallback away from them.
bool runs_on_fp8_tensor_cores(const ir::Node& gemm) {
  const ir::Value* w = gemm.input(1);
  if (w == nullptr || w->type().rank() != 2 || !w->type().is_static()) return false;
  const Shape shape = w->type().static_shape();
  return shape[0] % 16 == 0 && shape[1] % 16 == 0;
}

/// Readers of one activation that quantize it with one scale: they will share its codes.
struct Group {
  ir::Value* x = nullptr;
  float scale = 0.0f;
  std::vector<ir::Node*> readers;
};

std::vector<Group> find_groups(const ir::Graph& graph) {
  std::vector<Group> groups;
  for (ir::Value* x : graph.values()) {
    if (x->type().dtype != DType::kFloat32 || !x->type().has_rank()) continue;
    std::map<uint32_t, Group> by_scale;  // keyed by the scale's bits: equal values, equal rounding
    for (const ir::Use& use : x->uses()) {
      const std::optional<float> scale = mods::tensor_recipe_x_scale(use);
      if (!scale || !runs_on_fp8_tensor_cores(*use.node)) continue;
      Group& group = by_scale[std::bit_cast<uint32_t>(*scale)];
      group.x = x;
      group.scale = *scale;
      group.readers.push_back(use.node);
    }
    for (auto& [bits, group] : by_scale)
      if (group.readers.size() >= 2) groups.push_back(std::move(group));
  }
  return groups;
}

/// Inserts the QuantizeLinear of `group` and points its readers at the codes; returns the new node.
ir::Node* share(ir::Graph& graph, const Group& group) {
  const std::string base = group.x->name();
  ir::Value* scale = graph.add_initializer(graph.unique_value_name(base + "_scale"), Tensor::scalar_float(group.scale));
  ir::Value* zero_point = graph.add_initializer(graph.unique_value_name(base + "_zero_point"),
                                                Tensor::zeros(DType::kFloat8E4M3FN, {}));
  ir::Value* codes = graph.add_value(graph.unique_value_name(base + "_fp8"),
                                     ir::TensorType{DType::kFloat8E4M3FN, group.x->type().shape});
  for (ir::Node* reader : group.readers) {
    ir::Value* old_scale = reader->input(4);
    graph.set_input(reader, 0, codes);
    graph.set_input(reader, 4, scale);
    if (!old_scale->has_uses() && !old_scale->is_graph_input() && !old_scale->is_graph_output())
      graph.erase_value(old_scale);
  }
  return graph.add_node_with_outputs("QuantizeLinear", {group.x, scale, zero_point}, {codes},
                                     graph.unique_node_name(base + "_quantize"), "");
}

class ShareActivationQuantizePass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    std::vector<Group> groups = find_groups(graph);
    if (groups.empty()) return false;
    LOKA_ASSIGN_OR_RETURN(const FusionOpset opset,
                          require_opset_for_fusion(graph, kFp8QuantizeOpset, groups.size(), context));
    if (opset == FusionOpset::kNotUpgradable) return false;
    if (opset == FusionOpset::kRaised) groups = find_groups(graph);  // the upgrade may have rewritten nodes
    LOKA_ASSIGN_OR_RETURN(nlohmann::json document, read_annotations(graph));
    for (const Group& group : groups) {
      ir::Node* quantize = share(graph, group);
      nlohmann::json feeds = nlohmann::json::array();
      for (const ir::Node* reader : group.readers) feeds.push_back(reader->name());
      nlohmann::json& entry = document["nodes"][quantize->name()];
      entry["name"] = quantize->name();
      entry["op"] = "QuantizeLinear";
      entry["precision"] = "fp8_e4m3";
      entry["y_scale"] = group.scale;
      entry["feeds"] = std::move(feeds);
      context.add_statistic("quantizes-shared");
      context.add_statistic("gemms-fed", static_cast<double>(group.readers.size()));
    }
    write_annotations(graph, document);
    return true;
  }
};

}  // namespace

PassInfo share_activation_quantize_pass_info() {
  return PassInfo{"share-activation-quantize",
                  "quantize an FP32 activation once (QuantizeLinear to E4M3) for all the per-tensor QuantizedGemms "
                  "that read it with the same static scale",
                  {},
                  {"quantizes-shared", "gemms-fed"}};
}

std::unique_ptr<Pass> make_share_activation_quantize_pass() {
  return std::make_unique<ShareActivationQuantizePass>();
}

}  // namespace loka
