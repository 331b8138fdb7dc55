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

/// QuantizeLinear takes an FLOAT8E4M3FN zero point (and so writes E4M3 codes) from opset 19;
/// Transpose takes FP8 tensors from opset 21.
constexpr int64_t kFp8QuantizeOpset = 19;
constexpr int64_t kFp8TransposeOpset = 21;

/// Readers of one activation that quantize it with one scale: they will share its codes.
struct Group {
  ir::Value* x = nullptr;
  float scale = 0.0f;
  std::vector<ir::Node*> readers;
};

/// The readers of `x` that quantize it per tensor for the FP8 tensor cores, grouped by scale
/// (keyed by the scale's bits: equal values, equal rounding).
std::map<uint32_t, Group> quantizing_readers(ir::Value* x) {
  std::map<uint32_t, Group> by_scale;
  if (x->type().dtype != DType::kFloat32 || !x->type().has_rank()) return by_scale;
  for (const ir::Use& use : x->uses()) {
    const std::optional<float> scale = mods::tensor_recipe_x_scale(use);
    if (!scale || !mods::runs_on_fp8_tensor_cores(*use.node)) continue;
    Group& group = by_scale[std::bit_cast<uint32_t>(*scale)];
    group.x = x;
    group.scale = *scale;
    group.readers.push_back(use.node);
  }
  return by_scale;
}

/// What the rewrites add, for the annotation document and the statistics.
struct Added {
  ir::Node* node = nullptr;
  float scale = 0.0f;
  std::vector<ir::Node*> feeds;
};

/// The QuantizeLinear of `x` with the scale `scale` this pass already added (a value several
/// Transposes read, or that GEMMs read beside a Transpose), or null.
Added* existing_quantize(std::vector<Added>& added, const ir::Value* x, float scale) {
  for (Added& a : added)
    if (a.node->is("QuantizeLinear") && a.node->input(0) == x &&
        std::bit_cast<uint32_t>(a.scale) == std::bit_cast<uint32_t>(scale))
      return &a;
  return nullptr;
}

/// Groups of two or more readers, or of one where codes of that scale exist already (`added`).
std::vector<Group> find_groups(const ir::Graph& graph, std::vector<Added>& added) {
  std::vector<Group> groups;
  for (ir::Value* x : graph.values())
    for (auto& [bits, group] : quantizing_readers(x))
      if (group.readers.size() >= 2 || existing_quantize(added, x, group.scale) != nullptr)
        groups.push_back(std::move(group));
  return groups;
}

/// A Transpose read only by GEMMs that quantize its output with one scale: its input is
/// quantized instead and the codes are transposed (the group's x is the Transpose's output).
struct Hoist {
  ir::Node* transpose = nullptr;
  Group group;
};

std::vector<Hoist> find_hoists(const ir::Graph& graph) {
  std::vector<Hoist> hoists;
  for (ir::Node* node : graph.nodes()) {
    if (!node->is("Transpose") || node->input(0) == nullptr) continue;
    const ir::Value* x = node->input(0);
    ir::Value* y = node->output(0);
    if (x->type().dtype != DType::kFloat32 || !x->type().has_rank() || y->is_graph_output()) continue;
    std::map<uint32_t, Group> groups = quantizing_readers(y);
    if (groups.size() != 1 || groups.begin()->second.readers.size() != y->uses().size()) continue;
    hoists.push_back({node, std::move(groups.begin()->second)});
  }
  return hoists;
}

ir::Value* scale_initializer(ir::Graph& graph, const ir::Value* x, float scale) {
  return graph.add_initializer(graph.unique_value_name(x->name() + "_scale"), Tensor::scalar_float(scale));
}

/// One QuantizeLinear of `x` with `scale` (a new initializer, also the readers' X_scale); its codes.
ir::Value* quantize(ir::Graph& graph, ir::Value* x, ir::Value* scale, std::vector<Added>& added,
                    const std::vector<ir::Node*>& feeds) {
  const std::string base = x->name();
  ir::Value* zero_point = graph.add_initializer(graph.unique_value_name(base + "_zero_point"),
                                                Tensor::zeros(DType::kFloat8E4M3FN, {}));
  ir::Value* codes = graph.add_value(graph.unique_value_name(base + "_fp8"),
                                     ir::TensorType{DType::kFloat8E4M3FN, x->type().shape});
  ir::Node* node = graph.add_node_with_outputs("QuantizeLinear", {x, scale, zero_point}, {codes},
                                               graph.unique_node_name(base + "_quantize"), "");
  added.push_back({node, scale->initializer()->data<float>()[0], feeds});
  return codes;
}

/// Points `readers` (QuantizedGemms) at `codes` quantized with `scale`, dropping their old scales.
void rewire(ir::Graph& graph, const std::vector<ir::Node*>& readers, ir::Value* codes, ir::Value* scale) {
  for (ir::Node* reader : readers) {
    ir::Value* old_scale = reader->input(4);
    graph.set_input(reader, 0, codes);
    graph.set_input(reader, 4, scale);
    if (!old_scale->has_uses() && !old_scale->is_graph_input() && !old_scale->is_graph_output())
      graph.erase_value(old_scale);
  }
}

