// ============================================================================
// passes/ir/shape_inference_loka.cc — inference rules for the ai.loka ops
// (docs/loka_ops.md): QuantizedGemm, FusedGemm, LayerNormQuant, ResidualLayerNorm, QuantizedGather,
// EmbeddingBags, Attention, ConcatQuant.
//
// The compiler creates these ops itself, so the rules double as a static
// check of its rewrites: a wrong dtype, a K mismatch, a scale of the wrong
// shape or a missing required input is an error naming the node here, at
// compile time, instead of a failure at model load. They check what the CPU
// kernels (runtime/ops/loka_ops.cc) check, as far as types are known; values
// (a scale's sign, an id's range) are left to the kernels. Unknown types and
// symbolic dims pass through: [batch,K] x W[N,K] gives f32[batch,N].
// ============================================================================
#include <climits>
#include <cmath>
#include <initializer_list>
#include <string>

#include "passes/ir/shape_inference_helpers.h"
#include "runtime/ops/op_helpers.h"

namespace loka::ir::inference {
namespace {

/// Error when the input's dtype is known and not one of `allowed`.
Status check_dtype(const InferenceContext& ctx, size_t index, std::initializer_list<DType> allowed, const char* what) {
  const TensorType& type = ctx.input_type(index);
  if (type.dtype == DType::kUndefined) return Status::ok();
  std::string names;
  for (DType dtype : allowed) {
    if (type.dtype == dtype) return Status::ok();
    names += (names.empty() ? "" : " or ") + std::string(dtype_short_name(dtype));
  }
  return ctx.error(std::string(what) + " must be " + names + ", got " + describe(type));
}

/// Error when the input's rank is known and outside [min_rank, max_rank].
Status check_rank(const InferenceContext& ctx, size_t index, int min_rank, int max_rank, const char* what,
                  const char* expected) {
  const TensorType& type = ctx.input_type(index);
  if (type.has_rank() && (type.rank() < min_rank || type.rank() > max_rank))
    return ctx.error(std::string(what) + " must be " + expected + ", got " + describe(type));
  return Status::ok();
}

/// Error when both dims are known and differ.
Status check_dim(const InferenceContext& ctx, const Dim& actual, const Dim& expected, const std::string& message) {
  if (actual.is_known() && expected.is_known() && actual.value != expected.value) return ctx.error(message);
  return Status::ok();
}

/// Dim `axis` of the input (negative counts from the end), unknown when the rank is.
Dim dim_of(const TensorType& type, int axis) {
  if (!type.has_rank() || type.rank() == 0) return Dim::unknown();
  return (*type.shape)[static_cast<size_t>(axis < 0 ? axis + type.rank() : axis)];
}

/// A float32 vector input whose length must equal `length` (named `length_name`).
Status check_float_vector(const InferenceContext& ctx, size_t index, const Dim& length, const char* what,
                          const char* length_name) {
  LOKA_RETURN_IF_ERROR(check_dtype(ctx, index, {DType::kFloat32}, what));
  LOKA_RETURN_IF_ERROR(check_rank(ctx, index, 1, 1, what, (std::string("1-D [") + length_name + "]").c_str()));
  const TensorType& type = ctx.input_type(index);
  return check_dim(ctx, dim_of(type, 0), length,
                   std::string(what) + " " + describe(type) + " does not have length " + length_name + " = " +
                       std::to_string(length.value));
}

/// A float32 static scale of shape [] or [1].
Status check_scalar_scale(const InferenceContext& ctx, size_t index, const char* what) {
  LOKA_RETURN_IF_ERROR(check_dtype(ctx, index, {DType::kFloat32}, what));
  LOKA_RETURN_IF_ERROR(check_rank(ctx, index, 0, 1, what, "of shape [] or [1]"));
  const TensorType& type = ctx.input_type(index);
  if (type.rank() == 1)
    return check_dim(ctx, dim_of(type, 0), Dim::known(1), std::string(what) + " must be of shape [] or [1], got " + describe(type));
  return Status::ok();
}

/// A string attribute that must be one of `allowed`.
Result<std::string> choice_attribute(const InferenceContext& ctx, const char* name, const char* fallback,
                                     std::initializer_list<const char*> allowed) {
  auto value = ctx.attributes().get_string(name, fallback);
  if (!value) return ctx.error(value.status().message());
  std::string names;
  for (const char* option : allowed) {
    if (*value == option) return *value;
    names += (names.empty() ? "\"" : ", \"") + std::string(option) + "\"";
  }
  return ctx.error("attribute '" + std::string(name) + "' must be one of " + names + ", got \"" + *value + "\"");
}

/// An elementwise term of exactly Y's shape (no broadcasting): one of `allowed` (float32 unless
/// said otherwise), dim by dim where both are known.
Status check_same_shape(const InferenceContext& ctx, size_t index, const std::optional<Dims>& shape, const char* what,
                        std::initializer_list<DType> allowed = {DType::kFloat32}) {
  LOKA_RETURN_IF_ERROR(check_dtype(ctx, index, allowed, what));
  const TensorType& term = ctx.input_type(index);
  if (!shape || !term.has_rank()) return Status::ok();
  const std::string message = std::string(what) + " " + describe(term) + " must have Y's shape";
  if (term.shape->size() != shape->size()) return ctx.error(message);
  for (size_t d = 0; d < shape->size(); ++d) LOKA_RETURN_IF_ERROR(check_dim(ctx, (*term.shape)[d], (*shape)[d], message));
  return Status::ok();
}

/// Output 0's dtype from the `output_dtype` attribute of QuantizedGemm and EmbeddingBags.
Result<DType> output_dtype_attribute(const InferenceContext& ctx) {
  Result<DType> dtype = ops::read_output_dtype(ctx.attributes());
  if (!dtype) return ctx.error(dtype.status().message());
  return dtype;
}

Result<TypeList> quantized_gemm(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(3));
  LOKA_ASSIGN_OR_RETURN(const std::string recipe, choice_attribute(ctx, "act_recipe", "tensor", {"tensor", "row"}));
  LOKA_ASSIGN_OR_RETURN(const std::string activation,
                        choice_attribute(ctx, "activation", "none", {"none", "relu", "gelu"}));
  (void)activation;
  LOKA_ASSIGN_OR_RETURN(const DType y_dtype, output_dtype_attribute(ctx));
  // BF16 X, Multiplier and Residual are activations stored as BF16; they widen exactly.
  LOKA_RETURN_IF_ERROR(check_dtype(ctx, 0, {DType::kFloat32, DType::kBFloat16, DType::kFloat8E4M3FN}, "X"));
  LOKA_RETURN_IF_ERROR(check_rank(ctx, 0, 2, INT32_MAX, "X", "of rank >= 2"));
  LOKA_RETURN_IF_ERROR(check_dtype(ctx, 1, {DType::kFloat8E4M3FN}, "W"));
  LOKA_RETURN_IF_ERROR(check_rank(ctx, 1, 2, 2, "W", "2-D [N,K]"));
  const TensorType& x = ctx.input_type(0);
  const TensorType& w = ctx.input_type(1);
  const Dim n = dim_of(w, 0);
  LOKA_RETURN_IF_ERROR(check_dim(ctx, dim_of(x, -1), dim_of(w, 1),
                                 "K differs: X " + describe(x) + " vs W " + describe(w) + " ([N,K])"));
  LOKA_RETURN_IF_ERROR(check_float_vector(ctx, 2, n, "W_scale", "N"));
  if (ctx.has_input(3)) LOKA_RETURN_IF_ERROR(check_float_vector(ctx, 3, n, "B", "N"));
  const bool x_is_fp8 = x.dtype == DType::kFloat8E4M3FN;
  if (ctx.has_input(4)) {
    LOKA_RETURN_IF_ERROR(check_scalar_scale(ctx, 4, "X_scale"));
  } else if (x_is_fp8 || recipe == "tensor") {
    return ctx.error(std::string("input 4 (X_scale) is required ") +
                     (x_is_fp8 ? "when X is f8e4m3fn" : "by act_recipe \"tensor\""));
  }
  if (ctx.input_count() > 8) return ctx.error("takes at most 8 inputs, got " + std::to_string(ctx.input_count()));
  if (ctx.output_count() > 2) return ctx.error("has at most 2 outputs, got " + std::to_string(ctx.output_count()));
  // Output 1, Yq = Q(Y / Y_scale), comes with its scale, input 7, and only with it.
  const bool writes_codes = ctx.output_count() == 2;
  if (writes_codes && !ctx.has_input(7)) return ctx.error("output 1 (Yq) needs input 7 (Y_scale)");
  if (!writes_codes && ctx.has_input(7)) return ctx.error("input 7 (Y_scale) is given without output 1 (Yq)");
  if (writes_codes) LOKA_RETURN_IF_ERROR(check_scalar_scale(ctx, 7, "Y_scale"));
  std::optional<Dims> shape;
  if (x.has_rank()) {
    shape.emplace(x.shape->begin(), x.shape->end() - 1);
    shape->push_back(n);
  }
  for (const auto& [index, name] : {std::pair<size_t, const char*>{5, "Multiplier"}, {6, "Residual"}})
    if (ctx.has_input(index))
      LOKA_RETURN_IF_ERROR(check_same_shape(ctx, index, shape, name, {DType::kFloat32, DType::kBFloat16}));
  TypeList types{make_type(y_dtype, shape)};
  if (writes_codes) types.push_back(make_type(DType::kFloat8E4M3FN, std::move(shape)));
  return types;
}

Result<TypeList> fused_gemm(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(2));
  if (ctx.input_count() > 4) return ctx.error("takes at most 4 inputs, got " + std::to_string(ctx.input_count()));
  LOKA_ASSIGN_OR_RETURN(const std::string activation,
                        choice_attribute(ctx, "activation", "none", {"none", "relu", "gelu"}));
  (void)activation;
  auto trans_b = ctx.attributes().get_int("transB", 0);
  if (!trans_b) return ctx.error(trans_b.status().message());
  if (*trans_b != 0 && *trans_b != 1) return ctx.error("attribute 'transB' must be 0 or 1, got " + std::to_string(*trans_b));
  LOKA_RETURN_IF_ERROR(check_dtype(ctx, 0, {DType::kFloat32, DType::kBFloat16}, "X"));
  LOKA_RETURN_IF_ERROR(check_rank(ctx, 0, 2, INT32_MAX, "X", "of rank >= 2"));
  LOKA_RETURN_IF_ERROR(check_dtype(ctx, 1, {DType::kFloat32}, "W"));
  LOKA_RETURN_IF_ERROR(check_rank(ctx, 1, 2, INT32_MAX, "W", *trans_b ? "[..., N, K]" : "[..., K, N]"));
  const TensorType& x = ctx.input_type(0);
  const TensorType& w = ctx.input_type(1);
  const Dim n = dim_of(w, *trans_b ? -2 : -1);
  LOKA_RETURN_IF_ERROR(check_dim(ctx, dim_of(x, -1), dim_of(w, *trans_b ? -1 : -2),
                                 "K differs: X " + describe(x) + " vs W " + describe(w) + (*trans_b ? " ([N,K])" : " ([K,N])")));
  if (w.rank() > 2) {  // a batched W: X's rank and leading dims, no B or Residual
    if (x.has_rank() && x.rank() != w.rank())
      return ctx.error("a batched W must have X's rank: X " + describe(x) + " vs W " + describe(w));
    for (int axis = 0; axis + 2 < w.rank() && x.has_rank(); ++axis)
      LOKA_RETURN_IF_ERROR(check_dim(ctx, dim_of(x, axis), dim_of(w, axis),
                                     "batch dim " + std::to_string(axis) + " differs: X " + describe(x) + " vs W " + describe(w)));
    if (ctx.has_input(2) || ctx.has_input(3)) return ctx.error("a batched W takes no B or Residual");
  }
  if (ctx.has_input(2)) LOKA_RETURN_IF_ERROR(check_float_vector(ctx, 2, n, "B", "N"));
  std::optional<Dims> shape;
  if (x.has_rank()) {
    shape.emplace(x.shape->begin(), x.shape->end() - 1);
    shape->push_back(n);
  }
  if (ctx.has_input(3)) LOKA_RETURN_IF_ERROR(check_same_shape(ctx, 3, shape, "Residual"));
  return TypeList{make_type(DType::kFloat32, std::move(shape))};
}

