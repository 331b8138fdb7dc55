// ============================================================================
// passes/ir/shape_inference_shape_ops.cc — inference rules for ops that make
// or reinterpret shapes: Reshape, Flatten, Transpose, Unsqueeze, Squeeze,
// Shape, Size, Expand, Tile, ConstantOfShape, Range, Constant.
//
// Shape/Size/Constant are where tracked values start; Reshape, Expand, Tile
// and ConstantOfShape are where they are used. Reshape resolves 0 (copy the
// input dim, symbol included) and -1 (cancel symbols and sizes between input
// and target, so [batch,16,8] -> [batch,-1] gives [batch,128]).
// ============================================================================
#include <algorithm>
#include <climits>
#include <cmath>

#include "passes/ir/shape_inference_helpers.h"

namespace loka::ir::inference {
namespace {

/// Dims read from a tracked shape tensor (negative or unknown elements become unknown dims).
Dims dims_from_values(const TrackedValues& values) {
  Dims out;
  for (const SymbolicInt& e : values.elements) out.push_back(e.to_dim());
  return out;
}

/// A rank-1 shape input of unknown contents still fixes the output rank when its length is known.
std::optional<size_t> shape_input_length(const InferenceContext& ctx, size_t index) {
  const TensorType& type = ctx.input_type(index);
  if (type.rank() == 1 && (*type.shape)[0].is_known()) return static_cast<size_t>((*type.shape)[0].value);
  return std::nullopt;
}

/// The dim a -1 stands for: input and target are split into known sizes and symbols, shared
/// symbols cancel, and what remains must be a size ratio or a single symbol. Unknown otherwise.
Result<Dim> infer_minus_one(const InferenceContext& ctx, const Dims& input, const Dims& target, size_t hole) {
  int64_t input_size = 1;
  int64_t target_size = 1;
  std::vector<std::string> symbols;
  for (const Dim& dim : input) {
    if (dim.is_known()) {
      if (dim.value == 0 || input_size > kMaxTensorElements / dim.value) return Dim::unknown();
      input_size *= dim.value;
    } else if (dim.symbol.empty()) {
      return Dim::unknown();
    } else {
      symbols.push_back(dim.symbol);
    }
  }
  for (size_t i = 0; i < target.size(); ++i) {
    if (i == hole) continue;
    const Dim& dim = target[i];
    if (dim.is_known()) {
      if (dim.value == 0 || target_size > kMaxTensorElements / dim.value) return Dim::unknown();
      target_size *= dim.value;
      continue;
    }
    auto it = std::find(symbols.begin(), symbols.end(), dim.symbol);
    if (dim.symbol.empty() || it == symbols.end()) return Dim::unknown();
    symbols.erase(it);
  }
  if (symbols.empty()) {
    if (input_size % target_size != 0)
      return ctx.error("cannot reshape " + describe(make_type(DType::kUndefined, input)) + " to " +
                       describe(make_type(DType::kUndefined, target)) + " with -1 at dim " + std::to_string(hole));
    return Dim::known(input_size / target_size);
  }
  if (symbols.size() == 1 && input_size == target_size) return Dim::named(symbols[0]);
  return Dim::unknown();
}

Result<TypeList> reshape(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(2));
  const TensorType& x = ctx.input_type(0);
  auto allow_zero = ctx.attributes().get_int("allowzero", 0);
  if (!allow_zero) return ctx.error(allow_zero.status().message());
  const TrackedValues* requested = ctx.input_values(1);
  if (requested == nullptr) {
    const std::optional<size_t> length = shape_input_length(ctx, 1);
    return TypeList{make_type(x.dtype, length ? std::optional<Dims>(Dims(*length, Dim::unknown())) : std::nullopt)};
  }
  Dims out;
  std::optional<size_t> hole;
  bool has_zero = false;
  for (size_t i = 0; i < requested->elements.size(); ++i) {
    const SymbolicInt& e = requested->elements[i];
    if (!e.number) {
      out.push_back(e.to_dim());
      continue;
    }
    const int64_t n = *e.number;
    if (n < -1) return ctx.error("shape has invalid dim " + std::to_string(n) + " at " + std::to_string(i));
    if (n == -1) {
      if (hole) return ctx.error("shape has more than one -1");
      hole = i;
      out.push_back(Dim::unknown());
    } else if (n == 0 && *allow_zero == 0) {
      has_zero = true;
      if (x.has_rank() && i >= x.shape->size())
        return ctx.error("shape copies dim " + std::to_string(i) + " (0) from input " + describe(x));
      out.push_back(x.has_rank() ? (*x.shape)[i] : Dim::unknown());
    } else {
      has_zero = has_zero || n == 0;
      out.push_back(Dim::known(n));
    }
  }
  if (hole && *allow_zero != 0 && has_zero) return ctx.error("shape has both 0 and -1 with allowzero=1");
  if (hole && x.has_rank()) {
    LOKA_ASSIGN_OR_RETURN(out[*hole], infer_minus_one(ctx, *x.shape, out, *hole));
  }
  const TensorType result = make_type(x.dtype, out);
  if (result.is_static()) {
    auto count = checked_element_count(result.static_shape());
    if (!count) return ctx.error("shape " + describe(result) + " is too large");
    auto input_count = x.is_static() ? checked_element_count(x.static_shape()) : Result<int64_t>(int64_t{-1});
    if (input_count && *input_count >= 0 && *input_count != *count)
      return ctx.error("cannot reshape " + describe(x) + " to " + describe(result));
  }
  if (const TrackedValues* values = ctx.input_values(0); values != nullptr && out.size() <= 1) {
    TrackedValues moved = *values;
    moved.scalar = out.empty();
    if (!moved.scalar || moved.elements.size() == 1) ctx.set_output_values(0, std::move(moved));
  }
  return TypeList{result};
}

Result<TypeList> flatten(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(1));
  const TensorType& x = ctx.input_type(0);
  auto axis = ctx.attributes().get_int("axis", 1);
  if (!axis) return ctx.error(axis.status().message());
  if (!x.has_rank()) return TypeList{make_type(x.dtype, Dims{Dim::unknown(), Dim::unknown()})};
  const int64_t rank = x.rank();
  if (*axis < -rank || *axis > rank)
    return ctx.error("axis " + std::to_string(*axis) + " is out of range for rank " + std::to_string(rank));
  const size_t split = static_cast<size_t>(*axis < 0 ? *axis + rank : *axis);
  const std::span<const Dim> dims(*x.shape);
  return TypeList{make_type(x.dtype, Dims{multiply_dims(dims.first(split)), multiply_dims(dims.subspan(split))})};
}