/// Codes of `x` at `scale` for `readers`: those already made, or a new QuantizeLinear; the scale
/// initializer the readers take with them in `scale`.
ir::Value* codes_for(ir::Graph& graph, ir::Value* x, float scale_value, const std::vector<ir::Node*>& readers,
                     std::vector<Added>& added, ir::Value*& scale) {
  if (Added* made = existing_quantize(added, x, scale_value)) {
    made->feeds.insert(made->feeds.end(), readers.begin(), readers.end());
    scale = made->node->input(1);
    return made->node->output(0);
  }
  scale = scale_initializer(graph, x, scale_value);
  return quantize(graph, x, scale, added, readers);
}

/// Quantizes the Transpose's input and transposes the codes in its place (same name, same perm).
void hoist(ir::Graph& graph, const Hoist& h, std::vector<Added>& added) {
  ir::Node* transpose = h.transpose;
  ir::Value* x = transpose->input(0);
  ir::Value* y = transpose->output(0);
  ir::Value* scale = nullptr;
  ir::Value* codes = codes_for(graph, x, h.group.scale, h.group.readers, added, scale);
  ir::Value* moved = graph.add_value(graph.unique_value_name(y->name() + "_fp8"),
                                     ir::TensorType{DType::kFloat8E4M3FN, y->type().shape});
  rewire(graph, h.group.readers, moved, scale);
  const std::string name = transpose->name();
  const Attributes attributes = transpose->attributes();
  graph.erase_node(transpose);  // and y, now unread
  ir::Node* fp8 = graph.add_node_with_outputs("Transpose", {codes}, {moved}, name, "");
  fp8->mutable_attributes() = attributes;
  added.push_back({fp8, h.group.scale, h.group.readers});
}

class ShareActivationQuantizePass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    std::vector<Added> added;
    // Transposes first: a value they quantize may also have direct readers sharing a group below.
    std::vector<Hoist> hoists = find_hoists(graph);
    if (!hoists.empty()) {
      LOKA_ASSIGN_OR_RETURN(const FusionOpset opset,
                            require_opset_for_fusion(graph, kFp8TransposeOpset, hoists.size(), context));
      if (opset == FusionOpset::kRaised) hoists = find_hoists(graph);  // the upgrade may have rewritten nodes
      if (opset == FusionOpset::kNotUpgradable) hoists.clear();
      for (const Hoist& h : hoists) {
        hoist(graph, h, added);
        context.add_statistic("transposes-of-codes");
      }
    }
    std::vector<Group> groups = find_groups(graph, added);
    if (!groups.empty()) {
      LOKA_ASSIGN_OR_RETURN(const FusionOpset opset,
                            require_opset_for_fusion(graph, kFp8QuantizeOpset, groups.size(), context));
      if (opset == FusionOpset::kRaised) groups = find_groups(graph, added);
      if (opset == FusionOpset::kNotUpgradable) groups.clear();
      for (const Group& group : groups) {
        const bool shared = existing_quantize(added, group.x, group.scale) == nullptr;
        ir::Value* scale = nullptr;
        ir::Value* codes = codes_for(graph, group.x, group.scale, group.readers, added, scale);
        rewire(graph, group.readers, codes, scale);
        if (shared) context.add_statistic("quantizes-shared");
      }
    }
    if (added.empty()) return false;
    LOKA_ASSIGN_OR_RETURN(nlohmann::json document, read_annotations(graph));
    for (const Added& a : added) {
      nlohmann::json feeds = nlohmann::json::array();
      for (const ir::Node* reader : a.feeds) feeds.push_back(reader->name());
      nlohmann::json& entry = document["nodes"][a.node->name()];
      entry["name"] = a.node->name();
      entry["op"] = a.node->op_type();
      entry["precision"] = "fp8_e4m3";
      entry["y_scale"] = a.scale;
      entry["feeds"] = std::move(feeds);
      if (a.node->is("QuantizeLinear")) context.add_statistic("gemms-fed", static_cast<double>(a.feeds.size()));
    }
    write_annotations(graph, document);
    return true;
  }
};

}  // namespace

PassInfo share_activation_quantize_pass_info() {
  return PassInfo{"share-activation-quantize",
                  "quantize an FP32 activation once (QuantizeLinear to E4M3) for all the per-tensor QuantizedGemms "
                  "that read it with the same static scale, and before a Transpose only they read",
                  {},
                  {"quantizes-shared", "transposes-of-codes", "gemms-fed"}};
}

std::unique_ptr<Pass> make_share_activation_quantize_pass() {
  return std::make_unique<ShareActivationQuantizePass>();
}

}  // namespace loka
