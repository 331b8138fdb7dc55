// ============================================================================
// passes/ir/shape_inference_data_movement.cc — inference rules for ops that
// select or arrange data: Gather, GatherElements, Concat, Slice, Split, Pad.
//
// Gather (scalar or constant indices), Slice and Concat also propagate
// tracked values: they are the links of exporters' shape chains
// (Shape(x) -> Gather(0) -> Unsqueeze -> Concat -> Reshape).
// ============================================================================
#include <algorithm>
#include <climits>
#include <cstdlib>

#include "passes/ir/shape_inference_helpers.h"

namespace loka::ir::inference {
namespace {

Result<TypeList> gather(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(2));
  const TensorType& data = ctx.input_type(0);
  const TensorType& indices = ctx.input_type(1);
  if (indices.dtype != DType::kUndefined && indices.dtype != DType::kInt64 && indices.dtype != DType::kInt32)
    return ctx.error("indices must be INT32 or INT64, got " + std::string(dtype_name(indices.dtype)));
  auto axis_attr = ctx.attributes().get_int("axis", 0);
  if (!axis_attr) return ctx.error(axis_attr.status().message());
  if (!data.has_rank()) return TypeList{make_type(data.dtype, std::nullopt)};
  if (data.rank() == 0) return ctx.error("data must have rank >= 1, got " + describe(data));
  LOKA_ASSIGN_OR_RETURN(const int axis, normalize_axis(ctx, *axis_attr, data.rank(), "axis"));
  const Dim& extent = (*data.shape)[static_cast<size_t>(axis)];
  const TrackedValues* index_values = ctx.input_values(1);
  if (index_values != nullptr && extent.is_known())
    for (const SymbolicInt& index : index_values->elements)
      if (index.number && (*index.number < -extent.value || *index.number >= extent.value))
        return ctx.error("index " + std::to_string(*index.number) + " is out of range for dim " + std::to_string(axis) +
                         " of " + describe(data));
  const TrackedValues* data_values = ctx.input_values(0);
  if (data_values != nullptr && index_values != nullptr && axis == 0) {
    const auto length = static_cast<int64_t>(data_values->elements.size());
    TrackedValues picked;
    picked.scalar = index_values->scalar;
    for (const SymbolicInt& index : index_values->elements) {
      const int64_t i = !index.number ? -1 : *index.number < 0 ? *index.number + length : *index.number;
      picked.elements.push_back(i >= 0 && i < length ? data_values->elements[static_cast<size_t>(i)]
                                                     : SymbolicInt::unknown());
    }
    ctx.set_output_values(0, std::move(picked));
  }
  if (!indices.has_rank()) return TypeList{make_type(data.dtype, std::nullopt)};
  Dims out(data.shape->begin(), data.shape->begin() + axis);
  out.insert(out.end(), indices.shape->begin(), indices.shape->end());
  out.insert(out.end(), data.shape->begin() + axis + 1, data.shape->end());
  return TypeList{make_type(data.dtype, std::move(out))};
}

Result<TypeList> gather_elements(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(2));
  const TensorType& data = ctx.input_type(0);
  const TensorType& indices = ctx.input_type(1);
  if (indices.dtype != DType::kUndefined && indices.dtype != DType::kInt64 && indices.dtype != DType::kInt32)
    return ctx.error("indices must be INT32 or INT64, got " + std::string(dtype_name(indices.dtype)));
  auto axis = ctx.attributes().get_int("axis", 0);
  if (!axis) return ctx.error(axis.status().message());
  if (data.has_rank() && indices.has_rank() && data.rank() != indices.rank())
    return ctx.error("data " + describe(data) + " and indices " + describe(indices) + " differ in rank");
  const int rank = data.has_rank() ? data.rank() : indices.rank();
  if (rank >= 0) LOKA_RETURN_IF_ERROR(normalize_axis(ctx, *axis, rank, "axis").status());
  return TypeList{make_type(data.dtype, indices.shape)};
}

Result<TypeList> concat(InferenceContext& ctx) { return concatenated_type(ctx, 0); }

}  // namespace