Result<TypeList> layer_norm_quant(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(2));
  if (!ctx.has_input(3)) return ctx.error("input 3 (Y_scale) is required");
  if (ctx.input_count() > 4) return ctx.error("takes at most 4 inputs, got " + std::to_string(ctx.input_count()));
  auto epsilon = ctx.attributes().get_float("epsilon", 1e-5f);
  if (!epsilon) return ctx.error(epsilon.status().message());
  LOKA_RETURN_IF_ERROR(check_dtype(ctx, 0, {DType::kFloat32}, "X"));
  LOKA_RETURN_IF_ERROR(check_rank(ctx, 0, 1, INT32_MAX, "X", "of rank >= 1"));
  const TensorType& x = ctx.input_type(0);
  const Dim c = dim_of(x, -1);
  LOKA_RETURN_IF_ERROR(check_float_vector(ctx, 1, c, "Scale", "C"));
  if (ctx.has_input(2)) LOKA_RETURN_IF_ERROR(check_float_vector(ctx, 2, c, "B", "C"));
  LOKA_RETURN_IF_ERROR(check_scalar_scale(ctx, 3, "Y_scale"));
  return TypeList{make_type(DType::kFloat8E4M3FN, x.shape)};
}

Result<TypeList> residual_layer_norm(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(3));
  if (ctx.input_count() > 4) return ctx.error("takes at most 4 inputs, got " + std::to_string(ctx.input_count()));
  auto epsilon = ctx.attributes().get_float("epsilon", 1e-5f);
  if (!epsilon) return ctx.error(epsilon.status().message());
  LOKA_RETURN_IF_ERROR(check_dtype(ctx, 0, {DType::kFloat32}, "X"));
  LOKA_RETURN_IF_ERROR(check_rank(ctx, 0, 1, INT32_MAX, "X", "of rank >= 1"));
  const TensorType& x = ctx.input_type(0);
  LOKA_RETURN_IF_ERROR(check_dtype(ctx, 1, {DType::kFloat32}, "Residual"));
  LOKA_RETURN_IF_ERROR(check_same_shape(ctx, 1, x.shape, "Residual"));
  const Dim c = dim_of(x, -1);
  LOKA_RETURN_IF_ERROR(check_float_vector(ctx, 2, c, "Scale", "C"));
  if (ctx.has_input(3)) LOKA_RETURN_IF_ERROR(check_float_vector(ctx, 3, c, "B", "C"));
  return TypeList{make_type(DType::kFloat32, x.shape)};
}

