// ============================================================================
// passes/onnx/qdq_lowering.cc — `lower-qdq`: ai.loka ops -> standard QDQ ONNX.
//
// Each ai.loka node is replaced by a chain of standard ops computing the same
// values as the reference kernels (runtime/ops/loka_ops.cc): the quantized
// operands are bit-identical (QuantizeLinear and Cast to FP8 divide and round
// to nearest even with saturation, as the kernels do; DequantizeLinear
// multiplies the decoded code by the scale), only the GEMM's summation order
// may differ. The chain's last node keeps the lowered node's name and output
// value, so graph outputs, annotations keyed by node name and consumers stay.
//
// Two standard-ONNX limits shape the rewrites: Gather does not accept FP8
// tensors at any opset up to 21 (onnxruntime rejects it), so QuantizedGather
// (and EmbeddingBags, lowered back to the exporters' per-table Slice ->
// Gather -> ReduceSum chains and a Concat) dequantizes the table (per-row
// scale on axis 0, exact) before gathering, while a BF16 EmbeddingBags table
// is gathered as BF16 (Gather takes bfloat16 from opset 13) and only the
// gathered rows are Cast to float (exact); and per-tensor scales must be
// scalars for QuantizeLinear, so [1] scales are turned into [] ones.
//
// BF16 storage (docs/loka_ops.md) lowers to standard Casts: a BF16 X,
// Multiplier or Residual is Cast to float (exact, bits << 16) where it is read,
// and an op with output_dtype = 16 computes its float32 result, which a final
// Cast(to = BFLOAT16) rounds (nearest even, as the kernels) and which Yq, when
// the op has it, quantizes before that rounding.
//
// onnxruntime's ReluQuantRewrite deletes a Relu that feeds a QuantizeLinear
// whose zero point is not int8/uint8 (so every FP8 one), which changes the
// result; a static activation quantize therefore reads the Relu's input and
// the Relu moves after the DequantizeLinear (the same values, see below).
// ============================================================================
#include "passes/onnx/qdq_lowering.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "passes/canonicalize/rewrite_utils.h"
#include "passes/canonicalize/upgrade_opset.h"
#include "passes/ir/graph_algorithms.h"
#include "passes/ir/shape_inference.h"
#include "runtime/ops/op_helpers.h"

namespace loka {
namespace {

using ir::Dim;
using ir::Graph;
using ir::Node;
using ir::TensorType;
using ir::Value;

constexpr const char* kLokaDomain = "ai.loka";
constexpr int64_t kQdqOpset = 19;         // FP8 QuantizeLinear/DequantizeLinear/Cast(saturate)
constexpr int64_t kGeluOpset = 20;        // Gelu as one op
constexpr int64_t kOnnxFloat = 1;         // TensorProto.FLOAT
constexpr int64_t kOnnxBFloat16 = 16;     // TensorProto.BFLOAT16
constexpr int64_t kOnnxFloat8E4M3FN = 17;  // TensorProto.FLOAT8E4M3FN
constexpr float kE4M3Max = 448.0f;

std::string node_label(const Node& node) { return "node '" + node.name() + "' (" + node.op_type() + ")"; }

TensorType with_dtype(TensorType type, DType dtype) {
  type.dtype = dtype;
  return type;
}

/// `type` with its last dim replaced (unknown rank stays unknown).
TensorType with_last_dim(TensorType type, Dim dim) {
  if (type.shape && !type.shape->empty()) type.shape->back() = dim;
  return type;
}

TensorType float_type_of(const Value* value) { return with_dtype(value ? value->type() : TensorType{}, DType::kFloat32); }

/// Emits the nodes of one graph's lowering: names derived from the lowered node, constants
/// shared across the whole graph (one "448", one FP8 zero point, ...).
class Emitter {
 public:
  explicit Emitter(Graph& graph) : graph_(graph) {}

  /// A node with one fresh output of `type`, named `<base>/<suffix>`.
  Value* emit(const std::string& op, const std::vector<Value*>& inputs, TensorType type, const std::string& base,
              const std::string& suffix, Attributes attributes = {}) {
    Node* node = graph_.add_node(op, inputs, 1, base + "/" + suffix);
    node->mutable_attributes() = std::move(attributes);
    node->output(0)->set_type(std::move(type));
    return node->output(0);
  }

  /// The chain's last node: writes `output` and takes the lowered node's name.
  void emit_into(const std::string& op, const std::vector<Value*>& inputs, Value* output, const std::string& name,
                 Attributes attributes = {}) {
    Node* node = graph_.add_node_with_outputs(op, inputs, {output}, name);
    node->mutable_attributes() = std::move(attributes);
  }

