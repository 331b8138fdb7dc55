// ============================================================================
// runtime/ops/loka_ops.cc — the ai.loka operator domain, version 1, on the CPU:
// QuantizedGemm, FusedGemm, LayerNormQuant, ResidualLayerNorm, QuantizedGather, EmbeddingBags and ConcatQuant
// (docs/loka_ops.md).
//
// This file is the reference implementation the doc points to, so every FP8
// value goes through the bit-exact codecs (loka/float8.h, via the emulation
// routines of kernels/cpu/fp8_quantize.h, which the Probe uses too: what the
// Probe measures is what this kernel computes). Operands are dequantized to
// float and multiplied by the FP32 reference GEMM, which is exactly what an
// FP8 tensor-core GEMM with FP32 accumulation computes up to summation order.
// LayerNormQuant shares its row arithmetic with ONNX LayerNormalization
// (kernels/cpu/layer_norm.h) so "LayerNorm, then quantize" holds bit for bit.
// Large activations (the DCN residual stream) may be stored as BF16 to halve
// their bytes; they go through the codec of loka/bfloat16.h: widened exactly
// on the way in, so the float recipes apply unchanged, and a BF16 output
// (`output_dtype` = 16) is the float32 result rounded once, to nearest even.
//
// Every input is checked (presence, dtype, rank, sizes, scale values that
// are divided by) before memory is touched; messages name the input, and the
// session prefixes the node. Attributes are parsed when the plan is built.
// ============================================================================
#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/e4m3_encode.h"
#include "kernels/cpu/fp8_quantize.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/layer_norm.h"
#include "loka/bfloat16.h"
#include "loka/float8.h"
#include "runtime/op_kernel.h"
#include "runtime/ops/op_helpers.h"

namespace loka {
namespace {

constexpr const char* kDomain = "ai.loka";

// ----------------------------------------------------------------------------
// Shared checks.

Status require_e4m3(const Tensor& tensor, const char* what) {
  if (tensor.dtype() != DType::kFloat8E4M3FN)
    return Status::error(std::string(what) + " must be FLOAT8E4M3FN, got " + std::string(dtype_name(tensor.dtype())));
  return Status::ok();
}

/// Error unless `tensor` is a float32 vector of exactly `length` elements.
Status require_float_vector(const Tensor& tensor, int64_t length, const char* what, const char* length_name) {
  LOKA_RETURN_IF_ERROR(ops::require_float32(tensor, what));
  if (tensor.rank() != 1 || tensor.dim(0) != length)
    return Status::error(std::string(what) + " must have shape [" + length_name + "] = [" + std::to_string(length) +
                         "], got " + shape_to_string(tensor.shape()));
  return Status::ok();
}

/// Error unless `tensor` is a float32 scale of shape [] or [1].
Status require_scalar_scale(const Tensor& tensor, const char* what) {
  LOKA_RETURN_IF_ERROR(ops::require_float32(tensor, what));
  if (tensor.element_count() != 1 || tensor.rank() > 1)
    return Status::error(std::string(what) + " must have shape [] or [1], got " + shape_to_string(tensor.shape()));
  return Status::ok();
}

/// The value of a static scale that values are divided by: it must be finite and positive,
/// or quantization would produce NaN or saturate everything.
Result<float> read_divisor_scale(const Tensor& tensor, const char* what) {
  LOKA_RETURN_IF_ERROR(require_scalar_scale(tensor, what));
  const float scale = tensor.data<float>()[0];
  if (!(scale > 0.0f) || !std::isfinite(scale))
    return Status::error(std::string(what) + " must be finite and > 0, got " + std::to_string(scale));
  return scale;
}

bool has_input(std::span<const Tensor> in, size_t index) { return index < in.size() && in[index].defined(); }

/// `tensor`'s values as float32: its own storage when it is FLOAT, else (BFLOAT16) widened
/// exactly, bits << 16, into `widened` — so a BF16 operand computes what the float32 operand of
/// its widened values would, bit for bit.
const float* float32_values(const Tensor& tensor, std::vector<float>& widened) {
  if (tensor.dtype() == DType::kFloat32) return tensor.data<float>();
  widened = tensor.to_floats();
  return widened.data();
}

/// Where an op with `output_dtype` computes its float32 result: Y itself when Y is FLOAT, else a
/// scratch buffer that store() rounds into the BF16 Y (nearest even, NaN stays NaN), once,
/// after everything that reads the float32 result (QuantizedGemm's Yq) has read it.
class Float32Result {
 public:
  explicit Float32Result(Tensor& y) : y_(y), in_place_(y.dtype() == DType::kFloat32) {
    if (!in_place_) scratch_.resize(static_cast<size_t>(y.element_count()));
  }
  float* data() { return in_place_ ? y_.data<float>() : scratch_.data(); }
  std::span<const float> values() { return {data(), static_cast<size_t>(y_.element_count())}; }
  void store() {
    if (in_place_) return;
    uint16_t* codes = y_.data<uint16_t>();
    for (size_t i = 0; i < scratch_.size(); ++i) codes[i] = float_to_bf16(scratch_[i]);
  }

