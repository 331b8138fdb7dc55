// ============================================================================
// runtime/ops/elementwise.cc — unary and broadcasting binary ops, ONNX semantics.
//
// FP32 and FP64 compute natively, FP16/BF16 in FP32 with one rounding per op.
// Binary arithmetic, Max/Min and comparisons accept every integer width
// (exporters use INT64/INT32 for shape arithmetic); integer arithmetic wraps on
// overflow, division truncates toward zero (as ONNX Runtime), and division by
// zero is an error, not a trap. Neg/Abs/Relu also accept integers.
// ============================================================================
#include <cmath>
#include <functional>
#include <limits>
#include <type_traits>

#include "loka/bfloat16.h"
#include "runtime/op_kernel.h"
#include "runtime/ops/op_helpers.h"

namespace loka {
namespace {

using ops::broadcast_shapes;
using ops::broadcast_strides;

/// Calls fn(out_index, a_index, b_index) for every element of `out_shape`,
/// walking the last dimension in an inner loop.
template <typename Fn>
void for_each_broadcast(const Shape& out_shape, const Shape& a_shape, const Shape& b_shape, Fn fn) {
  const int64_t total = element_count(out_shape);
  if (total == 0) return;
  if (a_shape == b_shape) {
    for (int64_t i = 0; i < total; ++i) fn(i, i, i);
    return;
  }
  const std::vector<int64_t> sa = broadcast_strides(a_shape, out_shape);
  const std::vector<int64_t> sb = broadcast_strides(b_shape, out_shape);
  const int rank = static_cast<int>(out_shape.size());
  if (rank == 0) {
    fn(0, 0, 0);
    return;
  }
  const int64_t inner = out_shape.back();
  const int64_t inner_a = sa.back(), inner_b = sb.back();
  std::vector<int64_t> counter(static_cast<size_t>(rank), 0);
  int64_t ia = 0, ib = 0;
  for (int64_t out = 0; out < total; out += inner) {
    for (int64_t j = 0; j < inner; ++j) fn(out + j, ia + j * inner_a, ib + j * inner_b);
    // Advance the outer counter (all dims but the last).
    for (int d = rank - 2; d >= 0; --d) {
      const size_t du = static_cast<size_t>(d);
      ++counter[du];
      ia += sa[du];
      ib += sb[du];
      if (counter[du] < out_shape[du]) break;
      ia -= sa[du] * counter[du];
      ib -= sb[du] * counter[du];
      counter[du] = 0;
    }
  }
}

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kPow, kMax, kMin, kEqual, kLess, kGreater, kLessOrEqual, kGreaterOrEqual };

bool is_comparison(BinaryOp op) { return op >= BinaryOp::kEqual; }

/// Calls fn(T{}) with T the C++ element type of `dtype`, for the types whose
/// arithmetic runs natively (every int width, float32, float64); false otherwise.
template <typename Fn>
bool visit_native(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32: fn(float{}); return true;
    case DType::kFloat64: fn(double{}); return true;
    case DType::kInt8: fn(int8_t{}); return true;
    case DType::kInt16: fn(int16_t{}); return true;
    case DType::kInt32: fn(int32_t{}); return true;
    case DType::kInt64: fn(int64_t{}); return true;
    case DType::kUInt8: fn(uint8_t{}); return true;
    case DType::kUInt16: fn(uint16_t{}); return true;
    case DType::kUInt32: fn(uint32_t{}); return true;
    case DType::kUInt64: fn(uint64_t{}); return true;
    default: return false;
  }
}

/// FP16 and BF16 compute in FP32 and round back once per op (nearest even).
bool is_half(DType dtype) { return dtype == DType::kFloat16 || dtype == DType::kBFloat16; }

Tensor half_to_float(const Tensor& tensor) { return Tensor::from_floats(tensor.shape(), tensor.to_floats()); }