Result<TypeList> concatenated_type(InferenceContext& ctx, size_t first_input) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(first_input + 1));
  if (!ctx.attributes().has("axis")) return ctx.error("needs attribute 'axis'");
  auto axis_attr = ctx.attributes().get_int("axis");
  if (!axis_attr) return ctx.error(axis_attr.status().message());
  std::vector<size_t> inputs;
  for (size_t i = first_input; i < ctx.input_count(); ++i) {
    if (!ctx.has_input(i)) return ctx.error("input " + std::to_string(i) + " is missing");
    inputs.push_back(i);
  }
  LOKA_ASSIGN_OR_RETURN(const DType dtype, common_dtype(ctx, inputs));
  const TensorType* first = nullptr;
  for (size_t i : inputs) {
    const TensorType& type = ctx.input_type(i);
    if (!type.has_rank()) continue;
    if (first == nullptr) first = &type;
    else if (type.rank() != first->rank())
      return ctx.error("inputs differ in rank: " + describe(*first) + " vs " + describe(type));
  }
  if (first == nullptr) return TypeList{make_type(dtype, std::nullopt)};
  LOKA_ASSIGN_OR_RETURN(const int axis, normalize_axis(ctx, *axis_attr, first->rank(), "axis"));
  Dims out = *first->shape;
  Dim total = Dim::known(0);
  for (size_t i : inputs) {
    const TensorType& type = ctx.input_type(i);
    if (!type.has_rank()) {
      total = Dim::unknown();
      continue;
    }
    for (size_t d = 0; d < out.size(); ++d) {
      const Dim& dim = (*type.shape)[d];
      if (static_cast<int>(d) == axis) {
        int64_t sum = 0;
        const bool fits = total.is_known() && dim.is_known() && !__builtin_add_overflow(total.value, dim.value, &sum);
        total = fits ? Dim::known(sum) : Dim::unknown();
        continue;
      }
      if (dim.is_known() && out[d].is_known() && dim.value != out[d].value)
        return ctx.error("inputs differ in dim " + std::to_string(d) + ": " + describe(*first) + " vs " +
                         describe(type));
      if (dim.is_known() || (!out[d].is_known() && out[d].symbol.empty())) out[d] = dim;  // known > symbol > unknown
    }
  }
  out[static_cast<size_t>(axis)] = total;
  if (first->rank() == 1 && first_input == 0) {  // a shape chain's values (ConcatQuant encodes its own)
    TrackedValues joined;
    bool all = true;
    for (size_t i : inputs) {
      const TrackedValues* values = ctx.input_values(i);
      if (values == nullptr || values->scalar) {
        all = false;
        break;
      }
      joined.elements.insert(joined.elements.end(), values->elements.begin(), values->elements.end());
    }
    if (all) ctx.set_output_values(0, std::move(joined));
  }
  return TypeList{make_type(dtype, std::move(out))};
}

namespace {

/// `x` with unknown sizes along `axes` (every axis when the axes are not known): what can be said
/// of Slice or Pad when the amounts are not constants.
Result<TypeList> changed_along(const InferenceContext& ctx, const TensorType& x, const ListArgument& axes) {
  Dims out(x.shape->size(), Dim::unknown());
  if (axes.kind == ListArgument::Kind::kKnown) {
    out = *x.shape;
    LOKA_ASSIGN_OR_RETURN(const std::vector<int> normalized, normalize_axes(ctx, axes.values, x.rank(), "axes"));
    for (int axis : normalized) out[static_cast<size_t>(axis)] = Dim::unknown();
  }
  return TypeList{make_type(x.dtype, std::move(out))};
}

// ---- Slice ----------------------------------------------------------------

struct SliceBounds {
  int64_t start = 0;
  int64_t end = 0;  ///< exclusive, after clamping
  int64_t step = 1;
  int64_t length = 0;
};

/// ONNX Slice clamping of one axis of extent `dim`.
SliceBounds slice_bounds(int64_t dim, int64_t start, int64_t end, int64_t step) {
  SliceBounds b;
  b.step = step;
  if (dim == 0) return b;  // nothing to take (and the clamps below need dim >= 1)
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    b.start = std::clamp<int64_t>(start, 0, dim);
    b.end = std::clamp<int64_t>(end, 0, dim);
    b.length = b.end > b.start ? (b.end - b.start - 1) / step + 1 : 0;
  } else {
    b.start = std::clamp<int64_t>(start, 0, dim - 1);
    b.end = std::clamp<int64_t>(end, -1, dim - 1);
    const int64_t stride = step == INT64_MIN ? INT64_MAX : -step;
    b.length = b.start > b.end ? (b.start - b.end - 1) / stride + 1 : 0;
  }
  return b;
}

/// True when the slice keeps a whole axis whatever its extent (0:INT_MAX:1 or -1:INT_MIN:-1).
bool keeps_whole_axis(int64_t start, int64_t end, int64_t step) {
  constexpr int64_t kLarge = INT32_MAX;  // exporters write INT32_MAX or INT64_MAX for "to the end"
  if (step == 1) return start == 0 && end >= kLarge;
  if (step == -1) return start == -1 && end <= -kLarge;
  return false;
}