Result<TypeList> quantized_gather(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(3));
  if (ctx.input_count() > 3) return ctx.error("takes 3 inputs, got " + std::to_string(ctx.input_count()));
  LOKA_RETURN_IF_ERROR(check_dtype(ctx, 0, {DType::kFloat8E4M3FN}, "Table"));
  LOKA_RETURN_IF_ERROR(check_rank(ctx, 0, 2, 2, "Table", "2-D [V,D]"));
  LOKA_RETURN_IF_ERROR(check_dtype(ctx, 1, {DType::kFloat32}, "Row_scale"));
  LOKA_RETURN_IF_ERROR(check_rank(ctx, 1, 1, 1, "Row_scale", "1-D [V] or [1]"));
  LOKA_RETURN_IF_ERROR(check_dtype(ctx, 2, {DType::kInt32, DType::kInt64}, "Indices"));
  const TensorType& table = ctx.input_type(0);
  const Dim v = dim_of(table, 0);
  const Dim scales = dim_of(ctx.input_type(1), 0);
  if (scales.is_known() && scales.value != 1 && v.is_known() && scales.value != v.value)
    return ctx.error("Row_scale " + describe(ctx.input_type(1)) + " is neither [V] = [" + std::to_string(v.value) +
                     "] nor [1]");
  const TensorType& indices = ctx.input_type(2);
  std::optional<Dims> shape;
  if (indices.has_rank()) {
    shape = *indices.shape;
    shape->push_back(dim_of(table, 1));
  }
  return TypeList{make_type(DType::kFloat32, std::move(shape))};
}