void float_to_half(const Tensor& values, Tensor& out) {
  const float* in = values.data<float>();
  uint16_t* codes = out.data<uint16_t>();
  const bool bf16 = out.dtype() == DType::kBFloat16;
  for (int64_t i = 0; i < out.element_count(); ++i) codes[i] = bf16 ? float_to_bf16(in[i]) : float_to_fp16(in[i]);
}

/// Integer arithmetic wraps on overflow (as two's complement hardware and ONNX
/// Runtime do) instead of being undefined: it runs in an unsigned type at least
/// as wide as `unsigned`, so narrow types cannot overflow through promotion either.
template <typename T>
using WrapType = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

/// A double converted to T, saturating (NaN becomes 0) where the value does not fit:
/// a plain cast of an out-of-range double to an integer is undefined behaviour.
template <typename T>
T saturate_cast(double value) {
  if constexpr (std::is_integral_v<T>) {
    if (std::isnan(value)) return T(0);
    if (value <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (value >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  }
  return static_cast<T>(value);
}

/// Elements of a numeric tensor as doubles (Pow's exponent may have any numeric type).
std::vector<double> to_doubles(const Tensor& tensor) {
  if (tensor.dtype() == DType::kFloat64) return {tensor.data<double>(), tensor.data<double>() + tensor.element_count()};
  if (dtype_is_float(tensor.dtype())) {
    const std::vector<float> values = tensor.to_floats();
    return {values.begin(), values.end()};
  }
  const std::vector<int64_t> values = tensor.to_int64s();
  return {values.begin(), values.end()};
}

/// Elementwise integer arithmetic, wrapping (see WrapType); an integer division by zero fails.
template <typename T>
Status apply_integer_arithmetic(BinaryOp op, const T* pa, const Shape& a_shape, const T* pb, const Shape& b_shape, T* po,
                                const Shape& out_shape) {
  bool divided_by_zero = false;
  for_each_broadcast(out_shape, a_shape, b_shape, [&](int64_t o, int64_t i, int64_t j) {
    const T x = pa[i], y = pb[j];
    using W = WrapType<T>;
    switch (op) {
      case BinaryOp::kAdd: po[o] = static_cast<T>(static_cast<W>(x) + static_cast<W>(y)); break;
      case BinaryOp::kSub: po[o] = static_cast<T>(static_cast<W>(x) - static_cast<W>(y)); break;
      case BinaryOp::kMul: po[o] = static_cast<T>(static_cast<W>(x) * static_cast<W>(y)); break;
      case BinaryOp::kDiv:
        if (y == 0) {
          divided_by_zero = true;
          po[o] = 0;
        } else if (std::is_signed_v<T> && x == std::numeric_limits<T>::lowest() && y == static_cast<T>(-1)) {
          po[o] = x;  // the one signed quotient that overflows (and traps on x86): wraps to itself
        } else {
          po[o] = static_cast<T>(x / y);
        }
        break;
      case BinaryOp::kMax: po[o] = x > y ? x : y; break;
      case BinaryOp::kMin: po[o] = x < y ? x : y; break;
      default: break;
    }
  });
  if (divided_by_zero) return Status::error("integer division by zero");
  return Status::ok();
}

template <typename T>
Status apply_binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  const T* pa = a.data<T>();
  if (op == BinaryOp::kPow) {
    // pow in double, then to T: exact for every float32 and for integer results below 2^53.
    const std::vector<double> exponent = to_doubles(b);
    T* po = out.data<T>();
    for_each_broadcast(out.shape(), a.shape(), b.shape(), [&](int64_t o, int64_t i, int64_t j) {
      po[o] = saturate_cast<T>(std::pow(static_cast<double>(pa[i]), exponent[static_cast<size_t>(j)]));
    });
    return Status::ok();
  }
  const T* pb = b.data<T>();
  if (is_comparison(op)) {
    uint8_t* po = out.data<uint8_t>();
    for_each_broadcast(out.shape(), a.shape(), b.shape(), [&](int64_t o, int64_t i, int64_t j) {
      const T x = pa[i], y = pb[j];
      switch (op) {
        case BinaryOp::kEqual: po[o] = x == y; break;
        case BinaryOp::kLess: po[o] = x < y; break;
        case BinaryOp::kGreater: po[o] = x > y; break;
        case BinaryOp::kLessOrEqual: po[o] = x <= y; break;
        default: po[o] = x >= y; break;
      }
    });
    return Status::ok();
  }
  T* po = out.data<T>();
  if constexpr (std::is_floating_point_v<T>) {
    // One loop per operation, not a switch per element: the loops vectorize (elementwise
    // arithmetic was an eighth of a Probe's time on tiny DHEN).
    const auto combine = [&](auto fn) {
      for_each_broadcast(out.shape(), a.shape(), b.shape(),
                         [&](int64_t o, int64_t i, int64_t j) { po[o] = fn(pa[i], pb[j]); });
    };
    switch (op) {
      case BinaryOp::kAdd: combine([](T x, T y) { return x + y; }); break;
      case BinaryOp::kSub: combine([](T x, T y) { return x - y; }); break;
      case BinaryOp::kMul: combine([](T x, T y) { return x * y; }); break;
      case BinaryOp::kDiv: combine([](T x, T y) { return x / y; }); break;
      case BinaryOp::kMax: combine([](T x, T y) { return (std::isnan(x) || x > y) ? x : y; }); break;
      case BinaryOp::kMin: combine([](T x, T y) { return (std::isnan(x) || x < y) ? x : y; }); break;
      default: break;
    }
    return Status::ok();
  } else {
    return apply_integer_arithmetic(op, pa, a.shape(), pb, b.shape(), po, out.shape());
  }
}

Status run_binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out, KernelContext& context) {
  // Pow's exponent may have another numeric type than its base (ONNX T1/T2).
  if (op != BinaryOp::kPow && a.dtype() != b.dtype())
    return Status::error("operands have different types " + std::string(dtype_name(a.dtype())) + " and " +
                         std::string(dtype_name(b.dtype())));
  if (op == BinaryOp::kPow && (dtype_size(b.dtype()) == 0 || b.dtype() == DType::kBool || dtype_is_fp8(b.dtype())))
    return Status::error("unsupported exponent type " + std::string(dtype_name(b.dtype())));
  LOKA_ASSIGN_OR_RETURN(const Shape shape, broadcast_shapes(a.shape(), b.shape()));
  const DType out_dtype = is_comparison(op) ? DType::kBool : a.dtype();
  LOKA_ASSIGN_OR_RETURN(out, context.allocate(out_dtype, shape));
  if (is_half(a.dtype())) {
    const Tensor fa = half_to_float(a), fb = op == BinaryOp::kPow ? b : half_to_float(b);
    if (is_comparison(op)) return apply_binary<float>(op, fa, fb, out);
    Tensor result = Tensor::zeros(DType::kFloat32, shape);
    LOKA_RETURN_IF_ERROR(apply_binary<float>(op, fa, fb, result));
    float_to_half(result, out);
    return Status::ok();
  }
  if (a.dtype() == DType::kBool && is_comparison(op)) return apply_binary<uint8_t>(op, a, b, out);
  Status status = Status::ok();
  if (!visit_native(a.dtype(), [&](auto zero) { status = apply_binary<decltype(zero)>(op, a, b, out); }))
    return Status::error("unsupported operand type " + std::string(dtype_name(a.dtype())));
  return status;
}

