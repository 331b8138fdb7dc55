// ============================================================================
// passes/mods/fuse_attention.cc — `fuse-attention` (see the header).
//
// Matching starts at each Softmax and walks out: back through the scale to
// the QKᵀ MatMul, forward to the probabilities·V MatMul and the head merge.
// Each of Q, Kᵀ and V is then traced back to the token-major tensor it was
// split from (`HeadSource`: the tensor, the column of head 0, H and D).
// Nothing is changed until a whole chain has matched.
// ============================================================================
#include "passes/mods/fuse_attention.h"

#include <algorithm>
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
constexpr int64_t kMaxHeadDim = 128;  // kernels/cuda/attention.h; docs/loka_ops.md

using canonicalize::sole_reader_of;
using Dim = ir::Dim;
using Dims = std::vector<ir::Dim>;

using mods::same_dim;

/// Where a [B,H,N,D] (or single-head [B,N,D]) operand's heads live in a token-major tensor.
struct HeadSource {
  ir::Value* tensor = nullptr;  ///< [B, N, C]
  int64_t offset = 0;           ///< column of head 0
  int64_t heads = 1, head_dim = 0;
};

struct Match {
  ir::Node* scores = nullptr;  ///< the QKᵀ MatMul (its name goes to the fused node)
  HeadSource q, k, v;
  float scale = 1.0f;
  ir::Value* root = nullptr;           ///< the value the fused node replaces
  std::vector<ir::Node*> absorbed;     ///< chain nodes read only inside the chain
};

std::optional<Dims> dims_of(const ir::Value* value) {
  if (value == nullptr || value->type().dtype != DType::kFloat32) return std::nullopt;
  return value->type().shape;
}

bool perm_is(const ir::Node* node, const std::vector<int64_t>& expected) {
  auto perm = node->attributes().get_ints("perm");
  return perm && *perm == expected;
}

/// The producer of `value` when it is an `op` node and `value` has exactly one reader.
ir::Node* sole_use_producer(const ir::Value* value, const char* op) {
  if (!canonicalize::has_exactly_uses(value, 1) || value->producer() == nullptr) return nullptr;
  return value->producer()->is(op) ? value->producer() : nullptr;
}

/// X [B, N, C] reshaped to [B, N, split...] with C = product(split): the Reshape's input, else null.
ir::Value* split_of_last_dim(const ir::Node* reshape, const Dims& reshaped) {
  if (reshape == nullptr || !reshape->is("Reshape")) return nullptr;
  ir::Value* x = reshape->input(0);
  auto x_dims = dims_of(x);
  if (!x_dims || x_dims->size() != 3 || reshaped.size() < 3) return nullptr;
  if (!same_dim((*x_dims)[0], reshaped[0]) || !same_dim((*x_dims)[1], reshaped[1]) || !(*x_dims)[2].is_known())
    return nullptr;
  int64_t product = 1;
  for (size_t i = 2; i < reshaped.size(); ++i) {
    if (!reshaped[i].is_known()) return nullptr;
    product *= reshaped[i].value;
  }
  return product == (*x_dims)[2].value ? x : nullptr;
}

/// Head source of `value`, a [B,H,N,D] tensor that is (`key_transposed`: the [B,H,D,N] transpose of)
///   Transpose(Reshape(X → [B,N,H,D]), perm 0,2,1,3 | 0,2,3,1), or
///   Gather(Transpose(Reshape(X → [B,N,S,H,D]), perm 2,0,3,1,4), g, axis 0).
std::optional<HeadSource> multi_head_source(ir::Value* value, bool key_transposed) {
  ir::Node* node = value->producer();
  if (node == nullptr) return std::nullopt;
  if (node->is("Transpose") && perm_is(node, key_transposed ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 2, 1, 3})) {
    ir::Value* reshaped = node->input(0);
    auto dims = dims_of(reshaped);
    if (!dims || dims->size() != 4 || reshaped->producer() == nullptr) return std::nullopt;
    ir::Value* x = split_of_last_dim(reshaped->producer(), *dims);
    if (x == nullptr) return std::nullopt;
    return HeadSource{x, 0, (*dims)[2].value, (*dims)[3].value};
  }
  if (key_transposed || !node->is("Gather")) return std::nullopt;
  auto axis = node->attributes().get_int("axis", 0);
  auto index = canonicalize::int_list_constant(node->input(1));
  const Tensor* index_data = canonicalize::constant_data(node->input(1));
  if (!axis || *axis != 0 || !index || index->size() != 1 || index_data == nullptr || index_data->rank() != 0)
    return std::nullopt;
  ir::Value* stacked = node->input(0);
  ir::Node* transpose = stacked->producer();
  if (transpose == nullptr || !transpose->is("Transpose") || !perm_is(transpose, {2, 0, 3, 1, 4})) return std::nullopt;
  ir::Value* reshaped = transpose->input(0);
  auto dims = dims_of(reshaped);
  if (!dims || dims->size() != 5 || reshaped->producer() == nullptr) return std::nullopt;
  ir::Value* x = split_of_last_dim(reshaped->producer(), *dims);
  if (x == nullptr) return std::nullopt;
  const int64_t pieces = (*dims)[2].value, heads = (*dims)[3].value, head_dim = (*dims)[4].value;
  int64_t g = (*index)[0];
  if (g < 0) g += pieces;
  if (g < 0 || g >= pieces) return std::nullopt;
  return HeadSource{x, g * heads * head_dim, heads, head_dim};
}