Result<TypeList> embedding_bags(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(2));
  const size_t tables = ctx.input_count() / 2;  // Indices + (Table, Row_scale) pairs; a last omitted scale may be dropped
  auto listed = ctx.attributes().get_ints("offsets");
  if (!listed) return ctx.error(listed.status().message());
  const std::vector<int64_t>& offsets = *listed;
  if (offsets.size() != tables + 1)
    return ctx.error("attribute 'offsets' must have " + std::to_string(tables + 1) + " entries for " +
                     std::to_string(tables) + " tables, got " + std::to_string(offsets.size()));
  for (size_t t = 0; t < tables; ++t)
    if (offsets[t] < 0 || offsets[t + 1] <= offsets[t])
      return ctx.error("attribute 'offsets' must be strictly increasing from >= 0 (bag " + std::to_string(t) + ")");
  LOKA_ASSIGN_OR_RETURN(const DType y_dtype, output_dtype_attribute(ctx));
  LOKA_RETURN_IF_ERROR(check_dtype(ctx, 0, {DType::kInt32, DType::kInt64}, "Indices"));
  LOKA_RETURN_IF_ERROR(check_rank(ctx, 0, 2, 2, "Indices", "2-D [B, H]"));
  const TensorType& indices = ctx.input_type(0);
  const Dim h = dim_of(indices, 1);
  if (h.is_known() && offsets.back() > h.value)
    return ctx.error("attribute 'offsets' ends at " + std::to_string(offsets.back()) + ", beyond Indices " +
                     describe(indices));
  Dim d = Dim::unknown();
  for (size_t t = 0; t < tables; ++t) {
    const std::string table = "Table_" + std::to_string(t), scale = "Row_scale_" + std::to_string(t);
    if (!ctx.has_input(1 + 2 * t)) return ctx.error(table + " is missing");
    // BF16 tables are what store-tables-bf16 writes for tables FP8 cannot carry; they pool as float32.
    LOKA_RETURN_IF_ERROR(
        check_dtype(ctx, 1 + 2 * t, {DType::kFloat32, DType::kBFloat16, DType::kFloat8E4M3FN}, table.c_str()));
    LOKA_RETURN_IF_ERROR(check_rank(ctx, 1 + 2 * t, 2, 2, table.c_str(), "2-D [V, D]"));
    const TensorType& type = ctx.input_type(1 + 2 * t);
    const Dim row = dim_of(type, 1);
    LOKA_RETURN_IF_ERROR(check_dim(ctx, row, d, table + " " + describe(type) + " has another D than Table_0"));
    if (row.is_known()) d = row;
    const bool has_scale = 2 + 2 * t < ctx.input_count() && ctx.has_input(2 + 2 * t);
    if ((type.dtype == DType::kFloat32 || type.dtype == DType::kBFloat16) && has_scale)
      return ctx.error(scale + " is given for a " + (type.dtype == DType::kFloat32 ? "float32 " : "bf16 ") + table);
    if (type.dtype == DType::kFloat8E4M3FN) {
      if (!has_scale) return ctx.error(scale + " is missing for the FP8 " + table);
      LOKA_RETURN_IF_ERROR(check_dtype(ctx, 2 + 2 * t, {DType::kFloat32}, scale.c_str()));
      LOKA_RETURN_IF_ERROR(check_rank(ctx, 2 + 2 * t, 1, 1, scale.c_str(), "1-D [V] or [1]"));
      const Dim v = dim_of(type, 0), scales = dim_of(ctx.input_type(2 + 2 * t), 0);
      if (scales.is_known() && scales.value != 1 && v.is_known() && scales.value != v.value)
        return ctx.error(scale + " " + describe(ctx.input_type(2 + 2 * t)) + " is neither [V] = [" +
                         std::to_string(v.value) + "] nor [1]");
    }
  }
  std::optional<Dims> shape;
  if (indices.has_rank()) shape = Dims{dim_of(indices, 0), Dim::known(static_cast<int64_t>(tables)), d};
  return TypeList{make_type(y_dtype, std::move(shape))};
}

