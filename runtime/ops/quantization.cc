// ============================================================================
// runtime/ops/quantization.cc — QuantizeLinear, DequantizeLinear, Cast, CastLike.
//
// ONNX semantics, opsets 10–22 (Cast from 6). These ops are where FP8 enters
// and leaves a model, so the CPU reference must be bit-exact: every narrow
// float goes through the codecs of loka/float8.h and loka/bfloat16.h (round to
// nearest even; `saturate` clamps FP8 overflow, as ONNX's Cast table says).
//
// Quantize: y = saturate(rint(x / scale) + zero_point) for integer outputs and
// y = fp8(x / scale) for FP8 outputs (whose zero point must be 0); x / scale
// is computed in FP32. Scales are per tensor (scalar or one element), per axis
// (1-D along `axis`) or, from opset 21, per block of `block_size` along `axis`.
// Dequantize: y = (x - zero_point) * scale in FP32, stored as the scale's type.
//
// Cast, where ONNX leaves results undefined, does what is safe and
// deterministic: float -> integer truncates toward zero, saturates to the
// target range and maps NaN to 0; integer -> narrower integer wraps (as numpy).
// Float -> FP16/BF16/FP8 rounds once (a double is first narrowed to float with
// round-to-odd so that the second rounding is exact).
// ============================================================================
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "loka/bfloat16.h"
#include "loka/float8.h"
#include "runtime/op_kernel.h"
#include "runtime/ops/op_helpers.h"