Result<TypeList> transpose(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(1));
  const TensorType& x = ctx.input_type(0);
  const bool has_perm = ctx.attributes().has("perm");
  auto perm = ctx.attributes().get_ints("perm", std::vector<int64_t>{});
  if (!perm) return ctx.error(perm.status().message());
  if (!x.has_rank()) {
    if (!has_perm) return TypeList{make_type(x.dtype, std::nullopt)};
    return TypeList{make_type(x.dtype, Dims(perm->size(), Dim::unknown()))};
  }
  const int rank = x.rank();
  if (!has_perm)
    for (int i = rank - 1; i >= 0; --i) perm->push_back(i);
  if (static_cast<int>(perm->size()) != rank)
    return ctx.error("perm has " + std::to_string(perm->size()) + " entries for input " + describe(x));
  LOKA_ASSIGN_OR_RETURN(const std::vector<int> axes, normalize_axes(ctx, *perm, rank, "perm"));
  Dims out;
  for (int axis : axes) out.push_back((*x.shape)[static_cast<size_t>(axis)]);
  return TypeList{make_type(x.dtype, std::move(out))};
}

Result<TypeList> unsqueeze(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(1));
  const TensorType& x = ctx.input_type(0);
  LOKA_ASSIGN_OR_RETURN(const ListArgument axes, list_argument(ctx, "axes", 1));
  if (axes.kind == ListArgument::Kind::kAbsent) return ctx.error("needs axes (attribute or input 1)");
  if (axes.kind == ListArgument::Kind::kUnknown || !x.has_rank()) {
    const std::optional<size_t> added =
        axes.kind == ListArgument::Kind::kKnown ? std::optional<size_t>(axes.values.size()) : shape_input_length(ctx, 1);
    if (!x.has_rank() || !added) return TypeList{make_type(x.dtype, std::nullopt)};
    return TypeList{make_type(x.dtype, Dims(x.shape->size() + *added, Dim::unknown()))};
  }
  const int out_rank = x.rank() + static_cast<int>(axes.values.size());
  LOKA_ASSIGN_OR_RETURN(const std::vector<int> normalized, normalize_axes(ctx, axes.values, out_rank, "axes"));
  Dims out;
  size_t next = 0;
  for (int i = 0; i < out_rank; ++i) {
    if (std::find(normalized.begin(), normalized.end(), i) != normalized.end()) out.push_back(Dim::known(1));
    else out.push_back((*x.shape)[next++]);
  }
  if (const TrackedValues* values = ctx.input_values(0); values != nullptr && values->scalar && out_rank == 1) {
    TrackedValues vector = *values;
    vector.scalar = false;
    ctx.set_output_values(0, std::move(vector));
  }
  return TypeList{make_type(x.dtype, std::move(out))};
}