 private:
  Tensor& y_;
  bool in_place_;
  std::vector<float> scratch_;
};

/// Error unless the node's input count fits [min_inputs, max_inputs] and its output count
/// [1, max_outputs].
Status check_arity(const KernelInit& init, size_t min_inputs, size_t max_inputs, size_t max_outputs = 1) {
  if (init.input_count < min_inputs || init.input_count > max_inputs)
    return Status::error(std::string(init.op_type) + " takes " + std::to_string(min_inputs) +
                         (min_inputs == max_inputs ? "" : " to " + std::to_string(max_inputs)) + " inputs, got " +
                         std::to_string(init.input_count));
  if (init.output_count < 1 || init.output_count > max_outputs)
    return Status::error(std::string(init.op_type) + " has " +
                         (max_outputs == 1 ? "exactly 1 output" : "1 to " + std::to_string(max_outputs) + " outputs") +
                         ", got " + std::to_string(init.output_count));
  return Status::ok();
}

// ----------------------------------------------------------------------------
// QuantizedGemm: Y = act(Xq · Wqᵀ + B) [· Multiplier] [+ Residual], and optionally
// Yq = Q(Y / Y_scale), the next FP8 GEMM's input (fuse-epilogue-quantize), from the
// float32 Y even when Y is stored as BF16.

enum class ActRecipe { kTensor, kRow };
enum class Activation { kNone, kRelu, kGelu };

struct QuantizedGemmAttributes {
  ActRecipe recipe = ActRecipe::kTensor;
  Activation activation = Activation::kNone;
  DType output_dtype = DType::kFloat32;  ///< Y's storage: float32, or BF16 rounded from it
};

/// Same formulas as the ONNX Relu and Gelu(approximate="none") kernels, so a QDQ rewrite
/// (Gemm followed by Relu/Gelu) reproduces this op exactly.
float apply_activation(Activation activation, float v) {
  switch (activation) {
    case Activation::kNone: return v;
    case Activation::kRelu: return v > 0.0f ? v : (std::isnan(v) ? v : 0.0f);
    case Activation::kGelu: return 0.5f * v * (1.0f + std::erf(v * static_cast<float>(M_SQRT1_2)));
  }
  return v;
}

/// Error unless `term` (a Multiplier or Residual) has exactly Y's shape (no broadcasting) and is
/// float32, or also BFLOAT16 when `bf16_allowed` (QuantizedGemm's terms; FusedGemm's stay float32).
Status require_y_shaped(const Tensor& term, const Shape& y_shape, const char* what, bool bf16_allowed) {
  const bool typed = term.dtype() == DType::kFloat32 || (bf16_allowed && term.dtype() == DType::kBFloat16);
  if (typed && term.shape() == y_shape) return Status::ok();
  return Status::error(std::string(what) + " must be FLOAT" + (bf16_allowed ? " or BFLOAT16 " : " ") +
                       shape_to_string(y_shape) + " (Y's shape), got " + std::string(dtype_name(term.dtype())) + " " +
                       shape_to_string(term.shape()));
}

/// y[rows,n] = act(x · op(w) + bias) [· multiplier] [+ residual] (each optional, null when absent):
/// the float operations of the nodes QuantizedGemm and FusedGemm replace, in their order — y starts
/// as the bias broadcast over rows so the GEMM adds Σ + B, then the ONNX activation formula, then
/// the Mul and Add. w is [K,N], or [N,K] when trans_w; ldw its row length.
void gemm_then_epilogue(cpu::GemmShape shape, const float* x, const float* w, bool trans_w, int64_t ldw,
                        const float* bias, Activation activation, const float* multiplier, const float* residual,
                        float* y) {
  const int64_t count = shape.m * shape.n;
  if (bias)
    for (int64_t r = 0; r < shape.m; ++r) std::copy(bias, bias + shape.n, y + r * shape.n);
  cpu::gemm_f32(shape, false, trans_w, 1.0f, x, shape.k, w, ldw, bias ? 1.0f : 0.0f, y, shape.n);
  if (activation != Activation::kNone)
    for (int64_t i = 0; i < count; ++i) y[i] = apply_activation(activation, y[i]);
  if (multiplier)
    for (int64_t i = 0; i < count; ++i) y[i] = y[i] * multiplier[i];
  if (residual)
    for (int64_t i = 0; i < count; ++i) y[i] = y[i] + residual[i];
}

/// The `activation` attribute of QuantizedGemm and FusedGemm.
Result<Activation> parse_activation(const KernelInit& init) {
  LOKA_ASSIGN_OR_RETURN(const std::string activation, init.attributes.get_string("activation", "none"));
  if (activation == "none") return Activation::kNone;
  if (activation == "relu") return Activation::kRelu;
  if (activation == "gelu") return Activation::kGelu;
  return Status::error("attribute 'activation' must be \"none\", \"relu\" or \"gelu\", got \"" + activation + "\"");
}

Status run_quantized_gemm(const QuantizedGemmAttributes& attrs, std::span<const Tensor> in, std::span<Tensor> out,
                          KernelContext& context) {
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "X"));
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 1, "W"));
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 2, "W_scale"));
  const Tensor& x = in[0];
  const Tensor& w = in[1];
  const bool x_is_fp8 = x.dtype() == DType::kFloat8E4M3FN;
  if (!x_is_fp8 && x.dtype() != DType::kFloat32 && x.dtype() != DType::kBFloat16)
    return Status::error("X must be FLOAT, BFLOAT16 or FLOAT8E4M3FN, got " + std::string(dtype_name(x.dtype())));
  if (x.rank() < 2) return Status::error("X must have rank >= 2, got " + shape_to_string(x.shape()));
  LOKA_RETURN_IF_ERROR(require_e4m3(w, "W"));
  if (w.rank() != 2) return Status::error("W must be 2-D [N,K], got " + shape_to_string(w.shape()));
  const int64_t n = w.dim(0);
  const int64_t k = w.dim(1);
  if (x.dim(x.rank() - 1) != k)
    return Status::error("K differs: X " + shape_to_string(x.shape()) + " has K = " + std::to_string(x.dim(x.rank() - 1)) +
                         ", W " + shape_to_string(w.shape()) + " has K = " + std::to_string(k));
  LOKA_RETURN_IF_ERROR(require_float_vector(in[2], n, "W_scale", "N"));
  const bool has_bias = has_input(in, 3);
  if (has_bias) LOKA_RETURN_IF_ERROR(require_float_vector(in[3], n, "B", "N"));
  // X_scale is read for FP8 X and the "tensor" recipe; for "row" it is ignored but must still be well-formed.
  const bool needs_x_scale = x_is_fp8 || attrs.recipe == ActRecipe::kTensor;
  float x_scale = 1.0f;
  if (needs_x_scale) {
    if (!has_input(in, 4))
      return Status::error(std::string("missing input 4 (X_scale), required ") +
                           (x_is_fp8 ? "when X is FLOAT8E4M3FN" : "by act_recipe \"tensor\""));
    LOKA_ASSIGN_OR_RETURN(x_scale, read_divisor_scale(in[4], "X_scale"));
  } else if (has_input(in, 4)) {
    LOKA_RETURN_IF_ERROR(require_scalar_scale(in[4], "X_scale"));
  }

  Shape out_shape(x.shape().begin(), x.shape().end() - 1);
  const int64_t rows = element_count(out_shape);
  out_shape.push_back(n);
  for (const auto& [index, name] : {std::pair<size_t, const char*>{5, "Multiplier"}, {6, "Residual"}})
    if (has_input(in, index)) LOKA_RETURN_IF_ERROR(require_y_shaped(in[index], out_shape, name, /*bf16_allowed=*/true));
  const bool writes_codes = out.size() > 1;
  float y_scale = 1.0f;
  if (writes_codes) {
    if (!has_input(in, 7)) return Status::error("missing input 7 (Y_scale), required by output 1 (Yq)");
    LOKA_ASSIGN_OR_RETURN(y_scale, read_divisor_scale(in[7], "Y_scale"));
  } else if (has_input(in, 7)) {
    return Status::error("input 7 (Y_scale) is given without output 1 (Yq)");
  }
  LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(attrs.output_dtype, out_shape));
  if (writes_codes) {
    LOKA_ASSIGN_OR_RETURN(out[1], context.allocate(DType::kFloat8E4M3FN, out_shape));
  }
  if (rows == 0 || n == 0) return Status::ok();

  // xq[r,k]: the activation as the FP8 GEMM sees it, dequantized.
  const std::array<float, 256>& decode = cpu::e4m3fn_values();
  std::vector<float> xq;
  if (x_is_fp8) {
    xq.resize(static_cast<size_t>(rows * k));
    const uint8_t* codes = x.data<uint8_t>();
    for (size_t i = 0; i < xq.size(); ++i) xq[i] = decode[codes[i]] * x_scale;
  } else {
    xq = x.to_floats();  // a BF16 X widens exactly (bits << 16): the float recipes apply unchanged
    if (attrs.recipe == ActRecipe::kTensor)
      cpu::fake_quantize_per_tensor(xq, x_scale, cpu::Fp8Format::kE4M3FN);
    else
      cpu::fake_quantize_per_row(xq, rows, k, cpu::Fp8Format::kE4M3FN);
  }
  // wq[n,k] = D(W[n,k]) · W_scale[n], kept [N,K]: the GEMM reads it transposed.
  std::vector<float> wq(static_cast<size_t>(n * k));
  const uint8_t* w_codes = w.data<uint8_t>();
  const float* w_scale = in[2].data<float>();
  for (int64_t j = 0; j < n; ++j)
    for (int64_t p = 0; p < k; ++p) wq[static_cast<size_t>(j * k + p)] = decode[w_codes[j * k + p]] * w_scale[j];

  std::vector<float> widened_multiplier, widened_residual;
  Float32Result y(out[0]);
  gemm_then_epilogue({rows, n, k}, xq.data(), wq.data(), /*trans_w=*/true, k, has_bias ? in[3].data<float>() : nullptr,
                     attrs.activation, has_input(in, 5) ? float32_values(in[5], widened_multiplier) : nullptr,
                     has_input(in, 6) ? float32_values(in[6], widened_residual) : nullptr, y.data());
  // Exactly the QuantizeLinear (and the float-X "tensor" recipe) a reader of a float32 Y would
  // compute; from the float32 result even when Y is stored as BF16 (one rounding fewer).
  if (writes_codes) cpu::quantize_e4m3fn(y.values(), y_scale, out[1].data<uint8_t>());
  y.store();
  return Status::ok();
}

