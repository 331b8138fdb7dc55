// ============================================================================
// passes/mods/fuse_gemm_epilogue.cc — `fuse-gemm-epilogue`.
// ============================================================================
#include "passes/mods/fuse_gemm_epilogue.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "passes/canonicalize/rewrite_utils.h"
#include "passes/mods/rewrite_helpers.h"
#include "passes/probe/annotations.h"

namespace loka {
namespace {

using mods::kLokaDomain;
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

/// The bias input of a fused GEMM: the constant `old_bias` itself when it is already [N], else a
/// new initializer holding `row` (the [N] row it broadcasts).
ir::Value* bias_input(ir::Graph& graph, ir::Value* old_bias, const Tensor& row) {
  const Tensor* stored = mods::float_constant(old_bias);
  if (stored && stored->rank() == 1 && stored->element_count() == row.element_count()) return old_bias;
  return graph.add_initializer(old_bias->name() + ".row", row);
}

/// Replaces `gemm` and `chain` by one ai.loka `op` node reading `inputs` and writing the chain's
/// last value, under the GEMM's name and to the same readers; `old_bias` leaves the model when
/// nothing reads it any more (it lives on as the fused node's bias).
Status replace_with_fused(ir::Graph& graph, ir::Node* gemm, const std::vector<ir::Node*>& chain,
                          const std::vector<ir::Value*>& inputs, ir::Value* old_bias, const char* op,
                          Attributes attributes) {
  std::vector<ir::Node*> absorbed = chain;
  absorbed.push_back(gemm);
  ir::Value* result = chain.empty() ? gemm->output(0) : chain.back()->output(0);
  LOKA_RETURN_IF_ERROR(canonicalize::replace_with_node(graph, result, absorbed,
                                                       {op, inputs, std::move(attributes), gemm->name(), kLokaDomain})
                           .status());
  if (old_bias && std::find(inputs.begin(), inputs.end(), old_bias) == inputs.end() && !old_bias->has_uses() &&
      !old_bias->is_graph_output())
    graph.erase_value(old_bias);
  // A model with no FP8 site reaches here with no ai.loka node yet (insert-scales imports the
  // domain only when it lowers one): its first FusedGemm brings the import.
  mods::import_loka_domain(graph);
  return Status::ok();
}

/// Replaces the GEMM and the chain by one QuantizedGemm writing the chain's result value (see the
/// diagram in the header).
Status fuse(ir::Graph& graph, const Match& m) {
  std::vector<ir::Value*> inputs = m.gemm->inputs();
  inputs.resize(kResidualInput + 1, nullptr);
  ir::Value* old_bias = nullptr;
  if (m.bias_add) {
    old_bias = m.bias_add->input(m.bias_add->input(0) == m.gemm->output(0) ? 1 : 0);
    inputs[kBiasInput] = bias_input(graph, old_bias, *m.bias);
  }
  inputs[kMultiplierInput] = m.multiplier;
  inputs[kResidualInput] = m.residual;
  while (!inputs.empty() && inputs.back() == nullptr) inputs.pop_back();  // no trailing omitted inputs
  Attributes attributes = m.gemm->attributes();
  if (m.act) attributes.set("activation", m.activation);
  return replace_with_fused(graph, m.gemm, m.chain(), inputs, old_bias, "QuantizedGemm", std::move(attributes));
}

// ------------------------------------------------------------------ FP32 --

/// An FP32 GEMM site (one the Probe kept in FP32 or BF16) and the bias add and activation after it.
struct FloatMatch {
  ir::Node* gemm = nullptr;
  ir::Node* bias_add = nullptr;  ///< a MatMul's bias Add; may be null
  ir::Node* act = nullptr;       ///< may be null
  ir::Node* add = nullptr;       ///< the residual Add; may be null
  std::optional<Tensor> bias;    ///< the bias row [N]: the Add's, or the Gemm's C
  ir::Value* gemm_bias = nullptr;  ///< the Gemm's C when it is the bias
  ir::Value* residual = nullptr;
  std::string activation;
  bool trans_b = false;

