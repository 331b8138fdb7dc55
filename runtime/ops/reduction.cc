// ============================================================================
// runtime/ops/reduction.cc — the Reduce* family, ArgMax and ArgMin, ONNX semantics.
//
// Axes come from the `axes` attribute before the opset where they became an
// input (13 for ReduceSum, 18 for the others) and from the optional second
// input after. No axes means "reduce everything" unless noop_with_empty_axes
// is set, in which case the op is the identity. Negative axes count from the
// end; repeated axes are an error. keepdims (default 1) keeps reduced dims as 1.
//
// Float inputs (FLOAT, DOUBLE) accumulate in double; integer inputs in int64
// (ReduceMean of integers truncates, as numpy's mean followed by astype).
// Reducing an empty set gives the op's identity: 0 for sums and norms, 1 for
// products, -inf / +inf (the type's lowest / highest for integers) for
// max / min, -inf for the logarithmic reductions, NaN for the mean of floats.
// Max/Min propagate NaN. ReduceMax/ReduceMin also take BOOL (opset 20).
// ============================================================================
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "runtime/op_kernel.h"
#include "runtime/ops/op_helpers.h"

namespace loka {
namespace {

enum class Reduce { kSum, kMean, kMax, kMin, kProd, kSumSquare, kL1, kL2, kLogSum, kLogSumExp };

struct ReduceAttributes {
  Reduce op = Reduce::kSum;
  bool keepdims = true;
  bool noop_with_empty_axes = false;
  bool axes_from_input = false;
  std::vector<int64_t> attribute_axes;  ///< before axes became an input
};

/// Input dims classified as reduced or kept, plus the output shape.
struct ReducePlan {
  std::vector<bool> reduced;
  Shape output_shape;      ///< honours keepdims
  Shape kept_shape;        ///< keepdims=1 shape, used for index math
  int64_t group_size = 1;  ///< elements folded into each output
};

Result<ReducePlan> plan_reduction(const Shape& shape, const std::vector<int64_t>& axes, bool keepdims) {
  const int rank = static_cast<int>(shape.size());
  ReducePlan plan;
  plan.reduced.assign(shape.size(), axes.empty());
  for (int64_t axis : axes) {
    LOKA_ASSIGN_OR_RETURN(const int d, ops::normalize_axis(axis, rank));
    if (plan.reduced[static_cast<size_t>(d)])
      return Status::error("axis " + std::to_string(axis) + " is listed twice in axes");
    plan.reduced[static_cast<size_t>(d)] = true;
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (plan.reduced[d]) {
      plan.group_size *= shape[d];
      plan.kept_shape.push_back(1);
      if (keepdims) plan.output_shape.push_back(1);
    } else {
      plan.kept_shape.push_back(shape[d]);
      plan.output_shape.push_back(shape[d]);
    }
  }
  return plan;
}

/// Calls fn(input_index, output_index) for every input element, in input order.
template <typename Fn>
void for_each_reduced(const Shape& shape, const ReducePlan& plan, Fn fn) {
  const int64_t total = element_count(shape);
  if (total == 0) return;
  if (shape.empty()) {
    fn(0, 0);
    return;
  }
  std::vector<int64_t> out_strides = ops::contiguous_strides(plan.kept_shape);
  for (size_t d = 0; d < shape.size(); ++d)
    if (plan.reduced[d]) out_strides[d] = 0;
  const int rank = static_cast<int>(shape.size());
  const int64_t inner = shape.back();
  const int64_t inner_stride = out_strides.back();
  std::vector<int64_t> counter(shape.size(), 0);
  int64_t out = 0;
  for (int64_t in = 0; in < total; in += inner) {
    for (int64_t j = 0; j < inner; ++j) fn(in + j, out + j * inner_stride);
    for (int d = rank - 2; d >= 0; --d) {
      const size_t du = static_cast<size_t>(d);
      ++counter[du];
      out += out_strides[du];
      if (counter[du] < shape[du]) break;
      out -= out_strides[du] * counter[du];
      counter[du] = 0;
    }
  }
}

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T>;

/// Accumulator type: double for floats, int64 for integers.
template <typename T>
using Acc = std::conditional_t<kIsFloat<T>, double, int64_t>;

// Integer accumulation wraps (two's complement) instead of overflowing, which would be UB.
inline int64_t wrap_add(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
inline int64_t wrap_mul(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }
inline double wrap_add(double a, double b) { return a + b; }
inline double wrap_mul(double a, double b) { return a * b; }

template <typename T>
Acc<T> initial_value(Reduce op) {
  switch (op) {
    case Reduce::kProd: return 1;
    case Reduce::kMax:
      if constexpr (kIsFloat<T>) return -std::numeric_limits<double>::infinity();
      else return static_cast<Acc<T>>(std::numeric_limits<T>::lowest());
    case Reduce::kMin:
      if constexpr (kIsFloat<T>) return std::numeric_limits<double>::infinity();
      else return static_cast<Acc<T>>(std::numeric_limits<T>::max());
    default: return 0;
  }
}

template <typename T>
Status reduce_typed(Reduce op, const Tensor& x, const ReducePlan& plan, Tensor& y) {
  const T* px = x.data<T>();
  const size_t outputs = static_cast<size_t>(y.element_count());
  std::vector<Acc<T>> acc(outputs, initial_value<T>(op));
  // LogSumExp subtracts each group's maximum first, so exp cannot overflow.
  std::vector<double> shift;
  if (op == Reduce::kLogSumExp) {
    shift.assign(outputs, -std::numeric_limits<double>::infinity());
    for_each_reduced(x.shape(), plan, [&](int64_t i, int64_t o) {
      const double v = static_cast<double>(px[i]);
      if (!std::isinf(v)) shift[static_cast<size_t>(o)] = std::fmax(shift[static_cast<size_t>(o)], v);
    });
    for (double& s : shift)
      if (std::isinf(s)) s = 0.0;  // all-infinite (or empty) group: no shift needed
  }
  for_each_reduced(x.shape(), plan, [&](int64_t i, int64_t o) {
    Acc<T>& a = acc[static_cast<size_t>(o)];
    const Acc<T> v = static_cast<Acc<T>>(px[i]);
    switch (op) {
      case Reduce::kSum: case Reduce::kMean: case Reduce::kLogSum: a = wrap_add(a, v); break;
      case Reduce::kProd: a = wrap_mul(a, v); break;
      case Reduce::kSumSquare: case Reduce::kL2: a = wrap_add(a, wrap_mul(v, v)); break;
      case Reduce::kL1: a = v < 0 ? wrap_add(a, wrap_mul(v, -1)) : wrap_add(a, v); break;
      case Reduce::kMax:
        if constexpr (kIsFloat<T>) a = (std::isnan(a) || std::isnan(v)) ? std::numeric_limits<double>::quiet_NaN() : std::fmax(a, v);
        else a = std::max(a, v);
        break;
      case Reduce::kMin:
        if constexpr (kIsFloat<T>) a = (std::isnan(a) || std::isnan(v)) ? std::numeric_limits<double>::quiet_NaN() : std::fmin(a, v);
        else a = std::min(a, v);
        break;
      case Reduce::kLogSumExp: a += static_cast<Acc<T>>(std::exp(static_cast<double>(v) - shift[static_cast<size_t>(o)])); break;
    }
  });
  T* py = y.data<T>();
  for (size_t o = 0; o < outputs; ++o) {
    const Acc<T> a = acc[o];
    double value;
    switch (op) {
      case Reduce::kMean:
        if constexpr (kIsFloat<T>) {
          value = a / static_cast<double>(plan.group_size);
          break;
        } else {
          py[o] = static_cast<T>(plan.group_size == 0 ? 0 : a / plan.group_size);
          continue;
        }
      case Reduce::kL2: value = std::sqrt(static_cast<double>(a)); break;  // a >= 0 unless it wrapped
      case Reduce::kLogSum: value = std::log(static_cast<double>(a)); break;
      case Reduce::kLogSumExp: value = std::log(static_cast<double>(a)) + shift[o]; break;
      default:
        if constexpr (!kIsFloat<T>) {
          py[o] = static_cast<T>(a);  // exact integer result, no trip through double
          continue;
        }
        value = static_cast<double>(a);
        break;
    }
    if constexpr (kIsFloat<T>) {
      py[o] = static_cast<T>(value);
    } else {  // only L2 gets here (sqrt < 2^32); a wrapped sum of squares makes it NaN
      py[o] = std::isfinite(value) ? static_cast<T>(std::clamp(value, static_cast<double>(std::numeric_limits<T>::lowest()),
                                                              static_cast<double>(std::numeric_limits<T>::max())))
                                   : T{0};
    }
  }
  return Status::ok();
}

Status run_reduce(const ReduceAttributes& attrs, std::span<const Tensor> in, std::span<Tensor> out,
                  KernelContext& context) {
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "data"));
  const Tensor& x = in[0];
  std::vector<int64_t> axes = attrs.attribute_axes;
  if (attrs.axes_from_input && in.size() > 1 && in[1].defined()) {
    LOKA_ASSIGN_OR_RETURN(axes, ops::read_int_list(in[1], "axes"));
  }
  if (axes.empty() && attrs.noop_with_empty_axes) {
    // Identity. A copy, so a graph output never aliases a constant or a caller's input.
    LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(x.dtype(), x.shape()));
    if (x.byte_size() > 0) std::memcpy(out[0].raw(), x.raw(), x.byte_size());
    return Status::ok();
  }
  LOKA_ASSIGN_OR_RETURN(const ReducePlan plan, plan_reduction(x.shape(), axes, attrs.keepdims));
  LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(x.dtype(), plan.output_shape));
  const bool max_or_min = attrs.op == Reduce::kMax || attrs.op == Reduce::kMin;
  const bool logarithmic = attrs.op == Reduce::kLogSum || attrs.op == Reduce::kLogSumExp;
  if (logarithmic && x.dtype() != DType::kFloat32 && x.dtype() != DType::kFloat64)
    return Status::error("data must be FLOAT or DOUBLE for a logarithmic reduction, got " +
                         std::string(dtype_name(x.dtype())));
  switch (x.dtype()) {
    case DType::kFloat32: return reduce_typed<float>(attrs.op, x, plan, out[0]);
    case DType::kFloat64: return reduce_typed<double>(attrs.op, x, plan, out[0]);
    case DType::kInt64: return reduce_typed<int64_t>(attrs.op, x, plan, out[0]);
    case DType::kInt32: return reduce_typed<int32_t>(attrs.op, x, plan, out[0]);
    case DType::kInt8: return reduce_typed<int8_t>(attrs.op, x, plan, out[0]);
    case DType::kUInt8: return reduce_typed<uint8_t>(attrs.op, x, plan, out[0]);
    case DType::kBool:
      if (max_or_min) return reduce_typed<bool>(attrs.op, x, plan, out[0]);
      [[fallthrough]];
    default:
      return Status::error("data of type " + std::string(dtype_name(x.dtype())) + " is not supported");
  }
}