Result<std::unique_ptr<OpKernel>> make_quantized_gemm(const KernelInit& init) {
  LOKA_RETURN_IF_ERROR(check_arity(init, 3, 8, 2));
  QuantizedGemmAttributes attrs;
  LOKA_ASSIGN_OR_RETURN(const std::string recipe, init.attributes.get_string("act_recipe", "tensor"));
  if (recipe == "tensor") attrs.recipe = ActRecipe::kTensor;
  else if (recipe == "row") attrs.recipe = ActRecipe::kRow;
  else return Status::error("attribute 'act_recipe' must be \"tensor\" or \"row\", got \"" + recipe + "\"");
  LOKA_ASSIGN_OR_RETURN(attrs.activation, parse_activation(init));
  LOKA_ASSIGN_OR_RETURN(attrs.output_dtype, ops::read_output_dtype(init.attributes));
  return make_function_kernel([attrs](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
    return run_quantized_gemm(attrs, in, out, context);
  });
}

// ----------------------------------------------------------------------------
// FusedGemm: Y = act(X · op(W) + B), FP32.

/// A batched FusedGemm (W of rank >= 3): Y[b] = act(X[b] · op(W[b])) for every leading index b
/// of the equal leading dims; no B or Residual.
Status run_batched_fused_gemm(bool trans_b, Activation activation, std::span<const Tensor> in, std::span<Tensor> out,
                              KernelContext& context) {
  const Tensor& x = in[0];
  const Tensor& w = in[1];
  const Shape lead(x.shape().begin(), x.shape().end() - 2);
  if (x.rank() != w.rank() || !std::equal(lead.begin(), lead.end(), w.shape().begin()))
    return Status::error("a batched W must have X's rank and leading dims: X " + shape_to_string(x.shape()) + ", W " +
                         shape_to_string(w.shape()));
  if (has_input(in, 2) || has_input(in, 3)) return Status::error("a batched W takes no B or Residual");
  const int64_t m = x.dim(x.rank() - 2), k = x.dim(x.rank() - 1);
  const int64_t w_rows = w.dim(w.rank() - 2), w_cols = w.dim(w.rank() - 1);
  const int64_t n = trans_b ? w_rows : w_cols;
  if ((trans_b ? w_cols : w_rows) != k)
    return Status::error("inner dims differ: X " + shape_to_string(x.shape()) + " and W " + shape_to_string(w.shape()) +
                         (trans_b ? " (transB)" : ""));
  Shape out_shape = lead;
  out_shape.push_back(m);
  out_shape.push_back(n);
  LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(DType::kFloat32, out_shape));
  const int64_t batches = element_count(lead);
  std::vector<float> widened_x;
  const float* x_values = float32_values(x, widened_x);
  for (int64_t b = 0; b < batches && m * n > 0; ++b)
    gemm_then_epilogue({m, n, k}, x_values + b * m * k, w.data<float>() + b * k * n, trans_b, w_cols, nullptr,
                       activation, nullptr, nullptr, out[0].data<float>() + b * m * n);
  return Status::ok();
}

