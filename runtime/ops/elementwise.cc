// ============================================================================
// runtime/ops/elementwise.cc — unary and broadcasting binary ops, ONNX semantics.
//
// Float ops compute in FP32. Add/Sub/Mul/Div/comparisons also accept INT64 and
// INT32, which exporters use for shape arithmetic. Integer division truncates
// toward zero (as ONNX Runtime), and division by zero is an error, not a trap.
// ============================================================================
#include <cmath>
#include <functional>

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

template <typename T>
Status apply_binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  bool divided_by_zero = false;
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
  for_each_broadcast(out.shape(), a.shape(), b.shape(), [&](int64_t o, int64_t i, int64_t j) {
    const T x = pa[i], y = pb[j];
    switch (op) {
      case BinaryOp::kAdd: po[o] = x + y; break;
      case BinaryOp::kSub: po[o] = x - y; break;
      case BinaryOp::kMul: po[o] = x * y; break;
      case BinaryOp::kDiv:
        if constexpr (std::is_integral_v<T>) {
          if (y == 0) { divided_by_zero = true; po[o] = 0; } else { po[o] = x / y; }
        } else {
          po[o] = x / y;
        }
        break;
      case BinaryOp::kPow: po[o] = static_cast<T>(std::pow(static_cast<double>(x), static_cast<double>(y))); break;
      case BinaryOp::kMax: po[o] = (std::isnan(static_cast<double>(x)) || x > y) ? x : y; break;
      case BinaryOp::kMin: po[o] = (std::isnan(static_cast<double>(x)) || x < y) ? x : y; break;
      default: break;
    }
  });
  if (divided_by_zero) return Status::error("integer division by zero");
  return Status::ok();
}

/// Pow's exponent may have another numeric type than its base (ONNX T1/T2);
/// it is converted to the base's type first.
Result<Tensor> exponent_as(const Tensor& exponent, DType dtype) {
  if (exponent.dtype() == dtype) return exponent;
  const std::vector<float> values = exponent.to_floats();
  if (dtype == DType::kFloat32) return Tensor::from_floats(exponent.shape(), values);
  if (dtype == DType::kInt64) {
    std::vector<int64_t> ints(values.begin(), values.end());
    return Tensor::from_int64s(exponent.shape(), ints);
  }
  return Status::error("Pow with a " + std::string(dtype_name(dtype)) + " base needs an exponent of the same type");
}

Status run_binary(BinaryOp op, const Tensor& a, const Tensor& b_in, Tensor& out, KernelContext& context) {
  Tensor b = b_in;
  if (op == BinaryOp::kPow) {
    LOKA_ASSIGN_OR_RETURN(b, exponent_as(b_in, a.dtype()));
  }
  if (a.dtype() != b.dtype())
    return Status::error("operands have different types " + std::string(dtype_name(a.dtype())) + " and " +
                         std::string(dtype_name(b.dtype())));
  LOKA_ASSIGN_OR_RETURN(const Shape shape, broadcast_shapes(a.shape(), b.shape()));
  const DType out_dtype = is_comparison(op) ? DType::kBool : a.dtype();
  LOKA_ASSIGN_OR_RETURN(out, context.allocate(out_dtype, shape));
  switch (a.dtype()) {
    case DType::kFloat32: return apply_binary<float>(op, a, b, out);
    case DType::kInt64: return apply_binary<int64_t>(op, a, b, out);
    case DType::kInt32: return apply_binary<int32_t>(op, a, b, out);
    case DType::kFloat64: return apply_binary<double>(op, a, b, out);
    default:
      return Status::error("unsupported operand type " + std::string(dtype_name(a.dtype())));
  }
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

using UnaryFn = std::function<float(float)>;

/// Neg and Abs also apply to the integer types shape arithmetic uses.
template <typename T>
void apply_integer_unary(const std::string& op, const Tensor& x, Tensor& y) {
  const T* in = x.data<T>();
  T* out = y.data<T>();
  for (int64_t i = 0; i < x.element_count(); ++i) out[i] = op == "Neg" ? static_cast<T>(-in[i]) : (in[i] < 0 ? static_cast<T>(-in[i]) : in[i]);
}

void add_unary(OpRegistry& registry, const char* name, int min_opset,
               std::function<Result<UnaryFn>(const Attributes&)> make) {
  registry.add("", name, min_opset, 22, [make](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
    LOKA_ASSIGN_OR_RETURN(UnaryFn fn, make(init.attributes));
    const std::string op(init.op_type);
    return make_function_kernel([fn, op](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
      LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "X"));
      const DType dtype = in[0].dtype();
      if ((op == "Neg" || op == "Abs") && (dtype == DType::kInt64 || dtype == DType::kInt32)) {
        LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(dtype, in[0].shape()));
        if (dtype == DType::kInt64) apply_integer_unary<int64_t>(op, in[0], out[0]);
        else apply_integer_unary<int32_t>(op, in[0], out[0]);
        return Status::ok();
      }
      LOKA_RETURN_IF_ERROR(ops::require_float32(in[0], "X"));
      LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(DType::kFloat32, in[0].shape()));
      const float* x = in[0].data<float>();
      float* y = out[0].data<float>();
      const int64_t n = in[0].element_count();
      for (int64_t i = 0; i < n; ++i) y[i] = fn(x[i]);
      return Status::ok();
    });
  });
}

