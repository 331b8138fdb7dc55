// ============================================================================
// runtime/cuda/ops/gemm.cc — Gemm, MatMul, ai.loka.FusedGemm and ai.loka.QuantizedGemm on the GPU.
//
// FP32 Gemm/MatMul run cuBLASLt FP32 GEMMs (kernels/cuda/gemm.h; no TF32, so
// results match the CPU to summation order) unless Dispatch chose another
// candidate for the node (TF32, BF16: dispatched_gemm.h). A MatMul of a small
// matrix on the left of every sample (W [M,K] · X [B,K,N], K ≤ 64) runs LoKA's
// shared-left kernel instead, also FP32 (kernels/cuda/shared_left_matmul.h).
// QuantizedGemm runs the FP8 path when cuBLASLt can (K a multiple of 16): the
// activation is quantized (or already FP8 from LayerNormQuant) and the
// registry's fp8_e4m3 kernel runs (gemm_candidate.h: cuBLASLt applies the
// scales, bias, ReLU and a residual). With a Multiplier (the DCN cross),
// output 1 (Yq), a BF16 Residual beside an FP32 Y (or the other way round),
// or a BF16 Y that cuBLASLt cannot write in one pass (after the exact GELU,
// or with a residual after the activation), the E4M3 GEMM runs with unit
// scales into BF16 sums in the run
// scratch (2 bytes an element to write and read back instead of 4: the GEMM's
// own output pass is write-bound at these shapes) and LoKA's scale epilogue
// applies scales, bias, activation and both terms in one pass, writing Y (unless
// the node leaves it out) and the FP8 codes of Y for the next GEMM. Otherwise
// it runs the same arithmetic in FP32: weights decoded once when planned, the
// activation fake-quantized on the device, the terms, a BF16 Y and the codes
// written by the same scale epilogue after the GEMM. What lives across runs (decoded
// weights, the unit scales) is the op's own, allocated when the bucket is planned;
// what one run writes and reads within itself (the activation's codes, row scales,
// dequantized values) is borrowed from the bucket's arena for the step alone
// (DevicePlan::run_scratch_bytes), as the dispatched kernels' is.
// ============================================================================
#include <array>
#include <cmath>

#include "kernels/cuda/dequant_epilogue.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/fp8_convert.h"
#include "kernels/cuda/fp8_gemm.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/quantize_rows.h"
#include "kernels/cuda/shared_left_matmul.h"
#include "kernels/registry/kernel_registry.h"
#include "loka/float8.h"
#include "runtime/cuda/device_buffer.h"
#include "runtime/cuda/ops/dispatched_gemm.h"
#include "runtime/cuda/ops/op_args.h"

namespace loka::cuda {
namespace {

/// An FP32 GEMM Y = X·op(W) (+ bias [N]) with an optional full-size addend C [M,N].
class Fp32GemmOp final : public DeviceOp {
 public:
  struct Layout {
    int x = 0, w = 1, bias = -1, addend = -1;  ///< input positions (-1: none)
  };
  Fp32GemmOp(std::unique_ptr<Gemm> gemm, Layout layout, Shape y_shape, Shape addend_shape)
      : gemm_(std::move(gemm)), layout_(layout), y_shape_(std::move(y_shape)), addend_shape_(std::move(addend_shape)) {}
  Status enqueue(std::span<const DeviceTensor> in, std::span<const DeviceTensor> out, const DeviceRunContext& context,
                 int) const override {
    GemmArgs args;
    args.x = in[static_cast<size_t>(layout_.x)].data;
    args.w = in[static_cast<size_t>(layout_.w)].data;
    args.bias = layout_.bias >= 0 ? in[static_cast<size_t>(layout_.bias)].data : nullptr;
    args.y = out[0].data;
    LOKA_RETURN_IF_ERROR(gemm_->run(args, context.workspace, context.stream));
    if (layout_.addend < 0) return Status::ok();
    return launch_binary(BinaryOp::kAdd, out[0].data, y_shape_, in[static_cast<size_t>(layout_.addend)].data,
                         addend_shape_, DType::kFloat32, out[0].data, context.stream);
  }

