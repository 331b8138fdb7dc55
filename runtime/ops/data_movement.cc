// ============================================================================
// runtime/ops/data_movement.cc — ops that select, combine or rearrange
// elements without arithmetic: Gather, GatherElements, Concat, Slice, Split,
// Tile, Pad, Where, and the boolean Not/And/Or/Xor that feed Where masks.
//
// ONNX semantics for opsets up to 22; older opsets are accepted where they
// differ only in where an argument lives (attributes before inputs). Every op
// moves bytes by dtype_size, so it works on any dtype, FP8 included. Indices
// come from data, so each one is range-checked before any copy: a bad index
// is an error naming its value and the bound, never an out-of-bounds read.
// ============================================================================
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>

#include "runtime/op_kernel.h"
#include "runtime/ops/index_map_copy.h"
#include "runtime/ops/op_helpers.h"

namespace loka {
namespace {

using KernelResult = Result<std::unique_ptr<OpKernel>>;

const std::byte* bytes_of(const Tensor& tensor) { return static_cast<const std::byte*>(tensor.raw()); }
std::byte* bytes_of(Tensor& tensor) { return static_cast<std::byte*>(tensor.raw()); }

int64_t product(const Shape& shape, int begin, int end) {
  int64_t result = 1;
  for (int d = begin; d < end; ++d) result *= shape[static_cast<size_t>(d)];
  return result;
}

/// Index normalised into [0, size), or an error naming the index and the bound.
Result<int64_t> checked_index(int64_t index, int64_t size, int axis) {
  if (index < -size || index >= size) {
    if (size == 0)
      return Status::error("index " + std::to_string(index) + " is out of range: axis " + std::to_string(axis) +
                           " has size 0");
    return Status::error("index " + std::to_string(index) + " is out of range [" + std::to_string(-size) + ", " +
                         std::to_string(size - 1) + "] for axis " + std::to_string(axis) + " of size " +
                         std::to_string(size));
  }
  return index < 0 ? index + size : index;
}

// ---------------------------------------------------------------------------
// Gather and GatherElements.

KernelResult make_gather(const KernelInit& init) {
  LOKA_ASSIGN_OR_RETURN(const int64_t axis_attr, init.attributes.get_int("axis", 0));
  return make_function_kernel([axis_attr](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
    LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "data"));
    LOKA_RETURN_IF_ERROR(ops::require_input(in, 1, "indices"));
    const Tensor& data = in[0];
    LOKA_RETURN_IF_ERROR(ops::require_copyable(data, "data"));
    LOKA_RETURN_IF_ERROR(ops::require_index_type(in[1], "indices"));
    LOKA_ASSIGN_OR_RETURN(const int axis, ops::normalize_axis(axis_attr, data.rank()));
    const int64_t size = data.dim(axis);
    std::vector<int64_t> indices = in[1].to_int64s();
    for (int64_t& index : indices) {
      LOKA_ASSIGN_OR_RETURN(index, checked_index(index, size, axis));
    }
    Shape shape(data.shape().begin(), data.shape().begin() + axis);
    shape.insert(shape.end(), in[1].shape().begin(), in[1].shape().end());
    shape.insert(shape.end(), data.shape().begin() + axis + 1, data.shape().end());
    LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(data.dtype(), shape));
    const int64_t outer = product(data.shape(), 0, axis);
    const size_t block = static_cast<size_t>(product(data.shape(), axis + 1, data.rank())) * dtype_size(data.dtype());
    const std::byte* src = bytes_of(data);
    std::byte* dst = bytes_of(out[0]);
    for (int64_t o = 0; o < outer; ++o) {
      const std::byte* slab = src + static_cast<size_t>(o * size) * block;
      for (int64_t index : indices) {
        std::memcpy(dst, slab + static_cast<size_t>(index) * block, block);
        dst += block;
      }
    }
    return Status::ok();
  });
}

