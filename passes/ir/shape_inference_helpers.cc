// ============================================================================
// passes/ir/shape_inference_helpers.cc — dim arithmetic, broadcasting, axes and
// list arguments shared by the per-op inference rules.
// ============================================================================
#include "passes/ir/shape_inference_helpers.h"

#include <algorithm>

#include "passes/ir/text_format.h"

namespace loka::ir::inference {

TensorType make_type(DType dtype, std::optional<Dims> shape) {
  TensorType type;
  type.dtype = dtype;
  type.shape = std::move(shape);
  return type;
}

std::string describe(const TensorType& type) { return print_type(type); }

Dim multiply_dims(std::span<const Dim> dims) {
  for (const Dim& dim : dims)
    if (dim.is_known() && dim.value == 0) return Dim::known(0);  // zero wins whatever the rest is
  int64_t product = 1;
  const Dim* symbol = nullptr;
  int unknown_factors = 0;
  for (const Dim& dim : dims) {
    if (dim.is_known()) {
      if (product > kMaxTensorElements / dim.value) return Dim::unknown();
      product *= dim.value;
    } else {
      ++unknown_factors;
      symbol = &dim;
    }
  }
  if (unknown_factors == 0) return Dim::known(product);
  // One symbol times known 1s is that symbol; anything else has no name.
  if (unknown_factors == 1 && product == 1 && !symbol->symbol.empty()) return *symbol;
  return Dim::unknown();
}

Dim add_to_dim(const Dim& dim, int64_t delta) {
  int64_t sum = 0;
  if (dim.is_known())
    return !__builtin_add_overflow(dim.value, delta, &sum) && sum >= 0 ? Dim::known(sum) : Dim::unknown();
  return delta == 0 ? dim : Dim::unknown();
}

std::optional<Dim> broadcast_dim(const Dim& a, const Dim& b) {
  if (a.is_known() && b.is_known()) {
    if (a.value == b.value || b.value == 1) return a;
    if (a.value == 1) return b;
    return std::nullopt;
  }
  if (a.is_known()) return a.value == 1 ? b : a;  // b is a or 1
  if (b.is_known()) return b.value == 1 ? a : b;
  if (!a.symbol.empty() && a.symbol == b.symbol) return a;
  return Dim::unknown();  // different symbols or unknowns: could be either, or 1
}

Result<std::optional<Dims>> broadcast_inputs(const InferenceContext& ctx, const std::vector<size_t>& inputs) {
  Dims out;
  for (size_t index : inputs) {
    const TensorType& type = ctx.input_type(index);
    if (!type.has_rank()) return std::optional<Dims>();
    const Dims& dims = *type.shape;
    if (dims.size() > out.size()) out.insert(out.begin(), dims.size() - out.size(), Dim::known(1));
    const size_t offset = out.size() - dims.size();
    for (size_t i = 0; i < dims.size(); ++i) {
      std::optional<Dim> merged = broadcast_dim(out[offset + i], dims[i]);
      if (!merged) {
        std::string shapes;
        for (size_t k : inputs) shapes += (shapes.empty() ? "" : ", ") + describe(ctx.input_type(k));
        return ctx.error("cannot broadcast input shapes " + shapes);
      }
      out[offset + i] = *merged;
    }
  }
  return std::optional<Dims>(std::move(out));
}

Result<DType> common_dtype(const InferenceContext& ctx, const std::vector<size_t>& inputs) {
  DType dtype = DType::kUndefined;
  size_t first = 0;
  for (size_t index : inputs) {
    const DType d = ctx.input_type(index).dtype;
    if (d == DType::kUndefined) continue;
    if (dtype == DType::kUndefined) {
      dtype = d;
      first = index;
    } else if (d != dtype) {
      return ctx.error("input " + std::to_string(first) + " is " + std::string(dtype_name(dtype)) + " but input " +
                       std::to_string(index) + " is " + std::string(dtype_name(d)));
    }
  }
  return dtype;
}

Result<int> normalize_axis(const InferenceContext& ctx, int64_t axis, int rank, const char* what) {
  if (axis < -rank || axis >= rank)
    return ctx.error(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " +
                     std::to_string(rank));
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

Result<std::vector<int>> normalize_axes(const InferenceContext& ctx, const std::vector<int64_t>& axes, int rank,
                                        const char* what) {
  std::vector<int> out;
  for (int64_t axis : axes) {
    LOKA_ASSIGN_OR_RETURN(const int normalized, normalize_axis(ctx, axis, rank, what));
    if (std::find(out.begin(), out.end(), normalized) != out.end())
      return ctx.error(std::string(what) + " repeat axis " + std::to_string(axis));
    out.push_back(normalized);
  }
  return out;
}

Result<ListArgument> list_argument(const InferenceContext& ctx, const char* attribute, size_t input_index) {
  ListArgument out;
  if (ctx.attributes().has(attribute)) {
    auto values = ctx.attributes().get_ints(attribute);
    if (!values) return ctx.error(values.status().message());
    out.kind = ListArgument::Kind::kKnown;
    out.values = std::move(values).value();
    return out;
  }
  if (!ctx.has_input(input_index)) return out;
  const TrackedValues* tracked = ctx.input_values(input_index);
  std::optional<std::vector<int64_t>> numbers = tracked ? tracked->numbers() : std::nullopt;
  if (!numbers) {
    out.kind = ListArgument::Kind::kUnknown;
    return out;
  }
  out.kind = ListArgument::Kind::kKnown;
  out.values = std::move(*numbers);
  return out;
}

std::optional<TrackedValues> tracked_from_tensor(const Tensor& tensor) {
  const DType d = tensor.dtype();
  const bool integer = d == DType::kInt64 || d == DType::kInt32 || d == DType::kInt16 || d == DType::kInt8 ||
                       d == DType::kUInt8 || d == DType::kUInt16 || d == DType::kUInt32 || d == DType::kBool;
  if (!integer || !tensor.defined() || tensor.rank() > 1 || tensor.element_count() > int64_t{kMaxTrackedElements})
    return std::nullopt;
  TrackedValues out;
  out.scalar = tensor.rank() == 0;
  for (int64_t v : tensor.to_int64s()) out.elements.push_back(SymbolicInt::of(v));
  return out;
}

TrackedValues tracked_from_numbers(const std::vector<int64_t>& numbers, bool scalar) {
  TrackedValues out;
  out.scalar = scalar;
  for (int64_t v : numbers) out.elements.push_back(SymbolicInt::of(v));
  return out;
}

std::optional<TrackedValues> combine_tracked(const std::vector<const TrackedValues*>& inputs, const ElementFn& fn) {
  size_t length = 1;
  bool scalar = true;
  for (const TrackedValues* in : inputs) {
    if (in == nullptr) return std::nullopt;
    scalar = scalar && in->scalar;
    const size_t n = in->elements.size();
    if (n == 1) continue;
    if (length != 1 && n != length) return std::nullopt;
    length = n;
  }
  TrackedValues out;
  out.scalar = scalar;
  std::vector<SymbolicInt> args(inputs.size());
  for (size_t i = 0; i < length; ++i) {
    for (size_t k = 0; k < inputs.size(); ++k) {
      const auto& elements = inputs[k]->elements;
      args[k] = elements.size() == 1 ? elements[0] : elements[i];
    }
    out.elements.push_back(fn(args));
  }
  return out;
}

}  // namespace loka::ir::inference
