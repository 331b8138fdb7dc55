// ============================================================================
// passes/mods/fold_transposes.cc — `fold-transposes` (see header).
// ============================================================================
#include "passes/mods/fold_transposes.h"

#include <algorithm>

#include "passes/canonicalize/rewrite_utils.h"
#include "passes/mods/rewrite_helpers.h"

namespace loka {
namespace {

using mods::kLokaDomain;

/// The untransposed operand X when `matmul` is A · Transpose(X) over a strided batch (header).
ir::Value* foldable_operand(const ir::Node& matmul) {
  if (!matmul.is("MatMul") || matmul.inputs().size() != 2) return nullptr;
  const ir::Value* a = matmul.input(0);
  const ir::Value* t = matmul.input(1);
  if (a == nullptr || t == nullptr || t->producer() == nullptr) return nullptr;
  const ir::Node& transpose = *t->producer();
  ir::Value* x = transpose.input(0);
  if (x == nullptr) return nullptr;
  const int rank = a->type().rank();
  if (rank < 3 || x->type().rank() != rank || !mods::swaps_last_two_dims(transpose, rank)) return nullptr;
  if (a->type().dtype != DType::kFloat32 || x->type().dtype != DType::kFloat32) return nullptr;
  const std::vector<ir::Dim>& a_dims = *a->type().shape;
  const std::vector<ir::Dim>& x_dims = *x->type().shape;
  for (int axis = 0; axis + 2 < rank; ++axis)
    if (!mods::same_dim(a_dims[static_cast<size_t>(axis)], x_dims[static_cast<size_t>(axis)])) return nullptr;
  if (!mods::same_dim(a_dims.back(), x_dims.back())) return nullptr;  // K
  return x;
}

class FoldTransposesPass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    bool changed = false;
    // By id: a rewrite erases nodes that a snapshot of graph.nodes() would still hold.
    for (uint32_t id = 0; id < graph.node_id_bound(); ++id) {
      ir::Node* matmul = graph.node_by_id(id);
      if (matmul == nullptr) continue;
      ir::Value* x = foldable_operand(*matmul);
      if (x == nullptr) continue;
      ir::Node* transpose = matmul->input(1)->producer();
      Attributes attributes;
      attributes.set("transB", int64_t{1});
      canonicalize::NodeSpec gemm{"FusedGemm", {matmul->input(0), x}, std::move(attributes), matmul->name(), kLokaDomain};
      LOKA_RETURN_IF_ERROR(canonicalize::replace_with_node(graph, matmul->output(0), {matmul}, std::move(gemm)).status());
      context.add_statistic("transposes-folded");
      if (transpose->output(0)->uses().empty() && !transpose->output(0)->is_graph_output()) {
        LOKA_RETURN_IF_ERROR(canonicalize::erase_nodes(graph, {transpose}));
        context.add_statistic("transposes-erased");
      }
      changed = true;
    }
    if (changed) mods::import_loka_domain(graph);
    return changed;
  }
};

}  // namespace

PassInfo fold_transposes_pass_info() {
  return PassInfo{"fold-transposes",
                  "read the transposed right operand of a batched MatMul in place (ai.loka FusedGemm, transB=1)",
                  {},
                  {"transposes-folded", "transposes-erased"}};
}

std::unique_ptr<Pass> make_fold_transposes_pass() { return std::make_unique<FoldTransposesPass>(); }

}  // namespace loka
