// ============================================================================
// passes/canonicalize/fuse_matmul_add.cc — `fuse-matmul-add` (see header).
// ============================================================================
#include "passes/canonicalize/fuse_matmul_add.h"

#include "passes/canonicalize/rewrite_utils.h"

namespace loka {
namespace {

struct Match {
  ir::Node* matmul;
  ir::Node* add;
  ir::Value* bias;
};

/// The Add reading `matmul`'s output as one operand and a bias constant as the other, if any.
std::optional<Match> match(ir::Node* matmul) {
  ir::Value* a = matmul->input(0);
  ir::Value* product = matmul->output(0);
  const Tensor* weights = canonicalize::constant_data(matmul->input(1));
  if (a == nullptr || a->type().rank() != 2 || weights == nullptr || weights->rank() != 2) return std::nullopt;
  if (!dtype_is_float(weights->dtype()) || dtype_is_fp8(weights->dtype())) return std::nullopt;
  if (!canonicalize::has_exactly_uses(product, 1)) return std::nullopt;
  ir::Node* add = product->uses()[0].node;
  if (!add->is("Add") || add->inputs().size() != 2 || add->input(0) == add->input(1)) return std::nullopt;
  ir::Value* bias = add->input(product->uses()[0].input_index == 0 ? 1 : 0);
  const Tensor* b = canonicalize::constant_data(bias);
  if (b == nullptr || b->dtype() != weights->dtype()) return std::nullopt;
  const int64_t n = weights->dim(1);
  const Shape& s = b->shape();
  const bool row_vector = s.empty() || (s.size() == 1 && (s[0] == 1 || s[0] == n)) ||
                          (s.size() == 2 && s[0] == 1 && (s[1] == 1 || s[1] == n));
  if (!row_vector) return std::nullopt;
  return Match{matmul, add, bias};
}

class FuseMatMulAddPass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    bool changed = false;
    // By id: a rewrite erases nodes (the Add) that a snapshot of graph.nodes() would still hold.
    for (uint32_t id = 0; id < graph.node_id_bound(); ++id) {
      ir::Node* node = graph.node_by_id(id);
      if (node == nullptr || !node->is("MatMul")) continue;
      auto m = match(node);
      if (!m) continue;
      ir::Value* bias = m->bias;
      const Tensor& b = *canonicalize::constant_data(bias);
      if (b.rank() == 2) bias = graph.add_initializer(bias->name() + "_row", b.reshaped({b.dim(1)}));
      const std::string name = m->matmul->name();
      canonicalize::NodeSpec gemm{"Gemm", {m->matmul->input(0), m->matmul->input(1), bias}, {}, name, ""};
      LOKA_RETURN_IF_ERROR(
          canonicalize::replace_with_node(graph, m->add->output(0), {m->matmul, m->add}, std::move(gemm)).status());
      context.add_statistic("matmul-add-fused");
      changed = true;
    }
    return changed;
  }
};

}  // namespace

PassInfo fuse_matmul_add_pass_info() {
  return PassInfo{"fuse-matmul-add", "fuse a 2-D MatMul by constant weights and a bias Add into one Gemm", {},
                  {"matmul-add-fused"}};
}

std::unique_ptr<Pass> make_fuse_matmul_add_pass() { return std::make_unique<FuseMatMulAddPass>(); }

}  // namespace loka