  Value* float_constant(float value) {
    const std::string key = "f32:" + std::to_string(std::bit_cast<uint32_t>(value));
    return cached(key, "qdq_const", [&] { return Tensor::scalar_float(value); });
  }
  Value* int64_constant(const std::vector<int64_t>& values) {
    std::string key = "i64:";
    for (int64_t v : values) key += std::to_string(v) + ",";
    return cached(key, "qdq_axes", [&] { return Tensor::from_int64s({static_cast<int64_t>(values.size())}, values); });
  }
  /// The E4M3FN zero point (code 0), which fixes QuantizeLinear's output type to FP8.
  Value* fp8_zero_point() {
    return cached("fp8:0", "qdq_fp8_zero_point", [] { return Tensor::zeros(DType::kFloat8E4M3FN, {}); });
  }

  /// `value` as float32: itself, or, when it is BF16, a Cast to FLOAT — exact (bits << 16), as the
  /// kernels widen BF16 operands. One Cast per value, named `<base>/<suffix>` after its first
  /// reader (a DCN layer reads x0 as X, Multiplier and Residual).
  Value* widened(Value* value, const std::string& base, const std::string& suffix) {
    if (value == nullptr || value->type().dtype != DType::kBFloat16) return value;
    auto [it, fresh] = widened_.try_emplace(value->id(), nullptr);
    if (fresh) {
      Attributes to_float;
      to_float.set("to", kOnnxFloat);
      it->second = emit("Cast", {value}, float_type_of(value), base, suffix, std::move(to_float));
    }
    return it->second;
  }

  /// `scale` as a rank-0 tensor: QuantizeLinear reads a 1-D scale as per-axis.
  Value* scalar(Value* scale, const std::string& base) {
    if (scale->type().rank() == 0) return scale;
    if (scale->is_initializer() && scale->initializer()->element_count() == 1) {
      const std::string key = "scalar-of:" + std::to_string(scale->id());
      return cached(key, scale->name() + "_scalar", [&] { return scale->initializer()->clone().reshaped({}); });
    }
    return emit("Reshape", {scale, int64_constant({})}, TensorType::of(DType::kFloat32, {}), base, "scale_scalar");
  }

 private:
  template <typename Make>
  Value* cached(const std::string& key, const std::string& name, Make make) {
    auto it = constants_.find(key);
    if (it != constants_.end()) return it->second;
    Value* value = graph_.add_initializer(name, make());
    constants_.emplace(key, value);
    return value;
  }

