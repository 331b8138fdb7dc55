// ============================================================================
// runtime/ops/shape_ops.cc — ops that change a tensor's shape or make small
// tensors: Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout (inference),
// Transpose, Expand, Shape, Size, Constant, ConstantOfShape, Range.
//
// ONNX semantics for opsets up to 22, older opsets accepted where they differ
// only in where an argument lives (Squeeze/Unsqueeze axes as an attribute
// before 13). Ops that only reinterpret the shape return a view sharing the
// input's storage (Tensor::reshaped), so exporters' Reshape/Unsqueeze chains
// cost nothing. Data-copying ops work on any dtype by moving bytes.
// ============================================================================
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "runtime/op_kernel.h"
#include "runtime/ops/index_map_copy.h"
#include "runtime/ops/op_helpers.h"

namespace loka {
namespace {

using KernelResult = Result<std::unique_ptr<OpKernel>>;

/// Registers an op whose kernel needs nothing from its node.
/// Validated axes (normalized to [0, rank), no repeats); `what` names the list in errors.
Result<std::vector<int>> normalize_axes(const std::vector<int64_t>& axes, int rank, const char* what) {
  std::vector<int> out;
  for (int64_t axis : axes) {
    auto normalized = ops::normalize_axis(axis, rank);
    if (!normalized) return normalized.status().with_context(std::string(what) + ": ");
    if (std::find(out.begin(), out.end(), *normalized) != out.end())
      return Status::error(std::string(what) + " repeats axis " + std::to_string(axis));
    out.push_back(*normalized);
  }
  return out;
}

// ---------------------------------------------------------------------------
// Reshape: 0 copies the input dim (unless allowzero), -1 is inferred.

Result<Shape> reshape_target(const Shape& input, const std::vector<int64_t>& requested, bool allow_zero) {
  Shape out(requested.size());
  int inferred = -1;
  int64_t known = 1;
  bool has_zero = false;
  for (size_t i = 0; i < requested.size(); ++i) {
    int64_t dim = requested[i];
    if (dim == -1) {
      if (inferred >= 0) return Status::error("shape " + shape_to_string(requested) + " has more than one -1");
      inferred = static_cast<int>(i);
      continue;
    }
    if (dim < -1) return Status::error("shape " + shape_to_string(requested) + " has invalid dim " + std::to_string(dim));
    if (dim == 0) {
      has_zero = true;
      if (!allow_zero) {
        if (i >= input.size())
          return Status::error("shape " + shape_to_string(requested) + " copies dim " + std::to_string(i) +
                               " (0) from input of rank " + std::to_string(input.size()));
        dim = input[i];
      }
    }
    out[i] = dim;
    if (dim != 0 && known > kMaxTensorElements / dim)
      return Status::error("shape " + shape_to_string(requested) + " is too large");
    known *= dim;
  }
  const int64_t total = element_count(input);
  if (inferred >= 0) {
    if (allow_zero && has_zero)
      return Status::error("shape " + shape_to_string(requested) + " has both 0 and -1 with allowzero=1");
    if (known == 0 || total % known != 0)
      return Status::error("cannot reshape " + shape_to_string(input) + " to " + shape_to_string(requested) +
                           ": -1 cannot be inferred");
    out[static_cast<size_t>(inferred)] = total / known;
  } else if (known != total) {
    return Status::error("cannot reshape " + shape_to_string(input) + " (" + std::to_string(total) + " elements) to " +
                         shape_to_string(out));
  }
  return out;
}

KernelResult make_reshape(const KernelInit& init) {
  LOKA_ASSIGN_OR_RETURN(const int64_t allow_zero, init.attributes.get_int("allowzero", 0));
  return make_function_kernel([allow_zero](std::span<const Tensor> in, std::span<Tensor> out, KernelContext&) {
    LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "data"));
    LOKA_RETURN_IF_ERROR(ops::require_input(in, 1, "shape"));
    LOKA_ASSIGN_OR_RETURN(const std::vector<int64_t> requested, ops::read_int_list(in[1], "shape"));
    LOKA_ASSIGN_OR_RETURN(Shape target, reshape_target(in[0].shape(), requested, allow_zero != 0));
    out[0] = in[0].reshaped(std::move(target));
    return Status::ok();
  });
}