/// Head source of a Q or V operand ([B,N,D] single head, or [B,H,N,D]).
std::optional<HeadSource> operand_source(ir::Value* value, int rank) {
  auto dims = dims_of(value);
  if (!dims || static_cast<int>(dims->size()) != rank) return std::nullopt;
  if (rank == 3) {
    if (!dims->back().is_known()) return std::nullopt;
    return HeadSource{value, 0, 1, dims->back().value};
  }
  return multi_head_source(value, false);
}

/// Head source of the keys behind Kᵀ ([B,D,N] or [B,H,D,N]).
std::optional<HeadSource> key_source(ir::Value* key_t, int rank) {
  auto dims = dims_of(key_t);
  if (!dims || static_cast<int>(dims->size()) != rank || key_t->producer() == nullptr) return std::nullopt;
  ir::Node* transpose = key_t->producer();
  if (!transpose->is("Transpose")) return std::nullopt;
  if (rank == 3) return perm_is(transpose, {0, 2, 1}) ? operand_source(transpose->input(0), 3) : std::nullopt;
  if (perm_is(transpose, {0, 1, 3, 2})) return operand_source(transpose->input(0), 4);
  return multi_head_source(key_t, true);
}

/// The scale folded into the scores: Mul by a one-element constant (either side), Div by one, or none.
/// Returns the node's input that carries the raw scores and sets `scale`; null when `node` is no scale.
ir::Value* strip_scale(const ir::Node* node, float& scale) {
  const auto one_element = [](const ir::Value* value) -> std::optional<double> {
    const Tensor* data = canonicalize::constant_data(value);
    if (data == nullptr || data->dtype() != DType::kFloat32 || data->element_count() != 1 || data->rank() > 1)
      return std::nullopt;
    return canonicalize::scalar_constant(value);
  };
  if (node->is("Mul") && node->inputs().size() == 2) {
    for (size_t i : {0, 1})
      if (auto c = one_element(node->input(1 - i))) {
        scale = static_cast<float>(*c);
        return node->input(i);
      }
  } else if (node->is("Div") && node->inputs().size() == 2) {
    if (auto c = one_element(node->input(1)); c && *c != 0.0) {
      scale = static_cast<float>(1.0 / *c);
      return node->input(0);
    }
  }
  return nullptr;
}

bool same_layout(const HeadSource& a, const HeadSource& b) { return a.heads == b.heads && a.head_dim == b.head_dim; }

std::optional<Match> match(ir::Node* softmax, const nlohmann::json& nodes) {
  auto dims = dims_of(softmax->output(0));
  if (!dims || (dims->size() != 3 && dims->size() != 4) || softmax->inputs().size() != 1) return std::nullopt;
  const int rank = static_cast<int>(dims->size());
  auto axis = softmax->attributes().get_int("axis", -1);
  if (!axis || (*axis != -1 && *axis != rank - 1)) return std::nullopt;
  Match m;
  // Backwards: Softmax ← [scale] ← MatMul(Q, Kᵀ).
  ir::Value* scores = softmax->input(0);
  ir::Node* producer = canonicalize::has_exactly_uses(scores, 1) ? scores->producer() : nullptr;
  if (producer == nullptr) return std::nullopt;
  if (!producer->is("MatMul")) {
    scores = strip_scale(producer, m.scale);
    if (scores == nullptr) return std::nullopt;
    m.absorbed.push_back(producer);
    producer = sole_use_producer(scores, "MatMul");
    if (producer == nullptr) return std::nullopt;
  }
  m.scores = producer;
  // Forwards: Softmax → MatMul(P, V) [→ Transpose(0,2,1,3) → Reshape [B,N,H·D]].
  ir::Node* weighted = sole_reader_of(softmax->output(0), "MatMul");
  if (weighted == nullptr || weighted->input(0) != softmax->output(0)) return std::nullopt;
  auto q = operand_source(m.scores->input(0), rank);
  auto k = key_source(m.scores->input(1), rank);
  auto v = operand_source(weighted->input(1), rank);
  if (!q || !k || !v || !same_layout(*q, *k) || !same_layout(*q, *v)) return std::nullopt;
  if (q->head_dim < 1 || q->head_dim > kMaxHeadDim || q->heads < 1) return std::nullopt;
  auto q_dims = dims_of(q->tensor), k_dims = dims_of(k->tensor), v_dims = dims_of(v->tensor);
  if (!same_dim((*q_dims)[0], (*k_dims)[0]) || !same_dim((*q_dims)[0], (*v_dims)[0]) ||
      !same_dim((*k_dims)[1], (*v_dims)[1]) || !(*k_dims)[1].is_known() || (*k_dims)[1].value < 1)
    return std::nullopt;
  m.absorbed.insert(m.absorbed.begin(), m.scores);
  m.absorbed.push_back(softmax);
  m.absorbed.push_back(weighted);
  m.root = weighted->output(0);
  if (rank == 4) {
    ir::Node* merge = sole_reader_of(weighted->output(0), "Transpose");
    if (merge == nullptr || !perm_is(merge, {0, 2, 1, 3})) return std::nullopt;
    ir::Node* flatten = sole_reader_of(merge->output(0), "Reshape");
    if (flatten == nullptr || flatten->input(0) != merge->output(0)) return std::nullopt;
    auto out = dims_of(flatten->output(0));
    if (!out || out->size() != 3 || !same_dim((*out)[0], (*q_dims)[0]) || !same_dim((*out)[1], (*q_dims)[1]) ||
        !same_dim((*out)[2], Dim::known(q->heads * q->head_dim)))
      return std::nullopt;
    m.absorbed.push_back(merge);
    m.absorbed.push_back(flatten);
    m.root = flatten->output(0);
  }
  // Both MatMuls must be FP32 sites: a BF16 pin or an FP8 recipe keeps the unfused ops.
  for (const ir::Node* matmul : {m.scores, weighted}) {
    auto entry = nodes.find(matmul->name());
    if (entry != nodes.end() && entry->contains("precision") && (*entry)["precision"] != "fp32") return std::nullopt;
  }
  m.q = *q, m.k = *k, m.v = *v;
  return m;
}

