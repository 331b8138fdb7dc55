// ============================================================================
// passes/ir/shape_inference_linalg.cc — inference rules for Gemm, MatMul
// (batched, broadcast, 1-D promotion) and LayerNormalization.
//
// These are the FP8 candidate sites, so their static checks matter: an inner
// dimension mismatch is reported here, at compile time, naming the node.
// ============================================================================
#include <algorithm>
#include <climits>

#include "passes/ir/shape_inference_helpers.h"

namespace loka::ir::inference {
namespace {

/// Error when two dims are both known and differ.
Status check_same_dim(const InferenceContext& ctx, const Dim& a, const Dim& b, const std::string& what) {
  if (a.is_known() && b.is_known() && a.value != b.value)
    return ctx.error(what + ": " + std::to_string(a.value) + " vs " + std::to_string(b.value));
  return Status::ok();
}

Result<TypeList> gemm(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(2));
  std::vector<size_t> inputs{0, 1};
  if (ctx.has_input(2)) inputs.push_back(2);
  LOKA_ASSIGN_OR_RETURN(const DType dtype, common_dtype(ctx, inputs));
  auto trans_a = ctx.attributes().get_int("transA", 0);
  auto trans_b = ctx.attributes().get_int("transB", 0);
  if (!trans_a || !trans_b) return ctx.error((!trans_a ? trans_a : trans_b).status().message());
  const TensorType& a = ctx.input_type(0);
  const TensorType& b = ctx.input_type(1);
  if (a.has_rank() && a.rank() != 2) return ctx.error("A must be 2-D, got " + describe(a));
  if (b.has_rank() && b.rank() != 2) return ctx.error("B must be 2-D, got " + describe(b));
  const Dim m = a.has_rank() ? (*a.shape)[*trans_a ? 1 : 0] : Dim::unknown();
  const Dim k_a = a.has_rank() ? (*a.shape)[*trans_a ? 0 : 1] : Dim::unknown();
  const Dim k_b = b.has_rank() ? (*b.shape)[*trans_b ? 1 : 0] : Dim::unknown();
  const Dim n = b.has_rank() ? (*b.shape)[*trans_b ? 0 : 1] : Dim::unknown();
  LOKA_RETURN_IF_ERROR(check_same_dim(ctx, k_a, k_b,
                                      "inner dims differ (A " + describe(a) + " transA=" + std::to_string(*trans_a) +
                                          ", B " + describe(b) + " transB=" + std::to_string(*trans_b) + ")"));
  const Dims out{m, n};
  // C broadcasts one way onto [M, N].
  const TensorType& c = ctx.input_type(2);
  if (ctx.has_input(2) && c.has_rank()) {
    if (c.rank() > 2) return ctx.error("C must have rank <= 2, got " + describe(c));
    for (int i = 0; i < c.rank(); ++i) {
      const Dim& dim = (*c.shape)[static_cast<size_t>(i)];
      const Dim& target = out[static_cast<size_t>(2 - c.rank() + i)];
      if (dim.is_known() && dim.value != 1 && target.is_known() && dim.value != target.value)
        return ctx.error("C " + describe(c) + " does not broadcast to the output [M,N] = " +
                         describe(make_type(dtype, out)));
    }
  }
  return TypeList{make_type(dtype, out)};
}

Result<TypeList> matmul(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(2));
  LOKA_ASSIGN_OR_RETURN(const DType dtype, common_dtype(ctx, {0, 1}));
  const TensorType& a = ctx.input_type(0);
  const TensorType& b = ctx.input_type(1);
  if ((a.has_rank() && a.rank() == 0) || (b.has_rank() && b.rank() == 0))
    return ctx.error("inputs must have rank >= 1, got " + describe(a) + " and " + describe(b));
  if (!a.has_rank() || !b.has_rank()) return TypeList{make_type(dtype, std::nullopt)};
  // 1-D operands are promoted to matrices ([K] -> [1,K] for A, [K,1] for B) and the added dim dropped.
  Dims left = *a.shape;
  Dims right = *b.shape;
  const bool left_vector = left.size() == 1;
  const bool right_vector = right.size() == 1;
  if (left_vector) left.insert(left.begin(), Dim::known(1));
  if (right_vector) right.push_back(Dim::known(1));
  LOKA_RETURN_IF_ERROR(check_same_dim(ctx, left.back(), right[right.size() - 2],
                                      "inner dims differ (" + describe(a) + " x " + describe(b) + ")"));
  const Dims left_batch(left.begin(), left.end() - 2);
  const Dims right_batch(right.begin(), right.end() - 2);
  Dims out(std::max(left_batch.size(), right_batch.size()), Dim::known(1));
  for (const Dims* batch : {&left_batch, &right_batch}) {
    const size_t offset = out.size() - batch->size();
    for (size_t i = 0; i < batch->size(); ++i) {
      std::optional<Dim> merged = broadcast_dim(out[offset + i], (*batch)[i]);
      if (!merged) return ctx.error("batch dims do not broadcast (" + describe(a) + " x " + describe(b) + ")");
      out[offset + i] = *merged;
    }
  }
  if (!left_vector) out.push_back(left[left.size() - 2]);
  if (!right_vector) out.push_back(right.back());
  return TypeList{make_type(dtype, std::move(out))};
}