void add_reduce(OpRegistry& registry, const char* name, Reduce op, int axes_input_opset) {
  registry.add("", name, 1, 22, [op, axes_input_opset](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
    ReduceAttributes attrs;
    attrs.op = op;
    LOKA_ASSIGN_OR_RETURN(const int64_t keepdims, init.attributes.get_int("keepdims", 1));
    attrs.keepdims = keepdims != 0;
    attrs.axes_from_input = init.opset >= axes_input_opset;
    if (attrs.axes_from_input) {
      LOKA_ASSIGN_OR_RETURN(const int64_t noop, init.attributes.get_int("noop_with_empty_axes", 0));
      attrs.noop_with_empty_axes = noop != 0;
      if (init.attributes.has("axes"))
        return Status::error("'axes' is an input, not an attribute, from opset " + std::to_string(axes_input_opset));
    } else {
      LOKA_ASSIGN_OR_RETURN(attrs.attribute_axes, init.attributes.get_ints("axes", std::vector<int64_t>{}));
    }
    return make_function_kernel([attrs](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
      return run_reduce(attrs, in, out, context);
    });
  });
}

// ----------------------------------------------------------------------------
// ArgMax / ArgMin.

struct ArgAttributes {
  bool max = true;
  int64_t axis = 0;
  bool keepdims = true;
  bool select_last_index = false;
};

