// ============================================================================
// passes/mods/reassociate_matmuls.cc — `reassociate-matmuls` (see header).
// ============================================================================
#include "passes/mods/reassociate_matmuls.h"

#include <optional>

#include "passes/canonicalize/rewrite_utils.h"
#include "passes/mods/rewrite_helpers.h"

namespace loka {
namespace {

struct Chain {
  ir::Node* outer = nullptr;      ///< y = MatMul(X, u)
  ir::Node* inner = nullptr;      ///< u = MatMul(t, P)
  ir::Node* transpose = nullptr;  ///< t = Transpose(X)
  ir::Value* p = nullptr;
  int64_t n = 0;                  ///< tokens
};

/// `outer` as y = MatMul(X, MatMul(Transpose(X), P)) worth reassociating (header): the quadratic
/// form's multiply-adds at most `max_cost_ratio` times the linear form's. Nothing otherwise.
std::optional<Chain> match(ir::Node* outer, double max_cost_ratio) {
  if (!outer->is("MatMul") || outer->inputs().size() != 2) return std::nullopt;
  ir::Value* x = outer->input(0);
  ir::Value* u = outer->input(1);
  if (x == nullptr || u == nullptr || u->producer() == nullptr || mods::sole_reader(u) != outer) return std::nullopt;
  ir::Node* inner = u->producer();
  if (!inner->is("MatMul") || inner->inputs().size() != 2 || inner->input(0) == nullptr) return std::nullopt;
  ir::Node* transpose = inner->input(0)->producer();
  const int rank = x->type().rank();
  if (transpose == nullptr || transpose->input(0) != x || !mods::swaps_last_two_dims(*transpose, rank) || rank < 3)
    return std::nullopt;
  const Tensor* p = canonicalize::constant_data(inner->input(1));
  if (x->type().dtype != DType::kFloat32 || p == nullptr || p->dtype() != DType::kFloat32 || p->rank() != 2)
    return std::nullopt;
  const ir::Dim& n_dim = (*x->type().shape)[static_cast<size_t>(rank - 2)];
  const ir::Dim& d_dim = (*x->type().shape)[static_cast<size_t>(rank - 1)];
  if (!n_dim.is_known() || !d_dim.is_known() || p->dim(0) != n_dim.value) return std::nullopt;
  const double n = static_cast<double>(n_dim.value), d = static_cast<double>(d_dim.value);
  const double k = static_cast<double>(p->dim(1));
  if (n * n * (d + k) > max_cost_ratio * (2.0 * n * d * k)) return std::nullopt;  // the quadratic form costs too much
  return Chain{outer, inner, transpose, inner->input(1), n_dim.value};
}

class ReassociateMatMulsPass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    const double max_cost_ratio = context.float_option("max_cost_ratio");
    if (!(max_cost_ratio >= 0.0)) return Status::error("option max_cost_ratio must be >= 0");
    bool changed = false;
    for (uint32_t id = 0; id < graph.node_id_bound(); ++id) {
      ir::Node* node = graph.node_by_id(id);
      if (node == nullptr) continue;
      const std::optional<Chain> chain = match(node, max_cost_ratio);
      if (!chain) continue;
      ir::Value* x = chain->outer->input(0);
      // g = X·Xᵀ [lead.., n, n]: the inner node's name (the site it replaces), a fresh value.
      std::vector<ir::Dim> gram_dims = *x->type().shape;
      gram_dims.back() = ir::Dim::known(chain->n);
      ir::Value* gram = graph.add_value(chain->inner->output(0)->name() + "_gram",
                                        ir::TensorType{x->type().dtype, std::move(gram_dims)});
      const std::string inner_name = chain->inner->name();
      graph.set_input(chain->outer, 1, nullptr);
      graph.erase_node(chain->inner);
      graph.add_node_with_outputs("MatMul", {x, chain->transpose->output(0)}, {gram}, inner_name, "");
      graph.set_input(chain->outer, 0, gram);
      graph.set_input(chain->outer, 1, chain->p);
      context.add_statistic("matmuls-reassociated");
      changed = true;
    }
    return changed;
  }
};

}  // namespace

PassInfo reassociate_matmuls_pass_info() {
  return PassInfo{"reassociate-matmuls",
                  "compute X·(Xᵀ·P) as (X·Xᵀ)·P where that costs at most max_cost_ratio times the multiply-adds, "
                  "so no GEMM "
                  "reads a transposed left operand",
                  // 2: at Wukong's sizes (n = 34 and 64 tokens, d = 128, k = 24) the quadratic form costs
                  // 0.84x and 1.58x the multiply-adds, on tensor cores, and saves a transpose of X each.
                  {{"max_cost_ratio", OptionType::kFloat, "2.0",
                    "reassociate only where (X·Xᵀ)·P costs at most this many times the multiply-adds of X·(Xᵀ·P)"}},
                  {"matmuls-reassociated"}};
}

std::unique_ptr<Pass> make_reassociate_matmuls_pass() { return std::make_unique<ReassociateMatMulsPass>(); }

}  // namespace loka