KernelResult make_gather_elements(const KernelInit& init) {
  LOKA_ASSIGN_OR_RETURN(const int64_t axis_attr, init.attributes.get_int("axis", 0));
  return make_function_kernel([axis_attr](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
    LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "data"));
    LOKA_RETURN_IF_ERROR(ops::require_input(in, 1, "indices"));
    const Tensor& data = in[0];
    const Tensor& indices_tensor = in[1];
    LOKA_RETURN_IF_ERROR(ops::require_copyable(data, "data"));
    LOKA_RETURN_IF_ERROR(ops::require_index_type(indices_tensor, "indices"));
    LOKA_ASSIGN_OR_RETURN(const int axis, ops::normalize_axis(axis_attr, data.rank()));
    if (indices_tensor.rank() != data.rank())
      return Status::error("indices " + shape_to_string(indices_tensor.shape()) + " and data " +
                           shape_to_string(data.shape()) + " must have the same rank");
    // Off the gather axis, indices coordinates address data directly, so they must fit.
    for (int d = 0; d < data.rank(); ++d)
      if (d != axis && indices_tensor.dim(d) > data.dim(d))
        return Status::error("indices " + shape_to_string(indices_tensor.shape()) + " exceed data " +
                             shape_to_string(data.shape()) + " along axis " + std::to_string(d));
    std::vector<int64_t> indices = indices_tensor.to_int64s();
    for (int64_t& index : indices) {
      LOKA_ASSIGN_OR_RETURN(index, checked_index(index, data.dim(axis), axis));
    }
    LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(data.dtype(), indices_tensor.shape()));
    if (indices.empty()) return Status::ok();
    const std::vector<int64_t> strides = ops::contiguous_strides(data.shape());
    const size_t element = dtype_size(data.dtype());
    const std::byte* src = bytes_of(data);
    std::byte* dst = bytes_of(out[0]);
    const int rank = data.rank();
    std::vector<int64_t> coord(static_cast<size_t>(rank), 0);
    int64_t base = 0;  // data offset of the current coordinate, without the gather axis
    for (size_t i = 0; i < indices.size(); ++i) {
      const int64_t offset = base + indices[i] * strides[static_cast<size_t>(axis)];
      ops::detail::copy_element(dst + i * element, src + static_cast<size_t>(offset) * element, element);
      for (int d = rank - 1; d >= 0; --d) {
        const size_t du = static_cast<size_t>(d);
        const int64_t step = d == axis ? 0 : strides[du];
        ++coord[du];
        base += step;
        if (coord[du] < indices_tensor.dim(d)) break;
        base -= step * coord[du];
        coord[du] = 0;
      }
    }
    return Status::ok();
  });
}

// ---------------------------------------------------------------------------
// Concat and Split.

KernelResult make_concat(const KernelInit& init) {
  // Before opset 4 the axis was optional with default 1.
  LOKA_ASSIGN_OR_RETURN(const int64_t axis_attr,
                        init.attributes.get_int("axis", init.opset < 4 ? std::optional<int64_t>(1) : std::nullopt));
  return make_function_kernel([axis_attr](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
    return ops::concatenate(in, axis_attr, context, out[0]);
  });
}

struct SplitConfig {
  int64_t axis = 0;
  int opset = 0;
  std::optional<std::vector<int64_t>> split_attribute;  ///< opset < 13
  std::optional<int64_t> num_outputs;                   ///< opset >= 18
};

/// Sizes of the pieces along an axis of `size` for `count` outputs.
Result<std::vector<int64_t>> split_sizes(const SplitConfig& config, std::span<const Tensor> in, int64_t size,
                                         size_t count) {
  std::optional<std::vector<int64_t>> split = config.split_attribute;
  if (config.opset >= 13 && in.size() > 1 && in[1].defined()) {
    LOKA_ASSIGN_OR_RETURN(split, ops::read_int_list(in[1], "split"));
  }
  if (split) {
    if (split->size() != count)
      return Status::error("split " + shape_to_string(*split) + " has " + std::to_string(split->size()) +
                           " entries for " + std::to_string(count) + " outputs");
    int64_t total = 0;
    for (int64_t piece : *split) {
      if (piece < 0) return Status::error("split " + shape_to_string(*split) + " has a negative size");
      total += piece;
    }
    if (total != size)
      return Status::error("split " + shape_to_string(*split) + " sums to " + std::to_string(total) +
                           ", the axis has size " + std::to_string(size));
    return *split;
  }
  const auto n = static_cast<int64_t>(count);
  if (config.num_outputs && *config.num_outputs != n)
    return Status::error("num_outputs is " + std::to_string(*config.num_outputs) + " but the node has " +
                         std::to_string(n) + " outputs");
  // Opset 18 lets the last piece be smaller; earlier opsets need an even split.
  const int64_t piece = config.opset >= 18 ? (size + n - 1) / n : size / n;
  const int64_t last = size - piece * (n - 1);
  if (last < 0 || last > piece || (config.opset < 18 && last != piece))
    return Status::error("axis of size " + std::to_string(size) + " cannot be split into " + std::to_string(n) +
                         " outputs");
  std::vector<int64_t> sizes(count, piece);
  sizes.back() = last;
  return sizes;
}