// ---------------------------------------------------------------------------
// Flatten, Squeeze, Unsqueeze: views.

KernelResult make_flatten(const KernelInit& init) {
  LOKA_ASSIGN_OR_RETURN(const int64_t axis, init.attributes.get_int("axis", 1));
  return make_function_kernel([axis](std::span<const Tensor> in, std::span<Tensor> out, KernelContext&) {
    LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "input"));
    const Tensor& x = in[0];
    // Unlike most ops, Flatten's axis may equal the rank (all dims go to the outer product).
    if (axis < -x.rank() || axis > x.rank())
      return Status::error("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(x.rank()));
    const int split = static_cast<int>(axis < 0 ? axis + x.rank() : axis);
    int64_t outer = 1;
    for (int d = 0; d < split; ++d) outer *= x.dim(d);
    int64_t inner = 1;
    for (int d = split; d < x.rank(); ++d) inner *= x.dim(d);
    out[0] = x.reshaped({outer, inner});
    return Status::ok();
  });
}

/// Axes from the attribute (opset < 13) or the optional input 1 (opset >= 13).
struct AxesSource {
  bool from_input = false;
  std::optional<std::vector<int64_t>> attribute;
};

Result<AxesSource> axes_source(const KernelInit& init) {
  AxesSource source;
  source.from_input = init.opset >= 13;
  if (!source.from_input && init.attributes.has("axes")) {
    LOKA_ASSIGN_OR_RETURN(source.attribute, init.attributes.get_ints("axes"));
  }
  return source;
}

/// The axes of this call, or nullopt when none were given.
Result<std::optional<std::vector<int64_t>>> read_axes(const AxesSource& source, std::span<const Tensor> in) {
  if (!source.from_input) return source.attribute;
  if (in.size() < 2 || !in[1].defined()) return std::optional<std::vector<int64_t>>();
  LOKA_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ops::read_int_list(in[1], "axes"));
  return std::optional<std::vector<int64_t>>(std::move(axes));
}

KernelResult make_squeeze(const KernelInit& init) {
  LOKA_ASSIGN_OR_RETURN(const AxesSource source, axes_source(init));
  return make_function_kernel([source](std::span<const Tensor> in, std::span<Tensor> out, KernelContext&) {
    LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "data"));
    const Tensor& x = in[0];
    LOKA_ASSIGN_OR_RETURN(const auto axes, read_axes(source, in));
    std::vector<bool> drop(static_cast<size_t>(x.rank()), false);
    if (axes) {
      LOKA_ASSIGN_OR_RETURN(const std::vector<int> normalized, normalize_axes(*axes, x.rank(), "axes"));
      for (int axis : normalized) {
        if (x.dim(axis) != 1)
          return Status::error("cannot squeeze axis " + std::to_string(axis) + " of size " + std::to_string(x.dim(axis)) +
                               " in shape " + shape_to_string(x.shape()));
        drop[static_cast<size_t>(axis)] = true;
      }
    } else {
      for (int d = 0; d < x.rank(); ++d) drop[static_cast<size_t>(d)] = x.dim(d) == 1;
    }
    Shape shape;
    for (int d = 0; d < x.rank(); ++d)
      if (!drop[static_cast<size_t>(d)]) shape.push_back(x.dim(d));
    out[0] = x.reshaped(std::move(shape));
    return Status::ok();
  });
}