void add_binary(OpRegistry& registry, const char* name, BinaryOp op, int min_opset = 7) {
  registry.add("", name, min_opset, 22, [op](const KernelInit&) -> Result<std::unique_ptr<OpKernel>> {
    return make_function_kernel([op](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
      LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "A"));
      LOKA_RETURN_IF_ERROR(ops::require_input(in, 1, "B"));
      return run_binary(op, in[0], in[1], out[0], context);
    });
  });
}

/// Max/Min take any number of inputs; they fold pairwise.
void add_variadic(OpRegistry& registry, const char* name, BinaryOp op) {
  registry.add("", name, 8, 22, [op](const KernelInit&) -> Result<std::unique_ptr<OpKernel>> {
    return make_function_kernel([op](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
      LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "data_0"));
      Tensor acc = in[0];
      for (size_t i = 1; i < in.size(); ++i) {
        LOKA_RETURN_IF_ERROR(ops::require_input(in, i, "data_i"));
        Tensor next;
        LOKA_RETURN_IF_ERROR(run_binary(op, acc, in[i], next, context));
        acc = std::move(next);
      }
      out[0] = in.size() == 1 ? acc.clone() : acc;
      return Status::ok();
    });
  });
}

/// A unary op at float and double precision (FP16/BF16 use the float one), each applied to a
/// whole tensor: fn(in, out, count). One indirect call per tensor, not per element (a call per
/// element was a twentieth of a Probe's time on tiny DHEN).
struct UnaryFn {
  std::function<void(const float*, float*, int64_t)> f32;
  std::function<void(const double*, double*, int64_t)> f64;
};

