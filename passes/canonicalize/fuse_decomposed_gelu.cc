// ============================================================================
// passes/canonicalize/fuse_decomposed_gelu.cc — `fuse-decomposed-gelu` (see
// header). Matching walks out from each Erf; nothing is changed until every
// match (and the opset upgrade) is known to work.
// ============================================================================
#include "passes/canonicalize/fuse_decomposed_gelu.h"

#include <cmath>

#include "passes/canonicalize/rewrite_utils.h"
#include "passes/canonicalize/upgrade_opset.h"

namespace loka {
namespace {

constexpr int64_t kGeluOpset = 20;

struct Match {
  ir::Node* erf = nullptr;
  ir::Value* x = nullptr;
  std::vector<ir::Node*> nodes;  ///< every absorbed node
  ir::Value* root = nullptr;     ///< the value the Gelu replaces
};

/// True when `value` is a one-element float constant equal to `expected` within relative
/// `tolerance`, of a rank that cannot grow a rank-`rank` operand of the Mul/Add/Div it feeds.
bool is_constant(const ir::Value* value, double expected, int rank, double tolerance = 0.0) {
  const Tensor* data = canonicalize::constant_data(value);
  if (data == nullptr || !dtype_is_float(data->dtype()) || data->element_count() != 1) return false;
  if (data->rank() > 1 && data->rank() > rank) return false;
  auto v = canonicalize::scalar_constant(value);
  return v && std::abs(*v - expected) <= tolerance * std::abs(expected);
}

std::optional<Match> match(ir::Node* erf) {
  constexpr double kSqrt2 = 1.4142135623730951, kFloatRounding = 1e-6;
  Match m;
  m.erf = erf;
  // x / √2 or x · (1/√2), read by the Erf alone.
  ir::Value* scaled = erf->input(0);
  if (!canonicalize::has_exactly_uses(scaled, 1) || scaled->producer() == nullptr) return std::nullopt;
  ir::Node* scale = scaled->producer();
  if (scale->inputs().size() != 2) return std::nullopt;
  if (scale->is("Div")) {
    m.x = scale->input(0);
    if (m.x == nullptr || !is_constant(scale->input(1), kSqrt2, m.x->type().rank(), kFloatRounding))
      return std::nullopt;
  } else if (scale->is("Mul")) {
    for (size_t i : {0, 1}) {
      ir::Value* other = scale->input(1 - i);
      if (other && is_constant(scale->input(i), 1.0 / kSqrt2, other->type().rank(), kFloatRounding)) m.x = other;
    }
  } else {
    return std::nullopt;
  }
  if (m.x == nullptr || m.x->type().dtype != DType::kFloat32 || !m.x->type().has_rank()) return std::nullopt;
  const int rank = m.x->type().rank();
  const auto constant = [&](const ir::Value* value, double expected) { return is_constant(value, expected, rank); };

  // p = 1 + erf(·).
  ir::Node* add_one = canonicalize::sole_reader_of(erf->output(0), "Add");
  if (!add_one || !constant(canonicalize::other_operand(add_one, erf->output(0)), 1.0)) return std::nullopt;
  ir::Value* p = add_one->output(0);
  m.nodes = {scale, erf, add_one};

  // 0.5 · x · p, in one of the three associations.
  ir::Node* first = canonicalize::sole_reader_of(p, "Mul");
  if (!first) return std::nullopt;
  ir::Value* partner = canonicalize::other_operand(first, p);
  if (partner == nullptr) return std::nullopt;
  m.nodes.push_back(first);
  ir::Value* product = first->output(0);
  if (partner == m.x || constant(partner, 0.5)) {
    // (x · p) · 0.5, (x · p) / 2, or x · (p · 0.5).
    if (!canonicalize::has_exactly_uses(product, 1)) return std::nullopt;
    ir::Node* second = product->uses()[0].node;
    if (second->outputs().size() != 1) return std::nullopt;
    const bool by_half = second->is("Mul") && constant(canonicalize::other_operand(second, product), 0.5);
    const bool by_two = second->is("Div") && second->input(0) == product && constant(second->input(1), 2.0);
    const bool by_x = second->is("Mul") && canonicalize::other_operand(second, product) == m.x;
    if (partner == m.x ? !(by_half || by_two) : !by_x) return std::nullopt;
    m.nodes.push_back(second);
    m.root = second->output(0);
  } else {
    // (x · 0.5) · p: the half is computed from x first, read by this Mul alone.
    ir::Node* half = partner->producer();
    if (half == nullptr || !half->is("Mul") || !canonicalize::has_exactly_uses(partner, 1) ||
        !constant(canonicalize::other_operand(half, m.x), 0.5))
      return std::nullopt;
    m.nodes.push_back(half);
    m.root = product;
  }
  return m;
}

std::vector<Match> find_matches(const ir::Graph& graph) {
  std::vector<Match> matches;
  for (ir::Node* node : graph.nodes())
    if (node->is("Erf") && node->inputs().size() == 1 && node->outputs().size() == 1)
      if (auto m = match(node)) matches.push_back(std::move(*m));
  return matches;
}

class FuseDecomposedGeluPass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    std::vector<Match> matches = find_matches(graph);
    if (matches.empty()) return false;
    LOKA_ASSIGN_OR_RETURN(const FusionOpset opset, require_opset_for_fusion(graph, kGeluOpset, matches.size(), context));
    if (opset == FusionOpset::kNotUpgradable) return false;
    if (opset == FusionOpset::kRaised) matches = find_matches(graph);  // the upgrade may have rewritten nodes
    for (Match& m : matches) {
      Attributes attributes;
      attributes.set("approximate", std::string("none"));
      const std::string name = m.erf->name();
      LOKA_RETURN_IF_ERROR(canonicalize::replace_with_node(
                               graph, m.root, m.nodes,
                               canonicalize::NodeSpec{"Gelu", {m.x}, std::move(attributes), name, ""})
                               .status());
      context.add_statistic("gelus-fused");
    }
    return true;
  }
};

}  // namespace

PassInfo fuse_decomposed_gelu_pass_info() {
  return PassInfo{"fuse-decomposed-gelu",
                  "fuse the exact GELU chain Div(x,sqrt2)/Erf/Add(1)/Mul(x)/Mul(0.5) (any association) into Gelu "
                  "(raises the opset to 20)",
                  {},
                  {"gelus-fused", "opset-raised-to-20", "nodes-converted-by-upgrade", "skipped-opset-not-upgradable"}};
}

std::unique_ptr<Pass> make_fuse_decomposed_gelu_pass() { return std::make_unique<FuseDecomposedGeluPass>(); }

}  // namespace loka