KernelResult make_split(const KernelInit& init) {
  SplitConfig config;
  config.opset = init.opset;
  LOKA_ASSIGN_OR_RETURN(config.axis, init.attributes.get_int("axis", 0));
  if (init.opset < 13 && init.attributes.has("split")) {
    LOKA_ASSIGN_OR_RETURN(config.split_attribute, init.attributes.get_ints("split"));
  }
  if (init.opset >= 18 && init.attributes.has("num_outputs")) {
    LOKA_ASSIGN_OR_RETURN(config.num_outputs, init.attributes.get_int("num_outputs"));
  }
  if (init.output_count == 0) return Status::error("Split needs at least one output");
  return make_function_kernel([config](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
    LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "input"));
    const Tensor& x = in[0];
    LOKA_RETURN_IF_ERROR(ops::require_copyable(x, "input"));
    LOKA_ASSIGN_OR_RETURN(const int axis, ops::normalize_axis(config.axis, x.rank()));
    LOKA_ASSIGN_OR_RETURN(const std::vector<int64_t> sizes, split_sizes(config, in, x.dim(axis), out.size()));
    const int64_t outer = product(x.shape(), 0, axis);
    const size_t unit = static_cast<size_t>(product(x.shape(), axis + 1, x.rank())) * dtype_size(x.dtype());
    const size_t src_row = static_cast<size_t>(x.dim(axis)) * unit;
    size_t offset = 0;  // bytes into each source row where the current piece starts
    for (size_t i = 0; i < out.size(); ++i) {
      Shape shape = x.shape();
      shape[static_cast<size_t>(axis)] = sizes[i];
      LOKA_ASSIGN_OR_RETURN(out[i], context.allocate(x.dtype(), shape));
      const size_t chunk = static_cast<size_t>(sizes[i]) * unit;
      std::byte* dst = bytes_of(out[i]);
      for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * chunk, bytes_of(x) + o * src_row + offset, chunk);
      offset += chunk;
    }
    return Status::ok();
  });
}

// ---------------------------------------------------------------------------
// Slice, Tile, Pad: per-axis maps into copy_by_axis_maps.

using ops::SliceArgs;

/// Builds the per-axis maps of a slice of `x` (ONNX clamping rules) and the output shape.
Result<std::vector<ops::AxisMap>> slice_maps(const Tensor& x, SliceArgs args, Shape& shape) {
  LOKA_ASSIGN_OR_RETURN(const std::vector<ops::SliceWindow> windows, ops::slice_windows(x.shape(), std::move(args)));
  const std::vector<int64_t> strides = ops::contiguous_strides(x.shape());
  shape = x.shape();
  std::vector<ops::AxisMap> maps(static_cast<size_t>(x.rank()));
  for (size_t a = 0; a < windows.size(); ++a) {
    const ops::SliceWindow& w = windows[a];
    shape[a] = w.count;
    maps[a] = ops::AxisMap::strided(w.count, w.start * strides[a], w.count > 1 ? w.step * strides[a] : 0);
  }
  return maps;
}

Status run_slice(const Tensor& x, SliceArgs args, Tensor& out, KernelContext& context) {
  LOKA_RETURN_IF_ERROR(ops::require_copyable(x, "data"));
  Shape shape;
  LOKA_ASSIGN_OR_RETURN(const std::vector<ops::AxisMap> maps, slice_maps(x, std::move(args), shape));
  LOKA_ASSIGN_OR_RETURN(out, context.allocate(x.dtype(), shape));
  ops::copy_by_axis_maps(bytes_of(x), maps, dtype_size(x.dtype()), nullptr, bytes_of(out));
  return Status::ok();
}