/// Both precisions of one generic lambda, each looping over a tensor's elements.
template <typename G>
UnaryFn both(G g) {
  const auto over = [g](const auto* in, auto* out, int64_t count) {
    for (int64_t i = 0; i < count; ++i) out[i] = g(in[i]);
  };
  return {[over](const float* in, float* out, int64_t count) { over(in, out, count); },
          [over](const double* in, double* out, int64_t count) { over(in, out, count); }};
}

/// Which integer types an op accepts besides the float ones (ONNX type constraints).
enum class IntegerUse { kNone, kNeg, kAbs, kRelu };

template <typename T>
void apply_integer_unary(IntegerUse use, const Tensor& x, Tensor& y) {
  const T* in = x.data<T>();
  T* out = y.data<T>();
  using W = WrapType<T>;
  for (int64_t i = 0; i < x.element_count(); ++i) {
    const T v = in[i];
    const T negated = static_cast<T>(W(0) - static_cast<W>(v));  // wraps for the lowest value
    switch (use) {
      case IntegerUse::kNeg: out[i] = negated; break;
      case IntegerUse::kAbs:
        if constexpr (std::is_signed_v<T>) out[i] = v < T(0) ? negated : v;
        else out[i] = v;
        break;
      default: out[i] = v > T(0) ? v : T(0); break;
    }
  }
}

template <typename T, typename F>
void apply_float_unary(const F& fn, const Tensor& x, Tensor& y) {
  fn(x.data<T>(), y.data<T>(), x.element_count());
}

void add_unary(OpRegistry& registry, const char* name, int min_opset, std::function<Result<UnaryFn>(const Attributes&)> make,
               IntegerUse integer_use = IntegerUse::kNone) {
  registry.add("", name, min_opset, 22, [make, integer_use](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
    LOKA_ASSIGN_OR_RETURN(UnaryFn fn, make(init.attributes));
    return make_function_kernel([fn, integer_use](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
      LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "X"));
      const Tensor& x = in[0];
      const DType dtype = x.dtype();
      LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(dtype, x.shape()));
      switch (dtype) {
        case DType::kFloat32: apply_float_unary<float>(fn.f32, x, out[0]); return Status::ok();
        case DType::kFloat64: apply_float_unary<double>(fn.f64, x, out[0]); return Status::ok();
        case DType::kFloat16:
        case DType::kBFloat16: {
          Tensor values = half_to_float(x);
          apply_float_unary<float>(fn.f32, values, values);
          float_to_half(values, out[0]);
          return Status::ok();
        }
        default: break;
      }
      if (integer_use != IntegerUse::kNone && !dtype_is_float(dtype) && dtype != DType::kBool &&
          visit_native(dtype, [&](auto zero) {
            if constexpr (std::is_integral_v<decltype(zero)>) apply_integer_unary<decltype(zero)>(integer_use, x, out[0]);
          }))
        return Status::ok();
      return Status::error("X has unsupported type " + std::string(dtype_name(dtype)));
    });
  });
}

