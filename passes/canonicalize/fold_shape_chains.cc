// ============================================================================
// passes/canonicalize/fold_shape_chains.cc — `fold-shape-chains` (see header).
//
// The walk runs the same rules as infer_shapes but keeps the tracked values
// (infer_shapes discards them), collecting rewrites; the IR is changed only
// after the walk, so the walk never sees a half-rewritten graph.
// ============================================================================
#include "passes/canonicalize/fold_shape_chains.h"

#include <optional>

#include "passes/canonicalize/rewrite_utils.h"
#include "passes/ir/graph_algorithms.h"
#include "passes/ir/shape_inference.h"

namespace loka {
namespace {

using ir::SymbolicInt;
using ir::TrackedValues;

/// Tracked contents of an integer constant of rank <= 1 (the seeds of the walk).
std::optional<TrackedValues> track_constant(const Tensor& tensor) {
  const DType d = tensor.dtype();
  if ((d != DType::kInt64 && d != DType::kInt32) || tensor.rank() > 1 ||
      tensor.element_count() > static_cast<int64_t>(ir::kMaxTrackedElements))
    return std::nullopt;
  TrackedValues out;
  out.scalar = tensor.rank() == 0;
  for (int64_t v : tensor.to_int64s()) out.elements.push_back(SymbolicInt::of(v));
  return out;
}

/// Tracked values of every value, by value id (nullopt where nothing is known).
std::vector<std::optional<TrackedValues>> track_values(const ir::Graph& graph, const std::vector<ir::Node*>& order) {
  std::vector<std::optional<TrackedValues>> tracked(graph.value_id_bound());
  for (const ir::Value* value : graph.values())
    if (const Tensor* data = canonicalize::constant_data(value); data && value->is_initializer())
      tracked[value->id()] = track_constant(*data);
  const ir::ShapeInferenceRegistry& registry = ir::ShapeInferenceRegistry::global();
  for (const ir::Node* node : order) {
    const ir::InferenceFn* rule = registry.find(node->domain(), node->op_type());
    if (rule == nullptr) continue;
    std::vector<const ir::TensorType*> types;
    std::vector<const TrackedValues*> values;
    for (const ir::Value* input : node->inputs()) {
      types.push_back(input ? &input->type() : nullptr);
      values.push_back(input && tracked[input->id()] ? &*tracked[input->id()] : nullptr);
    }
    ir::InferenceContext ctx(*node, std::move(types), std::move(values));
    if (!(*rule)(ctx)) continue;  // a model error: infer-shapes reports it, this pass only skips
    for (size_t i = 0; i < node->outputs().size() && i < ctx.output_values().size(); ++i)
      tracked[node->output(i)->id()] = std::move(ctx.output_values()[i]);
  }
  return tracked;
}

/// The constant a fully known tracked value stands for, when its declared type agrees.
std::optional<Tensor> as_constant(const ir::Value& value, const TrackedValues& values) {
  auto numbers = values.numbers();
  const DType dtype = value.type().dtype;
  if (!numbers || (dtype != DType::kInt64 && dtype != DType::kInt32)) return std::nullopt;
  if (values.scalar && numbers->size() != 1) return std::nullopt;
  const Shape shape = values.scalar ? Shape{} : Shape{static_cast<int64_t>(numbers->size())};
  // A declared rank that disagrees means the tracking does not describe this value.
  if (value.type().has_rank() && value.type().rank() != static_cast<int>(shape.size())) return std::nullopt;
  Tensor tensor = Tensor::zeros(dtype, shape);
  for (size_t i = 0; i < numbers->size(); ++i) {
    if (dtype == DType::kInt64) tensor.data<int64_t>()[i] = (*numbers)[i];
    else tensor.data<int32_t>()[i] = static_cast<int32_t>((*numbers)[i]);
  }
  return tensor;
}

/// An exactly equivalent constant target for Reshape(data, <tracked target>), or nullopt.
std::optional<std::vector<int64_t>> constant_reshape_target(const ir::Node& reshape, const TrackedValues& target) {
  auto allow_zero = reshape.attributes().get_int("allowzero", 0);
  const ir::Value* data = reshape.input(0);
  if (!allow_zero || *allow_zero != 0 || data == nullptr || !data->type().has_rank() || target.scalar) return std::nullopt;
  const std::vector<ir::Dim>& dims = *data->type().shape;
  std::vector<int64_t> out;
  std::vector<size_t> unresolved;
  bool literal_minus_one = false;
  for (size_t i = 0; i < target.elements.size(); ++i) {
    const SymbolicInt& e = target.elements[i];
    if (e.number) {
      out.push_back(*e.number);  // the runtime value itself: same meaning, 0 and -1 included
      literal_minus_one = literal_minus_one || *e.number == -1;
    } else if (!e.symbol.empty() && i < dims.size() && dims[i].symbol == e.symbol) {
      out.push_back(0);  // equals data dim i, which 0 copies (allowzero = 0)
    } else {
      out.push_back(-1);
      unresolved.push_back(i);
    }
  }
  // Every element now resolves to the value the original target had at run time.
  if (unresolved.empty()) return out;
  if (unresolved.size() > 1 || literal_minus_one) return std::nullopt;
  // A new -1 is inferred as total / product(others): exact only when the others are positive numbers.
  for (size_t i = 0; i < out.size(); ++i)
    if (i != unresolved[0] && (out[i] <= 0 || !target.elements[i].number)) return std::nullopt;
  return out;
}

class FoldShapeChainsPass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    LOKA_ASSIGN_OR_RETURN(const std::vector<ir::Node*> order, ir::topological_order(graph));
    const std::vector<std::optional<TrackedValues>> tracked = track_values(graph, order);