/// Slice-1..9: starts, ends and axes are attributes.
KernelResult make_slice_v1(const KernelInit& init) {
  SliceArgs args;
  LOKA_ASSIGN_OR_RETURN(args.starts, init.attributes.get_ints("starts"));
  LOKA_ASSIGN_OR_RETURN(args.ends, init.attributes.get_ints("ends"));
  LOKA_ASSIGN_OR_RETURN(args.axes, init.attributes.get_ints("axes", std::vector<int64_t>{}));
  return make_function_kernel([args](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
    LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "data"));
    return run_slice(in[0], args, out[0], context);
  });
}

/// Slice-10+: starts, ends, axes and steps are inputs.
Status run_slice_v10(std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "data"));
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 1, "starts"));
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 2, "ends"));
  SliceArgs args;
  LOKA_ASSIGN_OR_RETURN(args.starts, ops::read_int_list(in[1], "starts"));
  LOKA_ASSIGN_OR_RETURN(args.ends, ops::read_int_list(in[2], "ends"));
  if (in.size() > 3 && in[3].defined()) {
    LOKA_ASSIGN_OR_RETURN(args.axes, ops::read_int_list(in[3], "axes"));
    if (args.axes.empty() && !args.starts.empty()) return Status::error("axes is empty but starts is not");
  }
  if (in.size() > 4 && in[4].defined()) {
    LOKA_ASSIGN_OR_RETURN(args.steps, ops::read_int_list(in[4], "steps"));
    if (args.steps.empty() && !args.starts.empty()) return Status::error("steps is empty but starts is not");
  }
  return run_slice(in[0], std::move(args), out[0], context);
}

Status run_tile(std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "input"));
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 1, "repeats"));
  const Tensor& x = in[0];
  LOKA_RETURN_IF_ERROR(ops::require_copyable(x, "input"));
  LOKA_ASSIGN_OR_RETURN(const std::vector<int64_t> repeats, ops::read_int_list(in[1], "repeats"));
  if (static_cast<int>(repeats.size()) != x.rank())
    return Status::error("repeats " + shape_to_string(repeats) + " must have one entry per axis of " +
                         shape_to_string(x.shape()));
  Shape shape(repeats.size());
  for (size_t d = 0; d < repeats.size(); ++d) {
    if (repeats[d] < 0) return Status::error("repeats " + shape_to_string(repeats) + " has a negative entry");
    if (repeats[d] != 0 && x.shape()[d] > kMaxTensorElements / repeats[d])
      return Status::error("tiling " + shape_to_string(x.shape()) + " by " + shape_to_string(repeats) + " is too large");
    shape[d] = x.shape()[d] * repeats[d];
  }
  LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(x.dtype(), shape));
  if (out[0].element_count() == 0) return Status::ok();
  const std::vector<int64_t> strides = ops::contiguous_strides(x.shape());
  std::vector<ops::AxisMap> maps(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (repeats[d] == 1) {
      maps[d] = ops::AxisMap::strided(shape[d], 0, strides[d]);
      continue;
    }
    std::vector<int64_t> table(static_cast<size_t>(shape[d]));
    for (int64_t o = 0; o < shape[d]; ++o) table[static_cast<size_t>(o)] = (o % x.shape()[d]) * strides[d];
    maps[d] = ops::AxisMap::explicit_table(std::move(table));
  }
  ops::copy_by_axis_maps(bytes_of(x), maps, dtype_size(x.dtype()), nullptr, bytes_of(out[0]));
  return Status::ok();
}

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

struct PadConfig {
  PadMode mode = PadMode::kConstant;
  int opset = 0;
  std::vector<int64_t> pads_attribute;  ///< opset < 11
  float value_attribute = 0.0f;         ///< opset < 11 (FLOAT data only then)
};

/// Input coordinate read by output coordinate `o` of an axis of `dim` padded by
/// `before`, or kFillIndex for the constant. Non-constant modes need dim > 0.
int64_t pad_source(PadMode mode, int64_t o, int64_t before, int64_t dim) {
  const int64_t i = o - before;
  if (i >= 0 && i < dim) return i;
  switch (mode) {
    case PadMode::kConstant: return ops::kFillIndex;
    case PadMode::kEdge: return i < 0 ? 0 : dim - 1;
    case PadMode::kWrap: return ((i % dim) + dim) % dim;
    case PadMode::kReflect: {
      if (dim == 1) return 0;
      // Mirror without repeating the edge: period 2 * (dim - 1), repeated as numpy does.
      const int64_t period = 2 * (dim - 1);
      const int64_t r = ((i % period) + period) % period;
      return r < dim ? r : period - r;
    }
  }
  return ops::kFillIndex;
}