KernelResult make_unsqueeze(const KernelInit& init) {
  LOKA_ASSIGN_OR_RETURN(const AxesSource source, axes_source(init));
  if (!source.from_input && !source.attribute) return Status::error("missing required attribute 'axes'");
  return make_function_kernel([source](std::span<const Tensor> in, std::span<Tensor> out, KernelContext&) {
    LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "data"));
    const Tensor& x = in[0];
    LOKA_ASSIGN_OR_RETURN(const auto axes, read_axes(source, in));
    if (!axes) return Status::error("missing input 1 (axes)");
    const int out_rank = x.rank() + static_cast<int>(axes->size());
    LOKA_ASSIGN_OR_RETURN(const std::vector<int> normalized, normalize_axes(*axes, out_rank, "axes"));
    std::vector<bool> inserted(static_cast<size_t>(out_rank), false);
    for (int axis : normalized) inserted[static_cast<size_t>(axis)] = true;
    Shape shape;
    int next = 0;
    for (int d = 0; d < out_rank; ++d) shape.push_back(inserted[static_cast<size_t>(d)] ? 1 : x.dim(next++));
    out[0] = x.reshaped(std::move(shape));
    return Status::ok();
  });
}

// ---------------------------------------------------------------------------
// Dropout at inference: the identity; the optional mask is all "kept".

/// Writes the value one in `dtype` (Dropout's mask before opset 10 has the data's type).
Status write_one(DType dtype, std::byte* dst) {
  const auto put = [dst](auto value) { std::memcpy(dst, &value, sizeof(value)); };
  switch (dtype) {
    case DType::kFloat32: put(1.0f); break;
    case DType::kFloat64: put(1.0); break;
    case DType::kFloat16: put(uint16_t{0x3C00}); break;
    case DType::kBFloat16: put(uint16_t{0x3F80}); break;
    case DType::kFloat8E4M3FN: put(uint8_t{0x38}); break;
    case DType::kFloat8E5M2: put(uint8_t{0x3C}); break;
    default: return Status::error("no mask of type " + std::string(dtype_name(dtype)));
  }
  return Status::ok();
}

KernelResult make_dropout(const KernelInit& init) {
  const bool bool_mask = init.opset >= 10;
  return make_function_kernel([bool_mask](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
    LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "data"));
    const Tensor& x = in[0];
    // Training mode (opset >= 12) with a non-zero ratio would drop at random: refused,
    // since LoKA only runs inference and results must be reproducible.
    if (in.size() > 2 && in[2].defined()) {
      if (in[2].dtype() != DType::kBool || in[2].element_count() != 1)
        return Status::error("training_mode must be a BOOL scalar, got " + std::string(dtype_name(in[2].dtype())) + " " +
                             shape_to_string(in[2].shape()));
      float ratio = 0.5f;
      if (in.size() > 1 && in[1].defined()) {
        if (!dtype_is_float(in[1].dtype()) || in[1].element_count() != 1)
          return Status::error("ratio must be a floating-point scalar");
        ratio = in[1].to_floats()[0];
      }
      if (in[2].data<uint8_t>()[0] != 0 && ratio != 0.0f)
        return Status::error("training_mode=true with ratio " + std::to_string(ratio) + " is not supported (inference only)");
    }
    out[0] = x;
    if (out.size() > 1) {
      const DType mask_type = bool_mask ? DType::kBool : x.dtype();
      LOKA_ASSIGN_OR_RETURN(out[1], context.allocate(mask_type, x.shape()));
      std::byte* mask = static_cast<std::byte*>(out[1].raw());
      const size_t size = dtype_size(mask_type);
      if (mask_type == DType::kBool || !dtype_is_float(mask_type)) {
        // Booleans and integers: the value 1 in little-endian bytes.
        if (size == 0) return Status::error("no mask of type " + std::string(dtype_name(mask_type)));
        std::memset(mask, 0, out[1].byte_size());
        for (int64_t i = 0; i < x.element_count(); ++i) mask[static_cast<size_t>(i) * size] = std::byte{1};
      } else {
        for (int64_t i = 0; i < x.element_count(); ++i) LOKA_RETURN_IF_ERROR(write_one(mask_type, mask + i * size));
      }
    }
    return Status::ok();
  });
}

// ---------------------------------------------------------------------------
// Transpose and Expand: strided copies through per-axis maps.