Result<TypeList> squeeze(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(1));
  const TensorType& x = ctx.input_type(0);
  LOKA_ASSIGN_OR_RETURN(const ListArgument axes, list_argument(ctx, "axes", 1));
  if (!x.has_rank() || axes.kind == ListArgument::Kind::kUnknown) return TypeList{make_type(x.dtype, std::nullopt)};
  Dims out;
  if (axes.kind == ListArgument::Kind::kAbsent) {
    // Without axes every size-1 dim goes; a dim that might be 1 makes the rank unknowable.
    for (const Dim& dim : *x.shape) {
      if (!dim.is_known()) return TypeList{make_type(x.dtype, std::nullopt)};
      if (dim.value != 1) out.push_back(dim);
    }
  } else {
    LOKA_ASSIGN_OR_RETURN(const std::vector<int> normalized, normalize_axes(ctx, axes.values, x.rank(), "axes"));
    for (int axis : normalized) {
      const Dim& dim = (*x.shape)[static_cast<size_t>(axis)];
      if (dim.is_known() && dim.value != 1)
        return ctx.error("cannot squeeze axis " + std::to_string(axis) + " of size " + std::to_string(dim.value) +
                         " in " + describe(x));
    }
    for (int i = 0; i < x.rank(); ++i)
      if (std::find(normalized.begin(), normalized.end(), i) == normalized.end())
        out.push_back((*x.shape)[static_cast<size_t>(i)]);
  }
  if (const TrackedValues* values = ctx.input_values(0);
      values != nullptr && out.empty() && values->elements.size() == 1) {
    TrackedValues scalar = *values;
    scalar.scalar = true;
    ctx.set_output_values(0, std::move(scalar));
  }
  return TypeList{make_type(x.dtype, std::move(out))};
}

Result<TypeList> shape(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(1));
  const TensorType& x = ctx.input_type(0);
  auto start = ctx.attributes().get_int("start", 0);
  auto end = ctx.attributes().get_int("end", INT64_MAX);
  if (!start || !end) return ctx.error((!start ? start : end).status().message());
  if (!x.has_rank()) return TypeList{make_type(DType::kInt64, Dims{Dim::unknown()})};
  // Negative bounds count from the end; both clamp to [0, rank] (opset 15).
  const int64_t rank = x.rank();
  const auto clamp = [rank](int64_t bound) { return std::clamp(bound < 0 ? bound + rank : bound, int64_t{0}, rank); };
  const int64_t first = clamp(*start);
  const int64_t last = std::max(first, clamp(*end));
  TrackedValues values;
  for (int64_t i = first; i < last; ++i) values.elements.push_back(SymbolicInt::from_dim((*x.shape)[static_cast<size_t>(i)]));
  ctx.set_output_values(0, std::move(values));
  return TypeList{make_type(DType::kInt64, Dims{Dim::known(last - first)})};
}

Result<TypeList> size(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(1));
  const TensorType& x = ctx.input_type(0);
  if (x.has_rank()) ctx.set_output_values(0, TrackedValues{{SymbolicInt::from_dim(multiply_dims(*x.shape))}, true});
  return TypeList{make_type(DType::kInt64, Dims{})};
}