KernelResult make_pad(const KernelInit& init) {
  PadConfig config;
  config.opset = init.opset;
  LOKA_ASSIGN_OR_RETURN(const std::string mode, init.attributes.get_string("mode", "constant"));
  if (mode == "constant") config.mode = PadMode::kConstant;
  else if (mode == "reflect") config.mode = PadMode::kReflect;
  else if (mode == "edge") config.mode = PadMode::kEdge;
  else if (mode == "wrap") config.mode = PadMode::kWrap;
  else return Status::error("attribute 'mode' must be constant, reflect, edge or wrap, got '" + mode + "'");
  if (init.opset < 11) {
    LOKA_ASSIGN_OR_RETURN(config.pads_attribute, init.attributes.get_ints("pads"));
    LOKA_ASSIGN_OR_RETURN(config.value_attribute, init.attributes.get_float("value", 0.0f));
  }
  return make_function_kernel([config](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
    LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "data"));
    const Tensor& x = in[0];
    LOKA_RETURN_IF_ERROR(ops::require_copyable(x, "data"));
    const int rank = x.rank();
    const size_t element = dtype_size(x.dtype());
    std::vector<int64_t> pads = config.pads_attribute;
    std::vector<std::byte> fill(element, std::byte{0});
    std::vector<int64_t> axes;
    if (config.opset < 11) {
      if (x.dtype() != DType::kFloat32 && config.value_attribute != 0.0f)
        return Status::error("attribute 'value' needs FLOAT data before opset 11");
      if (x.dtype() == DType::kFloat32) std::memcpy(fill.data(), &config.value_attribute, sizeof(float));
    } else {
      LOKA_RETURN_IF_ERROR(ops::require_input(in, 1, "pads"));
      LOKA_ASSIGN_OR_RETURN(pads, ops::read_int_list(in[1], "pads"));
      if (in.size() > 2 && in[2].defined() && config.mode == PadMode::kConstant) {
        const Tensor& value = in[2];
        if (value.dtype() != x.dtype() || value.element_count() != 1)
          return Status::error("constant_value must be one " + std::string(dtype_name(x.dtype())) + " element, got " +
                               std::string(dtype_name(value.dtype())) + shape_to_string(value.shape()));
        std::memcpy(fill.data(), value.raw(), element);
      }
      if (in.size() > 3 && in[3].defined()) {
        LOKA_ASSIGN_OR_RETURN(axes, ops::read_int_list(in[3], "axes"));
      }
    }
    if (axes.empty() && !(in.size() > 3 && in[3].defined()))
      for (int d = 0; d < rank; ++d) axes.push_back(d);
    if (pads.size() != 2 * axes.size())
      return Status::error("pads " + shape_to_string(pads) + " must have 2 entries per padded axis (" +
                           std::to_string(axes.size()) + " axes of " + shape_to_string(x.shape()) + ")");
    std::vector<int64_t> before(static_cast<size_t>(rank), 0), after(static_cast<size_t>(rank), 0);
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    for (size_t i = 0; i < axes.size(); ++i) {
      LOKA_ASSIGN_OR_RETURN(const int axis, ops::normalize_axis(axes[i], rank));
      if (seen[static_cast<size_t>(axis)]) return Status::error("axes repeat axis " + std::to_string(axes[i]));
      seen[static_cast<size_t>(axis)] = true;
      before[static_cast<size_t>(axis)] = pads[i];
      after[static_cast<size_t>(axis)] = pads[i + axes.size()];
    }
    Shape shape(static_cast<size_t>(rank));
    for (size_t d = 0; d < shape.size(); ++d) {
      const int64_t limit = kMaxTensorElements;  // keeps the sum below from overflowing
      if (before[d] < -limit || before[d] > limit || after[d] < -limit || after[d] > limit)
        return Status::error("pads " + shape_to_string(pads) + " are too large");
      shape[d] = x.shape()[d] + before[d] + after[d];
      if (shape[d] < 0)
        return Status::error("pads " + shape_to_string(pads) + " crop more than axis " + std::to_string(d) + " of " +
                             shape_to_string(x.shape()) + " holds");
      if (config.mode != PadMode::kConstant && x.shape()[d] == 0 && shape[d] > 0)
        return Status::error("cannot pad empty axis " + std::to_string(d) + " in a non-constant mode");
    }
    LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(x.dtype(), shape));
    if (out[0].element_count() == 0) return Status::ok();
    const std::vector<int64_t> strides = ops::contiguous_strides(x.shape());
    std::vector<ops::AxisMap> maps(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) {
      if (before[d] == 0 && after[d] == 0) {
        maps[d] = ops::AxisMap::strided(shape[d], 0, strides[d]);
        continue;
      }
      std::vector<int64_t> table(static_cast<size_t>(shape[d]));
      for (int64_t o = 0; o < shape[d]; ++o) {
        const int64_t source = pad_source(config.mode, o, before[d], x.shape()[d]);
        table[static_cast<size_t>(o)] = source == ops::kFillIndex ? ops::kFillIndex : source * strides[d];
      }
      maps[d] = ops::AxisMap::explicit_table(std::move(table));
    }
    ops::copy_by_axis_maps(bytes_of(x), maps, element, fill.data(), bytes_of(out[0]));
    return Status::ok();
  });
}