  std::vector<ir::Node*> chain() const {
    std::vector<ir::Node*> nodes;
    for (ir::Node* node : {bias_add, act, add})
      if (node) nodes.push_back(node);
    return nodes;
  }
};

/// The float attribute `name` of `node` equals `expected` (absent: ONNX's default 1).
bool float_attribute_is(const ir::Node& node, const char* name, float expected) {
  const Result<float> value = node.attributes().get_float(name, 1.0f);
  return value.is_ok() && value.value() == expected;
}

/// A Gemm (transA 0, alpha and beta 1, C absent or a bias row) followed by Relu/Gelu, or a MatMul
/// of an activation by a 2-D float32 constant followed by a bias Add and/or Relu/Gelu, either then
/// followed by a residual Add: what one cuBLASLt GEMM with a bias/ReLU epilogue and C computes
/// (ai.loka::FusedGemm).
std::optional<FloatMatch> match_float(ir::Node* gemm, bool allow_bare = false) {
  const bool is_gemm = gemm->is("Gemm", "");
  if (!is_gemm && !gemm->is("MatMul", "")) return std::nullopt;
  if (gemm->outputs().size() != 1 || gemm->input(0) == nullptr || gemm->input(1) == nullptr) return std::nullopt;
  const ir::TensorType& x = gemm->input(0)->type();
  const ir::TensorType& w = gemm->input(1)->type();
  if (x.dtype != DType::kFloat32 || w.dtype != DType::kFloat32 || !x.has_rank() || x.rank() < 2 || w.rank() != 2)
    return std::nullopt;
  FloatMatch m;
  m.gemm = gemm;
  if (is_gemm) {
    const Result<int64_t> trans_a = gemm->attributes().get_int("transA", 0);
    const Result<int64_t> trans_b = gemm->attributes().get_int("transB", 0);
    if (!trans_a.is_ok() || trans_a.value() != 0 || !trans_b.is_ok() || x.rank() != 2) return std::nullopt;
    if (!float_attribute_is(*gemm, "alpha", 1.0f) || !float_attribute_is(*gemm, "beta", 1.0f)) return std::nullopt;
    m.trans_b = trans_b.value() != 0;
  } else if (!gemm->input(1)->is_initializer()) {
    return std::nullopt;  // an activation x activation MatMul: no weight, no GEMM epilogue site
  }
  const ir::Dim& n_dim = (*w.shape)[m.trans_b ? 0 : 1];
  if (!n_dim.is_known()) return std::nullopt;
  const int64_t n = n_dim.value;
  if (is_gemm && gemm->input(2) != nullptr) {
    if (!(m.bias = bias_row(gemm->input(2), n, 2))) return std::nullopt;  // C broadcast per row: no bias
    m.gemm_bias = gemm->input(2);
  }
  ir::Value* current = gemm->output(0);
  ir::Node* reader = mods::sole_reader(current);
  if (!is_gemm && reader && reader->is("Add", "") && reader->outputs().size() == 1 && reader->inputs().size() == 2 &&
      reader->input(0) != reader->input(1)) {
    ir::Value* other = reader->input(0) == current ? reader->input(1) : reader->input(0);
    if ((m.bias = bias_row(other, n, x.rank()))) {
      m.bias_add = reader;
      current = reader->output(0);
      reader = mods::sole_reader(current);
    }
  }
  if (reader && !(m.activation = activation_of(*reader, current)).empty()) {
    m.act = reader;
    current = reader->output(0);
    reader = mods::sole_reader(current);
  }
  if (reader && reader->is("Add", "") && (m.residual = elementwise_partner(*reader, current))) m.add = reader;
  if (m.chain().empty() && !allow_bare) return std::nullopt;  // nothing after the GEMM to fold
  return m;
}

/// Replaces the GEMM and its chain by one ai.loka::FusedGemm writing the chain's result value.
Status fuse_float(ir::Graph& graph, const FloatMatch& m) {
  std::vector<ir::Value*> inputs = {m.gemm->input(0), m.gemm->input(1), nullptr, m.residual};
  ir::Value* old_bias = m.bias_add ? m.bias_add->input(m.bias_add->input(0) == m.gemm->output(0) ? 1 : 0) : m.gemm_bias;
  if (m.bias) inputs[2] = bias_input(graph, old_bias, *m.bias);
  while (inputs.back() == nullptr) inputs.pop_back();  // no trailing omitted inputs
  Attributes attributes;
  if (m.trans_b) attributes.set("transB", int64_t{1});
  if (m.act) attributes.set("activation", m.activation);
  return replace_with_fused(graph, m.gemm, m.chain(), inputs, old_bias, "FusedGemm", std::move(attributes));
}

/// Records the fused nodes' names under the GEMM's annotation entry ("from").
void note_fusion(nlohmann::json& document, const ir::Node& gemm, const std::vector<ir::Node*>& chain) {
  nlohmann::json& entry = document["nodes"][gemm.name()];
  entry["name"] = gemm.name();
  nlohmann::json from = entry.contains("from") ? entry["from"] : nlohmann::json::array({gemm.name()});
  for (const ir::Node* node : chain) from.push_back(node->name());
  entry["from"] = from;
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
      std::optional<FloatMatch> found_float;
      for (ir::Node* node : graph.nodes())
        if ((found = match(node)) || (found_float = match_float(node))) break;
      if (found_float) {
        const FloatMatch& m = *found_float;
        note_fusion(document, *m.gemm, m.chain());
        context.add_statistic("float-gemms-fused");
        if (m.bias_add) context.add_statistic("biases-fused");
        if (m.act) context.add_statistic(m.activation == "relu" ? "relus-fused" : "gelus-fused");
        if (m.add) context.add_statistic("residuals-fused");
        LOKA_RETURN_IF_ERROR(fuse_float(graph, m));
        changed = true;
        continue;
      }
      if (!found) break;
      const Match& m = *found;
      note_fusion(document, *m.gemm, m.chain());
      if (m.bias_add) context.add_statistic("biases-fused");
      if (m.act) context.add_statistic(m.activation == "relu" ? "relus-fused" : "gelus-fused");
      if (m.mul || m.add)
        context.add_statistic(m.mul && m.add ? "cross-layers-fused" : (m.mul ? "multiplies-fused" : "residuals-fused"));
      LOKA_RETURN_IF_ERROR(fuse(graph, m));
      changed = true;
    }
    if (!changed) return false;
    write_annotations(graph, document);
    return true;
  }
};

}  // namespace