namespace loka {
namespace {

// ----------------------------------------------------------------------------
// Element access by dtype.

/// One element read from any numeric tensor, without losing integer precision.
struct Number {
  enum class Kind { kSigned, kUnsigned, kFloat } kind = Kind::kFloat;
  int64_t s = 0;
  uint64_t u = 0;
  double d = 0.0;
};

template <typename T>
T load(const Tensor& tensor, int64_t index) {
  T value;
  std::memcpy(&value, static_cast<const std::byte*>(tensor.raw()) + index * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return value;
}

template <typename T>
void store(Tensor& tensor, int64_t index, T value) {
  std::memcpy(static_cast<std::byte*>(tensor.raw()) + index * static_cast<int64_t>(sizeof(T)), &value, sizeof(T));
}

Number read_number(const Tensor& tensor, int64_t i) {
  Number n;
  const auto as_signed = [&](int64_t v) { n.kind = Number::Kind::kSigned; n.s = v; };
  const auto as_unsigned = [&](uint64_t v) { n.kind = Number::Kind::kUnsigned; n.u = v; };
  switch (tensor.dtype()) {
    case DType::kFloat32: n.d = load<float>(tensor, i); break;
    case DType::kFloat64: n.d = load<double>(tensor, i); break;
    case DType::kFloat16: n.d = fp16_to_float(load<uint16_t>(tensor, i)); break;
    case DType::kBFloat16: n.d = bf16_to_float(load<uint16_t>(tensor, i)); break;
    case DType::kFloat8E4M3FN: n.d = fp8e4m3fn_to_float(load<uint8_t>(tensor, i)); break;
    case DType::kFloat8E5M2: n.d = fp8e5m2_to_float(load<uint8_t>(tensor, i)); break;
    case DType::kInt8: as_signed(load<int8_t>(tensor, i)); break;
    case DType::kInt16: as_signed(load<int16_t>(tensor, i)); break;
    case DType::kInt32: as_signed(load<int32_t>(tensor, i)); break;
    case DType::kInt64: as_signed(load<int64_t>(tensor, i)); break;
    case DType::kBool: as_signed(load<uint8_t>(tensor, i) != 0); break;
    case DType::kUInt8: as_unsigned(load<uint8_t>(tensor, i)); break;
    case DType::kUInt16: as_unsigned(load<uint16_t>(tensor, i)); break;
    case DType::kUInt32: as_unsigned(load<uint32_t>(tensor, i)); break;
    case DType::kUInt64: as_unsigned(load<uint64_t>(tensor, i)); break;
    default: break;  // rejected by callers (is_castable)
  }
  return n;
}

double to_double(const Number& n) {
  switch (n.kind) {
    case Number::Kind::kSigned: return static_cast<double>(n.s);
    case Number::Kind::kUnsigned: return static_cast<double>(n.u);
    default: return n.d;
  }
}

/// Narrows a double to float rounding to odd: the low bit records inexactness,
/// so a later round-to-nearest into a format with at least two fewer mantissa
/// bits (FP16, BF16, FP8) gives the correctly rounded result of the double.
float to_float_round_to_odd(double value) {
  float narrowed = static_cast<float>(value);
  if (std::isnan(value) || static_cast<double>(narrowed) == value) return narrowed;
  if (std::isinf(narrowed)) narrowed = std::copysign(std::numeric_limits<float>::max(), narrowed);
  if (std::fabs(static_cast<double>(narrowed)) > std::fabs(value)) narrowed = std::nextafter(narrowed, 0.0f);
  return float_from_bits(float_bits(narrowed) | 1u);
}

/// Float -> integer: truncate toward zero, saturate, NaN -> 0.
template <typename T>
T float_to_int(double value) {
  if (std::isnan(value)) return 0;
  const double truncated = std::trunc(value);
  if (truncated <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  // max() of 64-bit types is not a double; compare against 2^bits (exact) instead.
  const double upper = std::ldexp(1.0, std::numeric_limits<T>::digits);
  if (truncated >= upper) return std::numeric_limits<T>::max();
  return static_cast<T>(truncated);
}

template <typename T>
T number_to_int(const Number& n) {
  switch (n.kind) {
    case Number::Kind::kSigned: return static_cast<T>(n.s);  // modular, as numpy's astype
    case Number::Kind::kUnsigned: return static_cast<T>(n.u);
    default: return float_to_int<T>(n.d);
  }
}

/// A value as a float that a narrow float codec may round once more (see to_float_round_to_odd).
float number_to_float_for_narrowing(const Number& n) {
  if (n.kind == Number::Kind::kFloat) return to_float_round_to_odd(n.d);
  return to_float_round_to_odd(to_double(n));  // exact below 2^53
}

void write_number(Tensor& tensor, int64_t i, const Number& n, bool saturate) {
  switch (tensor.dtype()) {
    case DType::kFloat32:
      store<float>(tensor, i, n.kind == Number::Kind::kSigned     ? static_cast<float>(n.s)
                              : n.kind == Number::Kind::kUnsigned ? static_cast<float>(n.u)
                                                                  : static_cast<float>(n.d));
      break;
    case DType::kFloat64: store<double>(tensor, i, to_double(n)); break;
    case DType::kFloat16: store<uint16_t>(tensor, i, float_to_fp16(number_to_float_for_narrowing(n))); break;
    case DType::kBFloat16: store<uint16_t>(tensor, i, float_to_bf16(number_to_float_for_narrowing(n))); break;
    case DType::kFloat8E4M3FN:
      store<uint8_t>(tensor, i, float_to_fp8e4m3fn(number_to_float_for_narrowing(n), saturate));
      break;
    case DType::kFloat8E5M2:
      store<uint8_t>(tensor, i, float_to_fp8e5m2(number_to_float_for_narrowing(n), saturate));
      break;
    case DType::kBool: {
      const bool truth = n.kind == Number::Kind::kSigned ? n.s != 0 : n.kind == Number::Kind::kUnsigned ? n.u != 0 : n.d != 0.0;
      store<uint8_t>(tensor, i, truth ? 1 : 0);
      break;
    }
    case DType::kInt8: store<int8_t>(tensor, i, number_to_int<int8_t>(n)); break;
    case DType::kInt16: store<int16_t>(tensor, i, number_to_int<int16_t>(n)); break;
    case DType::kInt32: store<int32_t>(tensor, i, number_to_int<int32_t>(n)); break;
    case DType::kInt64: store<int64_t>(tensor, i, number_to_int<int64_t>(n)); break;
    case DType::kUInt8: store<uint8_t>(tensor, i, number_to_int<uint8_t>(n)); break;
    case DType::kUInt16: store<uint16_t>(tensor, i, number_to_int<uint16_t>(n)); break;
    case DType::kUInt32: store<uint32_t>(tensor, i, number_to_int<uint32_t>(n)); break;
    case DType::kUInt64: store<uint64_t>(tensor, i, number_to_int<uint64_t>(n)); break;
    default: break;
  }
}

/// True for the dtypes Cast reads and writes (every supported numeric type).
bool is_castable(DType dtype) { return dtype_is_supported(static_cast<int32_t>(dtype)); }

std::string type_name(DType dtype) { return std::string(dtype_name(dtype)); }

// ----------------------------------------------------------------------------
// Cast / CastLike.

Status run_cast(const Tensor& input, DType to, bool saturate, Tensor& output, KernelContext& context) {
  if (!is_castable(input.dtype())) return Status::error("Cast cannot read input of type " + type_name(input.dtype()));
  LOKA_ASSIGN_OR_RETURN(output, context.allocate(to, input.shape()));
  const int64_t n = input.element_count();
  if (input.dtype() == to) {
    if (n > 0) std::memcpy(output.raw(), input.raw(), input.byte_size());
    return Status::ok();
  }
  if (input.dtype() == DType::kFloat32 && dtype_is_fp8(to)) {  // the hot path: one rounding, no detour
    const float* x = input.data<float>();
    uint8_t* y = output.data<uint8_t>();
    for (int64_t i = 0; i < n; ++i)
      y[i] = to == DType::kFloat8E4M3FN ? float_to_fp8e4m3fn(x[i], saturate) : float_to_fp8e5m2(x[i], saturate);
    return Status::ok();
  }
  for (int64_t i = 0; i < n; ++i) write_number(output, i, read_number(input, i), saturate);
  return Status::ok();
}

Result<bool> read_saturate(const KernelInit& init) {
  LOKA_ASSIGN_OR_RETURN(const int64_t saturate, init.attributes.get_int("saturate", 1));
  if (saturate != 0 && saturate != 1)
    return Status::error("attribute 'saturate' must be 0 or 1, got " + std::to_string(saturate));
  return saturate == 1;
}

Result<std::unique_ptr<OpKernel>> make_cast(const KernelInit& init) {
  LOKA_ASSIGN_OR_RETURN(const int64_t to_number, init.attributes.get_int("to"));
  if (to_number < 0 || to_number > std::numeric_limits<int32_t>::max() ||
      !is_castable(static_cast<DType>(to_number)))
    return Status::error("Cast to type " + std::to_string(to_number) + " is not supported");
  const DType to = static_cast<DType>(to_number);
  LOKA_ASSIGN_OR_RETURN(const bool saturate, read_saturate(init));
  return make_function_kernel([to, saturate](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
    LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "input"));
    return run_cast(in[0], to, saturate, out[0], context);
  });
}

Result<std::unique_ptr<OpKernel>> make_cast_like(const KernelInit& init) {
  LOKA_ASSIGN_OR_RETURN(const bool saturate, read_saturate(init));
  return make_function_kernel([saturate](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
    LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "input"));
    LOKA_RETURN_IF_ERROR(ops::require_input(in, 1, "target_type"));
    if (!is_castable(in[1].dtype())) return Status::error("CastLike to " + type_name(in[1].dtype()) + " is not supported");
    return run_cast(in[0], in[1].dtype(), saturate, out[0], context);
  });
}