Status run_fused_gemm(bool trans_b, Activation activation, std::span<const Tensor> in, std::span<Tensor> out,
                      KernelContext& context) {
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "X"));
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 1, "W"));
  const Tensor& x = in[0];
  const Tensor& w = in[1];
  // X may be BFLOAT16 (BF16 activation storage): widened exactly, the float recipe unchanged.
  if (x.dtype() != DType::kFloat32 && x.dtype() != DType::kBFloat16)
    return Status::error("X must be FLOAT or BFLOAT16, got " + std::string(dtype_name(x.dtype())));
  LOKA_RETURN_IF_ERROR(ops::require_float32(w, "W"));
  if (x.rank() < 2) return Status::error("X must have rank >= 2, got " + shape_to_string(x.shape()));
  if (w.rank() > 2) return run_batched_fused_gemm(trans_b, activation, in, out, context);
  if (w.rank() != 2)
    return Status::error(std::string("W must be 2-D ") + (trans_b ? "[N,K]" : "[K,N]") + " or batched, got " +
                         shape_to_string(w.shape()));
  const int64_t k = x.dim(x.rank() - 1);
  const int64_t n = trans_b ? w.dim(0) : w.dim(1);
  if ((trans_b ? w.dim(1) : w.dim(0)) != k)
    return Status::error("inner dims differ: X " + shape_to_string(x.shape()) + " and W " + shape_to_string(w.shape()) +
                         (trans_b ? " (transB)" : ""));
  const bool has_bias = has_input(in, 2);
  if (has_bias) LOKA_RETURN_IF_ERROR(require_float_vector(in[2], n, "B", "N"));
  Shape out_shape(x.shape().begin(), x.shape().end() - 1);
  const int64_t rows = element_count(out_shape);
  out_shape.push_back(n);
  if (has_input(in, 3)) LOKA_RETURN_IF_ERROR(require_y_shaped(in[3], out_shape, "Residual", /*bf16_allowed=*/false));
  LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(DType::kFloat32, out_shape));
  if (rows == 0 || n == 0) return Status::ok();
  std::vector<float> widened_x;
  gemm_then_epilogue({rows, n, k}, float32_values(x, widened_x), w.data<float>(), trans_b, w.dim(1),
                     has_bias ? in[2].data<float>() : nullptr, activation, nullptr,
                     has_input(in, 3) ? in[3].data<float>() : nullptr, out[0].data<float>());
  return Status::ok();
}