/// An int attribute that must be at least `minimum`.
Result<int64_t> int_attribute_at_least(const InferenceContext& ctx, const char* name, int64_t fallback, int64_t minimum) {
  auto value = ctx.attributes().get_int(name, fallback);
  if (!value) return ctx.error(value.status().message());
  if (*value < minimum)
    return ctx.error("attribute '" + std::string(name) + "' must be >= " + std::to_string(minimum) + ", got " +
                     std::to_string(*value));
  return *value;
}

Result<TypeList> attention(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(3));
  if (ctx.input_count() > 3) return ctx.error("takes 3 inputs (Q, K, V), got " + std::to_string(ctx.input_count()));
  LOKA_ASSIGN_OR_RETURN(const int64_t heads, int_attribute_at_least(ctx, "heads", 0, 1));
  LOKA_ASSIGN_OR_RETURN(const int64_t head_dim, int_attribute_at_least(ctx, "head_dim", 0, 1));
  auto scale = ctx.attributes().get_float("scale", 1.0f);
  if (!scale) return ctx.error(scale.status().message());
  if (!std::isfinite(*scale)) return ctx.error("attribute 'scale' must be finite");
  const char* names[3] = {"Q", "K", "V"};
  const char* offsets[3] = {"q_offset", "k_offset", "v_offset"};
  for (size_t i = 0; i < 3; ++i) {
    LOKA_RETURN_IF_ERROR(check_dtype(ctx, i, {DType::kFloat32}, names[i]));
    LOKA_RETURN_IF_ERROR(check_rank(ctx, i, 3, 3, names[i], "3-D [B, N, C]"));
    LOKA_ASSIGN_OR_RETURN(const int64_t offset, int_attribute_at_least(ctx, offsets[i], 0, 0));
    const TensorType& type = ctx.input_type(i);
    const Dim columns = dim_of(type, 2);
    if (columns.is_known() && columns.value < offset + heads * head_dim)
      return ctx.error(std::string(names[i]) + " " + describe(type) + " is too narrow for " + std::to_string(heads) +
                       " heads of " + std::to_string(head_dim) + " from column " + std::to_string(offset));
  }
  const TensorType& q = ctx.input_type(0);
  const TensorType& k = ctx.input_type(1);
  const TensorType& v = ctx.input_type(2);
  LOKA_RETURN_IF_ERROR(check_dim(ctx, dim_of(k, 0), dim_of(q, 0), "K " + describe(k) + " and Q " + describe(q) + " differ in B"));
  LOKA_RETURN_IF_ERROR(check_dim(ctx, dim_of(v, 0), dim_of(q, 0), "V " + describe(v) + " and Q " + describe(q) + " differ in B"));
  LOKA_RETURN_IF_ERROR(check_dim(ctx, dim_of(v, 1), dim_of(k, 1), "K " + describe(k) + " and V " + describe(v) + " differ in N"));
  std::optional<Dims> shape;
  if (q.has_rank()) shape = Dims{dim_of(q, 0), dim_of(q, 1), Dim::known(heads * head_dim)};
  return TypeList{make_type(DType::kFloat32, std::move(shape))};
}

}  // namespace