// ---------------------------------------------------------------------------
// Where and the boolean ops: N-way numpy broadcast.

/// Calls fn(out_index, offsets) for every element of `out_shape`, where offsets[k]
/// is the element offset into operand k (its shape right-aligned and broadcast).
template <size_t N, typename Fn>
void for_each_broadcast(const Shape& out_shape, const std::array<const Shape*, N>& shapes, Fn fn) {
  const int64_t total = element_count(out_shape);
  if (total == 0) return;
  std::array<std::vector<int64_t>, N> strides;
  for (size_t k = 0; k < N; ++k) strides[k] = ops::broadcast_strides(*shapes[k], out_shape);
  std::array<int64_t, N> offsets{};
  std::vector<int64_t> counter(out_shape.size(), 0);
  for (int64_t i = 0; i < total; ++i) {
    fn(i, offsets);
    for (size_t d = out_shape.size(); d-- > 0;) {
      ++counter[d];
      for (size_t k = 0; k < N; ++k) offsets[k] += strides[k][d];
      if (counter[d] < out_shape[d]) break;
      for (size_t k = 0; k < N; ++k) offsets[k] -= strides[k][d] * counter[d];
      counter[d] = 0;
    }
  }
}

Status run_where(std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "condition"));
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 1, "X"));
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 2, "Y"));
  const Tensor &condition = in[0], &x = in[1], &y = in[2];
  if (condition.dtype() != DType::kBool)
    return Status::error("condition must be BOOL, got " + std::string(dtype_name(condition.dtype())));
  LOKA_RETURN_IF_ERROR(ops::require_copyable(x, "X"));
  if (x.dtype() != y.dtype())
    return Status::error("X and Y have different types " + std::string(dtype_name(x.dtype())) + " and " +
                         std::string(dtype_name(y.dtype())));
  LOKA_ASSIGN_OR_RETURN(const Shape xy, ops::broadcast_shapes(x.shape(), y.shape()));
  LOKA_ASSIGN_OR_RETURN(const Shape shape, ops::broadcast_shapes(condition.shape(), xy));
  LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(x.dtype(), shape));
  const size_t element = dtype_size(x.dtype());
  const auto* c = condition.data<uint8_t>();
  const std::byte *px = bytes_of(x), *py = bytes_of(y);
  std::byte* dst = bytes_of(out[0]);
  const std::array<const Shape*, 3> shapes = {&condition.shape(), &x.shape(), &y.shape()};
  for_each_broadcast(shape, shapes, [&](int64_t i, const std::array<int64_t, 3>& offsets) {
    const std::byte* from = c[offsets[0]] ? px + offsets[1] * element : py + offsets[2] * element;
    ops::detail::copy_element(dst + i * element, from, element);
  });
  return Status::ok();
}

Status require_bool(const Tensor& tensor, const char* what) {
  if (tensor.dtype() != DType::kBool)
    return Status::error(std::string(what) + " must be BOOL, got " + std::string(dtype_name(tensor.dtype())));
  return Status::ok();
}