KernelResult make_transpose(const KernelInit& init) {
  std::optional<std::vector<int64_t>> perm;
  if (init.attributes.has("perm")) {
    LOKA_ASSIGN_OR_RETURN(perm, init.attributes.get_ints("perm"));
  }
  return make_function_kernel([perm](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
    LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "data"));
    const Tensor& x = in[0];
    LOKA_RETURN_IF_ERROR(ops::require_copyable(x, "data"));
    const int rank = x.rank();
    std::vector<int64_t> order(static_cast<size_t>(rank));
    if (perm) {
      order = *perm;
      std::vector<bool> seen(static_cast<size_t>(rank), false);
      bool valid = static_cast<int>(order.size()) == rank;
      for (size_t i = 0; valid && i < order.size(); ++i) {
        valid = order[i] >= 0 && order[i] < rank && !seen[static_cast<size_t>(order[i])];
        if (valid) seen[static_cast<size_t>(order[i])] = true;
      }
      if (!valid)
        return Status::error("perm " + shape_to_string(order) + " is not a permutation of the axes of shape " +
                             shape_to_string(x.shape()));
    } else {
      for (int d = 0; d < rank; ++d) order[static_cast<size_t>(d)] = rank - 1 - d;
    }
    const std::vector<int64_t> strides = ops::contiguous_strides(x.shape());
    Shape shape(static_cast<size_t>(rank));
    std::vector<ops::AxisMap> maps(static_cast<size_t>(rank));
    for (size_t d = 0; d < order.size(); ++d) {
      const size_t from = static_cast<size_t>(order[d]);
      shape[d] = x.shape()[from];
      maps[d] = ops::AxisMap::strided(shape[d], 0, strides[from]);
    }
    LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(x.dtype(), shape));
    ops::copy_by_axis_maps(static_cast<const std::byte*>(x.raw()), maps, dtype_size(x.dtype()), nullptr,
                           static_cast<std::byte*>(out[0].raw()));
    return Status::ok();
  });
}

Status run_expand(std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "input"));
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 1, "shape"));
  const Tensor& x = in[0];
  LOKA_RETURN_IF_ERROR(ops::require_copyable(x, "input"));
  LOKA_ASSIGN_OR_RETURN(const std::vector<int64_t> requested, ops::read_int_list(in[1], "shape"));
  for (int64_t dim : requested)
    if (dim < 0) return Status::error("shape " + shape_to_string(requested) + " has a negative dim");
  auto target = ops::broadcast_shapes(x.shape(), requested);
  if (!target)
    return Status::error("cannot expand " + shape_to_string(x.shape()) + " to " + shape_to_string(requested) +
                         ": not broadcastable");
  LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(x.dtype(), *target));
  const std::vector<int64_t> strides = ops::broadcast_strides(x.shape(), *target);
  std::vector<ops::AxisMap> maps(target->size());
  for (size_t d = 0; d < target->size(); ++d) maps[d] = ops::AxisMap::strided((*target)[d], 0, strides[d]);
  ops::copy_by_axis_maps(static_cast<const std::byte*>(x.raw()), maps, dtype_size(x.dtype()), nullptr,
                         static_cast<std::byte*>(out[0].raw()));
  return Status::ok();
}

// ---------------------------------------------------------------------------
// Shape and Size.

KernelResult make_shape(const KernelInit& init) {
  LOKA_ASSIGN_OR_RETURN(const int64_t start, init.attributes.get_int("start", 0));
  std::optional<int64_t> end;
  if (init.attributes.has("end")) {
    LOKA_ASSIGN_OR_RETURN(end, init.attributes.get_int("end"));
  }
  return make_function_kernel([start, end](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
    LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "data"));
    const Shape& shape = in[0].shape();
    const int64_t rank = static_cast<int64_t>(shape.size());
    // Negative bounds count from the back; both are clamped to [0, rank] (ONNX 15).
    const auto clamp = [rank](int64_t bound) { return std::clamp(bound < 0 ? bound + rank : bound, int64_t{0}, rank); };
    const int64_t first = clamp(start);
    const int64_t last = std::max(first, clamp(end.value_or(rank)));
    LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(DType::kInt64, {last - first}));
    std::copy(shape.begin() + first, shape.begin() + last, out[0].data<int64_t>());
    return Status::ok();
  });
}

