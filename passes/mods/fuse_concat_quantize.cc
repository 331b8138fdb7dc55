// ============================================================================
// passes/mods/fuse_concat_quantize.cc — `fuse-concat-quantize`.
// ============================================================================
#include "passes/mods/fuse_concat_quantize.h"

#include <optional>
#include <string>
#include <vector>

#include "passes/ir/graph_algorithms.h"
#include "passes/mods/rewrite_helpers.h"
#include "passes/probe/annotations.h"

namespace loka {
namespace {

using mods::kLokaDomain;

/// A Concat and its readers, every one of which quantizes it at one scale.
struct Match {
  ir::Node* concat = nullptr;
  mods::QuantizingReaders readers;
};

std::optional<Match> match(ir::Node* node) {
  if (!node->is("Concat") || node->outputs().size() != 1 || !node->attributes().has("axis")) return std::nullopt;
  const ir::Value* joined = node->output(0);
  if (joined->is_graph_output() || joined->type().dtype != DType::kFloat32 || !joined->type().has_rank())
    return std::nullopt;
  for (const ir::Value* input : node->inputs())
    if (input == nullptr || input->type().dtype != DType::kFloat32) return std::nullopt;
  std::optional<mods::QuantizingReaders> readers = mods::quantizing_readers(*joined);
  if (!readers || readers->others) return std::nullopt;  // an FP32 reader: the concatenation is formed anyway
  return Match{node, std::move(*readers)};
}

/// Replaces the Concat by a ConcatQuant of the same name and axis, moves every reader to its codes
/// (a QuantizeLinear reader goes, with its annotation entry) and returns them.
ir::Value* replace_concat(ir::Graph& graph, const Match& m, nlohmann::json& document) {
  ir::Node* concat = m.concat;
  ir::Value* joined = concat->output(0);
  std::vector<ir::Value*> inputs{
      graph.add_initializer(graph.unique_value_name(joined->name() + "_scale"), Tensor::scalar_float(m.readers.scale))};
  inputs.insert(inputs.end(), concat->inputs().begin(), concat->inputs().end());
  const int64_t axis = *concat->attributes().get_int("axis");
  const std::string name = concat->name();
  ir::Value* codes = graph.add_value(graph.unique_value_name(joined->name() + "_fp8"),
                                     ir::TensorType{DType::kFloat8E4M3FN, joined->type().shape});
  mods::move_to_codes(graph, m.readers, codes, document);
  graph.erase_node(concat);  // and `joined`, now unread
  ir::Node* fused = graph.add_node_with_outputs("ConcatQuant", inputs, {codes}, name, kLokaDomain);
  fused->mutable_attributes().set("axis", axis);
  return codes;
}

class FuseConcatQuantizePass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    LOKA_ASSIGN_OR_RETURN(const std::vector<ir::Node*> order, ir::topological_order(graph));
    std::vector<Match> matches;  // disjoint: each rewrite touches one Concat and its own readers
    for (ir::Node* node : order)
      if (std::optional<Match> m = match(node)) matches.push_back(*m);
    if (matches.empty()) return false;
    LOKA_ASSIGN_OR_RETURN(nlohmann::json document, read_annotations(graph));
    mods::import_loka_domain(graph);
    for (const Match& m : matches) {
      const std::string name = m.concat->name();
      ir::Value* codes = replace_concat(graph, m, document);
      std::vector<std::string> feeds;
      for (const ir::Use& use : codes->uses())
        if (use.node->is("QuantizedGemm", kLokaDomain)) feeds.push_back(use.node->name());
      nlohmann::json& entry = document["nodes"][name];
      entry["name"] = name;
      entry["op"] = "ConcatQuant";
      entry["precision"] = "fp8_e4m3";
      entry["y_scale"] = m.readers.scale;
      entry["feeds"] = feeds;
      context.add_statistic("concats-quantizing");
      context.add_statistic("quantizes-removed", static_cast<double>(m.readers.gemms.size() + m.readers.quantizes.size()));
    }
    write_annotations(graph, document);
    return true;
  }
};

}  // namespace

PassInfo fuse_concat_quantize_pass_info() {
  return PassInfo{"fuse-concat-quantize",
                  "a Concat that only per-tensor FP8 readers read, all at one scale, becomes ai.loka ConcatQuant: each "
                  "input encoded into its slice of the codes, no FP32 concatenation",
                  {},
                  {"concats-quantizing", "quantizes-removed"}};
}

std::unique_ptr<Pass> make_fuse_concat_quantize_pass() { return std::make_unique<FuseConcatQuantizePass>(); }

}  // namespace loka
