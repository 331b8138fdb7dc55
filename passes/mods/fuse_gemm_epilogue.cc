// ============================================================================
// passes/mods/fuse_gemm_epilogue.cc — `fuse-gemm-epilogue`.
// ============================================================================
#include "passes/mods/fuse_gemm_epilogue.h"

#include <optional>
#include <string>
#include <vector>

#include "passes/mods/rewrite_helpers.h"
#include "passes/probe/annotations.h"

namespace loka {
namespace {

constexpr const char* kLokaDomain = "ai.loka";
constexpr size_t kMultiplierInput = 5, kResidualInput = 6;

/// Both shapes fully described (every dim a size or a name) and equal dim by dim.
bool same_full_shape(const ir::TensorType& a, const ir::TensorType& b) {
  if (!a.has_rank() || !b.has_rank() || a.shape->size() != b.shape->size()) return false;
  for (size_t d = 0; d < a.shape->size(); ++d) {
    const ir::Dim& x = (*a.shape)[d];
    if (!(x.is_known() || !x.symbol.empty()) || !(x == (*b.shape)[d])) return false;
  }
  return true;
}

/// The operand of `node` (a binary op reading `value` once) that is not `value`, when it is a
/// float32 tensor of `value`'s full shape; null otherwise.
ir::Value* elementwise_partner(const ir::Node& node, const ir::Value* value) {
  if (node.inputs().size() != 2 || node.outputs().size() != 1) return nullptr;
  ir::Value* a = node.input(0);
  ir::Value* b = node.input(1);
  if (a == nullptr || b == nullptr || a == b) return nullptr;
  ir::Value* other = a == value ? b : (b == value ? a : nullptr);
  if (other == nullptr || other->type().dtype != DType::kFloat32) return nullptr;
  return same_full_shape(other->type(), value->type()) ? other : nullptr;
}

struct Match {
  ir::Node* gemm = nullptr;
  ir::Node* mul = nullptr;  ///< may be null
  ir::Node* add = nullptr;  ///< may be null
  ir::Value* multiplier = nullptr;
  ir::Value* residual = nullptr;
};

std::optional<Match> match(ir::Node* gemm) {
  if (!gemm->is("QuantizedGemm", kLokaDomain) || gemm->input(kMultiplierInput) || gemm->input(kResidualInput))
    return std::nullopt;
  Match m;
  m.gemm = gemm;
  ir::Value* current = gemm->output(0);
  ir::Node* reader = mods::sole_reader(current);
  if (reader && reader->is("Mul", "")) {
    if ((m.multiplier = elementwise_partner(*reader, current))) {
      m.mul = reader;
      current = reader->output(0);
      reader = mods::sole_reader(current);
    }
  }
  if (reader && reader->is("Add", "")) {
    if ((m.residual = elementwise_partner(*reader, current))) m.add = reader;
  }
  if (!m.mul && !m.add) return std::nullopt;
  return m;
}

/// Replaces the GEMM and the chain by one GEMM writing the chain's result value, under the same
/// name and to the same readers (see the diagram in the header).
void fuse(ir::Graph& graph, const Match& m) {
  ir::Node* last = m.add ? m.add : m.mul;
  ir::Value* result = last->output(0);
  const std::string result_name = result->name(), gemm_name = m.gemm->name();
  const ir::TensorType type = result->type();
  std::vector<ir::Value*> inputs = m.gemm->inputs();
  inputs.resize(kResidualInput + 1, nullptr);
  inputs[kMultiplierInput] = m.multiplier;
  inputs[kResidualInput] = m.residual;
  while (!inputs.empty() && inputs.back() == nullptr) inputs.pop_back();  // no trailing omitted inputs
  const auto attributes = m.gemm->attributes();
  // Park the readers (and any graph-output role) on a placeholder while the old nodes go.
  ir::Value* placeholder = graph.add_value(result_name + "_fusing", type);
  graph.replace_all_uses_with(result, placeholder);
  if (m.add) graph.erase_node(m.add);
  if (m.mul) graph.erase_node(m.mul);
  graph.erase_node(m.gemm);
  ir::Value* output = graph.add_value(result_name, type);  // the name is free again: it keeps it
  graph.replace_all_uses_with(placeholder, output);
  graph.erase_value(placeholder);
  ir::Node* fused = graph.add_node_with_outputs("QuantizedGemm", inputs, {output}, gemm_name, kLokaDomain);
  fused->mutable_attributes() = attributes;
}

class FuseGemmEpiloguePass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    LOKA_ASSIGN_OR_RETURN(nlohmann::json document, read_annotations(graph));
    // One fusion at a time, matching afresh: a fusion replaces its chain's last value, which a
    // later chain may read (DCN cross layer l+1 adds layer l's output), so earlier matches go stale.
    bool changed = false;
    for (size_t bound = graph.nodes().size(); bound > 0; --bound) {
      std::optional<Match> found;
      for (ir::Node* node : graph.nodes())
        if ((found = match(node))) break;
      if (!found) break;
      const Match& m = *found;
      nlohmann::json& entry = document["nodes"][m.gemm->name()];
      entry["name"] = m.gemm->name();
      nlohmann::json from = entry.contains("from") ? entry["from"] : nlohmann::json::array({m.gemm->name()});
      if (m.mul) from.push_back(m.mul->name());
      if (m.add) from.push_back(m.add->name());
      entry["from"] = from;
      context.add_statistic(m.mul && m.add ? "cross-layers-fused" : (m.mul ? "multiplies-fused" : "residuals-fused"));
      fuse(graph, m);
      changed = true;
    }
    if (!changed) return false;
    write_annotations(graph, document);
    return true;
  }
};

}  // namespace

PassInfo fuse_gemm_epilogue_pass_info() {
  return PassInfo{"fuse-gemm-epilogue",
                  "fold an elementwise multiply (DCN cross) and a residual add after a QuantizedGemm into its epilogue",
                  {},
                  {"cross-layers-fused", "multiplies-fused", "residuals-fused"}};
}

std::unique_ptr<Pass> make_fuse_gemm_epilogue_pass() { return std::make_unique<FuseGemmEpiloguePass>(); }

}  // namespace loka
