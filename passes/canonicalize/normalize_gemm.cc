// ============================================================================
// passes/canonicalize/normalize_gemm.cc — `normalize-gemm` (see header).
// ============================================================================
#include "passes/canonicalize/normalize_gemm.h"

#include <cstring>
#include <map>
#include <tuple>

#include "passes/canonicalize/rewrite_utils.h"

namespace loka {
namespace {

/// `tensor` scaled by `factor` (FP32 only: the caller checks).
Tensor scaled(const Tensor& tensor, float factor) {
  Tensor out = Tensor::zeros(DType::kFloat32, tensor.shape());
  const float* in = tensor.data<float>();
  float* dst = out.data<float>();
  for (int64_t i = 0; i < tensor.element_count(); ++i) dst[i] = in[i] * factor;
  return out;
}

class NormalizeGemmPass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    // One rewritten copy per (weight, transposed, scale): shared weights stay shared.
    std::map<std::tuple<uint32_t, bool, uint32_t>, ir::Value*> rewritten;
    bool changed = false;
    for (ir::Node* node : graph.nodes()) {
      if (!node->is("Gemm")) continue;
      LOKA_ASSIGN_OR_RETURN(bool node_changed, normalize(graph, *node, rewritten, context));
      changed = changed || node_changed;
    }
    return changed;
  }

 private:
  static Result<bool> normalize(ir::Graph& graph, ir::Node& node,
                                std::map<std::tuple<uint32_t, bool, uint32_t>, ir::Value*>& rewritten,
                                PassContext& context) {
    const Attributes& attrs = node.attributes();
    const auto context_of = [&](const Status& s) { return s.with_context("node '" + node.name() + "' (Gemm): "); };
    auto alpha = attrs.get_float("alpha", 1.0f);
    auto beta = attrs.get_float("beta", 1.0f);
    auto trans_a = attrs.get_int("transA", 0);
    auto trans_b = attrs.get_int("transB", 0);
    if (!alpha || !beta || !trans_a || !trans_b)
      return context_of(!alpha ? alpha.status() : !beta ? beta.status() : !trans_a ? trans_a.status() : trans_b.status());
    bool changed = false;
    std::vector<std::string> dropped;
    const auto drop = [&](const char* name) {
      if (attrs.has(name)) dropped.push_back(name);
    };

    // B: fold alpha, store [N,K] with transB=1.
    const Tensor* b = canonicalize::constant_data(node.input(1));
    if (b && b->rank() == 2) {
      const bool fold_alpha = *alpha != 1.0f && b->dtype() == DType::kFloat32;
      const bool transpose = *trans_b == 0;
      if (fold_alpha || transpose) {
        const float factor = fold_alpha ? *alpha : 1.0f;
        uint32_t factor_bits;
        std::memcpy(&factor_bits, &factor, sizeof(factor));
        ir::Value*& copy = rewritten[{node.input(1)->id(), transpose, factor_bits}];
        if (copy == nullptr) {
          Tensor data = fold_alpha ? scaled(*b, factor) : *b;
          if (transpose) data = canonicalize::transpose_2d(data);
          copy = graph.add_initializer(node.input(1)->name() + (transpose ? "_t" : "_scaled"), data);
        }
        graph.set_input(&node, 1, copy);
        if (fold_alpha) context.add_statistic("alpha-folded");
        if (transpose) context.add_statistic("weights-transposed");
        changed = true;
      }
      if (fold_alpha) drop("alpha");
      node.mutable_attributes().set("transB", int64_t{1});
    }
    if (*alpha == 1.0f) drop("alpha");

    // C: fold beta, store [1,N] as [N]; beta means nothing without C.
    if (const Tensor* c = canonicalize::constant_data(node.input(2))) {
      const bool fold_beta = *beta != 1.0f && c->dtype() == DType::kFloat32;
      const bool row = c->rank() == 2 && c->dim(0) == 1;
      if (fold_beta || row) {
        Tensor data = fold_beta ? scaled(*c, *beta) : *c;
        if (row) data = data.reshaped({c->dim(1)});
        graph.set_input(&node, 2, graph.add_initializer(node.input(2)->name() + (fold_beta ? "_scaled" : "_row"), data));
        if (fold_beta) context.add_statistic("beta-folded");
        changed = true;
      }
      if (fold_beta) drop("beta");
    }
    if (*beta == 1.0f || node.input(2) == nullptr) drop("beta");

    // A: materialise a transposed constant.
    const Tensor* a = canonicalize::constant_data(node.input(0));
    if (*trans_a != 0 && a && a->rank() == 2) {
      graph.set_input(&node, 0, graph.add_initializer(node.input(0)->name() + "_t", canonicalize::transpose_2d(*a)));
      drop("transA");
      context.add_statistic("transa-materialized");
      changed = true;
    }
    if (*trans_a == 0) drop("transA");

    if (!dropped.empty()) {
      node.mutable_attributes() = canonicalize::without_attributes(node.attributes(), dropped);
      changed = true;
    }
    return changed;
  }
};

}  // namespace

PassInfo normalize_gemm_pass_info() {
  return PassInfo{"normalize-gemm",
                  "fold alpha/beta into constant operands, store constant weights as [N,K] with transB=1",
                  {},
                  {"alpha-folded", "beta-folded", "weights-transposed", "transa-materialized"}};
}

std::unique_ptr<Pass> make_normalize_gemm_pass() { return std::make_unique<NormalizeGemmPass>(); }

}  // namespace loka
