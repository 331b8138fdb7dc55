// ============================================================================
// passes/canonicalize/canonicalize.cc — `canonicalize` (see header).
// ============================================================================
#include "passes/canonicalize/canonicalize.h"

#include <functional>

#include "passes/canonicalize/decompose_ops.h"
#include "passes/canonicalize/eliminate_dead_code.h"
#include "passes/canonicalize/fold_constants.h"
#include "passes/canonicalize/fold_shape_chains.h"
#include "passes/canonicalize/fuse_decomposed_gelu.h"
#include "passes/canonicalize/fuse_decomposed_layernorm.h"
#include "passes/canonicalize/fuse_matmul_add.h"
#include "passes/canonicalize/lower_einsum.h"
#include "passes/canonicalize/normalize_gemm.h"
#include "passes/canonicalize/remove_identities.h"
#include "passes/infer_shapes_pass.h"
#include "passes/ir/verifier.h"

namespace loka {
namespace {

struct SubPass {
  PassInfo info;
  std::unique_ptr<Pass> pass;
  std::map<std::string, std::string> options;  ///< the declared defaults, some overridden
};

SubPass sub_pass(PassInfo info, std::unique_ptr<Pass> pass) {
  std::map<std::string, std::string> options;
  for (const PassOption& option : info.options) options[option.name] = option.default_value;
  return SubPass{std::move(info), std::move(pass), std::move(options)};
}

class CanonicalizePass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    std::vector<SubPass> passes;
    passes.push_back(sub_pass(infer_shapes_pass_info(), make_infer_shapes_pass()));
    passes.push_back(sub_pass(lower_einsum_pass_info(), make_lower_einsum_pass()));
    passes.push_back(sub_pass(decompose_ops_pass_info(), make_decompose_ops_pass()));
    passes.push_back(sub_pass(fold_constants_pass_info(), make_fold_constants_pass()));
    passes.back().options["max-elements"] = std::to_string(context.int_option("max-folded-elements"));
    passes.push_back(sub_pass(fold_shape_chains_pass_info(), make_fold_shape_chains_pass()));
    passes.push_back(sub_pass(remove_identities_pass_info(), make_remove_identities_pass()));
    passes.push_back(sub_pass(fuse_matmul_add_pass_info(), make_fuse_matmul_add_pass()));
    passes.push_back(sub_pass(normalize_gemm_pass_info(), make_normalize_gemm_pass()));
    passes.push_back(sub_pass(fuse_decomposed_layernorm_pass_info(), make_fuse_decomposed_layernorm_pass()));
    passes.push_back(sub_pass(fuse_decomposed_gelu_pass_info(), make_fuse_decomposed_gelu_pass()));
    passes.push_back(sub_pass(eliminate_dead_code_pass_info(), make_eliminate_dead_code_pass()));

    const int64_t max_iterations = context.int_option("max-iterations");
    bool changed = false;
    for (int64_t round = 1;; ++round) {
      if (round > max_iterations) {
        context.add_statistic("iteration-bound-reached");
        break;
      }
      bool round_changed = false;
      for (SubPass& sub : passes) {
        PassContext sub_context(context.settings(), sub.options);
        auto result = sub.pass->run(graph, sub_context);
        if (!result) return result.status().with_context("canonicalize round " + std::to_string(round) + ", " + sub.info.name + ": ");
        round_changed = round_changed || *result;
        for (const auto& [name, amount] : sub_context.statistics())
          if (amount != 0) context.add_statistic(sub.info.name + "." + name, amount);
      }
      if (Status valid = ir::verify_graph(graph); !valid)
        return valid.with_context("canonicalize round " + std::to_string(round) + " broke the IR: ");
      context.add_statistic("rounds");
      if (!round_changed) break;
      changed = true;
    }
    return changed;
  }
};

}  // namespace

PassInfo canonicalize_pass_info() {
  return PassInfo{"canonicalize",
                  "fold constants and shape chains, remove identities, fuse MatMul+Add and decomposed LayerNorms and "
                  "GELUs, "
                  "normalise Gemms, remove dead code; to a fixpoint",
                  {{"max-iterations", OptionType::kInt, "8", "bound on the rounds run to reach a fixpoint"},
                   {"max-folded-elements", OptionType::kInt, std::to_string(kDefaultMaxFoldedElements),
                    "largest constant-folded output (elements)"}},
                  {"rounds", "iteration-bound-reached", "<pass>.<statistic> of every sub-pass"}};
}

std::unique_ptr<Pass> make_canonicalize_pass() { return std::make_unique<CanonicalizePass>(); }

}  // namespace loka