 private:
  std::unique_ptr<Gemm> gemm_;
  Layout layout_;
  Shape y_shape_, addend_shape_;
};

/// An FP32 GEMM with output 0's requested row pitch where cuBLASLt takes it (Y written straight
/// into its slice of a Concat's output: runtime/concat_placement.h), else packed rows.
Result<DevicePlan> fp32_gemm_plan(GemmProblem problem, Fp32GemmOp::Layout layout, const DeviceOpInit& init,
                                  const Shape& addend_shape) {
  auto gemm = plan_pitched_or_packed(layout.addend < 0 ? init.outputs[0].row_pitch : 0, [&](int64_t pitch) {
    problem.y_row_pitch = pitch;
    return Gemm::create(problem);
  });
  if (!gemm) return gemm.status();
  const bool pitched = (*gemm)->problem().y_row_pitch != 0;
  return DevicePlan{std::make_unique<Fp32GemmOp>(std::move(gemm).value(), layout, init.outputs[0].shape, addend_shape),
                    -1, pitched};
}

Status require_all_float32(const DeviceOpInit& init, std::initializer_list<size_t> inputs) {
  for (size_t i : inputs) LOKA_RETURN_IF_ERROR(require_float32(init, i));
  if (init.outputs[0].dtype != DType::kFloat32) return Status::error("output must be FLOAT");
  return Status::ok();
}

/// Input `index`'s dtype where an op reads FP32 or BF16 (FusedGemm's X; QuantizedGemm's X for
/// the float recipes, its Multiplier and Residual); an error naming `what` for any other.
Result<DType> float32_or_bf16_input(const DeviceOpInit& init, size_t index, const char* what) {
  const DType dtype = init.inputs[index].dtype;
  if (dtype == DType::kFloat32 || dtype == DType::kBFloat16) return dtype;
  return Status::error(std::string(what) + " must be FLOAT or BFLOAT16, got " + std::string(dtype_name(dtype)));
}

/// ONNX Gemm: transA = 0, alpha = 1; C as a bias ([N] or [1,N], beta = 1) or a
/// broadcast addend (beta = 1).
Result<DevicePlan> plan_gemm(const DeviceOpInit& init) {
  LOKA_RETURN_IF_ERROR(require_all_float32(init, {0, 1}));
  LOKA_ASSIGN_OR_RETURN(const int64_t trans_a, init.attributes.get_int("transA", 0));
  LOKA_ASSIGN_OR_RETURN(const int64_t trans_b, init.attributes.get_int("transB", 0));
  LOKA_ASSIGN_OR_RETURN(const float alpha, init.attributes.get_float("alpha", 1.0f));
  LOKA_ASSIGN_OR_RETURN(const float beta, init.attributes.get_float("beta", 1.0f));
  if (trans_a != 0 || alpha != 1.0f) return Status::error("transA != 0 or alpha != 1 has no CUDA kernel yet");
  const Shape& a = init.inputs[0].shape;
  const Shape& b = init.inputs[1].shape;
  if (a.size() != 2 || b.size() != 2) return Status::error("A and B must be matrices");
  GemmProblem problem;
  problem.m = a[0];
  problem.k = a[1];
  problem.n = trans_b ? b[0] : b[1];
  problem.input = problem.output = DType::kFloat32;
  problem.transpose_w = trans_b != 0;
  Fp32GemmOp::Layout layout;
  Shape addend_shape;
  if (has_input(init, 2)) {
    LOKA_RETURN_IF_ERROR(require_float32(init, 2));
    if (beta != 1.0f) return Status::error("beta != 1 has no CUDA kernel yet");
    const Shape& c = init.inputs[2].shape;
    if (element_count(c) == problem.n && (c.size() == 1 || (c.size() == 2 && c[0] == 1))) {
      problem.has_bias = true;
      layout.bias = 2;
    } else {
      layout.addend = 2;
      addend_shape = c;
    }
  }
  const kernels::GemmKey key{"Gemm", DType::kFloat32, DType::kFloat32, DType::kFloat32, kernels::ScaleGranularity::kNone,
                             trans_b ? kernels::GemmLayout::kNT : kernels::GemmLayout::kNN,
                             init.inputs[1].host.defined(), problem.has_bias, GemmEpilogue::kNone};
  LOKA_ASSIGN_OR_RETURN(auto dispatched, plan_dispatched_gemm(init, key, {problem.m, problem.n, problem.k, 1},
                                                              GemmInputSlots{0, 1, -1, layout.bias, -1, layout.addend}));
  if (dispatched) return std::move(*dispatched);
  return fp32_gemm_plan(problem, layout, init, addend_shape);
}

/// ai.loka.FusedGemm: Y = act(X · op(W) + B) (+ R) over X's flattened leading rows — one cuBLASLt
/// GEMM with its bias/ReLU epilogue and the residual as C (exact GELU, and a residual after an
/// activation, in passes after it: kernels/cuda/gemm_candidate.h). A batched W (X's rank and
/// leading dims, no B or Residual) is one strided-batched GEMM, W read transposed in place when
/// transB = 1: fold-transposes' X·Yᵀ, where a Transpose kernel ran before. A BFLOAT16 X (BF16
/// activation storage) is the op on its widened values: the key says BF16, and the kernels widen
/// it (FP32, TF32) or read it as it is (BF16, a Dispatch choice).
Result<DevicePlan> plan_fused_gemm(const DeviceOpInit& init) {
  LOKA_RETURN_IF_ERROR(require_all_float32(init, {1}));
  if (!has_input(init, 0)) return Status::error("input 0 (X) is missing");
  LOKA_ASSIGN_OR_RETURN(const DType x_type, float32_or_bf16_input(init, 0, "X (input 0)"));
  LOKA_ASSIGN_OR_RETURN(const int64_t trans_b, init.attributes.get_int("transB", 0));
  LOKA_ASSIGN_OR_RETURN(const std::string activation, init.attributes.get_string("activation", std::string("none")));
  const Shape& x = init.inputs[0].shape;
  const Shape& w = init.inputs[1].shape;
  if (x.size() < 2 || w.size() < 2) return Status::error("X and W must have rank >= 2");
  const bool batched = w.size() > 2;
  if (batched && (x.size() != w.size() || !std::equal(x.begin(), x.end() - 2, w.begin())))
    return Status::error("a batched W must have X's rank and leading dims: X " + shape_to_string(x) + ", W " +
                         shape_to_string(w));
  const int64_t k = x.back(), n = trans_b ? w[w.size() - 2] : w.back();
  if ((trans_b ? w.back() : w[w.size() - 2]) != k) return Status::error("inner dims differ");
  const int64_t rows = k == 0 ? 0 : element_count(x) / k;
  const bool has_bias = has_input(init, 2), has_residual = has_input(init, 3);
  if (batched && (has_bias || has_residual)) return Status::error("a batched W takes no B or Residual");
  if (has_bias) LOKA_RETURN_IF_ERROR(require_float32(init, 2));
  if (has_residual) LOKA_RETURN_IF_ERROR(require_float32(init, 3));
  const GemmEpilogue epilogue =
      activation == "relu" ? GemmEpilogue::kRelu : activation == "gelu" ? GemmEpilogue::kGelu : GemmEpilogue::kNone;
  kernels::GemmKey key{"FusedGemm", x_type, DType::kFloat32, DType::kFloat32, kernels::ScaleGranularity::kNone,
                       kernels::gemm_layout(batched, trans_b != 0), init.inputs[1].host.defined(), has_bias, epilogue};
  key.residual = has_residual;
  GemmInputSlots slots{0, 1, -1, has_bias ? 2 : -1, -1};
  slots.residual = has_residual ? 3 : -1;
  const int64_t m = batched ? x[x.size() - 2] : rows;
  const kernels::GemmShape shape{m, n, k, batched && m > 0 ? rows / m : 1};
  LOKA_ASSIGN_OR_RETURN(auto dispatched, plan_dispatched_gemm(init, key, shape, slots));
  if (dispatched) return std::move(*dispatched);
  // No Dispatch choice: the registry's FP32 kernel (bias, ReLU and a residual ride in cuBLASLt's GEMM),
  // a BF16 X widened first: the op's FP32 arithmetic (BF16 sums are Dispatch's to choose, measured).
  kernels::GemmCandidate fp32;
  fp32.precision = kernels::GemmPrecision::kFp32;
  LOKA_ASSIGN_OR_RETURN(auto kernel, create_gemm_kernel(fp32, key, shape, GemmCandidatePlanInputs{}, init, slots));
  return gemm_kernel_plan(std::move(kernel), slots, init);
}

/// Y[b] = A · X[b] with LoKA's kernel: A the MatMul's 2-D (or batch-1) left operand. With a sample
/// stride, each sample's [M, N] lands in its slice of a Concat's output along the tokens; with a
/// row stride, each row of N in its slice of one along the features (matmul_pitched_rows).
class SharedLeftMatMulOp final : public DeviceOp {
 public:
  SharedLeftMatMulOp(int64_t batch, int64_t m, int64_t k, int64_t n, int64_t sample_stride, int64_t row_stride)
      : batch_(batch), m_(m), k_(k), n_(n), sample_stride_(sample_stride), row_stride_(row_stride) {}
  Status enqueue(std::span<const DeviceTensor> in, std::span<const DeviceTensor> out, const DeviceRunContext& context,
                 int) const override {
    SharedLeftMatMulArgs args;
    args.a = static_cast<const float*>(in[0].data);
    args.x = static_cast<const float*>(in[1].data);
    args.y = static_cast<float*>(out[0].data);
    args.batch = batch_, args.m = m_, args.k = k_, args.n = n_;
    args.y_sample_stride = sample_stride_;
    args.y_row_stride = row_stride_;
    return launch_shared_left_matmul(args, context.stream);
  }