// ----------------------------------------------------------------------------
// Scale layout shared by QuantizeLinear and DequantizeLinear.

/// How a scale (and its zero point) maps onto the elements of x, viewed as
/// [outer, axis_dim, inner] around the quantization axis.
struct ScaleLayout {
  enum class Mode { kTensor, kAxis, kBlock } mode = Mode::kTensor;
  int64_t outer = 1, axis_dim = 1, inner = 1;
  int64_t block = 1;             ///< elements per block along the axis (kBlock)
  int64_t scale_axis_dim = 1;    ///< scale's extent along the axis (kBlock)

  int64_t scale_index(int64_t o, int64_t a, int64_t j) const {
    switch (mode) {
      case Mode::kTensor: return 0;
      case Mode::kAxis: return a;
      default: return (o * scale_axis_dim + a / block) * inner + j;
    }
  }
};

struct QuantAttributes {
  int64_t axis = 1;
  int64_t block_size = 0;
  bool saturate = true;
  DType output_dtype = DType::kUndefined;  ///< QuantizeLinear 21: used when there is no zero point
  int opset = 0;
};

Result<ScaleLayout> scale_layout(const Tensor& x, const Tensor& scale, const QuantAttributes& attrs) {
  ScaleLayout layout;
  if (scale.element_count() == 1) {  // per tensor, whatever the rank (as ONNX's reference)
    layout.inner = x.element_count();
    return layout;
  }
  LOKA_ASSIGN_OR_RETURN(const int axis, ops::normalize_axis(attrs.axis, x.rank()));
  for (int d = 0; d < x.rank(); ++d) {
    if (d < axis) layout.outer *= x.dim(d);
    if (d > axis) layout.inner *= x.dim(d);
  }
  layout.axis_dim = x.dim(axis);
  if (attrs.block_size == 0) {
    if (scale.rank() != 1 || scale.dim(0) != layout.axis_dim)
      return Status::error("scale of shape " + shape_to_string(scale.shape()) + " is neither a scalar nor 1-D of size " +
                           std::to_string(layout.axis_dim) + " (x" + shape_to_string(x.shape()) + ", axis " +
                           std::to_string(attrs.axis) + ")");
    layout.mode = ScaleLayout::Mode::kAxis;
    return layout;
  }
  const int64_t blocks = (layout.axis_dim + attrs.block_size - 1) / attrs.block_size;
  Shape expected = x.shape();
  expected[static_cast<size_t>(axis)] = blocks;
  if (scale.shape() != expected)
    return Status::error("blocked scale must have shape " + shape_to_string(expected) + " for x" +
                         shape_to_string(x.shape()) + " and block_size " + std::to_string(attrs.block_size) + ", got " +
                         shape_to_string(scale.shape()));
  layout.mode = ScaleLayout::Mode::kBlock;
  layout.block = attrs.block_size;
  layout.scale_axis_dim = blocks;
  return layout;
}