Result<TypeList> slice(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(1));
  const TensorType& x = ctx.input_type(0);
  LOKA_ASSIGN_OR_RETURN(const ListArgument starts, list_argument(ctx, "starts", 1));
  LOKA_ASSIGN_OR_RETURN(const ListArgument ends, list_argument(ctx, "ends", 2));
  LOKA_ASSIGN_OR_RETURN(ListArgument axes, list_argument(ctx, "axes", 3));
  LOKA_ASSIGN_OR_RETURN(ListArgument steps, list_argument(ctx, "steps", 4));
  using Kind = ListArgument::Kind;
  if (starts.kind == Kind::kAbsent || ends.kind == Kind::kAbsent) return ctx.error("needs starts and ends");
  if (!x.has_rank()) return TypeList{make_type(x.dtype, std::nullopt)};
  const int rank = x.rank();
  if (starts.kind == Kind::kUnknown || ends.kind == Kind::kUnknown || axes.kind == Kind::kUnknown ||
      steps.kind == Kind::kUnknown) {
    return changed_along(ctx, x, axes);
  }
  const size_t n = starts.values.size();
  if (axes.kind == Kind::kAbsent)
    for (size_t i = 0; i < n; ++i) axes.values.push_back(static_cast<int64_t>(i));
  if (steps.kind == Kind::kAbsent) steps.values.assign(n, 1);
  if (ends.values.size() != n || axes.values.size() != n || steps.values.size() != n)
    return ctx.error("starts, ends, axes and steps differ in length");
  LOKA_ASSIGN_OR_RETURN(const std::vector<int> normalized, normalize_axes(ctx, axes.values, rank, "axes"));
  Dims out = *x.shape;
  for (size_t i = 0; i < n; ++i) {
    const int64_t start = starts.values[i];
    const int64_t end = ends.values[i];
    const int64_t step = steps.values[i];
    if (step == 0) return ctx.error("steps must not be 0");
    Dim& dim = out[static_cast<size_t>(normalized[i])];
    if (dim.is_known()) {
      dim = Dim::known(slice_bounds(dim.value, start, end, step).length);
    } else if (!keeps_whole_axis(start, end, step)) {
      dim = Dim::unknown();
    }
  }
  // A tracked vector is sliced along its only axis (bounds taken from the elements themselves).
  const TrackedValues* values = ctx.input_values(0);
  if (values != nullptr && !values->scalar && rank == 1 && n <= 1) {
    TrackedValues picked;
    if (n == 0) {
      picked = *values;
    } else {
      const SliceBounds b =
          slice_bounds(static_cast<int64_t>(values->elements.size()), starts.values[0], ends.values[0], steps.values[0]);
      for (int64_t k = 0, i = b.start; k < b.length; ++k, i += b.step)
        picked.elements.push_back(values->elements[static_cast<size_t>(i)]);
    }
    ctx.set_output_values(0, std::move(picked));
  }
  return TypeList{make_type(x.dtype, std::move(out))};
}

// ---- Split ----------------------------------------------------------------