Result<std::unique_ptr<OpKernel>> make_fused_gemm(const KernelInit& init) {
  LOKA_RETURN_IF_ERROR(check_arity(init, 2, 4));
  LOKA_ASSIGN_OR_RETURN(const int64_t trans_b, init.attributes.get_int("transB", 0));
  if (trans_b != 0 && trans_b != 1) return Status::error("attribute 'transB' must be 0 or 1, got " + std::to_string(trans_b));
  LOKA_ASSIGN_OR_RETURN(const Activation activation, parse_activation(init));
  return make_function_kernel([trans = trans_b == 1, activation](std::span<const Tensor> in, std::span<Tensor> out,
                                                                 KernelContext& context) {
    return run_fused_gemm(trans, activation, in, out, context);
  });
}

// ----------------------------------------------------------------------------
// The two fused norms share ONNX LayerNormalization's row arithmetic (cpu::layer_norm_row) and attribute.

Result<float> parse_epsilon(const KernelInit& init) {
  LOKA_ASSIGN_OR_RETURN(const float epsilon, init.attributes.get_float("epsilon", 1e-5f));
  if (!(epsilon >= 0.0f) || !std::isfinite(epsilon))
    return Status::error("attribute 'epsilon' must be finite and >= 0, got " + std::to_string(epsilon));
  return epsilon;
}

// ----------------------------------------------------------------------------
// LayerNormQuant: Y = Q(LayerNorm(X; Scale, B, epsilon, axis=-1) / Y_scale).

Status run_layer_norm_quant(float epsilon, std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "X"));
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 1, "Scale"));
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 3, "Y_scale"));
  const Tensor& x = in[0];
  LOKA_RETURN_IF_ERROR(ops::require_float32(x, "X"));
  if (x.rank() < 1) return Status::error("X must have rank >= 1, got a scalar");
  const int64_t c = x.dim(x.rank() - 1);
  LOKA_RETURN_IF_ERROR(require_float_vector(in[1], c, "Scale", "C"));
  const bool has_bias = has_input(in, 2);
  if (has_bias) LOKA_RETURN_IF_ERROR(require_float_vector(in[2], c, "B", "C"));
  LOKA_ASSIGN_OR_RETURN(const float y_scale, read_divisor_scale(in[3], "Y_scale"));

  LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(DType::kFloat8E4M3FN, x.shape()));
  if (c == 0) return Status::ok();
  const int64_t rows = x.element_count() / c;
  const float* px = x.data<float>();
  const float* scale = in[1].data<float>();
  const float* bias = has_bias ? in[2].data<float>() : nullptr;
  uint8_t* py = out[0].data<uint8_t>();
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* codes = py + r * c;
    // Divide, not multiply by a reciprocal: bit-exact with ONNX QuantizeLinear.
    cpu::layer_norm_row(px + r * c, c, epsilon, scale, bias,
                   [&](int64_t j, float value) { codes[j] = cpu::e4m3fn_code(value / y_scale); });
  }
  return Status::ok();
}

Result<std::unique_ptr<OpKernel>> make_layer_norm_quant(const KernelInit& init) {
  LOKA_RETURN_IF_ERROR(check_arity(init, 4, 4));
  LOKA_ASSIGN_OR_RETURN(const float epsilon, parse_epsilon(init));
  return make_function_kernel([epsilon](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
    return run_layer_norm_quant(epsilon, in, out, context);
  });
}

// ----------------------------------------------------------------------------
// ResidualLayerNorm: Y = LayerNorm(X + Residual; Scale, B, epsilon, axis=-1), the sum in float32.