template <typename T>
void arg_typed(const ArgAttributes& attrs, const Tensor& x, int64_t outer, int64_t n, int64_t inner, int64_t* out) {
  const T* px = x.data<T>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const T* column = px + o * n * inner + i;
      int64_t best = 0;
      for (int64_t j = 1; j < n; ++j) {
        const T v = column[j * inner], b = column[best * inner];
        bool take;
        if constexpr (kIsFloat<T>) {
          // NaN wins over numbers (numpy's argmax/argmin); among NaNs the first or last.
          if (std::isnan(b)) take = std::isnan(v) && attrs.select_last_index;
          else if (std::isnan(v)) take = true;
          else take = attrs.max ? (v > b || (v == b && attrs.select_last_index)) : (v < b || (v == b && attrs.select_last_index));
        } else {
          take = attrs.max ? (v > b || (v == b && attrs.select_last_index)) : (v < b || (v == b && attrs.select_last_index));
        }
        if (take) best = j;
      }
      out[o * inner + i] = best;
    }
  }
}

Status run_arg(const ArgAttributes& attrs, std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "data"));
  const Tensor& x = in[0];
  LOKA_ASSIGN_OR_RETURN(const int axis, ops::normalize_axis(attrs.axis, x.rank()));
  if (x.dim(axis) == 0) return Status::error("cannot take the arg of an empty axis " + std::to_string(attrs.axis));
  int64_t outer = 1, inner = 1;
  Shape shape;
  for (int d = 0; d < x.rank(); ++d) {
    if (d < axis) outer *= x.dim(d);
    if (d > axis) inner *= x.dim(d);
    if (d != axis) shape.push_back(x.dim(d));
    else if (attrs.keepdims) shape.push_back(1);
  }
  LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(DType::kInt64, shape));
  const int64_t n = x.dim(axis);
  int64_t* y = out[0].data<int64_t>();
  switch (x.dtype()) {
    case DType::kFloat32: arg_typed<float>(attrs, x, outer, n, inner, y); break;
    case DType::kFloat64: arg_typed<double>(attrs, x, outer, n, inner, y); break;
    case DType::kInt64: arg_typed<int64_t>(attrs, x, outer, n, inner, y); break;
    case DType::kInt32: arg_typed<int32_t>(attrs, x, outer, n, inner, y); break;
    case DType::kInt8: arg_typed<int8_t>(attrs, x, outer, n, inner, y); break;
    case DType::kUInt8: arg_typed<uint8_t>(attrs, x, outer, n, inner, y); break;
    default: return Status::error("data of type " + std::string(dtype_name(x.dtype())) + " is not supported");
  }
  return Status::ok();
}