Status check_scale(const Tensor& scale, const QuantAttributes& attrs, const char* what) {
  if (scale.dtype() != DType::kFloat32 && scale.dtype() != DType::kFloat16 && scale.dtype() != DType::kBFloat16)
    return Status::error(std::string(what) + " must be FLOAT, FLOAT16 or BFLOAT16, got " + type_name(scale.dtype()));
  if (attrs.opset < 21 && scale.rank() > 1)
    return Status::error(std::string(what) + " must be a scalar or 1-D before opset 21, got shape " +
                         shape_to_string(scale.shape()));
  return Status::ok();
}

/// The zero point must have the scale's shape (a scalar and a one-element 1-D count as equal).
Status check_zero_point_shape(const Tensor& zero_point, const Tensor& scale) {
  const bool both_single = zero_point.element_count() == 1 && scale.element_count() == 1 && zero_point.rank() <= 1 &&
                           scale.rank() <= 1;
  if (!both_single && zero_point.shape() != scale.shape())
    return Status::error("zero point shape " + shape_to_string(zero_point.shape()) + " differs from scale shape " +
                         shape_to_string(scale.shape()));
  return Status::ok();
}

/// FP8 zero points carry no information in ONNX: they must be (±)0.
Status check_fp8_zero_point_is_zero(const Tensor& zero_point) {
  for (int64_t i = 0; i < zero_point.element_count(); ++i)
    if ((load<uint8_t>(zero_point, i) & 0x7F) != 0)
      return Status::error("a " + type_name(zero_point.dtype()) + " zero point must be 0");
  return Status::ok();
}

/// Reads one float element of a float-typed tensor (scale or x).
float read_float(const Tensor& tensor, int64_t i) { return static_cast<float>(to_double(read_number(tensor, i))); }

/// Every element of a small tensor (scales, zero points) as float; all zeros for an absent one.
std::vector<float> read_all_floats(const Tensor& tensor, size_t count_if_absent) {
  std::vector<float> values(tensor.defined() ? static_cast<size_t>(tensor.element_count()) : count_if_absent, 0.0f);
  if (tensor.defined())
    for (size_t i = 0; i < values.size(); ++i) values[i] = read_float(tensor, static_cast<int64_t>(i));
  return values;
}

/// Calls fn(element_index, scale_index) for every element of x, in order.
template <typename Fn>
void for_each_scaled(const ScaleLayout& layout, Fn fn) {
  int64_t index = 0;
  for (int64_t o = 0; o < layout.outer; ++o)
    for (int64_t a = 0; a < layout.axis_dim; ++a)
      for (int64_t j = 0; j < layout.inner; ++j) fn(index++, layout.scale_index(o, a, j));
}