  Graph& graph_;
  std::map<std::string, Value*> constants_;
  std::map<uint32_t, Value*> widened_;  ///< BF16 value id -> its float32 Cast
};

// ----------------------------------------------------------------------------
// Checks, all before the first rewrite (so an error leaves the graph unchanged).

Status require_inputs(const Node& node, std::initializer_list<std::pair<size_t, const char*>> required,
                      size_t max_outputs = 1) {
  for (const auto& [index, what] : required)
    if (node.input(index) == nullptr)
      return Status::error(node_label(node) + ": input " + std::to_string(index) + " (" + what + ") is missing");
  if (node.outputs().empty() || node.outputs().size() > max_outputs)
    return Status::error(node_label(node) + ": expected " +
                         (max_outputs == 1 ? std::string("exactly 1 output") : "1 to " + std::to_string(max_outputs) + " outputs"));
  return Status::ok();
}

Status check_string_attribute(const Node& node, const char* name, const char* fallback,
                              std::initializer_list<const char*> allowed) {
  LOKA_ASSIGN_OR_RETURN(const std::string value, node.attributes().get_string(name, fallback));
  for (const char* candidate : allowed)
    if (value == candidate) return Status::ok();
  return Status::error(node_label(node) + ": attribute '" + name + "' = \"" + value + "\" has no QDQ lowering");
}

Status check_loka_node(const Node& node) {
  if (node.op_type() == "QuantizedGemm") {
    LOKA_RETURN_IF_ERROR(require_inputs(node, {{0, "X"}, {1, "W"}, {2, "W_scale"}}, 2));
    if (node.outputs().size() == 2 && node.input(7) == nullptr)
      return Status::error(node_label(node) + ": output 1 (Yq) needs input 7 (Y_scale)");
    LOKA_RETURN_IF_ERROR(check_string_attribute(node, "act_recipe", "tensor", {"tensor", "row"}));
    LOKA_RETURN_IF_ERROR(check_string_attribute(node, "activation", "none", {"none", "relu", "gelu"}));
    const DType x = node.input(0)->type().dtype;
    if (x != DType::kFloat32 && x != DType::kBFloat16 && x != DType::kFloat8E4M3FN)
      return Status::error(node_label(node) + ": X '" + node.input(0)->name() +
                           "' must be FLOAT, BFLOAT16 or FLOAT8E4M3FN, got " + std::string(dtype_name(x)));
    const std::string recipe = *node.attributes().get_string("act_recipe", "tensor");
    if ((x == DType::kFloat8E4M3FN || recipe == "tensor") && node.input(4) == nullptr)
      return Status::error(node_label(node) + ": input 4 (X_scale) is missing");
    return Status::ok();
  }
  if (node.op_type() == "FusedGemm") {
    LOKA_RETURN_IF_ERROR(require_inputs(node, {{0, "X"}, {1, "W"}}));
    LOKA_RETURN_IF_ERROR(check_string_attribute(node, "activation", "none", {"none", "relu", "gelu"}));
    LOKA_ASSIGN_OR_RETURN(const int64_t trans_b, node.attributes().get_int("transB", 0));
    if (trans_b != 0 && trans_b != 1) return Status::error(node_label(node) + ": attribute 'transB' must be 0 or 1");
    return Status::ok();
  }
  if (node.op_type() == "LayerNormQuant") {
    LOKA_RETURN_IF_ERROR(require_inputs(node, {{0, "X"}, {1, "Scale"}, {3, "Y_scale"}}));
    return node.attributes().get_float("epsilon", 1e-5f).status();
  }
  if (node.op_type() == "ResidualLayerNorm") {
    LOKA_RETURN_IF_ERROR(require_inputs(node, {{0, "X"}, {1, "Residual"}, {2, "Scale"}}));
    return node.attributes().get_float("epsilon", 1e-5f).status();
  }
  if (node.op_type() == "QuantizedGather") {
    LOKA_RETURN_IF_ERROR(require_inputs(node, {{0, "Table"}, {1, "Row_scale"}, {2, "Indices"}}));
    const TensorType& scale = node.input(1)->type();
    if (scale.rank() != 1 || !(*scale.shape)[0].is_known())
      return Status::error(node_label(node) + ": Row_scale '" + node.input(1)->name() +
                           "' needs a known shape [V] or [1] to choose per-row or per-tensor dequantization");
    return Status::ok();
  }
  if (node.op_type() == "EmbeddingBags") {
    LOKA_RETURN_IF_ERROR(require_inputs(node, {{0, "Indices"}, {1, "Table_0"}}));
    LOKA_ASSIGN_OR_RETURN(const std::vector<int64_t> offsets, node.attributes().get_ints("offsets"));
    if (offsets.size() != node.inputs().size() / 2 + 1 || node.output(0)->type().rank() != 3)
      return Status::error(node_label(node) + ": offsets and tables disagree, or the output is not [B, T, D]");
    for (size_t t = 0; t + 1 < offsets.size(); ++t) {
      const Value* scale = node.input(2 + 2 * t);
      if (scale != nullptr && (scale->type().rank() != 1 || !(*scale->type().shape)[0].is_known()))
        return Status::error(node_label(node) + ": Row_scale_" + std::to_string(t) + " '" + scale->name() +
                             "' needs a known shape [V] or [1] to choose per-row or per-tensor dequantization");
    }
    return Status::ok();
  }
  if (node.op_type() == "ConcatQuant") {
    LOKA_RETURN_IF_ERROR(require_inputs(node, {{0, "Y_scale"}, {1, "X_1"}}));
    return node.attributes().get_int("axis").status();
  }
  if (node.op_type() == "Attention") {
    LOKA_RETURN_IF_ERROR(require_inputs(node, {{0, "Q"}, {1, "K"}, {2, "V"}}));
    for (size_t i = 0; i < 3; ++i)
      if (node.input(i)->type().rank() != 3)
        return Status::error(node_label(node) + ": input " + std::to_string(i) + " '" + node.input(i)->name() +
                             "' must be 3-D [B, N, C]");
    for (const char* name : {"heads", "head_dim"}) LOKA_RETURN_IF_ERROR(node.attributes().get_int(name).status());
    return Status::ok();
  }
  return Status::error(node_label(node) + ": ai.loka::" + node.op_type() + " has no QDQ lowering");
}

// ----------------------------------------------------------------------------
// The rewrites. Each takes the lowered node's inputs and attributes (the node
// is already erased) and writes `output`.

struct Lowering {
  std::string name;                  ///< the lowered node's name, reused by the chain's last node
  std::string op_type;
  std::vector<Value*> inputs;        ///< null for omitted inputs
  Attributes attributes;
  Value* output = nullptr;           ///< the original output value's replacement (same name and type)
  Value* input(size_t index) const { return index < inputs.size() ? inputs[index] : nullptr; }
};

/// xq = D(Q(X / s)) · s with s from the row's finite amax (1 when that is 0), as
/// cpu::fake_quantize_per_row: non-finite elements do not count toward the amax.
Value* quantize_rows(Emitter& emit, Value* x, const std::string& base) {
  const TensorType f32 = float_type_of(x);
  const TensorType column = with_last_dim(f32, Dim::known(1));
  const TensorType f32_bool = with_dtype(f32, DType::kBool);
  const TensorType column_bool = with_dtype(column, DType::kBool);
  Value* magnitude = emit.emit("Abs", {x}, f32, base, "abs");
  Value* finite = emit.emit("Less", {magnitude, emit.float_constant(std::numeric_limits<float>::infinity())}, f32_bool,
                            base, "is_finite");
  Value* counted = emit.emit("Where", {finite, magnitude, emit.float_constant(0.0f)}, f32, base, "finite_abs");
  Attributes keep;
  keep.set("keepdims", int64_t{1});
  Value* amax = emit.emit("ReduceMax", {counted, emit.int64_constant({-1})}, column, base, "row_amax", keep);
  Value* positive = emit.emit("Greater", {amax, emit.float_constant(0.0f)}, column_bool, base, "amax_positive");
  Value* ratio = emit.emit("Div", {amax, emit.float_constant(kE4M3Max)}, column, base, "amax_over_448");
  Value* scale = emit.emit("Where", {positive, ratio, emit.float_constant(1.0f)}, column, base, "row_scale");
  Value* scaled = emit.emit("Div", {x, scale}, f32, base, "x_over_scale");
  Attributes to_fp8;
  to_fp8.set("to", kOnnxFloat8E4M3FN);
  to_fp8.set("saturate", int64_t{1});
  Value* codes = emit.emit("Cast", {scaled}, with_dtype(f32, DType::kFloat8E4M3FN), base, "x_fp8", to_fp8);
  Attributes to_float;
  to_float.set("to", kOnnxFloat);
  Value* decoded = emit.emit("Cast", {codes}, f32, base, "x_decoded", to_float);
  return emit.emit("Mul", {decoded, scale}, f32, base, "xq");
}

/// Y = act(X · op(W) + B) [· multiplier] [+ residual] in standard ops, the last writing the
/// node's output: Gemm for a matrix X, MatMul (+ Add) over leading dims otherwise (W
/// transposed first when it is [N,K]); `act` is the reference kernel's Relu / exact Gelu.
void emit_float_gemm(Emitter& emit, const Lowering& node, Value* x, Value* w, bool trans_b, Value* bias,
                     const std::string& activation, Value* multiplier, Value* residual, int64_t opset) {
  const std::string& base = node.name;
  const bool last = activation == "none" && !multiplier && !residual;
  auto gemm_step = [&](const char* op, const std::vector<Value*>& inputs, const char* suffix, Attributes attributes) {
    if (!last) return emit.emit(op, inputs, float_type_of(node.output), base, suffix, std::move(attributes));
    emit.emit_into(op, inputs, node.output, node.name, std::move(attributes));
    return node.output;
  };
  Value* y = nullptr;
  if (x->type().rank() == 2) {
    Attributes gemm_attributes;
    if (trans_b) gemm_attributes.set("transB", int64_t{1});
    std::vector<Value*> inputs{x, w};
    if (bias) inputs.push_back(bias);
    y = gemm_step("Gemm", inputs, "gemm", gemm_attributes);
  } else {
    Value* w_kn = w;
    if (trans_b) {  // the last two dims swap: a 2-D weight, or each matrix of a batched FusedGemm's W
      Attributes perm;
      perm.set("perm", canonicalize::perm_swapping_last_two(w->type().rank()));
      TensorType wt = float_type_of(w);
      if (wt.shape && wt.shape->size() >= 2) std::swap((*wt.shape)[wt.shape->size() - 2], wt.shape->back());
      w_kn = emit.emit("Transpose", {w}, wt, base, "transpose_w", perm);
    }
    if (bias) {
      Value* product = emit.emit("MatMul", {x, w_kn}, float_type_of(node.output), base, "matmul");
      y = gemm_step("Add", {product, bias}, "add_bias", {});
    } else {
      y = gemm_step("MatMul", {x, w_kn}, "matmul", {});
    }
  }
  if (last) return;

  // Each remaining step writes the output when nothing follows it.
  const TensorType t = float_type_of(node.output);
  auto step = [&](const char* op, const std::vector<Value*>& inputs, const char* suffix, bool final_step) {
    if (!final_step) return emit.emit(op, inputs, t, base, suffix);
    emit.emit_into(op, inputs, node.output, node.name);
    return node.output;
  };
  const bool activation_last = !multiplier && !residual;
  if (activation == "relu") {
    y = step("Relu", {y}, "relu", activation_last);
  } else if (activation == "gelu" && opset >= kGeluOpset) {
    y = step("Gelu", {y}, "gelu", activation_last);
  } else if (activation == "gelu") {
    // 0.5·v·(1 + erf(v·√½)), in the reference kernel's order of operations.
    Value* half = emit.emit("Mul", {y, emit.float_constant(0.5f)}, t, base, "gelu_half");
    Value* inner = emit.emit("Mul", {y, emit.float_constant(static_cast<float>(M_SQRT1_2))}, t, base, "gelu_scaled");
    Value* erf = emit.emit("Erf", {inner}, t, base, "gelu_erf");
    Value* one_plus = emit.emit("Add", {erf, emit.float_constant(1.0f)}, t, base, "gelu_one_plus");
    y = step("Mul", {half, one_plus}, "gelu", activation_last);
  }
  if (multiplier) y = step("Mul", {y, multiplier}, "multiply", !residual);
  if (residual) step("Add", {y, residual}, "residual", true);
}

void lower_quantized_gemm(Emitter& emit, const Lowering& node, int64_t opset) {
  const std::string& base = node.name;
  Value* x = emit.widened(node.input(0), base, "widen_x");
  const std::string recipe = *node.attributes.get_string("act_recipe", "tensor");
  const std::string activation = *node.attributes.get_string("activation", "none");
  const TensorType x_f32 = float_type_of(x);

  // xq: the activation as the FP8 GEMM sees it.
  Value* xq = nullptr;
  if (x->type().dtype == DType::kFloat8E4M3FN) {
    xq = emit.emit("DequantizeLinear", {x, emit.scalar(node.input(4), base)}, x_f32, base, "dequantize_x");
  } else if (recipe == "tensor") {
    // onnxruntime's ReluQuantRewrite deletes a Relu feeding QuantizeLinear unless the zero point
    // is an int8/uint8 that is not the range's bottom, so it drops a Relu before an FP8 quantize
    // (optimizer/qdq_transformer/relu_quantizelinear.cc). Quantize the Relu's input and apply the
    // Relu after dequantizing instead: the same values (Q is monotone, Q(0) = 0, Q(NaN) = NaN).
    Node* relu = x->producer();
    const bool relu_after = relu && relu->is("Relu") && relu->input(0);
    Value* source = relu_after ? relu->input(0) : x;
    Value* scale = emit.scalar(node.input(4), base);
    Value* codes = emit.emit("QuantizeLinear", {source, scale, emit.fp8_zero_point()},
                             with_dtype(source->type(), DType::kFloat8E4M3FN), base, "quantize_x");
    xq = emit.emit("DequantizeLinear", {codes, scale}, float_type_of(source), base, "dequantize_x");
    if (relu_after) xq = emit.emit("Relu", {xq}, x_f32, base, "relu_x");
  } else {
    xq = quantize_rows(emit, x, base);
  }

  // wq[n,k] = D(W[n,k]) · W_scale[n].
  Value* w = node.input(1);
  Attributes per_channel;
  per_channel.set("axis", int64_t{0});
  Value* wq = emit.emit("DequantizeLinear", {w, node.input(2)}, float_type_of(w), base, "dequantize_w", per_channel);

  Value* multiplier = emit.widened(node.input(5), base, "widen_multiplier");
  Value* residual = emit.widened(node.input(6), base, "widen_residual");
  emit_float_gemm(emit, node, xq, wq, /*trans_b=*/true, node.input(3), activation, multiplier, residual, opset);
}

void lower_fused_gemm(Emitter& emit, const Lowering& node, int64_t opset) {
  const bool trans_b = *node.attributes.get_int("transB", 0) != 0;
  const std::string activation = *node.attributes.get_string("activation", "none");
  // A BF16 X (BF16 activation storage) widens exactly, as the kernels read it.
  emit_float_gemm(emit, node, emit.widened(node.input(0), node.name, "widen_x"), node.input(1), trans_b, node.input(2),
                  activation, nullptr, node.input(3), opset);
}

void lower_layer_norm_quant(Emitter& emit, const Lowering& node) {
  Attributes norm;
  norm.set("axis", int64_t{-1});
  norm.set("epsilon", *node.attributes.get_float("epsilon", 1e-5f));
  norm.set("stash_type", int64_t{1});
  std::vector<Value*> inputs{node.input(0), node.input(1)};
  if (node.input(2)) inputs.push_back(node.input(2));
  Value* normalized = emit.emit("LayerNormalization", inputs, float_type_of(node.input(0)), node.name, "layer_norm", norm);
  emit.emit_into("QuantizeLinear", {normalized, emit.scalar(node.input(3), node.name), emit.fp8_zero_point()},
                 node.output, node.name);
}

/// ConcatQuant as the Concat and QuantizeLinear it replaced.
void lower_concat_quant(Emitter& emit, const Lowering& node) {
  Attributes axis;
  axis.set("axis", *node.attributes.get_int("axis"));
  const std::vector<Value*> parts(node.inputs.begin() + 1, node.inputs.end());
  TensorType joined_type = node.output->type();
  joined_type.dtype = DType::kFloat32;
  Value* joined = emit.emit("Concat", parts, joined_type, node.name, "concat", axis);
  emit.emit_into("QuantizeLinear", {joined, emit.scalar(node.input(0), node.name), emit.fp8_zero_point()}, node.output,
                 node.name);
}

/// ResidualLayerNorm as the Add and LayerNormalization it replaced.
void lower_residual_layer_norm(Emitter& emit, const Lowering& node) {
  Value* sum = emit.emit("Add", {node.input(0), node.input(1)}, float_type_of(node.input(0)), node.name, "sum");
  Attributes norm;
  norm.set("axis", int64_t{-1});
  norm.set("epsilon", *node.attributes.get_float("epsilon", 1e-5f));
  norm.set("stash_type", int64_t{1});
  std::vector<Value*> inputs{sum, node.input(2)};
  if (node.input(3)) inputs.push_back(node.input(3));
  emit.emit_into("LayerNormalization", inputs, node.output, node.name, norm);
}

/// An FP8 table as float32 rows: Gather cannot read FP8 (its type list excludes it up to
/// opset 21), so lookups dequantize the table first (per-row scale on axis 0: exact).
Value* dequantized_table(Emitter& emit, Value* table, Value* scale, const std::string& base, const std::string& suffix) {
  const bool per_tensor = (*scale->type().shape)[0].value == 1;
  Attributes per_row;
  if (!per_tensor) per_row.set("axis", int64_t{0});
  return emit.emit("DequantizeLinear", {table, per_tensor ? emit.scalar(scale, base) : scale}, float_type_of(table),
                   base, suffix, per_row);
}

void lower_quantized_gather(Emitter& emit, const Lowering& node) {
  Value* values = dequantized_table(emit, node.input(0), node.input(1), node.name, "dequantize_table");
  Attributes axis;
  axis.set("axis", int64_t{0});
  emit.emit_into("Gather", {values, node.input(2)}, node.output, node.name, axis);
}

/// EmbeddingBags as the exporters' chain: per table Slice -> Gather -> ReduceSum(keepdims), then Concat
/// (an FP8 table dequantized before the Gather; a BF16 table's gathered rows Cast to float after it).
void lower_embedding_bags(Emitter& emit, const Lowering& node) {
  const std::vector<int64_t> offsets = node.attributes.get_ints("offsets").value();  // checked by check_loka_node
  const TensorType& ids = node.input(0)->type();
  const Dim batch = ids.has_rank() ? (*ids.shape)[0] : Dim::unknown();
  const Dim width = node.output->type().has_rank() ? (*node.output->type().shape)[2] : Dim::unknown();
  Attributes gather_axis, keep;
  gather_axis.set("axis", int64_t{0});
  keep.set("keepdims", int64_t{1});
  std::vector<Value*> pooled;
  for (size_t t = 0; t + 1 < offsets.size(); ++t) {
    const std::string tag = "bag" + std::to_string(t);
    const int64_t bag = offsets[t + 1] - offsets[t];
    Value* rows = node.input(1 + 2 * t);
    if (node.input(2 + 2 * t) != nullptr)
      rows = dequantized_table(emit, rows, node.input(2 + 2 * t), node.name, tag + "_dequantize");
    const bool bf16 = rows->type().dtype == DType::kBFloat16;
    Value* bag_ids = emit.emit("Slice",
                               {node.input(0), emit.int64_constant({offsets[t]}), emit.int64_constant({offsets[t + 1]}),
                                emit.int64_constant({1})},
                               TensorType{ids.dtype, std::vector<Dim>{batch, Dim::known(bag)}}, node.name, tag + "_ids");
    const std::vector<Dim> rows_shape{batch, Dim::known(bag), width};
    Value* gathered = emit.emit("Gather", {rows, bag_ids}, TensorType{bf16 ? DType::kBFloat16 : DType::kFloat32, rows_shape},
                                node.name, tag + "_rows", gather_axis);
    // BF16 rows widen exactly (bits << 16), so the chain pools what the op pools. Widening after
    // the Gather keeps the table BF16 at rest in the exported model (a Cast of the whole table
    // would be folded into a float32 copy at load) and converts only the rows read.
    gathered = emit.widened(gathered, node.name, tag + "_widen");
    pooled.push_back(emit.emit("ReduceSum", {gathered, emit.int64_constant({1})},
                               TensorType{DType::kFloat32, std::vector<Dim>{batch, Dim::known(1), width}}, node.name,
                               tag + "_sum", keep));
  }
  Attributes concat_axis;
  concat_axis.set("axis", int64_t{1});
  emit.emit_into("Concat", pooled, node.output, node.name, concat_axis);
}

/// Attention as the exporters' chain: per operand Slice (its heads' columns) -> Reshape [B,N,H,D] ->
/// Transpose to [B,H,N,D] (keys to [B,H,D,N]); MatMul, Mul by the scale, Softmax, MatMul; then the
/// heads merged back with Transpose and Reshape [B,N,H·D].
void lower_attention(Emitter& emit, const Lowering& node) {
  const int64_t heads = *node.attributes.get_int("heads"), head_dim = *node.attributes.get_int("head_dim");
  const auto dim = [](const Value* value, size_t axis) { return (*value->type().shape)[axis]; };
  const Dim batch = dim(node.input(0), 0), queries = dim(node.input(0), 1), keys = dim(node.input(1), 1);
  const auto f32 = [](std::vector<Dim> dims) { return TensorType{DType::kFloat32, std::move(dims)}; };
  const char* offsets[3] = {"q_offset", "k_offset", "v_offset"};
  const char* tags[3] = {"q", "k", "v"};
  Value* operands[3] = {};
  for (size_t i = 0; i < 3; ++i) {
    Value* x = node.input(i);
    const Dim tokens = dim(x, 1);
    const int64_t offset = *node.attributes.get_int(offsets[i], 0);
    const Dim width = Dim::known(heads * head_dim);
    if (offset != 0 || !(dim(x, 2) == width))
      x = emit.emit("Slice",
                    {x, emit.int64_constant({offset}), emit.int64_constant({offset + heads * head_dim}),
                     emit.int64_constant({2})},
                    f32({batch, tokens, width}), node.name, std::string(tags[i]) + "_columns");
    Value* split = emit.emit("Reshape", {x, emit.int64_constant({0, 0, heads, head_dim})},
                             f32({batch, tokens, Dim::known(heads), Dim::known(head_dim)}), node.name,
                             std::string(tags[i]) + "_heads");
    Attributes perm;
    const bool key = i == 1;
    perm.set("perm", key ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 2, 1, 3});
    operands[i] = emit.emit("Transpose", {split}, key ? f32({batch, Dim::known(heads), Dim::known(head_dim), tokens})
                                                      : f32({batch, Dim::known(heads), tokens, Dim::known(head_dim)}),
                            node.name, key ? "k_transposed" : std::string(tags[i]) + "_by_head", perm);
  }
  const TensorType scores_type = f32({batch, Dim::known(heads), queries, keys});
  Value* dots = emit.emit("MatMul", {operands[0], operands[1]}, scores_type, node.name, "dots");
  Value* scores = emit.emit("Mul", {dots, emit.float_constant(*node.attributes.get_float("scale", 1.0f))},
                            scores_type, node.name, "scores");
  Attributes last_axis;
  last_axis.set("axis", int64_t{-1});
  Value* probabilities = emit.emit("Softmax", {scores}, scores_type, node.name, "softmax", last_axis);
  Value* context = emit.emit("MatMul", {probabilities, operands[2]},
                             f32({batch, Dim::known(heads), queries, Dim::known(head_dim)}), node.name, "context");
  Attributes merge;
  merge.set("perm", std::vector<int64_t>{0, 2, 1, 3});
  Value* merged = emit.emit("Transpose", {context}, f32({batch, queries, Dim::known(heads), Dim::known(head_dim)}),
                            node.name, "merge_heads", merge);
  emit.emit_into("Reshape", {merged, emit.int64_constant({0, 0, heads * head_dim})}, node.output, node.name);
}

/// Detaches `old` (an output of a node about to be erased) from its readers: they read the
/// returned placeholder until the lowering's value replaces it.
Value* detach_output(Graph& graph, Value* old) {
  Value* placeholder = graph.add_value(old->name() + "/lowering");
  graph.replace_all_uses_with(old, placeholder);
  return placeholder;
}

/// What Yq's QuantizeLinear reads: the lowered output, or, when a Relu writes it, the same values
/// from Where(v <= 0, 0, v) on the Relu's input. onnxruntime's ReluQuantRewrite deletes a Relu
/// that feeds a QuantizeLinear with an FP8 zero point, which would encode the negative values;
/// the Where keeps Relu's every value (NaN <= 0 is false, so NaN stays NaN; -0 gives +0).
Value* quantizable(Emitter& emit, const Lowering& lowering) {
  Node* relu = lowering.output->producer();
  if (relu == nullptr || !relu->is("Relu")) return lowering.output;
  Value* v = relu->input(0);
  Value* zero = emit.float_constant(0.0f);
  Value* clipped = emit.emit("LessOrEqual", {v, zero}, TensorType{DType::kBool, v->type().shape}, lowering.name, "yq_not_positive");
  return emit.emit("Where", {clipped, zero, v}, v->type(), lowering.name, "yq_relu");
}

/// Replaces `node` by its standard-op chain; the chain's last node writes a new value
/// with the old output's name and type, and every reader moves to it. A QuantizedGemm's
/// Yq (output 1) becomes the QuantizeLinear of that value with Y_scale, its definition.
/// With output_dtype = 16 the chain writes the float32 result instead, Yq quantizes it, and
/// a Cast named `<node>/round_bf16` rounds it into the BF16 output.
void lower_node(Graph& graph, Emitter& emit, Node* node, int64_t opset) {
  Lowering lowering{node->name(), node->op_type(), node->inputs(), node->attributes(), nullptr};
  Value* old_output = node->output(0);
  const std::string output_name = old_output->name();
  const TensorType output_type = old_output->type();
  Value* placeholder = detach_output(graph, old_output);
  Value* old_codes = node->outputs().size() > 1 ? node->output(1) : nullptr;
  const std::string codes_name = old_codes ? old_codes->name() : std::string();
  const TensorType codes_type = old_codes ? old_codes->type() : TensorType{};
  Value* codes_placeholder = old_codes ? detach_output(graph, old_codes) : nullptr;
  graph.erase_node(node);
  Value* output = graph.add_value(output_name, output_type);
  // QuantizedGemm's and EmbeddingBags' output_dtype, which inference checked: 1 (FLOAT, the default) or 16.
  const Result<DType> output_dtype = ops::read_output_dtype(lowering.attributes);
  const bool bf16_output = output_dtype && *output_dtype == DType::kBFloat16;
  lowering.output = bf16_output ? graph.add_value(graph.unique_value_name(output_name + "/fp32"),
                                                  with_dtype(output_type, DType::kFloat32))
                                : output;
  if (lowering.op_type == "QuantizedGemm") lower_quantized_gemm(emit, lowering, opset);
  else if (lowering.op_type == "FusedGemm") lower_fused_gemm(emit, lowering, opset);
  else if (lowering.op_type == "LayerNormQuant") lower_layer_norm_quant(emit, lowering);
  else if (lowering.op_type == "ConcatQuant") lower_concat_quant(emit, lowering);
  else if (lowering.op_type == "ResidualLayerNorm") lower_residual_layer_norm(emit, lowering);
  else if (lowering.op_type == "EmbeddingBags") lower_embedding_bags(emit, lowering);
  else if (lowering.op_type == "Attention") lower_attention(emit, lowering);
  else lower_quantized_gather(emit, lowering);
  if (bf16_output) {
    Attributes to_bf16;
    to_bf16.set("to", kOnnxBFloat16);
    emit.emit_into("Cast", {lowering.output}, output, lowering.name + "/round_bf16", to_bf16);
  }
  graph.replace_all_uses_with(placeholder, output);
  graph.erase_value(placeholder);
  if (codes_placeholder) {
    Value* codes = graph.add_value(codes_name, codes_type);
    emit.emit_into("QuantizeLinear", {quantizable(emit, lowering), emit.scalar(lowering.input(7), lowering.name), emit.fp8_zero_point()},
                   codes, lowering.name + "/quantize_y");
    graph.replace_all_uses_with(codes_placeholder, codes);
    graph.erase_value(codes_placeholder);
  }
  // Inputs the chain no longer reads (a [1] scale replaced by its scalar copy, a Relu moved after
  // the dequantize) go when nothing else reads them.
  std::set<uint32_t> input_ids;
  for (const Value* input : lowering.inputs)
    if (input) input_ids.insert(input->id());
  for (const uint32_t id : input_ids) {
    Value* input = graph.value_by_id(id);
    if (!input || input->has_uses() || input->is_graph_input() || input->is_graph_output()) continue;
    if (input->is_initializer()) {
      graph.erase_value(input);
    } else if (Node* producer = input->producer(); producer && producer->outputs().size() == 1) {
      graph.erase_node(producer);
    }
  }
}

}  // namespace