Result<UnaryFn> fixed(UnaryFn fn) { return fn; }

float gelu_exact(float x) { return 0.5f * x * (1.0f + std::erf(x * static_cast<float>(M_SQRT1_2))); }
float gelu_tanh(float x) {
  const float inner = static_cast<float>(std::sqrt(2.0 / M_PI)) * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + std::tanh(inner));
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

  const auto none = [](UnaryFn fn) { return [fn](const Attributes&) { return fixed(fn); }; };
  add_unary(registry, "Relu", 6, none([](float x) { return x > 0.0f ? x : (std::isnan(x) ? x : 0.0f); }));
  add_unary(registry, "Sigmoid", 6, none([](float x) { return 1.0f / (1.0f + std::exp(-x)); }));
  add_unary(registry, "Tanh", 6, none([](float x) { return std::tanh(x); }));
  add_unary(registry, "Erf", 9, none([](float x) { return std::erf(x); }));
  add_unary(registry, "Neg", 6, none([](float x) { return -x; }));
  add_unary(registry, "Exp", 6, none([](float x) { return std::exp(x); }));
  add_unary(registry, "Log", 6, none([](float x) { return std::log(x); }));
  add_unary(registry, "Abs", 6, none([](float x) { return std::fabs(x); }));
  add_unary(registry, "Sqrt", 6, none([](float x) { return std::sqrt(x); }));
  add_unary(registry, "Reciprocal", 6, none([](float x) { return 1.0f / x; }));
  add_unary(registry, "Floor", 6, none([](float x) { return std::floor(x); }));
  add_unary(registry, "Ceil", 6, none([](float x) { return std::ceil(x); }));
  add_unary(registry, "Softplus", 1, none([](float x) { return std::log1p(std::exp(x)); }));
  add_unary(registry, "LeakyRelu", 6, [](const Attributes& attributes) -> Result<UnaryFn> {
    LOKA_ASSIGN_OR_RETURN(const float alpha, attributes.get_float("alpha", 0.01f));
    return UnaryFn([alpha](float x) { return x < 0.0f ? alpha * x : x; });
  });
  add_unary(registry, "Gelu", 20, [](const Attributes& attributes) -> Result<UnaryFn> {
    LOKA_ASSIGN_OR_RETURN(const std::string approximate, attributes.get_string("approximate", "none"));
    if (approximate == "none") return UnaryFn(gelu_exact);
    if (approximate == "tanh") return UnaryFn(gelu_tanh);
    return Status::error("attribute 'approximate' must be 'none' or 'tanh', got '" + approximate + "'");
  });
}

}  // namespace loka
