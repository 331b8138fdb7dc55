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
constexpr size_t kBiasInput = 3, kMultiplierInput = 5, kResidualInput = 6;

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

/// The bias [N] an Add operand stands for when it is a float32 constant that adds the same
/// row to every row of a rank-`rank` product with `n` columns ([N], [1], [], [1,..,1,N]);
/// nothing otherwise (a per-row or per-element addend is not a bias).
std::optional<Tensor> bias_row(const ir::Value* operand, int64_t n, int rank) {
  const Tensor* data = mods::float_constant(operand);
  if (data == nullptr || n <= 0 || data->rank() > rank) return std::nullopt;
  for (int d = 0; d + 1 < data->rank(); ++d)
    if (data->dim(d) != 1) return std::nullopt;
  const int64_t count = data->element_count();
  if (count != n && count != 1) return std::nullopt;
  if (count == n && data->rank() == 1) return *data;
  std::vector<float> row(static_cast<size_t>(n), data->to_floats()[0]);
  if (count == n) row = data->to_floats();
  return Tensor::from_floats({n}, row);
}

/// The output columns N of a QuantizedGemm (W is [N, K]); 0 when unknown.
int64_t output_columns(const ir::Node& gemm) {
  const ir::TensorType& w = gemm.input(1)->type();
  if (w.rank() != 2 || !(*w.shape)[0].is_known()) return 0;
  return (*w.shape)[0].value;
}

struct Match {
  ir::Node* gemm = nullptr;
  ir::Node* bias_add = nullptr;  ///< may be null
  ir::Node* act = nullptr;       ///< Relu or Gelu(approximate="none"); may be null
  ir::Node* mul = nullptr;       ///< may be null
  ir::Node* add = nullptr;       ///< may be null
  std::optional<Tensor> bias;    ///< the bias row [N] when bias_add is set
  std::string activation;        ///< "relu" or "gelu" when act is set
  ir::Value* multiplier = nullptr;
  ir::Value* residual = nullptr;

  /// The matched nodes after the GEMM, in chain order.
  std::vector<ir::Node*> chain() const {
    std::vector<ir::Node*> nodes;
    for (ir::Node* node : {bias_add, act, mul, add})
      if (node) nodes.push_back(node);
    return nodes;
  }
};

/// "relu" or "gelu" when `node` is an ONNX Relu or exact Gelu reading `value`; "" otherwise.
std::string activation_of(const ir::Node& node, const ir::Value* value) {
  if (node.inputs().size() != 1 || node.input(0) != value || node.outputs().size() != 1) return "";
  if (node.is("Relu", "")) return "relu";
  if (node.is("Gelu", "")) {
    auto approximate = node.attributes().get_string("approximate", "none");
    return approximate && *approximate == "none" ? "gelu" : "";
  }
  return "";
}

std::optional<Match> match(ir::Node* gemm) {
  if (!gemm->is("QuantizedGemm", kLokaDomain) || gemm->input(kMultiplierInput) || gemm->input(kResidualInput))
    return std::nullopt;
  Match m;
  m.gemm = gemm;
  auto activation = gemm->attributes().get_string("activation", "none");
  const bool no_activation = activation && *activation == "none";
  ir::Value* current = gemm->output(0);
  ir::Node* reader = mods::sole_reader(current);
  // A bias Add (a MatMul site's, which insert-scales lowers without one) when the GEMM has no B
  // and no activation yet (B is added before it: a GEMM that fused a Relu earlier is done).
  if (reader && reader->is("Add", "") && !gemm->input(kBiasInput) && no_activation && reader->outputs().size() == 1 &&
      reader->inputs().size() == 2 && reader->input(0) != reader->input(1) && current->type().has_rank()) {
    ir::Value* other = reader->input(0) == current ? reader->input(1) : reader->input(0);
    if ((m.bias = bias_row(other, output_columns(*gemm), current->type().rank()))) {
      m.bias_add = reader;
      current = reader->output(0);
      reader = mods::sole_reader(current);
    }
  }
  if (reader && no_activation) {
    if (!(m.activation = activation_of(*reader, current)).empty()) {
      m.act = reader;
      current = reader->output(0);
      reader = mods::sole_reader(current);
    }
  }
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
  if (m.chain().empty()) return std::nullopt;
  return m;
}

/// Replaces the GEMM and the chain by one GEMM writing the chain's result value, under the same
/// name and to the same readers (see the diagram in the header).
void fuse(ir::Graph& graph, const Match& m) {
  const std::vector<ir::Node*> chain = m.chain();
  ir::Value* result = chain.back()->output(0);
  const std::string result_name = result->name(), gemm_name = m.gemm->name();
  const ir::TensorType type = result->type();
  std::vector<ir::Value*> inputs = m.gemm->inputs();
  inputs.resize(kResidualInput + 1, nullptr);
  ir::Value* old_bias = nullptr;
  if (m.bias_add) {
    old_bias = m.bias_add->input(m.bias_add->input(0) == m.gemm->output(0) ? 1 : 0);
    const Tensor& stored = *old_bias->initializer();
    inputs[kBiasInput] = stored.rank() == 1 && stored.element_count() == m.bias->element_count()
                             ? old_bias  // already [N]: shared as is
                             : graph.add_initializer(old_bias->name() + ".row", *m.bias);
  }
  inputs[kMultiplierInput] = m.multiplier;
  inputs[kResidualInput] = m.residual;
  while (!inputs.empty() && inputs.back() == nullptr) inputs.pop_back();  // no trailing omitted inputs
  Attributes attributes = m.gemm->attributes();
  if (m.act) attributes.set("activation", m.activation);
  // Park the readers (and any graph-output role) on a placeholder while the old nodes go.
  ir::Value* placeholder = graph.add_value(result_name + "_fusing", type);
  graph.replace_all_uses_with(result, placeholder);
  for (auto node = chain.rbegin(); node != chain.rend(); ++node) graph.erase_node(*node);
  graph.erase_node(m.gemm);
  // A bias constant nobody else reads leaves the model (it lives on as B).
  if (old_bias && old_bias != inputs[kBiasInput] && !old_bias->has_uses() && !old_bias->is_graph_output())
    graph.erase_value(old_bias);
  ir::Value* output = graph.add_value(result_name, type);  // the name is free again: it keeps it
  graph.replace_all_uses_with(placeholder, output);
  graph.erase_value(placeholder);
  ir::Node* fused = graph.add_node_with_outputs("QuantizedGemm", inputs, {output}, gemm_name, kLokaDomain);
  fused->mutable_attributes() = std::move(attributes);
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
      for (const ir::Node* node : m.chain()) from.push_back(node->name());
      entry["from"] = from;
      if (m.bias_add) context.add_statistic("biases-fused");
      if (m.act) context.add_statistic(m.activation == "relu" ? "relus-fused" : "gelus-fused");
      if (m.mul || m.add)
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
                  "fold a bias add, a ReLU/GELU, an elementwise multiply (DCN cross) and a residual add after a "
                  "QuantizedGemm into its epilogue",
                  {},
                  {"biases-fused", "relus-fused", "gelus-fused", "cross-layers-fused", "multiplies-fused",
                   "residuals-fused"}};
}

std::unique_ptr<Pass> make_fuse_gemm_epilogue_pass() { return std::make_unique<FuseGemmEpiloguePass>(); }

}  // namespace loka