Status lower_to_qdq(Graph& graph, QdqLoweringStats* stats) {
  QdqLoweringStats local;
  QdqLoweringStats& result = stats ? *stats : local;
  result = {};

  // Producers first: a rewrite may look at the (already lowered) producer of its input.
  LOKA_ASSIGN_OR_RETURN(const std::vector<Node*> order, ir::topological_order(graph));
  std::vector<Node*> loka_nodes;
  for (Node* node : order)
    if (node->domain() == kLokaDomain) loka_nodes.push_back(node);
  if (loka_nodes.empty()) {
    // Nothing to lower: the model is already standard; only a dangling import goes.
    result.changed = graph.opsets.erase(kLokaDomain) > 0;
    return Status::ok();
  }

  // The rewrites pick ops by dtype and rank (FP8 or float X, matrix or not): infer them first.
  LOKA_RETURN_IF_ERROR(ir::infer_shapes(graph));
  for (const Node* node : loka_nodes) LOKA_RETURN_IF_ERROR(check_loka_node(*node));
  auto found = graph.opsets.find("");
  const int64_t from = found == graph.opsets.end() ? kQdqOpset : found->second;
  const int64_t opset = std::max(from, kQdqOpset);
  if (found != graph.opsets.end()) LOKA_RETURN_IF_ERROR(check_opset_upgrade(graph, opset));

  // Checks done: from here on nothing fails.
  if (found != graph.opsets.end()) {
    LOKA_ASSIGN_OR_RETURN(result.ops_upgraded, upgrade_opset(graph, opset));
  }
  Emitter emit(graph);
  for (Node* node : loka_nodes) lower_node(graph, emit, node, opset);
  result.ops_lowered = loka_nodes.size();
  graph.opsets[""] = opset;
  graph.opsets.erase(kLokaDomain);
  result.changed = true;
  return Status::ok();
}

namespace {

class LowerQdqPass final : public Pass {
 public:
  Result<bool> run(Graph& graph, PassContext& context) override {
    QdqLoweringStats stats;
    LOKA_RETURN_IF_ERROR(lower_to_qdq(graph, &stats));
    context.add_statistic("ops-lowered", static_cast<double>(stats.ops_lowered));
    context.add_statistic("ops-upgraded", static_cast<double>(stats.ops_upgraded));
    return stats.changed;
  }
};

}  // namespace

PassInfo lower_qdq_pass_info() {
  return PassInfo{"lower-qdq",
                  "rewrite ai.loka ops into standard ONNX QuantizeLinear/DequantizeLinear ops (opset >= 19)",
                  {},
                  {"ops-lowered", "ops-upgraded"}};
}

std::unique_ptr<Pass> make_lower_qdq_pass() { return std::make_unique<LowerQdqPass>(); }

}  // namespace loka