Result<TypeList> split(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(1));
  const TensorType& x = ctx.input_type(0);
  const size_t n = ctx.output_count();
  auto axis_attr = ctx.attributes().get_int("axis", 0);
  if (!axis_attr) return ctx.error(axis_attr.status().message());
  LOKA_ASSIGN_OR_RETURN(const ListArgument sizes, list_argument(ctx, "split", 1));
  const bool has_num_outputs = ctx.attributes().has("num_outputs");
  if (has_num_outputs) {
    auto num_outputs = ctx.attributes().get_int("num_outputs");
    if (!num_outputs) return ctx.error(num_outputs.status().message());
    if (*num_outputs != static_cast<int64_t>(n))
      return ctx.error("num_outputs is " + std::to_string(*num_outputs) + " but the node has " + std::to_string(n) +
                       " outputs");
  }
  if (!x.has_rank()) return TypeList(n, make_type(x.dtype, std::nullopt));
  LOKA_ASSIGN_OR_RETURN(const int axis, normalize_axis(ctx, *axis_attr, x.rank(), "axis"));
  const Dim& extent = (*x.shape)[static_cast<size_t>(axis)];
  std::vector<Dim> pieces(n, Dim::unknown());
  if (sizes.kind == ListArgument::Kind::kKnown) {
    if (sizes.values.size() != n)
      return ctx.error("split has " + std::to_string(sizes.values.size()) + " sizes for " + std::to_string(n) +
                       " outputs");
    int64_t total = 0;
    for (size_t i = 0; i < n; ++i) {
      if (sizes.values[i] < 0) return ctx.error("split has negative size " + std::to_string(sizes.values[i]));
      if (sizes.values[i] > kMaxTensorElements) return ctx.error("split size is too large");
      total += sizes.values[i];
      pieces[i] = Dim::known(sizes.values[i]);
    }
    if (extent.is_known() && total != extent.value)
      return ctx.error("split sizes sum to " + std::to_string(total) + " but dim " + std::to_string(axis) + " of " +
                       describe(x) + " is " + std::to_string(extent.value));
  } else if (sizes.kind == ListArgument::Kind::kAbsent && extent.is_known() && n > 0) {
    const auto count = static_cast<int64_t>(n);
    if (has_num_outputs) {
      // opset 18: ceil-sized chunks, the last one smaller.
      const int64_t chunk = (extent.value + count - 1) / count;
      const int64_t last = extent.value - chunk * (count - 1);
      if (last < 0)
        return ctx.error("dim " + std::to_string(axis) + " of " + describe(x) + " cannot be split into " +
                         std::to_string(count) + " chunks");
      for (size_t i = 0; i < n; ++i) pieces[i] = Dim::known(i + 1 == n ? last : chunk);
    } else {
      if (extent.value % count != 0)
        return ctx.error("dim " + std::to_string(axis) + " of " + describe(x) + " does not split evenly into " +
                         std::to_string(count) + " outputs");
      pieces.assign(n, Dim::known(extent.value / count));
    }
  }
  TypeList out;
  for (const Dim& piece : pieces) {
    Dims dims = *x.shape;
    dims[static_cast<size_t>(axis)] = piece;
    out.push_back(make_type(x.dtype, std::move(dims)));
  }
  return out;
}

// ---- Pad ------------------------------------------------------------------

Result<TypeList> pad(InferenceContext& ctx) {
  LOKA_RETURN_IF_ERROR(ctx.require_inputs(1));
  const TensorType& x = ctx.input_type(0);
  LOKA_ASSIGN_OR_RETURN(const ListArgument pads, list_argument(ctx, "pads", 1));
  LOKA_ASSIGN_OR_RETURN(ListArgument axes, list_argument(ctx, "axes", 3));
  if (pads.kind == ListArgument::Kind::kAbsent) return ctx.error("needs pads (attribute or input 1)");
  if (!x.has_rank()) return TypeList{make_type(x.dtype, std::nullopt)};
  const int rank = x.rank();
  if (axes.kind == ListArgument::Kind::kAbsent) {
    axes.kind = ListArgument::Kind::kKnown;
    for (int i = 0; i < rank; ++i) axes.values.push_back(i);
  }
  if (pads.kind == ListArgument::Kind::kUnknown || axes.kind == ListArgument::Kind::kUnknown) {
    return changed_along(ctx, x, axes);
  }
  LOKA_ASSIGN_OR_RETURN(const std::vector<int> normalized, normalize_axes(ctx, axes.values, rank, "axes"));
  const size_t n = normalized.size();
  if (pads.values.size() != 2 * n)
    return ctx.error("pads has " + std::to_string(pads.values.size()) + " entries for " + std::to_string(n) + " axes");
  Dims out = *x.shape;
  for (size_t i = 0; i < n; ++i) {
    const int64_t before = pads.values[i];
    const int64_t after = pads.values[i + n];
    if (std::abs(before) > kMaxTensorElements || std::abs(after) > kMaxTensorElements)
      return ctx.error("pads entry is too large");
    Dim& dim = out[static_cast<size_t>(normalized[i])];
    const Dim padded = add_to_dim(dim, before + after);
    if (dim.is_known() && !padded.is_known())
      return ctx.error("pads " + std::to_string(before) + "," + std::to_string(after) + " remove more than dim " +
                       std::to_string(normalized[i]) + " of " + describe(x));
    dim = padded;
  }
  return TypeList{make_type(x.dtype, std::move(out))};
}

}  // namespace

void register_data_movement_rules(ShapeInferenceRegistry& registry) {
  registry.add("", "Gather", gather);
  registry.add("", "GatherElements", gather_elements);
  registry.add("", "Concat", concat);
  registry.add("", "Slice", slice);
  registry.add("", "Split", split);
  registry.add("", "Pad", pad);
}

}  // namespace loka::ir::inference