Status run_not(std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "X"));
  LOKA_RETURN_IF_ERROR(require_bool(in[0], "X"));
  LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(DType::kBool, in[0].shape()));
  const auto* x = in[0].data<uint8_t>();
  auto* y = out[0].data<uint8_t>();
  for (int64_t i = 0; i < in[0].element_count(); ++i) y[i] = x[i] ? 0 : 1;
  return Status::ok();
}

template <typename Op>
Status run_logical(std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "A"));
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 1, "B"));
  LOKA_RETURN_IF_ERROR(require_bool(in[0], "A"));
  LOKA_RETURN_IF_ERROR(require_bool(in[1], "B"));
  LOKA_ASSIGN_OR_RETURN(const Shape shape, ops::broadcast_shapes(in[0].shape(), in[1].shape()));
  LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(DType::kBool, shape));
  const auto *a = in[0].data<uint8_t>(), *b = in[1].data<uint8_t>();
  auto* y = out[0].data<uint8_t>();
  const std::array<const Shape*, 2> shapes = {&in[0].shape(), &in[1].shape()};
  for_each_broadcast(shape, shapes, [&](int64_t i, const std::array<int64_t, 2>& offsets) {
    y[i] = Op()(a[offsets[0]] != 0, b[offsets[1]] != 0) ? 1 : 0;
  });
  return Status::ok();
}

}  // namespace

void register_data_movement_ops(OpRegistry& registry) {
  registry.add("", "Gather", 1, 22, make_gather);
  registry.add("", "GatherElements", 11, 22, make_gather_elements);
  registry.add("", "Concat", 1, 22, make_concat);
  registry.add("", "Split", 2, 22, make_split);
  registry.add("", "Slice", 1, 9, make_slice_v1);
  add_stateless_op(registry, "Slice", 10, 22, run_slice_v10);
  add_stateless_op(registry, "Tile", 6, 22, run_tile);
  registry.add("", "Pad", 2, 22, make_pad);
  add_stateless_op(registry, "Where", 9, 22, run_where);
  add_stateless_op(registry, "Not", 1, 22, run_not);
  add_stateless_op(registry, "And", 7, 22, run_logical<std::logical_and<bool>>);
  add_stateless_op(registry, "Or", 7, 22, run_logical<std::logical_or<bool>>);
  add_stateless_op(registry, "Xor", 7, 22, run_logical<std::not_equal_to<bool>>);
}

namespace ops {

Status concatenate(std::span<const Tensor> in, int64_t axis_attr, KernelContext& context, Tensor& out) {
  if (in.empty()) return Status::error("Concat needs at least one input");
  for (size_t i = 0; i < in.size(); ++i) LOKA_RETURN_IF_ERROR(require_input(in, i, "inputs"));
  const Tensor& first = in[0];
  LOKA_RETURN_IF_ERROR(require_copyable(first, "inputs"));
  LOKA_ASSIGN_OR_RETURN(const int axis, normalize_axis(axis_attr, first.rank()));
  Shape shape = first.shape();
  shape[static_cast<size_t>(axis)] = 0;
  for (const Tensor& t : in) {
    bool compatible = t.dtype() == first.dtype() && t.rank() == first.rank();
    for (int d = 0; compatible && d < t.rank(); ++d) compatible = d == axis || t.dim(d) == first.dim(d);
    if (!compatible)
      return Status::error("cannot concatenate " + std::string(dtype_name(first.dtype())) +
                           shape_to_string(first.shape()) + " and " + std::string(dtype_name(t.dtype())) +
                           shape_to_string(t.shape()) + " along axis " + std::to_string(axis));
    shape[static_cast<size_t>(axis)] += t.dim(axis);
  }
  LOKA_ASSIGN_OR_RETURN(out, context.allocate(first.dtype(), shape));
  const int64_t outer = product(shape, 0, axis);
  const size_t unit = static_cast<size_t>(product(shape, axis + 1, first.rank())) * dtype_size(first.dtype());
  std::byte* dst = bytes_of(out);
  for (int64_t o = 0; o < outer; ++o)
    for (const Tensor& t : in) {
      const size_t chunk = static_cast<size_t>(t.dim(axis)) * unit;
      std::memcpy(dst, bytes_of(t) + static_cast<size_t>(o) * chunk, chunk);
      dst += chunk;
    }
  return Status::ok();
}

}  // namespace ops

}  // namespace loka
