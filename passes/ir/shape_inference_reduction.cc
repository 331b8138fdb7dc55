// ============================================================================
// passes/ir/shape_inference_reduction.cc — inference rules for Reduce* and
// ArgMax/ArgMin.
//
// Reduce axes are an attribute before opset 18 (13 for ReduceSum) and an
// input after; whichever the node has is used. Axes from an input that is not
// a known constant leave the reduced dims unknown (rank kept with keepdims=1,
// unknown rank otherwise), never a guess.
// ============================================================================
#include <algorithm>

#include "passes/ir/shape_inference_helpers.h"

namespace loka::ir::inference {
namespace {

/// Shape of `x` reduced over `axes` (all dims when empty).
Dims reduced_shape(const Dims& x, const std::vector<int>& axes, bool keepdims) {
  Dims out;
  for (size_t i = 0; i < x.size(); ++i) {
    const bool reduced = axes.empty() || std::find(axes.begin(), axes.end(), static_cast<int>(i)) != axes.end();
    if (!reduced) out.push_back(x[i]);
    else if (keepdims) out.push_back(Dim::known(1));
  }
  return out;
}

Result<TypeList> reduce(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(1));
  auto keepdims = ctx.attributes().get_int("keepdims", 1);
  auto noop = ctx.attributes().get_int("noop_with_empty_axes", 0);
  if (!keepdims || !noop) return ctx.error((!keepdims ? keepdims : noop).status().message());
  LOKA_ASSIGN_OR_RETURN(const ListArgument axes, list_argument(ctx, "axes", 1));
  const TensorType& x = ctx.input_type(0);
  const bool all_axes = axes.kind == ListArgument::Kind::kAbsent ||
                        (axes.kind == ListArgument::Kind::kKnown && axes.values.empty());
  if (all_axes && *noop != 0) return TypeList{x};
  if (!x.has_rank()) return TypeList{make_type(x.dtype, std::nullopt)};
  if (axes.kind == ListArgument::Kind::kUnknown) {
    if (*keepdims == 0) return TypeList{make_type(x.dtype, std::nullopt)};
    return TypeList{make_type(x.dtype, Dims(x.shape->size(), Dim::unknown()))};
  }
  LOKA_ASSIGN_OR_RETURN(const std::vector<int> normalized, normalize_axes(ctx, axes.values, x.rank(), "axes"));
  return TypeList{make_type(x.dtype, reduced_shape(*x.shape, normalized, *keepdims != 0))};
}

Result<TypeList> arg_extreme(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(1));
  auto axis = ctx.attributes().get_int("axis", 0);
  auto keepdims = ctx.attributes().get_int("keepdims", 1);
  if (!axis || !keepdims) return ctx.error((!axis ? axis : keepdims).status().message());
  const TensorType& x = ctx.input_type(0);
  if (!x.has_rank()) return TypeList{make_type(DType::kInt64, std::nullopt)};
  LOKA_ASSIGN_OR_RETURN(const int normalized, normalize_axis(ctx, *axis, x.rank(), "axis"));
  return TypeList{make_type(DType::kInt64, reduced_shape(*x.shape, {normalized}, *keepdims != 0))};
}

}  // namespace

void register_reduction_rules(ShapeInferenceRegistry& registry) {
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare",
                         "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp"})
    registry.add("", op, reduce);
  registry.add("", "ArgMax", arg_extreme);
  registry.add("", "ArgMin", arg_extreme);
}

}  // namespace loka::ir::inference