// ----------------------------------------------------------------------------
// QuantizeLinear.

struct IntegerRange {
  double low, high;
};

std::optional<IntegerRange> integer_range(DType dtype) {
  switch (dtype) {
    case DType::kUInt8: return IntegerRange{0, 255};
    case DType::kInt8: return IntegerRange{-128, 127};
    case DType::kUInt16: return IntegerRange{0, 65535};
    case DType::kInt16: return IntegerRange{-32768, 32767};
    default: return std::nullopt;
  }
}

Status run_quantize(const QuantAttributes& attrs, std::span<const Tensor> in, std::span<Tensor> out,
                    KernelContext& context) {
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "x"));
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 1, "y_scale"));
  const Tensor& x = in[0];
  const Tensor& scale = in[1];
  const Tensor zero_point = in.size() > 2 ? in[2] : Tensor();
  if (x.dtype() != DType::kFloat32 && x.dtype() != DType::kFloat16 && x.dtype() != DType::kBFloat16 &&
      x.dtype() != DType::kInt32)
    return Status::error("x must be FLOAT, FLOAT16, BFLOAT16 or INT32, got " + type_name(x.dtype()));
  LOKA_RETURN_IF_ERROR(check_scale(scale, attrs, "y_scale"));

  DType out_dtype = attrs.output_dtype == DType::kUndefined ? DType::kUInt8 : attrs.output_dtype;
  if (zero_point.defined()) {
    if (attrs.output_dtype != DType::kUndefined && attrs.output_dtype != zero_point.dtype())
      return Status::error("output_dtype " + type_name(attrs.output_dtype) + " differs from the zero point's type " +
                           type_name(zero_point.dtype()));
    out_dtype = zero_point.dtype();
    LOKA_RETURN_IF_ERROR(check_zero_point_shape(zero_point, scale));
  }
  const std::optional<IntegerRange> range = integer_range(out_dtype);
  const bool fp8 = out_dtype == DType::kFloat8E4M3FN || out_dtype == DType::kFloat8E5M2;
  if (!range && !fp8) return Status::error("cannot quantize to " + type_name(out_dtype));
  if (fp8 && zero_point.defined()) LOKA_RETURN_IF_ERROR(check_fp8_zero_point_is_zero(zero_point));

  LOKA_ASSIGN_OR_RETURN(const ScaleLayout layout, scale_layout(x, scale, attrs));
  LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(out_dtype, x.shape()));
  Tensor& y = out[0];
  if (x.element_count() == 0) return Status::ok();
  // Scales and zero points are small: decode them once (8/16-bit zero points are exact in float).
  const std::vector<float> scales = read_all_floats(scale, 0);
  const std::vector<float> zero_points = read_all_floats(range ? zero_point : Tensor(), scales.size());

  if (fp8) {
    uint8_t* codes = y.data<uint8_t>();
    const bool e4m3 = out_dtype == DType::kFloat8E4M3FN;
    for_each_scaled(layout, [&](int64_t i, int64_t s) {
      const float q = read_float(x, i) / scales[static_cast<size_t>(s)];
      codes[i] = e4m3 ? float_to_fp8e4m3fn(q, attrs.saturate) : float_to_fp8e5m2(q, attrs.saturate);
    });
    return Status::ok();
  }
  for_each_scaled(layout, [&](int64_t i, int64_t s) {
    const float q = read_float(x, i) / scales[static_cast<size_t>(s)];
    const double zp = zero_points[static_cast<size_t>(s)];
    // rint rounds half to even in the default rounding mode; NaN has no level, it maps to the zero point.
    double level = std::isnan(q) ? zp : std::rint(static_cast<double>(q)) + zp;
    level = std::min(std::max(level, range->low), range->high);
    Number n;
    n.kind = Number::Kind::kSigned;
    n.s = static_cast<int64_t>(level);
    write_number(y, i, n, true);
  });
  return Status::ok();
}

// ----------------------------------------------------------------------------
// DequantizeLinear.