Status run_residual_layer_norm(float epsilon, std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "X"));
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 1, "Residual"));
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 2, "Scale"));
  const Tensor& x = in[0];
  const Tensor& residual = in[1];
  LOKA_RETURN_IF_ERROR(ops::require_float32(x, "X"));
  LOKA_RETURN_IF_ERROR(ops::require_float32(residual, "Residual"));
  if (x.rank() < 1) return Status::error("X must have rank >= 1, got a scalar");
  if (residual.shape() != x.shape())
    return Status::error("Residual must have X's shape " + shape_to_string(x.shape()) + ", got " +
                         shape_to_string(residual.shape()));
  const int64_t c = x.dim(x.rank() - 1);
  LOKA_RETURN_IF_ERROR(require_float_vector(in[2], c, "Scale", "C"));
  const bool has_bias = has_input(in, 3);
  if (has_bias) LOKA_RETURN_IF_ERROR(require_float_vector(in[3], c, "B", "C"));

  LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(DType::kFloat32, x.shape()));
  if (c == 0) return Status::ok();
  const int64_t rows = x.element_count() / c;
  const float* px = x.data<float>();
  const float* pr = residual.data<float>();
  const float* scale = in[2].data<float>();
  const float* bias = has_bias ? in[3].data<float>() : nullptr;
  float* py = out[0].data<float>();
  std::vector<float> sum(static_cast<size_t>(c));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < c; ++j) sum[static_cast<size_t>(j)] = px[r * c + j] + pr[r * c + j];  // ONNX Add
    float* y = py + r * c;
    cpu::layer_norm_row(sum.data(), c, epsilon, scale, bias, [&](int64_t j, float value) { y[j] = value; });
  }
  return Status::ok();
}

Result<std::unique_ptr<OpKernel>> make_residual_layer_norm(const KernelInit& init) {
  LOKA_RETURN_IF_ERROR(check_arity(init, 3, 4));
  LOKA_ASSIGN_OR_RETURN(const float epsilon, parse_epsilon(init));
  return make_function_kernel([epsilon](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
    return run_residual_layer_norm(epsilon, in, out, context);
  });
}

// ----------------------------------------------------------------------------
// QuantizedGather: Y[i, d] = D(Table[idx, d]) · Row_scale[idx or 0].

template <typename Index>
Status gather_rows(const Index* ids, int64_t count, const uint8_t* table, int64_t v, int64_t d, const float* row_scale,
                   bool per_row, float* y) {
  const std::array<float, 256>& decode = cpu::e4m3fn_values();
  for (int64_t i = 0; i < count; ++i) {
    const int64_t id = static_cast<int64_t>(ids[i]);
    if (id < -v || id >= v)
      return Status::error("Indices[" + std::to_string(i) + "] = " + std::to_string(id) + " is outside [-" +
                           std::to_string(v) + ", " + std::to_string(v) + ")");
    const int64_t row = id < 0 ? id + v : id;
    const float scale = row_scale[per_row ? row : 0];
    const uint8_t* codes = table + row * d;
    for (int64_t j = 0; j < d; ++j) y[i * d + j] = decode[codes[j]] * scale;
  }
  return Status::ok();
}

Status run_quantized_gather(std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "Table"));
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 1, "Row_scale"));
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 2, "Indices"));
  const Tensor& table = in[0];
  const Tensor& row_scale = in[1];
  const Tensor& indices = in[2];
  LOKA_RETURN_IF_ERROR(require_e4m3(table, "Table"));
  if (table.rank() != 2) return Status::error("Table must be 2-D [V,D], got " + shape_to_string(table.shape()));
  const int64_t v = table.dim(0);
  const int64_t d = table.dim(1);
  LOKA_RETURN_IF_ERROR(ops::require_float32(row_scale, "Row_scale"));
  if (row_scale.rank() != 1 || (row_scale.dim(0) != v && row_scale.dim(0) != 1))
    return Status::error("Row_scale must have shape [V] = [" + std::to_string(v) + "] or [1], got " +
                         shape_to_string(row_scale.shape()));
  LOKA_RETURN_IF_ERROR(ops::require_index_type(indices, "Indices"));
  Shape out_shape = indices.shape();
  out_shape.push_back(d);
  LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(DType::kFloat32, out_shape));
  // [1] with V == 1 is both per-row and per-tensor; either reading gives the same scale.
  const bool per_row = row_scale.dim(0) == v;
  const uint8_t* codes = table.data<uint8_t>();
  const float* scales = row_scale.data<float>();
  float* y = out[0].data<float>();
  if (indices.dtype() == DType::kInt32)
    return gather_rows(indices.data<int32_t>(), indices.element_count(), codes, v, d, scales, per_row, y);
  return gather_rows(indices.data<int64_t>(), indices.element_count(), codes, v, d, scales, per_row, y);
}

Result<std::unique_ptr<OpKernel>> make_quantized_gather(const KernelInit& init) {
  LOKA_RETURN_IF_ERROR(check_arity(init, 3, 3));
  return make_function_kernel(run_quantized_gather);
}

// ----------------------------------------------------------------------------
// EmbeddingBags: Y[b, t, :] = Σ_{k in bag t} R_t(Indices[b, k]).