void add_arg(OpRegistry& registry, const char* name, bool max) {
  registry.add("", name, 1, 22, [max](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
    ArgAttributes attrs;
    attrs.max = max;
    LOKA_ASSIGN_OR_RETURN(attrs.axis, init.attributes.get_int("axis", 0));
    LOKA_ASSIGN_OR_RETURN(const int64_t keepdims, init.attributes.get_int("keepdims", 1));
    LOKA_ASSIGN_OR_RETURN(const int64_t last, init.attributes.get_int("select_last_index", 0));
    attrs.keepdims = keepdims != 0;
    attrs.select_last_index = last != 0;
    return make_function_kernel([attrs](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
      return run_arg(attrs, in, out, context);
    });
  });
}

}  // namespace

void register_reduction_ops(OpRegistry& registry) {
  add_reduce(registry, "ReduceSum", Reduce::kSum, 13);
  add_reduce(registry, "ReduceMean", Reduce::kMean, 18);
  add_reduce(registry, "ReduceMax", Reduce::kMax, 18);
  add_reduce(registry, "ReduceMin", Reduce::kMin, 18);
  add_reduce(registry, "ReduceProd", Reduce::kProd, 18);
  add_reduce(registry, "ReduceSumSquare", Reduce::kSumSquare, 18);
  add_reduce(registry, "ReduceL1", Reduce::kL1, 18);
  add_reduce(registry, "ReduceL2", Reduce::kL2, 18);
  add_reduce(registry, "ReduceLogSum", Reduce::kLogSum, 18);
  add_reduce(registry, "ReduceLogSumExp", Reduce::kLogSumExp, 18);
  add_arg(registry, "ArgMax", true);
  add_arg(registry, "ArgMin", false);
}

}  // namespace loka