Status run_dequantize(const QuantAttributes& attrs, std::span<const Tensor> in, std::span<Tensor> out,
                      KernelContext& context) {
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "x"));
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 1, "x_scale"));
  const Tensor& x = in[0];
  const Tensor& scale = in[1];
  const Tensor zero_point = in.size() > 2 ? in[2] : Tensor();
  const bool fp8 = x.dtype() == DType::kFloat8E4M3FN || x.dtype() == DType::kFloat8E5M2;
  if (!fp8 && !integer_range(x.dtype()) && x.dtype() != DType::kInt32)
    return Status::error("x must be INT8, UINT8, INT16, UINT16, INT32, FLOAT8E4M3FN or FLOAT8E5M2, got " +
                         type_name(x.dtype()));
  LOKA_RETURN_IF_ERROR(check_scale(scale, attrs, "x_scale"));
  if (zero_point.defined()) {
    if (zero_point.dtype() != x.dtype())
      return Status::error("x_zero_point type " + type_name(zero_point.dtype()) + " differs from x type " +
                           type_name(x.dtype()));
    LOKA_RETURN_IF_ERROR(check_zero_point_shape(zero_point, scale));
    if (fp8) LOKA_RETURN_IF_ERROR(check_fp8_zero_point_is_zero(zero_point));
  }
  LOKA_ASSIGN_OR_RETURN(const ScaleLayout layout, scale_layout(x, scale, attrs));
  LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(scale.dtype(), x.shape()));
  Tensor& y = out[0];
  if (x.element_count() == 0) return Status::ok();
  const std::vector<float> scales = read_all_floats(scale, 0);
  const std::vector<float> zero_points = read_all_floats(fp8 ? Tensor() : zero_point, scales.size());

  if (y.dtype() == DType::kFloat32) {
    float* values = y.data<float>();
    for_each_scaled(layout, [&](int64_t i, int64_t s) {
      const size_t k = static_cast<size_t>(s);
      values[i] = (read_float(x, i) - zero_points[k]) * scales[k];
    });
    return Status::ok();
  }
  for_each_scaled(layout, [&](int64_t i, int64_t s) {
    const size_t k = static_cast<size_t>(s);
    Number n;
    n.d = (read_float(x, i) - zero_points[k]) * scales[k];  // FP32 product, rounded once to the scale's type
    write_number(y, i, n, true);
  });
  return Status::ok();
}

Result<QuantAttributes> read_quant_attributes(const KernelInit& init, bool quantize) {
  QuantAttributes attrs;
  attrs.opset = init.opset;
  LOKA_ASSIGN_OR_RETURN(attrs.axis, init.attributes.get_int("axis", 1));
  LOKA_ASSIGN_OR_RETURN(attrs.block_size, init.attributes.get_int("block_size", 0));
  if (attrs.block_size < 0) return Status::error("attribute 'block_size' must be >= 0, got " + std::to_string(attrs.block_size));
  if (!quantize) return attrs;
  LOKA_ASSIGN_OR_RETURN(attrs.saturate, read_saturate(init));
  LOKA_ASSIGN_OR_RETURN(const int64_t output_dtype, init.attributes.get_int("output_dtype", 0));
  if (output_dtype != 0) {
    attrs.output_dtype = static_cast<DType>(output_dtype);
    if (!integer_range(attrs.output_dtype) && attrs.output_dtype != DType::kFloat8E4M3FN &&
        attrs.output_dtype != DType::kFloat8E5M2)
      return Status::error("output_dtype " + type_name(attrs.output_dtype) + " is not a supported quantized type");
  }
  return attrs;
}

}  // namespace

void register_quantization_ops(OpRegistry& registry) {
  registry.add("", "Cast", 6, 22, make_cast);
  registry.add("", "CastLike", 15, 22, make_cast_like);
  registry.add("", "QuantizeLinear", 10, 22, [](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
    LOKA_ASSIGN_OR_RETURN(const QuantAttributes attrs, read_quant_attributes(init, true));
    return make_function_kernel([attrs](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
      return run_quantize(attrs, in, out, context);
    });
  });
  registry.add("", "DequantizeLinear", 10, 22, [](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
    LOKA_ASSIGN_OR_RETURN(const QuantAttributes attrs, read_quant_attributes(init, false));
    return make_function_kernel([attrs](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
      return run_dequantize(attrs, in, out, context);
    });
  });
}

}  // namespace loka
