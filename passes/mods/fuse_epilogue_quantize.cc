// ============================================================================
// passes/mods/fuse_epilogue_quantize.cc — `fuse-epilogue-quantize`.
// ============================================================================
#include "passes/mods/fuse_epilogue_quantize.h"

#include <optional>
#include <string>
#include <vector>

#include "passes/canonicalize/rewrite_utils.h"
#include "passes/ir/graph_algorithms.h"
#include "passes/mods/rewrite_helpers.h"
#include "passes/probe/annotations.h"

namespace loka {
namespace {

using mods::kLokaDomain;
constexpr size_t kMultiplierInput = 5;
constexpr size_t kYScaleInput = 7;

/// A QuantizedGemm and the readers of its output that quantize it, at one scale.
struct Match {
  ir::Node* producer = nullptr;
  mods::QuantizingReaders readers;
};

/// A cross layer (a Multiplier: LoKA's epilogue pass runs anyway) with quantizing readers, or
/// a QuantizedGemm on the FP8 tensor cores that only quantizing readers read (Y then goes unread).
std::optional<Match> match(ir::Node* node, bool unread_y) {
  if (!node->is("QuantizedGemm", kLokaDomain)) return std::nullopt;
  if (node->outputs().size() != 1 || node->input(kYScaleInput) != nullptr) return std::nullopt;
  ir::Value* y = node->output(0);
  if (y->type().dtype != DType::kFloat32 || !y->type().has_rank()) return std::nullopt;
  const bool cross = node->input(kMultiplierInput) != nullptr;
  if (!cross && (!unread_y || y->is_graph_output() || !mods::runs_on_fp8_tensor_cores(*node))) return std::nullopt;
  std::optional<mods::QuantizingReaders> readers = mods::quantizing_readers(*y);
  // Without a Multiplier an FP32 reader keeps Y written, and cuBLASLt's epilogue writes it fastest;
  // a cross layer's FP32 readers (the next layer's Residual, a Concat, ...) keep reading Y.
  if (!readers || (!cross && readers->others)) return std::nullopt;
  return Match{node, std::move(*readers)};
}

/// Rebuilds the producer with output 1 and input 7 (the graph has no way to add an output to a
/// node): Y keeps its name, readers and graph-output role. Returns Yq.
Result<ir::Value*> add_codes_output(ir::Graph& graph, ir::Node* producer, float scale) {
  ir::Value* y = producer->output(0);
  std::vector<ir::Value*> inputs = producer->inputs();
  inputs.resize(kYScaleInput + 1, nullptr);
  inputs[kYScaleInput] = graph.add_initializer(graph.unique_value_name(y->name() + "_scale"), Tensor::scalar_float(scale));
  canonicalize::NodeSpec spec{"QuantizedGemm", std::move(inputs), producer->attributes(), producer->name(), kLokaDomain};
  spec.extra_outputs.emplace_back(y->name() + "_fp8", ir::TensorType{DType::kFloat8E4M3FN, y->type().shape});
  LOKA_ASSIGN_OR_RETURN(ir::Node* rebuilt, canonicalize::replace_with_node(graph, y, {producer}, std::move(spec)));
  return rebuilt->output(1);
}

/// The QuantizedGemms reading `codes`, directly or through a Transpose of them (the form
/// share-activation-quantize gives a transposed activation).
void gemms_reading(const ir::Value* codes, std::vector<std::string>& names) {
  for (const ir::Use& use : codes->uses()) {
    if (use.node->is("QuantizedGemm", kLokaDomain)) names.push_back(use.node->name());
    else if (use.node->is("Transpose")) gemms_reading(use.node->output(0), names);
  }
}

/// The first match in topological order, or nothing.
Result<std::optional<Match>> first_match(const ir::Graph& graph, bool unread_y) {
  LOKA_ASSIGN_OR_RETURN(const std::vector<ir::Node*> order, ir::topological_order(graph));
  for (ir::Node* node : order)
    if (std::optional<Match> m = match(node, unread_y)) return m;
  return std::optional<Match>();
}

class FuseEpilogueQuantizePass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    LOKA_ASSIGN_OR_RETURN(nlohmann::json document, read_annotations(graph));
    // One rewrite at a time, matching afresh: a rewrite rebuilds its producer, which may be a
    // reader in another match (cross layer l+1 reads layer l's output), so earlier matches go
    // stale. A rebuilt producer has input 7 and does not match again.
    bool changed = false;
    for (size_t bound = graph.nodes().size(); bound > 0; --bound) {
      LOKA_ASSIGN_OR_RETURN(const std::optional<Match> found, first_match(graph, context.bool_option("unread_y")));
      if (!found) break;
      const Match& m = *found;
      const std::string name = m.producer->name();
      LOKA_ASSIGN_OR_RETURN(ir::Value* codes, add_codes_output(graph, m.producer, m.readers.scale));
      mods::move_to_codes(graph, m.readers, codes, document);
      nlohmann::json& entry = document["nodes"][name];
      entry["name"] = name;
      entry["y_scale"] = m.readers.scale;
      std::vector<std::string> feeds;
      gemms_reading(codes, feeds);
      entry["feeds"] = feeds;
      context.add_statistic("epilogues-quantizing");
      context.add_statistic("quantizes-removed", static_cast<double>(m.readers.gemms.size() + m.readers.quantizes.size()));
      changed = true;
    }
    if (!changed) return false;
    write_annotations(graph, document);
    return true;
  }
};

}  // namespace

PassInfo fuse_epilogue_quantize_pass_info() {
  return PassInfo{"fuse-epilogue-quantize",
                  "a QuantizedGemm writes the E4M3 codes of its output (output Yq) for the per-tensor FP8 GEMMs "
                  "that read it, so they skip their quantize pass: DCN cross layers, and GEMMs only such readers read",
                  {{"unread_y", OptionType::kBool, "true",
                    "also rewrite a QuantizedGemm without a Multiplier whose Y only quantizing readers read (Y is then "
                    "left out of the model: 5 bytes an element on the GPU where Y and a quantize pass moved 9)"}},
                  {"epilogues-quantizing", "quantizes-removed"}};
}

std::unique_ptr<Pass> make_fuse_epilogue_quantize_pass() { return std::make_unique<FuseEpilogueQuantizePass>(); }

}  // namespace loka