 private:
  int64_t batch_, m_, k_, n_;
  int64_t sample_stride_;  ///< 0: M · the row stride
  int64_t row_stride_;     ///< 0: N
};

/// MatMul: [..., M, K] × [K, N] (a weight: one GEMM over all leading rows),
/// [B..., M, K] × [B..., K, N] with equal leading dims (strided-batched), or
/// [M, K] × [B..., K, N] (a weight on the left, read by every batch).
Result<DevicePlan> plan_matmul(const DeviceOpInit& init) {
  LOKA_RETURN_IF_ERROR(require_all_float32(init, {0, 1}));
  const Shape& a = init.inputs[0].shape;
  const Shape& b = init.inputs[1].shape;
  if (a.size() < 2 || b.size() < 2) return Status::error("1-D MatMul operands have no CUDA kernel yet");
  GemmProblem problem;
  problem.input = problem.output = DType::kFloat32;
  problem.transpose_w = false;
  problem.k = a.back();
  problem.n = b.back();
  if (b[b.size() - 2] != problem.k) return Status::error("inner dims differ");
  const int64_t b_batch = element_count(b) / (problem.k * problem.n == 0 ? 1 : problem.k * problem.n);
  const int64_t a_batch = element_count(a) / (a[a.size() - 2] * problem.k == 0 ? 1 : a[a.size() - 2] * problem.k);
  if (b.size() == 2 || b_batch == 1) {
    problem.m = problem.k == 0 ? 0 : element_count(a) / problem.k;
  } else if (a.size() == 2 || a_batch == 1) {
    problem.batch = b_batch;
    problem.broadcast_x = true;
    problem.m = a[a.size() - 2];
  } else {
    const Shape lead_a(a.begin(), a.end() - 2), lead_b(b.begin(), b.end() - 2);
    if (lead_a != lead_b)
      return Status::error("MatMul batch dims " + shape_to_string(lead_a) + " and " + shape_to_string(lead_b) +
                           " broadcast against each other: no CUDA kernel yet (equal dims, or one side 2-D, have)");
    problem.batch = element_count(lead_a);
    problem.m = a[a.size() - 2];
  }
  const kernels::GemmKey key{"MatMul", DType::kFloat32, DType::kFloat32, DType::kFloat32, kernels::ScaleGranularity::kNone,
                             b.size() == 2 ? kernels::GemmLayout::kNN : kernels::GemmLayout::kBatched,
                             init.inputs[1].host.defined(), false, GemmEpilogue::kNone};
  // A shared X (weight on the left) is no registry problem: Dispatch gives such nodes a reason, no kernel.
  // Small ones (the token mixing of Wukong and DHEN) run LoKA's kernel, as fast as cuBLASLt's
  // batched SIMT tiles or faster there (shared_left_matmul.h); larger ones a strided-batched
  // cuBLASLt GEMM.
  if (problem.broadcast_x && shared_left_matmul_can_implement(problem.m, problem.k).is_ok()) {
    // The pitch asked for is between samples [M, N] (a Concat along the tokens) or between rows
    // of N (along the features); matmul_pitched_rows offers both.
    const DeviceValueInfo& y = init.outputs[0];
    const bool row_pitched = y.row_pitch != 0 && y.row_width == problem.n && problem.m != 1;
    const int64_t sample_stride = row_pitched ? 0 : y.row_pitch, row_stride = row_pitched ? y.row_pitch : 0;
    return DevicePlan{std::make_unique<SharedLeftMatMulOp>(problem.batch, problem.m, problem.k, problem.n,
                                                           sample_stride, row_stride),
                      -1, y.row_pitch != 0};
  }
  if (!problem.broadcast_x) {
    LOKA_ASSIGN_OR_RETURN(auto dispatched, plan_dispatched_gemm(init, key, {problem.m, problem.n, problem.k, problem.batch},
                                                                GemmInputSlots{}));
    if (dispatched) return std::move(*dispatched);
  }
  return fp32_gemm_plan(problem, Fp32GemmOp::Layout{}, init, Shape{});
}

// ---------------------------------------------------------------- FP8 ---

enum class XForm { kFp8, kTensor, kRow };

/// `count` floats of 1.0 on the device: the scales of a GEMM run with unit scales, or of an
/// epilogue whose GEMM applied them already.
Result<DeviceBuffer> upload_ones(size_t count) {
  LOKA_ASSIGN_OR_RETURN(DeviceBuffer ones, DeviceBuffer::allocate(count * sizeof(float)));
  const std::vector<float> host(count, 1.0f);
  if (cudaMemcpy(ones.data(), host.data(), count * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess)
    return Status::error("uploading unit scales failed");
  return ones;
}

/// ai.loka.QuantizedGemm (docs/loka_ops.md) on the FP8 tensor cores.
class QuantizedGemmOp final : public DeviceOp {
 public:
  struct Config {
    XForm x_form = XForm::kTensor;
    DType x_type = DType::kFloat32;  ///< kTensor and kRow: X's storage, FP32 or BF16 (widened exactly)
    float x_scale = 1.0f;  ///< kTensor: the static scale (host copy of X_scale)
    int64_t rows = 0, n = 0, k = 0;
    bool has_bias = false;
    GemmEpilogue activation = GemmEpilogue::kNone;
    bool has_multiplier = false;  ///< input 5: Y ⊙ Multiplier (DCN cross)
    bool has_residual = false;    ///< input 6: + Residual
    DType multiplier_type = DType::kFloat32, residual_type = DType::kFloat32;  ///< each FP32 or BF16
    bool writes_codes = false;    ///< output 1: Yq = Q(Y / Y_scale), of Y before its BF16 rounding
    bool writes_y = true;         ///< output 0 present (a node may leave Y out when it writes Yq)
    DType y_type = DType::kFloat32;  ///< output_dtype: FP32, or BF16 (the FP32 result rounded to nearest even)
    float y_scale = 1.0f;         ///< writes_codes: the static Y_scale (host copy of input 7)
  };
  static Result<std::unique_ptr<QuantizedGemmOp>> create(const Config& config) {
    std::unique_ptr<QuantizedGemmOp> op(new QuantizedGemmOp(config));
    LOKA_ASSIGN_OR_RETURN(op->gemm_, Fp8Gemm::create(accumulator_problem(config)));
    LOKA_ASSIGN_OR_RETURN(op->unit_, upload_ones(1));
    return op;
  }
  /// The GEMM this op runs: unit scales, each sum rounded to BF16 (half the bytes of FP32 to write
  /// and to read again in the scale epilogue; 2^-8 of a sum, far below its FP8 operands' error).
  static Fp8GemmProblem accumulator_problem(const Config& config) {
    return Fp8GemmProblem{config.rows, config.n, config.k, false, false, DType::kBFloat16, false, GemmEpilogue::kNone};
  }
  /// [activation codes | row scales | BF16 sums], each 256-byte aligned: the run scratch it borrows.
  size_t run_scratch_bytes() const {
    return accumulator_offset() + device_aligned(static_cast<size_t>(config_.rows * config_.n) * sizeof(uint16_t));
  }
  Status enqueue(std::span<const DeviceTensor> in, std::span<const DeviceTensor> out, const DeviceRunContext& context,
                 int) const override {
    std::byte* scratch = static_cast<std::byte*>(context.run_scratch);
    if (scratch == nullptr && run_scratch_bytes() > 0) return Status::error("no run scratch was lent");
    const float* unit = static_cast<const float*>(unit_.data());
    uint8_t* codes = reinterpret_cast<uint8_t*>(scratch);
    float* row_scales = reinterpret_cast<float*>(scratch + row_scales_offset());
    const uint8_t* x_codes = codes;
    const float* x_scale = nullptr;
    switch (config_.x_form) {
      case XForm::kFp8:
        x_codes = static_cast<const uint8_t*>(in[0].data);
        x_scale = static_cast<const float*>(in[4].data);
        break;
      case XForm::kTensor:
        LOKA_RETURN_IF_ERROR(cuda_status_of(launch_quantize_fp8(in[0].data, config_.x_type, codes,
                                                                config_.rows * config_.k, config_.x_scale,
                                                                Fp8Kind::kE4M3FN, context.stream)));
        x_scale = static_cast<const float*>(in[4].data);
        break;
      case XForm::kRow:
        LOKA_RETURN_IF_ERROR(launch_quantize_rows(in[0].data, in[0].dtype, config_.rows, config_.k, codes, row_scales,
                                                  context.stream));
        x_scale = row_scales;
        break;
    }
    Fp8GemmArgs args;
    args.x = x_codes;
    args.w = static_cast<const uint8_t*>(in[1].data);
    args.x_scale = unit;
    args.w_scale = unit;
    args.y = scratch + accumulator_offset();
    LOKA_RETURN_IF_ERROR(gemm_->run(args, context.workspace, context.stream));
    DequantEpilogueArgs epilogue = node_epilogue(config_, in, out);
    epilogue.acc = args.y;
    epilogue.acc_type = DType::kBFloat16;
    epilogue.x_scale = x_scale;
    epilogue.per_row_x_scale = config_.x_form == XForm::kRow;
    epilogue.w_scale = static_cast<const float*>(in[2].data);
    epilogue.bias = config_.has_bias ? static_cast<const float*>(in[3].data) : nullptr;
    epilogue.activation = config_.activation;
    return launch_dequant_epilogue(epilogue, context.stream);
  }
  /// The scale epilogue's terms (inputs 5 and 6), outputs (Y unless the node leaves it out, Yq)
  /// and shape, as the node has them: both QuantizedGemm ops apply them after their GEMM.
  static DequantEpilogueArgs node_epilogue(const Config& config, std::span<const DeviceTensor> in,
                                           std::span<const DeviceTensor> out) {
    DequantEpilogueArgs epilogue;
    epilogue.multiplier = config.has_multiplier ? in[5].data : nullptr;
    epilogue.multiplier_type = config.multiplier_type;
    epilogue.residual = config.has_residual ? in[6].data : nullptr;
    epilogue.residual_type = config.residual_type;
    epilogue.y = config.writes_y ? out[0].data : nullptr;
    epilogue.y_type = config.y_type;
    if (config.writes_codes) {
      epilogue.codes = static_cast<uint8_t*>(out[1].data);
      epilogue.code_scale = config.y_scale;
    }
    epilogue.rows = config.rows;
    epilogue.cols = config.n;
    return epilogue;
  }

 private:
  explicit QuantizedGemmOp(Config config) : config_(config) {}
  static Status cuda_status_of(cudaError_t error) {
    return error == cudaSuccess ? Status::ok() : Status::error(std::string("FP8 quantize: ") + cudaGetErrorString(error));
  }
  size_t row_scales_offset() const {
    return config_.x_form == XForm::kFp8 ? 0 : device_aligned(static_cast<size_t>(config_.rows * config_.k));
  }
  size_t rows_bytes() const { return static_cast<size_t>(config_.rows) * sizeof(float); }
  size_t accumulator_offset() const {
    return row_scales_offset() + (config_.x_form == XForm::kRow ? device_aligned(rows_bytes()) : 0);
  }
  Config config_;
  std::unique_ptr<Fp8Gemm> gemm_;
  DeviceBuffer unit_;  ///< 1.0f: the GEMM runs with unit scales, the epilogue applies them
};

/// QuantizedGemm where cuBLASLt has no FP8 kernel (K not a multiple of 16):
/// the same quantization, then an FP32 GEMM on the dequantized operands
/// (weights decoded once, when planned), its bias and activation in the GEMM;
/// then, where the node has them, the scale epilogue with unit scales applies
/// the Multiplier and Residual and writes a BF16 Y and the codes, in one pass.
class FakeQuantGemmOp final : public DeviceOp {
 public:
  static Result<std::unique_ptr<FakeQuantGemmOp>> create(const QuantizedGemmOp::Config& config, const Tensor& w_codes,
                                                         const Tensor& w_scale) {
    std::unique_ptr<FakeQuantGemmOp> op(new FakeQuantGemmOp(config));
    GemmProblem problem;
    problem.m = config.rows;
    problem.n = config.n;
    problem.k = config.k;
    problem.input = problem.output = DType::kFloat32;
    problem.transpose_w = true;  // the decoded weights keep W's [N, K] layout
    problem.has_bias = config.has_bias;
    problem.epilogue = config.activation;
    LOKA_ASSIGN_OR_RETURN(op->gemm_, Gemm::create(problem));
    // wq[n,k] = D(W[n,k]) · W_scale[n], as the CPU reference.
    const std::vector<float> scales = w_scale.to_floats();
    std::vector<float> decoded(static_cast<size_t>(config.n * config.k));
    const uint8_t* codes = w_codes.data<uint8_t>();
    for (int64_t j = 0; j < config.n; ++j)
      for (int64_t p = 0; p < config.k; ++p)
        decoded[static_cast<size_t>(j * config.k + p)] = fp8e4m3fn_to_float(codes[j * config.k + p]) * scales[static_cast<size_t>(j)];
    const size_t weight_bytes = decoded.size() * sizeof(float);
    const size_t count = static_cast<size_t>(config.rows * config.k);
    LOKA_ASSIGN_OR_RETURN(op->weights_, DeviceBuffer::allocate(weight_bytes));
    if (op->runs_epilogue()) {
      LOKA_ASSIGN_OR_RETURN(op->unit_scales_, upload_ones(static_cast<size_t>(std::max<int64_t>(config.n, 1))));
    }
    op->codes_offset_ = device_aligned(count * sizeof(float));
    op->scales_offset_ = op->codes_offset_ + device_aligned(count);
    op->y_offset_ = op->scales_offset_ + device_aligned(static_cast<size_t>(config.rows + 1) * sizeof(float));
    // The GEMM's FP32 result where Y is not it (left out of the node, only Yq read; or BF16): in
    // the scratch, for the epilogue to read.
    const size_t y_bytes = op->gemm_writes_y() ? 0 : static_cast<size_t>(config.rows * config.n) * sizeof(float);
    op->run_scratch_bytes_ = op->y_offset_ + y_bytes;
    if (weight_bytes > 0 &&
        cudaMemcpy(op->weights_.data(), decoded.data(), weight_bytes, cudaMemcpyHostToDevice) != cudaSuccess)
      return Status::error("uploading the decoded FP8 weights failed");
    return op;
  }
  /// [dequantized activation | codes | row scales | Y when the node leaves it out]: the run scratch it borrows.
  size_t run_scratch_bytes() const { return run_scratch_bytes_; }
  Status enqueue(std::span<const DeviceTensor> in, std::span<const DeviceTensor> out, const DeviceRunContext& context,
                 int) const override {
    std::byte* scratch = static_cast<std::byte*>(context.run_scratch);
    if (scratch == nullptr) return Status::error("no run scratch was lent");
    float* xq = reinterpret_cast<float*>(scratch);
    uint8_t* codes = reinterpret_cast<uint8_t*>(scratch + codes_offset_);
    float* row_scales = reinterpret_cast<float*>(scratch + scales_offset_);
    const int64_t count = config_.rows * config_.k;
    const auto check = [](cudaError_t error) {
      return error == cudaSuccess ? Status::ok() : Status::error(std::string("FP8 fake quantize: ") + cudaGetErrorString(error));
    };
    switch (config_.x_form) {
      case XForm::kFp8:
        LOKA_RETURN_IF_ERROR(check(launch_dequantize_fp8(static_cast<const uint8_t*>(in[0].data), xq, count,
                                                         config_.x_scale, Fp8Kind::kE4M3FN, context.stream)));
        break;
      case XForm::kTensor:
        LOKA_RETURN_IF_ERROR(check(launch_quantize_fp8(in[0].data, config_.x_type, codes, count, config_.x_scale,
                                                       Fp8Kind::kE4M3FN, context.stream)));
        LOKA_RETURN_IF_ERROR(
            check(launch_dequantize_fp8(codes, xq, count, config_.x_scale, Fp8Kind::kE4M3FN, context.stream)));
        break;
      case XForm::kRow:
        LOKA_RETURN_IF_ERROR(launch_quantize_rows(in[0].data, in[0].dtype, config_.rows, config_.k, codes, row_scales,
                                                  context.stream));
        LOKA_RETURN_IF_ERROR(check(launch_dequantize_fp8(codes, xq, count, 1.0f, Fp8Kind::kE4M3FN, context.stream)));
        LOKA_RETURN_IF_ERROR(launch_binary(BinaryOp::kMul, xq, {config_.rows, config_.k}, row_scales, {config_.rows, 1},
                                           DType::kFloat32, xq, context.stream));
        break;
    }
    void* gemm_y = gemm_writes_y() ? out[0].data : scratch + y_offset_;
    GemmArgs args;
    args.x = xq;
    args.w = weights_.data();
    args.bias = config_.has_bias ? in[3].data : nullptr;
    args.y = gemm_y;
    LOKA_RETURN_IF_ERROR(gemm_->run(args, context.workspace, context.stream));
    if (!runs_epilogue()) return Status::ok();
    // The scales, bias and activation are applied: unit scales make the epilogue's v the GEMM's
    // result exactly, then the terms, Y and Q(Y / Y_scale) as on the FP8 path (in place over an FP32 Y).
    DequantEpilogueArgs epilogue = QuantizedGemmOp::node_epilogue(config_, in, out);
    epilogue.acc = gemm_y;
    epilogue.x_scale = epilogue.w_scale = static_cast<const float*>(unit_scales_.data());
    return launch_dequant_epilogue(epilogue, context.stream);
  }

 private:
  explicit FakeQuantGemmOp(QuantizedGemmOp::Config config) : config_(config) {}
  /// The GEMM writes Y itself: an FP32 output 0 with nothing after the activation.
  bool gemm_writes_y() const { return config_.writes_y && config_.y_type == DType::kFloat32; }
  /// Anything to do after the GEMM: the terms, the codes, or Y's rounding to BF16.
  bool runs_epilogue() const {
    return config_.has_multiplier || config_.has_residual || config_.writes_codes || !gemm_writes_y();
  }
  QuantizedGemmOp::Config config_;
  std::unique_ptr<Gemm> gemm_;
  DeviceBuffer weights_;      ///< decoded once, when planned
  DeviceBuffer unit_scales_;  ///< n floats of 1.0 when runs_epilogue(): the epilogue's x and w scales
  size_t codes_offset_ = 0, scales_offset_ = 0, y_offset_ = 0, run_scratch_bytes_ = 0;
};

Result<DevicePlan> plan_quantized_gemm(const DeviceOpInit& init) {
  if (init.inputs.size() < 3) return Status::error("needs X, W and W_scale");
  const DeviceValueInfo& x = init.inputs[0];
  const DeviceValueInfo& w = init.inputs[1];
  if (w.dtype != DType::kFloat8E4M3FN || w.shape.size() != 2) return Status::error("W must be FLOAT8E4M3FN [N, K]");
  LOKA_ASSIGN_OR_RETURN(const std::string recipe, init.attributes.get_string("act_recipe", std::string("tensor")));
  LOKA_ASSIGN_OR_RETURN(const std::string activation, init.attributes.get_string("activation", std::string("none")));
  QuantizedGemmOp::Config config;
  LOKA_ASSIGN_OR_RETURN(config.y_type, output_dtype_attribute(init));
  config.n = w.shape[0];
  config.k = w.shape[1];
  config.rows = x.shape.empty() || config.k == 0 ? 0 : element_count(x.shape) / config.k;
  config.has_bias = has_input(init, 3);
  config.has_multiplier = has_input(init, 5);
  config.has_residual = has_input(init, 6);
  if (config.has_multiplier) {
    LOKA_ASSIGN_OR_RETURN(config.multiplier_type, float32_or_bf16_input(init, 5, "input 5 (Multiplier)"));
  }
  if (config.has_residual) {
    LOKA_ASSIGN_OR_RETURN(config.residual_type, float32_or_bf16_input(init, 6, "input 6 (Residual)"));
  }
  config.activation = activation == "relu"   ? GemmEpilogue::kRelu
                      : activation == "gelu" ? GemmEpilogue::kGelu
                                             : GemmEpilogue::kNone;
  if (x.dtype == DType::kFloat8E4M3FN) {
    config.x_form = XForm::kFp8;
  } else if (recipe == "row") {
    config.x_form = XForm::kRow;
  } else {
    config.x_form = XForm::kTensor;
    if (!has_input(init, 4) || !init.inputs[4].host.defined())
      return Status::error("the tensor recipe needs a constant X_scale");
    config.x_scale = init.inputs[4].host.to_floats().at(0);
  }
  if (config.x_form == XForm::kFp8) {
    if (!has_input(init, 4) || !init.inputs[4].host.defined()) return Status::error("FP8 X needs a constant X_scale");
    config.x_scale = init.inputs[4].host.to_floats().at(0);
  } else {
    LOKA_ASSIGN_OR_RETURN(config.x_type, float32_or_bf16_input(init, 0, "X (input 0)"));
  }
  config.writes_codes = init.outputs.size() > 1 && init.outputs[1].present;
  config.writes_y = !init.outputs.empty() && init.outputs[0].present;
  if (!config.writes_y && !config.writes_codes) return Status::error("output 0 (Y) may be left out only with output 1 (Yq)");
  if (config.writes_codes) {
    if (init.outputs[1].dtype != DType::kFloat8E4M3FN) return Status::error("output 1 (Yq) must be FLOAT8E4M3FN");
    if (!has_input(init, 7) || !init.inputs[7].host.defined())
      return Status::error("output 1 (Yq) needs a constant input 7 (Y_scale)");
    config.y_scale = init.inputs[7].host.to_floats().at(0);
    if (!(config.y_scale > 0.0f) || !std::isfinite(config.y_scale))
      return Status::error("input 7 (Y_scale) must be finite and > 0");
  }
  kernels::GemmKey key{"QuantizedGemm", x.dtype == DType::kFloat8E4M3FN ? DType::kFloat8E4M3FN : config.x_type,
                       DType::kFloat8E4M3FN, config.y_type,
                       config.x_form == XForm::kRow ? kernels::ScaleGranularity::kRow : kernels::ScaleGranularity::kTensor,
                       kernels::GemmLayout::kNT, w.host.defined(), config.has_bias, config.activation};
  // Dispatch's candidates take a Residual (in Y's dtype) but no Multiplier, nor write Yq; their
  // FP8 family reads a BF16 X and writes a BF16 Y. A DCN cross node, or one whose Residual is held
  // in the other dtype than Y, keeps the built-in op, whose scale epilogue applies both terms,
  // reads and writes either dtype and writes the codes in the same pass.
  // So does BF16 storage the registry has no kernel for (has_gemm_candidate: a BF16 Y that
  // cuBLASLt cannot write in one pass, after the exact GELU or with a residual after the activation,
  // whose BF16 sums the own op moves in fewer bytes; or K or N not multiples of 16, the FP32
  // fallback below).
  key.residual = config.has_residual;
  const bool residual_in_y_type = !config.has_residual || config.residual_type == config.y_type;
  const bool bf16_storage = config.x_type == DType::kBFloat16 || config.y_type == DType::kBFloat16;
  const bool no_registry_kernel =
      bf16_storage && !kernels::has_gemm_candidate(key, {config.rows, config.n, config.k, 1});
  const bool own_epilogue = config.has_multiplier || config.writes_codes || !residual_in_y_type || no_registry_kernel;
  GemmInputSlots slots{0, 1, 2, config.has_bias ? 3 : -1, has_input(init, 4) ? 4 : -1};
  slots.residual = config.has_residual ? 6 : -1;
  if (!own_epilogue) {
    LOKA_ASSIGN_OR_RETURN(auto dispatched, plan_dispatched_gemm(init, key, {config.rows, config.n, config.k, 1}, slots));
    if (dispatched) return std::move(*dispatched);
  }
  const Fp8GemmProblem problem = QuantizedGemmOp::accumulator_problem(config);
  if (Fp8Gemm::can_implement(problem).is_ok() && !own_epilogue) {
    // The registry's FP8 kernel (cuBLASLt applies scales, bias and ReLU: gemm_candidate.h).
    kernels::GemmCandidate candidate;
    candidate.precision = kernels::GemmPrecision::kFp8E4M3;
    candidate.granularity = key.activation_scale;
    GemmCandidatePlanInputs inputs;
    if (config.has_bias && init.inputs[3].host.defined()) inputs.host_bias = &init.inputs[3].host;
    inputs.x_scale = config.x_scale;
    auto kernel = create_gemm_kernel(candidate, key, {config.rows, config.n, config.k, 1}, inputs, init, slots);
    if (kernel) return gemm_kernel_plan(std::move(kernel).value(), slots, init);
  }
  if (Fp8Gemm::can_implement(problem).is_ok()) {
    auto op = QuantizedGemmOp::create(config);
    if (op) {
      const size_t run_scratch = (*op)->run_scratch_bytes();
      return DevicePlan{std::move(op).value(), -1, false, run_scratch};
    }
  }
  // No FP8 kernel for this shape: the same arithmetic in FP32 (bit-identical quantization).
  if (!w.host.defined() || !init.inputs[2].host.defined()) return Status::error("W and W_scale must be constants");
  LOKA_ASSIGN_OR_RETURN(auto op, FakeQuantGemmOp::create(config, w.host, init.inputs[2].host));
  const size_t run_scratch = op->run_scratch_bytes();
  return DevicePlan{std::move(op), -1, false, run_scratch};
}

// --- which of these write pitched rows (DeviceOpRegistry's PitchedRowRule) ---
// Rows of their last dim, where one cuBLASLt GEMM writes the output with no pass after it
// reading packed rows (a C that is no bias, a residual, the exact GELU, a DCN multiplier) and no
// strided batch: what the factories above plan. They may still decline: a positional cuBLASLt
// algorithm, LoKA's small-M kernel, no cuBLASLt algorithm for the pitch.

bool input_present(const PlanStep& step, size_t i) { return i < step.inputs.size() && step.inputs[i] != kNoValue; }

const Shape& input_shape(const PlanStep& step, const BucketShapes& shapes, size_t i) {
  return shapes.shapes[static_cast<size_t>(step.inputs[i])];
}

int64_t output_row_width(const PlanStep& step, const BucketShapes& shapes) {
  const Shape& out = shapes.shapes[static_cast<size_t>(step.outputs[0])];
  return out.empty() ? 0 : out.back();
}

bool exact_gelu(const PlanStep& step) {
  const Result<std::string> activation = step.attributes.get_string("activation", std::string("none"));
  return !activation || *activation == "gelu";
}

int64_t gemm_pitched_rows(const PlanStep& step, const BucketShapes& shapes) {
  const int64_t n = output_row_width(step, shapes);
  if (!input_present(step, 2)) return n;
  const Shape& c = input_shape(step, shapes, 2);  // a bias [N] or [1, N] rides in the GEMM; another C is added after it
  return element_count(c) == n && (c.size() == 1 || (c.size() == 2 && c[0] == 1)) ? n : 0;
}

std::vector<int64_t> matmul_pitched_rows(const PlanStep& step, const BucketShapes& shapes) {
  if (!input_present(step, 0) || !input_present(step, 1)) return {};
  const Shape& a = input_shape(step, shapes, 0);
  const Shape& b = input_shape(step, shapes, 1);  // one weight for every row, not a strided batch
  const bool one_weight = b.size() == 2 || (b.size() > 2 && element_count(b) == b[b.size() - 2] * b.back());
  if (one_weight) return single_row_width(output_row_width)(step, shapes);
  // One matrix on the left of every sample (LoKA's shared-left kernel): it writes whole samples
  // [M, N] with a stride between them (the slice a Concat along the token axis gives it), or
  // rows of N with a pitch between them (a Concat along the features: DHEN's linear module).
  const bool one_left = a.size() >= 2 && element_count(a) == a[a.size() - 2] * a.back();
  if (!one_left || b.size() < 3 || a.back() != b[b.size() - 2] ||
      !shared_left_matmul_can_implement(a[a.size() - 2], a.back()).is_ok() || b.back() == 0)
    return {};
  if (a[a.size() - 2] == 1) return {b.back()};  // a sample is one row
  return {a[a.size() - 2] * b.back(), b.back()};
}

int64_t fused_gemm_pitched_rows(const PlanStep& step, const BucketShapes& shapes) {
  const bool batched = input_present(step, 1) && input_shape(step, shapes, 1).size() > 2;  // a strided batch
  return !batched && !input_present(step, 3) && !exact_gelu(step) ? output_row_width(step, shapes) : 0;
}

int64_t quantized_gemm_pitched_rows(const PlanStep& step, const BucketShapes& shapes) {
  const bool writes_codes = step.outputs.size() > 1 && step.outputs[1] != kNoValue;
  // A BF16 X or Y runs on the same cuBLASLt FP8 kernels (a BF16 Y as their D, with its pitch).
  if (input_present(step, 5) || input_present(step, 6) || writes_codes || exact_gelu(step)) return 0;
  return output_row_width(step, shapes);
}

}  // namespace

void register_gemm_device_ops(DeviceOpRegistry& registry) {
  registry.add("", "Gemm", plan_gemm, single_row_width(gemm_pitched_rows));
  registry.add("", "MatMul", plan_matmul, matmul_pitched_rows);
  registry.add("ai.loka", "FusedGemm", plan_fused_gemm, single_row_width(fused_gemm_pitched_rows));
  registry.add("ai.loka", "QuantizedGemm", plan_quantized_gemm, single_row_width(quantized_gemm_pitched_rows));
}

}  // namespace loka::cuda