/// Validated offsets attribute: T + 1 strictly increasing entries.
Result<std::vector<int64_t>> embedding_bag_offsets(const Attributes& attributes, size_t tables) {
  LOKA_ASSIGN_OR_RETURN(std::vector<int64_t> offsets, attributes.get_ints("offsets"));
  if (offsets.size() != tables + 1)
    return Status::error("attribute 'offsets' must have " + std::to_string(tables + 1) + " entries (one more than the " +
                         std::to_string(tables) + " tables), got " + std::to_string(offsets.size()));
  if (offsets[0] < 0) return Status::error("attribute 'offsets' starts below 0");
  for (size_t t = 0; t < tables; ++t)
    if (offsets[t + 1] <= offsets[t])
      return Status::error("attribute 'offsets' must be strictly increasing (bag " + std::to_string(t) + " is empty)");
  return offsets;
}

/// One table as the pooling loop reads it.
struct BagTable {
  const float* rows = nullptr;      ///< float32 table
  const uint16_t* bf16 = nullptr;   ///< BF16 table (widened exactly, then pooled as float32)
  const uint8_t* codes = nullptr;   ///< FP8 table
  const float* scales = nullptr;
  bool per_row = false;
  int64_t v = 0;
};

template <typename Index>
Status pool_bags(const Index* ids, int64_t batch, int64_t h, const std::vector<int64_t>& offsets,
                 const std::vector<BagTable>& tables, int64_t d, float* y) {
  const std::array<float, 256>& decode = cpu::e4m3fn_values();
  std::vector<double> acc(static_cast<size_t>(d));
  const int64_t t_count = static_cast<int64_t>(tables.size());
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < t_count; ++t) {
      const BagTable& table = tables[static_cast<size_t>(t)];
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t k = offsets[static_cast<size_t>(t)]; k < offsets[static_cast<size_t>(t) + 1]; ++k) {
        const int64_t id = static_cast<int64_t>(ids[b * h + k]);
        if (id < -table.v || id >= table.v)
          return Status::error("Indices[" + std::to_string(b) + ", " + std::to_string(k) + "] = " + std::to_string(id) +
                               " is outside [-" + std::to_string(table.v) + ", " + std::to_string(table.v) +
                               ") of Table_" + std::to_string(t));
        const int64_t row = id < 0 ? id + table.v : id;
        if (table.codes != nullptr) {
          // One FP32 product per element, as QuantizedGather, then the double sum ReduceSum takes.
          const float scale = table.scales[table.per_row ? row : 0];
          const uint8_t* codes = table.codes + row * d;
          for (int64_t j = 0; j < d; ++j) acc[static_cast<size_t>(j)] += decode[codes[j]] * scale;
        } else if (table.bf16 != nullptr) {
          // bf16 -> float is exact (the bits shifted up), so a BF16 table pools exactly as the
          // float32 table holding its widened values does.
          const uint16_t* values = table.bf16 + row * d;
          for (int64_t j = 0; j < d; ++j) acc[static_cast<size_t>(j)] += bf16_to_float(values[j]);
        } else {
          const float* values = table.rows + row * d;
          for (int64_t j = 0; j < d; ++j) acc[static_cast<size_t>(j)] += values[j];
        }
      }
      float* out = y + (b * t_count + t) * d;
      for (int64_t j = 0; j < d; ++j) out[j] = static_cast<float>(acc[static_cast<size_t>(j)]);
    }
  }
  return Status::ok();
}

/// EmbeddingBags' attributes, parsed when the plan is built.
struct EmbeddingBagsAttributes {
  std::vector<int64_t> offsets;          ///< validated: T + 1 strictly increasing entries
  DType output_dtype = DType::kFloat32;  ///< Y's storage: float32, or BF16 rounded from it
};