bool can_become_fused_gemm(const ir::Node& gemm) {
  // match_float only reads the graph; the non-const node is what a fusion would later rewrite.
  return match_float(const_cast<ir::Node*>(&gemm), /*allow_bare=*/true).has_value();
}

Status become_fused_gemm(ir::Graph& graph, ir::Node& gemm, nlohmann::json& annotations) {
  const std::optional<FloatMatch> m = match_float(&gemm, /*allow_bare=*/true);
  if (!m) return Status::error("node '" + gemm.name() + "' is no float Gemm or MatMul by a 2-D constant");
  if (!m->chain().empty()) note_fusion(annotations, *m->gemm, m->chain());
  return fuse_float(graph, *m);
}

PassInfo fuse_gemm_epilogue_pass_info() {
  return PassInfo{"fuse-gemm-epilogue",
                  "fold a bias add, a ReLU/GELU, an elementwise multiply (DCN cross) and a residual add after a "
                  "QuantizedGemm into its epilogue, and a bias add and ReLU/GELU after an FP32 Gemm/MatMul into "
                  "an ai.loka FusedGemm",
                  {},
                  {"biases-fused", "relus-fused", "gelus-fused", "cross-layers-fused", "multiplies-fused",
                   "residuals-fused", "float-gemms-fused"}};
}

std::unique_ptr<Pass> make_fuse_gemm_epilogue_pass() { return std::make_unique<FuseGemmEpiloguePass>(); }

}  // namespace loka