/// ConcatQuant: input 0 the scalar Y_scale, the rest float32 tensors Concat joins; E4M3FN codes out.
Result<TypeList> concat_quant(InferenceContext& ctx) {
  if (ctx.input_count() < 2) return ctx.error("takes Y_scale and at least one input, got " + std::to_string(ctx.input_count()) + " inputs");
  LOKA_RETURN_IF_ERROR(check_scalar_scale(ctx, 0, "Y_scale"));
  for (size_t i = 1; i < ctx.input_count(); ++i)
    LOKA_RETURN_IF_ERROR(check_dtype(ctx, i, {DType::kFloat32}, "every input after Y_scale"));
  LOKA_ASSIGN_OR_RETURN(TypeList joined, concatenated_type(ctx, 1));
  joined.front().dtype = DType::kFloat8E4M3FN;
  return joined;
}

void register_loka_rules(ShapeInferenceRegistry& registry) {
  registry.add("ai.loka", "QuantizedGemm", quantized_gemm);
  registry.add("ai.loka", "FusedGemm", fused_gemm);
  registry.add("ai.loka", "LayerNormQuant", layer_norm_quant);
  registry.add("ai.loka", "ResidualLayerNorm", residual_layer_norm);
  registry.add("ai.loka", "QuantizedGather", quantized_gather);
  registry.add("ai.loka", "EmbeddingBags", embedding_bags);
  registry.add("ai.loka", "Attention", attention);
  registry.add("ai.loka", "ConcatQuant", concat_quant);
}

}  // namespace loka::ir::inference