template <typename T>
T gelu_exact(T x) { return T(0.5) * x * (T(1) + std::erf(x * static_cast<T>(M_SQRT1_2))); }
template <typename T>
T gelu_tanh(T x) {
  const T inner = static_cast<T>(std::sqrt(2.0 / M_PI)) * (x + T(0.044715) * x * x * x);
  return T(0.5) * x * (T(1) + std::tanh(inner));
}

}  // namespace

void register_elementwise_ops(OpRegistry& registry) {
  add_binary(registry, "Add", BinaryOp::kAdd);
  add_binary(registry, "Sub", BinaryOp::kSub);
  add_binary(registry, "Mul", BinaryOp::kMul);
  add_binary(registry, "Div", BinaryOp::kDiv);
  add_binary(registry, "Pow", BinaryOp::kPow);
  add_binary(registry, "Equal", BinaryOp::kEqual);
  add_binary(registry, "Less", BinaryOp::kLess);
  add_binary(registry, "Greater", BinaryOp::kGreater);
  add_binary(registry, "LessOrEqual", BinaryOp::kLessOrEqual, 12);
  add_binary(registry, "GreaterOrEqual", BinaryOp::kGreaterOrEqual, 12);
  add_variadic(registry, "Max", BinaryOp::kMax);
  add_variadic(registry, "Min", BinaryOp::kMin);

  const auto none = [](UnaryFn fn) { return [fn](const Attributes&) -> Result<UnaryFn> { return fn; }; };
  add_unary(registry, "Relu", 6, none(both([](auto x) { return x > 0 ? x : (std::isnan(x) ? x : decltype(x)(0)); })),
            IntegerUse::kRelu);
  add_unary(registry, "Sigmoid", 6, none(both([](auto x) { return decltype(x)(1) / (decltype(x)(1) + std::exp(-x)); })));
  add_unary(registry, "Tanh", 6, none(both([](auto x) { return std::tanh(x); })));
  add_unary(registry, "Erf", 9, none(both([](auto x) { return std::erf(x); })));
  add_unary(registry, "Neg", 6, none(both([](auto x) { return -x; })), IntegerUse::kNeg);
  add_unary(registry, "Exp", 6, none(both([](auto x) { return std::exp(x); })));
  add_unary(registry, "Log", 6, none(both([](auto x) { return std::log(x); })));
  add_unary(registry, "Abs", 6, none(both([](auto x) { return std::fabs(x); })), IntegerUse::kAbs);
  add_unary(registry, "Sqrt", 6, none(both([](auto x) { return std::sqrt(x); })));
  add_unary(registry, "Reciprocal", 6, none(both([](auto x) { return decltype(x)(1) / x; })));
  add_unary(registry, "Floor", 6, none(both([](auto x) { return std::floor(x); })));
  add_unary(registry, "Ceil", 6, none(both([](auto x) { return std::ceil(x); })));
  add_unary(registry, "Softplus", 1, none(both([](auto x) { return std::log1p(std::exp(x)); })));
  add_unary(registry, "LeakyRelu", 6, [](const Attributes& attributes) -> Result<UnaryFn> {
    LOKA_ASSIGN_OR_RETURN(const float alpha, attributes.get_float("alpha", 0.01f));
    return both([alpha](auto x) { return x < 0 ? decltype(x)(alpha) * x : x; });
  });
  add_unary(registry, "Gelu", 20, [](const Attributes& attributes) -> Result<UnaryFn> {
    LOKA_ASSIGN_OR_RETURN(const std::string approximate, attributes.get_string("approximate", "none"));
    if (approximate == "none") return both([](auto x) { return gelu_exact(x); });
    if (approximate == "tanh") return both([](auto x) { return gelu_tanh(x); });
    return Status::error("attribute 'approximate' must be 'none' or 'tanh', got '" + approximate + "'");
  });
}

}  // namespace loka