Result<TypeList> layer_normalization(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(2));
  std::vector<size_t> inputs{0, 1};
  if (ctx.has_input(2)) inputs.push_back(2);
  LOKA_ASSIGN_OR_RETURN(const DType dtype, common_dtype(ctx, inputs));
  auto axis = ctx.attributes().get_int("axis", -1);
  auto stash = ctx.attributes().get_int("stash_type", 1);
  if (!axis || !stash) return ctx.error((!axis ? axis : stash).status().message());
  if (*stash > INT32_MAX || !dtype_is_supported(static_cast<int32_t>(*stash)))
    return ctx.error("attribute 'stash_type' is not a supported data type: " + std::to_string(*stash));
  const TensorType& x = ctx.input_type(0);
  TypeList out{make_type(dtype, x.shape)};
  std::optional<Dims> stats;
  if (x.has_rank()) {
    LOKA_ASSIGN_OR_RETURN(const int first, normalize_axis(ctx, *axis, x.rank(), "axis"));
    // Scale and bias broadcast onto the normalised dims X[axis:].
    const Dims normalized(x.shape->begin() + first, x.shape->end());
    for (size_t index : inputs) {
      if (index == 0) continue;
      const TensorType& param = ctx.input_type(index);
      if (!param.has_rank()) continue;
      const char* name = index == 1 ? "Scale" : "B";
      if (param.rank() > static_cast<int>(normalized.size()))
        return ctx.error(std::string(name) + " " + describe(param) + " has more dims than X[axis:] of " + describe(x));
      const size_t offset = normalized.size() - param.shape->size();
      for (size_t i = 0; i < param.shape->size(); ++i) {
        const Dim& dim = (*param.shape)[i];
        const Dim& target = normalized[offset + i];
        if (dim.is_known() && dim.value != 1 && target.is_known() && dim.value != target.value)
          return ctx.error(std::string(name) + " " + describe(param) + " does not match X " + describe(x) +
                           " from axis " + std::to_string(first));
      }
    }
    stats.emplace(x.shape->begin(), x.shape->begin() + first);
    stats->resize(x.shape->size(), Dim::known(1));
  }
  for (size_t i = 1; i < ctx.output_count(); ++i) out.push_back(make_type(static_cast<DType>(*stash), stats));
  return out;
}

}  // namespace

void register_linalg_rules(ShapeInferenceRegistry& registry) {
  registry.add("", "Gemm", gemm);
  registry.add("", "MatMul", matmul);
  registry.add("", "LayerNormalization", layer_normalization);
}

}  // namespace loka::ir::inference