Status run_embedding_bags(const EmbeddingBagsAttributes& attrs, std::span<const Tensor> in, std::span<Tensor> out,
                          KernelContext& context) {
  const std::vector<int64_t>& offsets = attrs.offsets;
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "Indices"));
  const Tensor& indices = in[0];
  LOKA_RETURN_IF_ERROR(ops::require_index_type(indices, "Indices"));
  if (indices.rank() != 2) return Status::error("Indices must be 2-D [B, H], got " + shape_to_string(indices.shape()));
  const int64_t batch = indices.dim(0), h = indices.dim(1);
  if (offsets.back() > h)
    return Status::error("attribute 'offsets' ends at " + std::to_string(offsets.back()) + ", beyond Indices' " +
                         std::to_string(h) + " columns");
  const size_t t_count = offsets.size() - 1;
  std::vector<BagTable> tables(t_count);
  int64_t d = -1;
  for (size_t t = 0; t < t_count; ++t) {
    const std::string table_name = "Table_" + std::to_string(t), scale_name = "Row_scale_" + std::to_string(t);
    LOKA_RETURN_IF_ERROR(ops::require_input(in, 1 + 2 * t, table_name.c_str()));
    const Tensor& table = in[1 + 2 * t];
    if (table.rank() != 2)
      return Status::error(table_name + " must be 2-D [V, D], got " + shape_to_string(table.shape()));
    if (d >= 0 && table.dim(1) != d)
      return Status::error(table_name + " has rows of " + std::to_string(table.dim(1)) + ", Table_0 of " +
                           std::to_string(d) + " (all tables share D)");
    d = table.dim(1);
    BagTable& bag = tables[t];
    bag.v = table.dim(0);
    const bool has_scale = has_input(in, 2 + 2 * t);
    if (table.dtype() == DType::kFloat32 || table.dtype() == DType::kBFloat16) {
      if (has_scale)
        return Status::error(scale_name + " is given for " + (table.dtype() == DType::kFloat32 ? "float32 " : "BFLOAT16 ") +
                             table_name + " (FP8 tables only)");
      if (table.dtype() == DType::kFloat32)
        bag.rows = table.data<float>();
      else
        bag.bf16 = table.data<uint16_t>();
      continue;
    }
    if (table.dtype() != DType::kFloat8E4M3FN)
      return Status::error(table_name + " must be FLOAT, BFLOAT16 or FLOAT8E4M3FN, got " +
                           std::string(dtype_name(table.dtype())));
    LOKA_RETURN_IF_ERROR(ops::require_input(in, 2 + 2 * t, scale_name.c_str()));
    const Tensor& scale = in[2 + 2 * t];
    LOKA_RETURN_IF_ERROR(ops::require_float32(scale, scale_name.c_str()));
    if (scale.rank() != 1 || (scale.dim(0) != bag.v && scale.dim(0) != 1))
      return Status::error(scale_name + " must have shape [V] = [" + std::to_string(bag.v) + "] or [1], got " +
                           shape_to_string(scale.shape()));
    bag.codes = table.data<uint8_t>();
    bag.scales = scale.data<float>();
    bag.per_row = scale.dim(0) == bag.v;
  }
  LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(attrs.output_dtype, Shape{batch, static_cast<int64_t>(t_count), d}));
  Float32Result y(out[0]);
  LOKA_RETURN_IF_ERROR(indices.dtype() == DType::kInt32
                           ? pool_bags(indices.data<int32_t>(), batch, h, offsets, tables, d, y.data())
                           : pool_bags(indices.data<int64_t>(), batch, h, offsets, tables, d, y.data()));
  y.store();
  return Status::ok();
}

Result<std::unique_ptr<OpKernel>> make_embedding_bags(const KernelInit& init) {
  if (init.input_count < 2 || init.output_count != 1)
    return Status::error("takes Indices and at least one table, and has one output");
  const size_t tables = init.input_count / 2;  // Indices + (Table, Row_scale) pairs, the last scale may be omitted
  EmbeddingBagsAttributes attrs;
  LOKA_ASSIGN_OR_RETURN(attrs.offsets, embedding_bag_offsets(init.attributes, tables));
  LOKA_ASSIGN_OR_RETURN(attrs.output_dtype, ops::read_output_dtype(init.attributes));
  return make_function_kernel([attrs](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
    return run_embedding_bags(attrs, in, out, context);
  });
}

// ----------------------------------------------------------------------------
// ConcatQuant: Yq = Q(Concat(X_1, ..., X_n; axis) / Y_scale), E4M3FN codes.

Result<std::unique_ptr<OpKernel>> make_concat_quant(const KernelInit& init) {
  if (init.input_count < 2 || init.output_count != 1)
    return Status::error("takes Y_scale and at least one input, and has one output");
  LOKA_ASSIGN_OR_RETURN(const int64_t axis, init.attributes.get_int("axis"));
  return make_function_kernel([axis](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
    LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "Y_scale"));
    LOKA_ASSIGN_OR_RETURN(const float y_scale, read_divisor_scale(in[0], "Y_scale"));
    const std::span<const Tensor> parts = in.subspan(1);
    for (size_t i = 0; i < parts.size(); ++i)
      if (parts[i].defined()) LOKA_RETURN_IF_ERROR(ops::require_float32(parts[i], "inputs"));
    Tensor joined;
    LOKA_RETURN_IF_ERROR(ops::concatenate(parts, axis, context, joined));
    LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(DType::kFloat8E4M3FN, joined.shape()));
    // Exactly QuantizeLinear(Concat(...), Y_scale, 0): one FP32 division, saturating.
    cpu::quantize_e4m3fn(std::span<const float>(joined.data<float>(), static_cast<size_t>(joined.element_count())),
                         y_scale, out[0].data<uint8_t>());
    return Status::ok();
  });
}

}  // namespace

void register_loka_ops(OpRegistry& registry) {
  registry.add(kDomain, "QuantizedGemm", 1, 1, make_quantized_gemm);
  registry.add(kDomain, "FusedGemm", 1, 1, make_fused_gemm);
  registry.add(kDomain, "LayerNormQuant", 1, 1, make_layer_norm_quant);
  registry.add(kDomain, "ResidualLayerNorm", 1, 1, make_residual_layer_norm);
  registry.add(kDomain, "QuantizedGather", 1, 1, make_quantized_gather);
  registry.add(kDomain, "EmbeddingBags", 1, 1, make_embedding_bags);
  registry.add(kDomain, "ConcatQuant", 1, 1, make_concat_quant);
}

}  // namespace loka
