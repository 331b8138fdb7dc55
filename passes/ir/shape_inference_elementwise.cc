// ============================================================================
// passes/ir/shape_inference_elementwise.cc — inference rules for element-wise
// ops: unary activations, Softmax/LogSoftmax, broadcasting arithmetic and
// comparisons, Where, Cast/CastLike, Identity, Dropout, Quantize/Dequantize.
//
// Integer arithmetic, comparisons, Where and Cast also propagate tracked
// values, because exporters build Reshape targets with them (Mul of a dim by
// a constant, Where(Equal(shape, -1), ...)).
// ============================================================================
#include <climits>

#include "passes/ir/shape_inference_helpers.h"

namespace loka::ir::inference {
namespace {

bool is_integer_or_bool(DType d) {
  return d == DType::kInt64 || d == DType::kInt32 || d == DType::kInt16 || d == DType::kInt8 || d == DType::kUInt8 ||
         d == DType::kUInt16 || d == DType::kUInt32 || d == DType::kUInt64 || d == DType::kBool;
}

// ---- arithmetic on tracked elements (symbols survive identities: x+0, x*1, x-0, x/1) ----

SymbolicInt add_element(std::span<const SymbolicInt> a) {
  int64_t r = 0;
  if (a[0].number && a[1].number)
    return __builtin_add_overflow(*a[0].number, *a[1].number, &r) ? SymbolicInt::unknown() : SymbolicInt::of(r);
  if (a[0].number == 0) return a[1];
  if (a[1].number == 0) return a[0];
  return SymbolicInt::unknown();
}

SymbolicInt sub_element(std::span<const SymbolicInt> a) {
  int64_t r = 0;
  if (a[0].number && a[1].number)
    return __builtin_sub_overflow(*a[0].number, *a[1].number, &r) ? SymbolicInt::unknown() : SymbolicInt::of(r);
  if (a[1].number == 0) return a[0];
  if (!a[0].symbol.empty() && a[0].symbol == a[1].symbol) return SymbolicInt::of(0);
  return SymbolicInt::unknown();
}

SymbolicInt mul_element(std::span<const SymbolicInt> a) {
  int64_t r = 0;
  if (a[0].number && a[1].number)
    return __builtin_mul_overflow(*a[0].number, *a[1].number, &r) ? SymbolicInt::unknown() : SymbolicInt::of(r);
  if (a[0].number == 0 || a[1].number == 0) return SymbolicInt::of(0);
  if (a[0].number == 1) return a[1];
  if (a[1].number == 1) return a[0];
  return SymbolicInt::unknown();
}

SymbolicInt div_element(std::span<const SymbolicInt> a) {
  if (a[0].number && a[1].number && *a[1].number != 0 && !(*a[0].number == INT64_MIN && *a[1].number == -1))
    return SymbolicInt::of(*a[0].number / *a[1].number);  // integer Div truncates, as C++
  if (a[1].number == 1) return a[0];
  return SymbolicInt::unknown();
}

template <bool kMax>
SymbolicInt extreme_element(std::span<const SymbolicInt> a) {
  int64_t best = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].number) return SymbolicInt::unknown();
    if (i == 0 || (kMax ? *a[i].number > best : *a[i].number < best)) best = *a[i].number;
  }
  return SymbolicInt::of(best);
}

SymbolicInt equal_element(std::span<const SymbolicInt> a) {
  if (a[0].number && a[1].number) return SymbolicInt::of(*a[0].number == *a[1].number);
  if (!a[0].symbol.empty() && a[0].symbol == a[1].symbol) return SymbolicInt::of(1);
  // A symbolic dim is a size, never negative: Equal(batch, -1) is false.
  const auto negative = [](const SymbolicInt& e) { return e.number && *e.number < 0; };
  if ((!a[0].symbol.empty() && negative(a[1])) || (!a[1].symbol.empty() && negative(a[0])))
    return SymbolicInt::of(0);
  return SymbolicInt::unknown();
}

template <typename Compare>
ElementFn compare_numbers(Compare compare) {
  return [compare](std::span<const SymbolicInt> a) {
    if (a[0].number && a[1].number) return SymbolicInt::of(compare(*a[0].number, *a[1].number) ? 1 : 0);
    return SymbolicInt::unknown();
  };
}

