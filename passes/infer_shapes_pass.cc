// ============================================================================
// passes/infer_shapes_pass.cc — `infer-shapes`.
// ============================================================================
#include "passes/infer_shapes_pass.h"

#include "passes/ir/shape_inference.h"

namespace loka {
namespace {

class InferShapesPass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    std::vector<ir::TensorType> before;
    for (const ir::Value* value : graph.values()) before.push_back(value->type());
    LOKA_RETURN_IF_ERROR(ir::infer_shapes(graph));
    size_t changed = 0, index = 0;
    for (const ir::Value* value : graph.values()) changed += !(value->type() == before[index++]);
    context.add_statistic("types-changed", static_cast<double>(changed));
    return changed > 0;
  }
};

}  // namespace

PassInfo infer_shapes_pass_info() {
  return PassInfo{"infer-shapes", "infer the dtype and shape of every value (symbolic batch dims kept)", {},
                  {"types-changed"}};
}

std::unique_ptr<Pass> make_infer_shapes_pass() { return std::make_unique<InferShapesPass>(); }

}  // namespace loka