Status run_size(std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "data"));
  LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(DType::kInt64, {}));
  out[0].data<int64_t>()[0] = in[0].element_count();
  return Status::ok();
}

// ---------------------------------------------------------------------------
// Constant and ConstantOfShape.

KernelResult make_constant(const KernelInit& init) {
  const Attributes& attributes = init.attributes;
  if (attributes.all().size() != 1)
    return Status::error("Constant needs exactly one of value, value_float(s), value_int(s); got " +
                         std::to_string(attributes.all().size()) + " attributes");
  const std::string& name = attributes.all().begin()->first;
  Tensor value;
  if (name == "value") {
    LOKA_ASSIGN_OR_RETURN(value, attributes.get_tensor("value"));
  } else if (name == "value_float") {
    LOKA_ASSIGN_OR_RETURN(const float v, attributes.get_float(name));
    value = Tensor::scalar_float(v);
  } else if (name == "value_floats") {
    LOKA_ASSIGN_OR_RETURN(const std::vector<float> v, attributes.get_floats(name));
    value = Tensor::from_floats({static_cast<int64_t>(v.size())}, v);
  } else if (name == "value_int") {
    LOKA_ASSIGN_OR_RETURN(const int64_t v, attributes.get_int(name));
    value = Tensor::from_int64s({}, std::span<const int64_t>(&v, 1));
  } else if (name == "value_ints") {
    LOKA_ASSIGN_OR_RETURN(const std::vector<int64_t> v, attributes.get_ints(name));
    value = Tensor::from_int64s({static_cast<int64_t>(v.size())}, v);
  } else if (name == "sparse_value" || name == "value_string" || name == "value_strings") {
    return Status::error("Constant attribute '" + name + "' is not supported (sparse and string tensors)");
  } else {
    return Status::error("Constant has unknown attribute '" + name + "'");
  }
  // Kernels never write their inputs, so every run can hand out the same tensor.
  return make_function_kernel([value](std::span<const Tensor>, std::span<Tensor> out, KernelContext&) {
    out[0] = value;
    return Status::ok();
  });
}

KernelResult make_constant_of_shape(const KernelInit& init) {
  Tensor value = Tensor::scalar_float(0.0f);
  if (init.attributes.has("value")) {
    LOKA_ASSIGN_OR_RETURN(value, init.attributes.get_tensor("value"));
    if (value.element_count() != 1)
      return Status::error("attribute 'value' must hold one element, got shape " + shape_to_string(value.shape()));
    LOKA_RETURN_IF_ERROR(ops::require_copyable(value, "attribute 'value'"));
  }
  return make_function_kernel([value](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
    LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "input"));
    LOKA_ASSIGN_OR_RETURN(const std::vector<int64_t> shape, ops::read_int_list(in[0], "input"));
    for (int64_t dim : shape)
      if (dim < 0) return Status::error("shape " + shape_to_string(shape) + " has a negative dim");
    LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(value.dtype(), shape));
    const size_t size = dtype_size(value.dtype());
    std::byte* dst = static_cast<std::byte*>(out[0].raw());
    const auto* src = static_cast<const std::byte*>(value.raw());
    for (int64_t i = 0; i < out[0].element_count(); ++i) std::memcpy(dst + i * size, src, size);
    return Status::ok();
  });
}

// ---------------------------------------------------------------------------
// Range: start + i * delta for i < max(ceil((limit - start) / delta), 0).