SymbolicInt where_element(std::span<const SymbolicInt> a) {
  if (!a[0].number) return a[1] == a[2] ? a[1] : SymbolicInt::unknown();
  return *a[0].number != 0 ? a[1] : a[2];
}

/// Tracked values of all present inputs combined by `fn`, recorded on output 0.
void track_combined(InferenceContext& ctx, const ElementFn& fn) {
  if (!fn) return;
  std::vector<const TrackedValues*> inputs;
  for (size_t i = 0; i < ctx.input_count(); ++i) inputs.push_back(ctx.input_values(i));
  if (auto combined = combine_tracked(inputs, fn)) ctx.set_output_values(0, std::move(*combined));
}

std::vector<size_t> present_inputs(const InferenceContext& ctx) {
  std::vector<size_t> out;
  for (size_t i = 0; i < ctx.input_count(); ++i)
    if (ctx.has_input(i)) out.push_back(i);
  return out;
}

// ---- rules ----------------------------------------------------------------

enum class OutputDtype { kSameAsInputs, kBool, kFirstInput };

/// Broadcasting n-ary op; inputs share a dtype unless the output follows input 0 (Pow).
InferenceFn broadcasting(size_t min_inputs, OutputDtype output_dtype, ElementFn values = {}) {
  return [=](InferenceContext& ctx) -> Result<TypeList> {
    LOKA_RETURN_IF_ERROR(ctx.require_inputs(min_inputs));
    const std::vector<size_t> inputs = present_inputs(ctx);
    DType dtype = ctx.input_type(0).dtype;
    if (output_dtype != OutputDtype::kFirstInput) {
      LOKA_ASSIGN_OR_RETURN(dtype, common_dtype(ctx, inputs));
    }
    if (output_dtype == OutputDtype::kBool) dtype = DType::kBool;
    LOKA_ASSIGN_OR_RETURN(std::optional<Dims> shape, broadcast_inputs(ctx, inputs));
    track_combined(ctx, values);
    return TypeList{make_type(dtype, std::move(shape))};
  };
}

/// Output 0 has the input's type (activations); extra outputs are not expected.
Result<TypeList> unary(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(1));
  return TypeList{ctx.input_type(0)};
}

Result<TypeList> softmax(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(1));
  const TensorType& x = ctx.input_type(0);
  auto axis = ctx.attributes().get_int("axis", -1);
  if (!axis) return ctx.error(axis.status().message());
  if (x.has_rank()) LOKA_RETURN_IF_ERROR(normalize_axis(ctx, *axis, x.rank(), "axis").status());
  return TypeList{x};
}

Result<TypeList> identity(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(1));
  if (const TrackedValues* values = ctx.input_values(0)) ctx.set_output_values(0, *values);
  return TypeList{ctx.input_type(0)};
}

Result<TypeList> dropout(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(1));
  TypeList out{ctx.input_type(0)};
  if (ctx.output_count() > 1) out.push_back(make_type(DType::kBool, ctx.input_type(0).shape));
  return out;
}

Result<TypeList> where(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(3));
  const DType condition = ctx.input_type(0).dtype;
  if (condition != DType::kUndefined && condition != DType::kBool)
    return ctx.error("condition must be BOOL, got " + std::string(dtype_name(condition)));
  LOKA_ASSIGN_OR_RETURN(const DType dtype, common_dtype(ctx, {1, 2}));
  LOKA_ASSIGN_OR_RETURN(std::optional<Dims> shape, broadcast_inputs(ctx, {0, 1, 2}));
  track_combined(ctx, where_element);
  return TypeList{make_type(dtype, std::move(shape))};
}

/// Output of dtype `to` with the input's shape; tracked integers survive integer casts.
TypeList cast_to(InferenceContext& ctx, DType to) {
  const TrackedValues* values = ctx.input_values(0);
  if (values != nullptr && to == DType::kBool) {
    TrackedValues truth = *values;
    for (SymbolicInt& e : truth.elements) e = e.number ? SymbolicInt::of(*e.number != 0) : SymbolicInt::unknown();
    ctx.set_output_values(0, std::move(truth));
  } else if (values != nullptr && is_integer_or_bool(to)) {
    ctx.set_output_values(0, *values);
  }
  return TypeList{make_type(to, ctx.input_type(0).shape)};
}