Result<TypeList> expand(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(2));
  const TensorType& x = ctx.input_type(0);
  Dims target;
  if (const TrackedValues* values = ctx.input_values(1)) {
    target = dims_from_values(*values);
  } else if (const std::optional<size_t> length = shape_input_length(ctx, 1)) {
    target.assign(*length, Dim::unknown());
  } else {
    return TypeList{make_type(x.dtype, std::nullopt)};
  }
  if (!x.has_rank()) return TypeList{make_type(x.dtype, std::nullopt)};
  Dims out = *x.shape;
  if (target.size() > out.size()) out.insert(out.begin(), target.size() - out.size(), Dim::known(1));
  const size_t offset = out.size() - target.size();
  for (size_t i = 0; i < target.size(); ++i) {
    std::optional<Dim> merged = broadcast_dim(out[offset + i], target[i]);
    if (!merged)
      return ctx.error("input " + describe(x) + " does not broadcast to shape " +
                       describe(make_type(DType::kUndefined, target)));
    out[offset + i] = *merged;
  }
  return TypeList{make_type(x.dtype, std::move(out))};
}

Result<TypeList> tile(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(2));
  const TensorType& x = ctx.input_type(0);
  if (!x.has_rank()) return TypeList{make_type(x.dtype, std::nullopt)};
  const TrackedValues* repeats = ctx.input_values(1);
  if (repeats == nullptr) return TypeList{make_type(x.dtype, Dims(x.shape->size(), Dim::unknown()))};
  if (repeats->elements.size() != x.shape->size())
    return ctx.error("repeats has " + std::to_string(repeats->elements.size()) + " entries for input " + describe(x));
  Dims out;
  for (size_t i = 0; i < x.shape->size(); ++i) {
    const SymbolicInt& r = repeats->elements[i];
    if (r.number && *r.number < 0) return ctx.error("repeats has negative entry " + std::to_string(*r.number));
    const Dim factors[2] = {(*x.shape)[i], r.to_dim()};
    out.push_back(multiply_dims(factors));
  }
  return TypeList{make_type(x.dtype, std::move(out))};
}

Result<TypeList> constant_of_shape(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(1));
  Tensor fill = Tensor::scalar_float(0.0f);
  if (ctx.attributes().has("value")) {
    auto value = ctx.attributes().get_tensor("value");
    if (!value) return ctx.error(value.status().message());
    if (value->element_count() != 1) return ctx.error("attribute 'value' must hold one element");
    fill = std::move(value).value();
  }
  const TrackedValues* shape_values = ctx.input_values(0);
  if (shape_values == nullptr) {
    const std::optional<size_t> length = shape_input_length(ctx, 0);
    return TypeList{make_type(fill.dtype(), length ? std::optional<Dims>(Dims(*length, Dim::unknown())) : std::nullopt)};
  }
  for (const SymbolicInt& e : shape_values->elements)
    if (e.number && *e.number < 0) return ctx.error("shape has negative dim " + std::to_string(*e.number));
  const TensorType out = make_type(fill.dtype(), dims_from_values(*shape_values));
  // A small integer result (e.g. a vector of ones feeding Expand) is tracked too.
  if (std::optional<TrackedValues> element = tracked_from_tensor(fill); element && out.rank() <= 1 && out.is_static()) {
    const int64_t count = out.shape->empty() ? 1 : (*out.shape)[0].value;
    if (count <= static_cast<int64_t>(kMaxTrackedElements))
      ctx.set_output_values(0, TrackedValues{std::vector<SymbolicInt>(static_cast<size_t>(count), element->elements[0]),
                                             out.rank() == 0});
  }
  return TypeList{out};
}

/// A scalar argument of Range as a double: a tracked number or a float constant.
std::optional<double> range_argument(const InferenceContext& ctx, size_t index) {
  if (const TrackedValues* values = ctx.input_values(index); values && values->elements.size() == 1) {
    const SymbolicInt& e = values->elements[0];
    return e.number ? std::optional<double>(static_cast<double>(*e.number)) : std::nullopt;
  }
  const Tensor* constant = ctx.input_constant(index);
  if (constant == nullptr || constant->element_count() != 1 || !dtype_is_float(constant->dtype())) return std::nullopt;
  return static_cast<double>(constant->to_floats()[0]);
}