/// Erases the head-split nodes (Gather, Transpose, Reshape) the fusion left unread, readers first,
/// and the constants (shapes, indices) only they read.
Status erase_unread_head_splits(ir::Graph& graph) {
  LOKA_ASSIGN_OR_RETURN(std::vector<ir::Node*> order, ir::topological_order(graph));
  std::vector<ir::Value*> operands;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    ir::Node* node = *it;
    if (!(node->is("Gather") || node->is("Transpose") || node->is("Reshape"))) continue;
    const bool unread = std::none_of(node->outputs().begin(), node->outputs().end(),
                                     [](const ir::Value* v) { return v->has_uses() || v->is_graph_output(); });
    if (!unread) continue;
    operands.insert(operands.end(), node->inputs().begin() + 1, node->inputs().end());
    graph.erase_node(node);
  }
  std::sort(operands.begin(), operands.end());
  operands.erase(std::unique(operands.begin(), operands.end()), operands.end());
  for (ir::Value* value : operands)
    if (value != nullptr && value->is_initializer() && !value->has_uses() && !value->is_graph_input() &&
        !value->is_graph_output())
      graph.erase_value(value);
  return Status::ok();
}

class FuseAttentionPass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    LOKA_ASSIGN_OR_RETURN(nlohmann::json document, read_annotations(graph));
    const nlohmann::json no_nodes = nlohmann::json::object();
    const nlohmann::json& nodes = document.contains("nodes") ? document["nodes"] : no_nodes;
    std::vector<Match> matches;
    for (ir::Node* node : graph.nodes())
      if (node->is("Softmax"))
        if (auto m = match(node, nodes)) matches.push_back(std::move(*m));
    if (matches.empty()) return false;
    for (Match& m : matches) {
      const std::string name = m.scores->name();
      nlohmann::json from = nlohmann::json::array();
      for (const ir::Node* node : m.absorbed) from.push_back(node->name());
      Attributes attributes;
      attributes.set("heads", m.q.heads);
      attributes.set("head_dim", m.q.head_dim);
      attributes.set("scale", m.scale);
      attributes.set("q_offset", m.q.offset);
      attributes.set("k_offset", m.k.offset);
      attributes.set("v_offset", m.v.offset);
      LOKA_RETURN_IF_ERROR(canonicalize::replace_with_node(
                               graph, m.root, m.absorbed,
                               canonicalize::NodeSpec{"Attention", {m.q.tensor, m.k.tensor, m.v.tensor},
                                                      std::move(attributes), name, kLokaDomain})
                               .status());
      nlohmann::json& entry = document["nodes"][name];
      entry["name"] = name;
      entry["op"] = "Attention";
      entry["precision"] = "fp32";
      entry["from"] = std::move(from);
      entry.erase("kernel");  // the MatMul's Dispatch choice, if any, no longer applies
      context.add_statistic("attentions-fused");
      context.add_statistic("heads-fused", static_cast<double>(m.q.heads));
    }
    LOKA_RETURN_IF_ERROR(erase_unread_head_splits(graph));
    mods::import_loka_domain(graph);
    write_annotations(graph, document);
    return true;
  }
};

}  // namespace

PassInfo fuse_attention_pass_info() {
  return PassInfo{"fuse-attention",
                  "fuse scaled dot-product attention (head split, QK^T MatMul, scale, Softmax, PV MatMul, head merge) "
                  "into one ai.loka Attention reading Q, K and V in place from the projections",
                  {},
                  {"attentions-fused", "heads-fused"}};
}

std::unique_ptr<Pass> make_fuse_attention_pass() { return std::make_unique<FuseAttentionPass>(); }

}  // namespace loka