Result<TypeList> cast(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(1));
  auto to = ctx.attributes().get_int("to");
  if (!to) return ctx.error(to.status().message());
  if (*to < INT32_MIN || *to > INT32_MAX || !dtype_is_supported(static_cast<int32_t>(*to)))
    return ctx.error("attribute 'to' is not a supported data type: " + std::to_string(*to));
  return cast_to(ctx, static_cast<DType>(*to));
}

Result<TypeList> cast_like(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(2));
  const DType to = ctx.input_type(1).dtype;
  if (to == DType::kUndefined) return TypeList{make_type(DType::kUndefined, ctx.input_type(0).shape)};
  return cast_to(ctx, to);
}

Result<TypeList> quantize_linear(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(2));
  auto output_dtype = ctx.attributes().get_int("output_dtype", 0);
  if (!output_dtype) return ctx.error(output_dtype.status().message());
  // The zero point fixes the type when present; else output_dtype (opset 21); else UINT8.
  if (*output_dtype != 0 && (*output_dtype > INT32_MAX || !dtype_is_supported(static_cast<int32_t>(*output_dtype))))
    return ctx.error("attribute 'output_dtype' is not a supported data type: " + std::to_string(*output_dtype));
  DType dtype = DType::kUInt8;
  if (ctx.has_input(2)) dtype = ctx.input_type(2).dtype;
  else if (*output_dtype != 0) dtype = static_cast<DType>(*output_dtype);
  if (ctx.has_input(2) && *output_dtype != 0 && dtype != DType::kUndefined && *output_dtype != static_cast<int64_t>(dtype))
    return ctx.error("output_dtype " + std::to_string(*output_dtype) + " differs from the zero point's type " +
                     std::string(dtype_name(dtype)));
  return TypeList{make_type(dtype, ctx.input_type(0).shape)};
}

Result<TypeList> dequantize_linear(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(2));
  if (ctx.has_input(2)) LOKA_RETURN_IF_ERROR(common_dtype(ctx, {0, 2}).status());
  // The output has the scale's type (FLOAT before opset 19, where the scale had to be FLOAT).
  return TypeList{make_type(ctx.input_type(1).dtype, ctx.input_type(0).shape)};
}

}  // namespace

void register_elementwise_rules(ShapeInferenceRegistry& registry) {
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Erf", "Gelu", "Neg", "Exp", "Log", "Abs", "Sqrt", "Reciprocal",
                         "Floor", "Ceil", "Softplus", "LeakyRelu", "Not"})
    registry.add("", op, unary);
  registry.add("", "Softmax", softmax);
  registry.add("", "LogSoftmax", softmax);
  registry.add("", "Identity", identity);
  registry.add("", "Dropout", dropout);

  registry.add("", "Add", broadcasting(2, OutputDtype::kSameAsInputs, add_element));
  registry.add("", "Sub", broadcasting(2, OutputDtype::kSameAsInputs, sub_element));
  registry.add("", "Mul", broadcasting(2, OutputDtype::kSameAsInputs, mul_element));
  registry.add("", "Div", broadcasting(2, OutputDtype::kSameAsInputs, div_element));
  registry.add("", "Pow", broadcasting(2, OutputDtype::kFirstInput));
  registry.add("", "Max", broadcasting(1, OutputDtype::kSameAsInputs, extreme_element<true>));
  registry.add("", "Min", broadcasting(1, OutputDtype::kSameAsInputs, extreme_element<false>));
  for (const char* op : {"And", "Or", "Xor"}) registry.add("", op, broadcasting(2, OutputDtype::kSameAsInputs));
  registry.add("", "Equal", broadcasting(2, OutputDtype::kBool, equal_element));
  registry.add("", "Less", broadcasting(2, OutputDtype::kBool, compare_numbers(std::less<int64_t>())));
  registry.add("", "Greater", broadcasting(2, OutputDtype::kBool, compare_numbers(std::greater<int64_t>())));
  registry.add("", "LessOrEqual", broadcasting(2, OutputDtype::kBool, compare_numbers(std::less_equal<int64_t>())));
  registry.add("", "GreaterOrEqual",
               broadcasting(2, OutputDtype::kBool, compare_numbers(std::greater_equal<int64_t>())));
  registry.add("", "Where", where);

  registry.add("", "Cast", cast);
  registry.add("", "CastLike", cast_like);
  registry.add("", "QuantizeLinear", quantize_linear);
  registry.add("", "DequantizeLinear", dequantize_linear);
}

}  // namespace loka::ir::inference