Result<TypeList> range(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(3));
  LOKA_ASSIGN_OR_RETURN(const DType dtype, common_dtype(ctx, {0, 1, 2}));
  for (size_t i = 0; i < 3; ++i) {
    const TensorType& type = ctx.input_type(i);
    if (type.has_rank() && !(type.rank() == 0 || (type.rank() == 1 && (*type.shape)[0] == Dim::known(1))))
      return ctx.error("input " + std::to_string(i) + " must be a scalar, got " + describe(type));
  }
  const std::optional<double> start = range_argument(ctx, 0);
  const std::optional<double> limit = range_argument(ctx, 1);
  const std::optional<double> delta = range_argument(ctx, 2);
  if (!start || !limit || !delta) return TypeList{make_type(dtype, Dims{Dim::unknown()})};
  if (*delta == 0) return ctx.error("delta is 0");
  const double steps = std::ceil((*limit - *start) / *delta);
  if (!(steps <= static_cast<double>(kMaxTensorElements))) return ctx.error("the range is too long");
  const int64_t count = std::max<int64_t>(0, static_cast<int64_t>(steps));
  const bool integral = ctx.input_values(0) && ctx.input_values(1) && ctx.input_values(2);
  if (integral && count <= static_cast<int64_t>(kMaxTrackedElements)) {
    TrackedValues values;
    for (int64_t i = 0; i < count; ++i)
      values.elements.push_back(SymbolicInt::of(static_cast<int64_t>(*start + static_cast<double>(i) * *delta)));
    ctx.set_output_values(0, std::move(values));
  }
  return TypeList{make_type(dtype, Dims{Dim::known(count)})};
}

Result<TypeList> constant(InferenceContext& ctx) {
  const Attributes& attributes = ctx.attributes();
  if (attributes.all().size() != 1) return ctx.error("needs exactly one value attribute");
  const std::string& name = attributes.all().begin()->first;
  TensorType out;
  if (name == "value") {
    auto tensor = attributes.get_tensor("value");
    if (!tensor) return ctx.error(tensor.status().message());
    out = TensorType::of(tensor->dtype(), tensor->shape());
    if (std::optional<TrackedValues> values = tracked_from_tensor(*tensor)) ctx.set_output_values(0, std::move(*values));
  } else if (name == "value_float") {
    out = TensorType::of(DType::kFloat32, {});
  } else if (name == "value_floats") {
    auto floats = attributes.get_floats(name);
    if (!floats) return ctx.error(floats.status().message());
    out = TensorType::of(DType::kFloat32, {static_cast<int64_t>(floats->size())});
  } else if (name == "value_int" || name == "value_ints") {
    const bool scalar = name == "value_int";
    std::vector<int64_t> numbers;
    if (scalar) {
      auto value = attributes.get_int(name);
      if (!value) return ctx.error(value.status().message());
      numbers.push_back(*value);
    } else {
      auto values = attributes.get_ints(name);
      if (!values) return ctx.error(values.status().message());
      numbers = std::move(values).value();
    }
    out = TensorType::of(DType::kInt64, scalar ? Shape{} : Shape{static_cast<int64_t>(numbers.size())});
    if (numbers.size() <= kMaxTrackedElements) ctx.set_output_values(0, tracked_from_numbers(numbers, scalar));
  } else if (name == "value_string") {
    out = TensorType::of(DType::kString, {});
  } else if (name == "value_strings") {
    const auto* strings = std::get_if<std::vector<std::string>>(&attributes.all().begin()->second);
    if (strings == nullptr) return ctx.error("attribute 'value_strings' is not a list of strings");
    out = TensorType::of(DType::kString, {static_cast<int64_t>(strings->size())});
  } else {
    return ctx.error("unsupported attribute '" + name + "'");
  }
  return TypeList{out};
}

}  // namespace

void register_shape_rules(ShapeInferenceRegistry& registry) {
  registry.add("", "Reshape", reshape);
  registry.add("", "Flatten", flatten);
  registry.add("", "Transpose", transpose);
  registry.add("", "Unsqueeze", unsqueeze);
  registry.add("", "Squeeze", squeeze);
  registry.add("", "Shape", shape);
  registry.add("", "Size", size);
  registry.add("", "Expand", expand);
  registry.add("", "Tile", tile);
  registry.add("", "ConstantOfShape", constant_of_shape);
  registry.add("", "Range", range);
  registry.add("", "Constant", constant);
}

}  // namespace loka::ir::inference