    std::vector<std::pair<ir::Node*, Tensor>> folds;
    std::vector<std::pair<ir::Node*, std::vector<int64_t>>> targets;
    for (ir::Node* node : order) {
      if (node->is("Constant")) continue;  // fold-constants turns those into initializers
      if (node->outputs().size() == 1) {
        const ir::Value* output = node->output(0);
        if (!output->is_graph_output() && output->has_uses() && tracked[output->id()])
          if (auto constant = as_constant(*output, *tracked[output->id()])) {
            folds.emplace_back(node, std::move(*constant));
            continue;
          }
      }
      const ir::Value* shape = node->input(1);
      if (node->is("Reshape") && shape && !canonicalize::constant_data(shape) && tracked[shape->id()] &&
          !tracked[shape->id()]->numbers())
        if (auto target = constant_reshape_target(*node, *tracked[shape->id()]))
          targets.emplace_back(node, std::move(*target));
    }

    for (auto& [node, tensor] : folds) {
      context.add_statistic(node->is("Shape") ? "shapes-folded" : "shape-values-folded");
      LOKA_RETURN_IF_ERROR(canonicalize::replace_with_initializers(graph, node, {std::move(tensor)}));
    }
    for (auto& [node, target] : targets) {
      const int64_t length = static_cast<int64_t>(target.size());
      ir::Value* constant = graph.add_initializer(node->name() + "_shape", Tensor::from_int64s({length}, target));
      graph.set_input(node, 1, constant);
      context.add_statistic("reshape-targets-resolved");
    }
    return !folds.empty() || !targets.empty();
  }
};

}  // namespace

PassInfo fold_shape_chains_pass_info() {
  return PassInfo{"fold-shape-chains",
                  "fold shape arithmetic over static dims to constants; give Reshapes exact constant targets "
                  "(0 = copy a symbolic dim)",
                  {},
                  {"shapes-folded", "shape-values-folded", "reshape-targets-resolved"}};
}

std::unique_ptr<Pass> make_fold_shape_chains_pass() { return std::make_unique<FoldShapeChainsPass>(); }

}  // namespace loka