template <typename T>
Status run_range_typed(const Tensor& start_t, const Tensor& limit_t, const Tensor& delta_t, Tensor& out,
                       KernelContext& context) {
  const T start = start_t.data<T>()[0], limit = limit_t.data<T>()[0], delta = delta_t.data<T>()[0];
  if (delta == T(0)) return Status::error("delta must not be zero");
  int64_t count = 0;
  if constexpr (std::is_integral_v<T>) {
    // Exact integer count; 128-bit so limit - start cannot overflow.
    const __int128 span = static_cast<__int128>(limit) - start;
    const __int128 steps = delta > 0 ? (span + delta - 1) / delta : (span + delta + 1) / delta;
    if (steps > kMaxTensorElements) return Status::error("Range has too many elements");
    count = steps > 0 ? static_cast<int64_t>(steps) : 0;
  } else {
    // As ONNX Runtime: the difference in T, the division in double.
    const double steps = std::ceil(static_cast<double>(limit - start) / static_cast<double>(delta));
    if (!(steps <= static_cast<double>(kMaxTensorElements)))  // also catches NaN
      return Status::error("Range has too many elements (or a non-finite bound)");
    count = steps > 0 ? static_cast<int64_t>(steps) : 0;
  }
  LOKA_ASSIGN_OR_RETURN(out, context.allocate(start_t.dtype(), {count}));
  T* y = out.data<T>();
  for (int64_t i = 0; i < count; ++i) {
    if constexpr (std::is_integral_v<T>) {
      // Every value lies in [start, limit), but i * delta alone may not fit in T:
      // wrap-around unsigned arithmetic gives the exact result without signed overflow.
      y[i] = static_cast<T>(static_cast<uint64_t>(start) + static_cast<uint64_t>(i) * static_cast<uint64_t>(delta));
    } else {
      y[i] = static_cast<T>(start + static_cast<T>(i) * delta);
    }
  }
  return Status::ok();
}

Status run_range(std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
  const char* names[3] = {"start", "limit", "delta"};
  for (size_t i = 0; i < 3; ++i) {
    LOKA_RETURN_IF_ERROR(ops::require_input(in, i, names[i]));
    if (in[i].element_count() != 1 || in[i].rank() > 1)
      return Status::error(std::string(names[i]) + " must be a scalar, got shape " + shape_to_string(in[i].shape()));
    if (in[i].dtype() != in[0].dtype())
      return Status::error(std::string(names[i]) + " has type " + std::string(dtype_name(in[i].dtype())) +
                           ", start has " + std::string(dtype_name(in[0].dtype())));
  }
  switch (in[0].dtype()) {
    case DType::kFloat32: return run_range_typed<float>(in[0], in[1], in[2], out[0], context);
    case DType::kFloat64: return run_range_typed<double>(in[0], in[1], in[2], out[0], context);
    case DType::kInt16: return run_range_typed<int16_t>(in[0], in[1], in[2], out[0], context);
    case DType::kInt32: return run_range_typed<int32_t>(in[0], in[1], in[2], out[0], context);
    case DType::kInt64: return run_range_typed<int64_t>(in[0], in[1], in[2], out[0], context);
    default: return Status::error("Range does not support type " + std::string(dtype_name(in[0].dtype())));
  }
}

}  // namespace

void register_shape_ops(OpRegistry& registry) {
  registry.add("", "Reshape", 5, 22, make_reshape);
  registry.add("", "Flatten", 1, 22, make_flatten);
  registry.add("", "Squeeze", 1, 22, make_squeeze);
  registry.add("", "Unsqueeze", 1, 22, make_unsqueeze);
  registry.add("", "Dropout", 7, 22, make_dropout);
  registry.add("", "Transpose", 1, 22, make_transpose);
  registry.add("", "Shape", 1, 22, make_shape);
  registry.add("", "Constant", 1, 22, make_constant);
  registry.add("", "ConstantOfShape", 9, 22, make_constant_of_shape);
  add_stateless_op(registry, "Expand", 8, 22, run_expand);
  add_stateless_op(registry, "Size", 1, 22, run_size);
  add_stateless_op(registry, "Range", 11, 22, run_range);
  add_stateless_op(registry, "Identity", 1, 22, [](std::span<const Tensor> in, std::span<Tensor> out, KernelContext&) {
    LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "input"));
    out[0] = in[0];
    return Status::ok();
  });
}

}  // namespace loka
