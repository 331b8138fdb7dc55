// ============================================================================
// kernels/cuda/gemm_candidate.cc — planning and running one GEMM candidate.
// ============================================================================
#include "kernels/cuda/gemm_candidate.h"

#include <string>
#include <vector>

#include "kernels/cuda/cudnn_fp8_gemm.h"
#include "kernels/cuda/dequant_epilogue.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/fp8_convert.h"
#include "kernels/cuda/fp8_gemm.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/quantize_rows.h"
#include "kernels/cuda/small_m_gemm.h"
#include "loka/bfloat16.h"
#include "loka/float8.h"

namespace loka::cuda {
namespace {

using kernels::GemmCandidate;
using kernels::GemmKey;
using kernels::GemmLayout;
using kernels::GemmPrecision;
using kernels::GemmShape;
using kernels::ScaleGranularity;

Status check(cudaError_t error, const char* what) {
  return error == cudaSuccess ? Status::ok() : Status::error(std::string(what) + ": " + cudaGetErrorString(error));
}

/// Device memory owned by a planned kernel.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory() {
    device_free(data_);
  }
  Status allocate(size_t bytes) {
    if (bytes == 0) bytes = 256;
    return check(device_malloc(&data_, bytes), "allocating GEMM scratch");
  }
  std::byte* at(size_t offset) const { return static_cast<std::byte*>(data_) + offset; }

 private:
  void* data_ = nullptr;
};

/// Weights as FP32 values in their stored layout: FP32 as is, E4M3 codes [N,K] decoded times scale[n].
Result<std::vector<float>> host_weight_values(const GemmKey& key, const GemmShape& shape,
                                              const GemmCandidatePlanInputs& inputs) {
  if (inputs.host_w == nullptr || !inputs.host_w->defined())
    return Status::error("needs the weights as a constant (converted once when planned)");
  const Tensor& w = *inputs.host_w;
  if (key.weight != DType::kFloat8E4M3FN) {
    if (w.dtype() != DType::kFloat32) return Status::error("FP32 weights expected");
    return w.to_floats();
  }
  if (inputs.host_w_scale == nullptr || !inputs.host_w_scale->defined())
    return Status::error("E4M3 weights need their scales as a constant");
  const std::vector<float> scales = inputs.host_w_scale->to_floats();
  if (w.dtype() != DType::kFloat8E4M3FN || w.element_count() != shape.n * shape.k ||
      static_cast<int64_t>(scales.size()) != shape.n)
    return Status::error("E4M3 weights must be [N,K] with N scales");
  std::vector<float> values(static_cast<size_t>(shape.n * shape.k));
  const uint8_t* codes = w.data<uint8_t>();
  for (int64_t j = 0; j < shape.n; ++j)
    for (int64_t p = 0; p < shape.k; ++p)
      values[static_cast<size_t>(j * shape.k + p)] =
          fp8e4m3fn_to_float(codes[j * shape.k + p]) * scales[static_cast<size_t>(j)];
  return values;
}

/// The small-M kernel's operands: what X holds follows the key, as the fp8_e4m3 path's quantize does.
SmallMGemmArgs small_m_args(const GemmKey& key, const GemmShape& shape, ScaleGranularity granularity,
                            const GemmCandidateArgs& args) {
  SmallMGemmArgs small;
  small.x = args.x;
  small.input = key.input == DType::kFloat8E4M3FN       ? SmallMInput::kE4M3Codes
                : granularity == ScaleGranularity::kRow ? SmallMInput::kFloatRowScale
                                                        : SmallMInput::kFloatTensorScale;
  small.w = static_cast<const uint8_t*>(args.w);
  small.w_scale = args.w_scale;
  small.x_scale = args.x_scale;
  small.bias = key.bias ? args.bias : nullptr;
  small.epilogue = key.epilogue;
  small.residual = key.residual ? static_cast<const float*>(args.residual) : nullptr;
  small.y = static_cast<float*>(args.y);  // small_m writes FP32 (can_implement)
  small.m = shape.m;
  small.n = shape.n;
  small.k = shape.k;
  return small;
}

}  // namespace

struct GemmKernel::Impl {
  GemmKey key;
  GemmShape shape;
  float x_scale = 1.0f;
  std::unique_ptr<Gemm> gemm;        ///< fp32, bf16, fp8_emulated; bf16x2's first term (X · W_hi)
  std::unique_ptr<Gemm> low_term;    ///< bf16x2's second term: X · W_lo + Y, then the bias and activation
  std::unique_ptr<Fp8Gemm> fp8;      ///< fp8_e4m3 through cuBLASLt
  std::unique_ptr<CudnnFp8Gemm> cudnn;  ///< fp8_e4m3 as a cuDNN graph
  /// Kept across runs: converted constant weights (bf16, emulation); the unit scale, the M copies
  /// of the static activation scale and the BF16 bias (fp8_e4m3).
  DeviceMemory scratch;
  size_t weights_offset = 0, low_weights_offset = 0, unit_offset = 0, copies_offset = 0, bias_offset = 0;
  /// Written and read within one run (GemmKernel::run_scratch_bytes): a computed W cast to BF16,
  /// X's BF16 copy or dequantized values, its codes, its per-row scales. Offsets into the run's
  /// scratch: lent by the caller, or `own_run_scratch`.
  DeviceMemory own_run_scratch;
  size_t run_bytes = 0;
  size_t computed_w_offset = 0, x_offset = 0, codes_offset = 0, row_scales_offset = 0;
  size_t accumulator_offset = 0;  ///< fp8_e4m3 with unit scales and a BF16 Y: the FP32 sums the epilogue reads
  bool lent_run_scratch = false;
  /// The run's scratch: the lent one, or the kernel's own.
  Result<std::byte*> run_base(const GemmCandidateArgs& args) const {
    if (!lent_run_scratch) return own_run_scratch.at(0);
    if (args.run_scratch == nullptr && run_bytes > 0)
      return Status::error("planned to borrow " + std::to_string(run_bytes) + " bytes of run scratch, but none was lent");
    return static_cast<std::byte*>(args.run_scratch);
  }
  /// Allocates the run scratch unless runs lend it.
  Status plan_run_scratch(size_t bytes) {
    run_bytes = bytes;
    return lent_run_scratch || bytes == 0 ? Status::ok() : own_run_scratch.allocate(bytes);
  }
  int algorithms = 1;
  bool scales_in_gemm = false;  ///< fp8_e4m3: cuBLASLt applies the scales, bias and ReLU (no epilogue pass)
  bool bias_per_run = false;    ///< ... and the bias is no constant: cast to BF16 on every run
  bool residual_in_gemm = false;  ///< key.residual added by the GEMM: cuBLASLt's C (no activation after it), or the cuDNN graph
  int64_t y_row_pitch = 0;        ///< GemmCandidatePlanInputs::y_row_pitch, when taken
};

GemmKernel::GemmKernel(GemmCandidate candidate, std::unique_ptr<Impl> impl)
    : candidate_(candidate), impl_(std::move(impl)) {}
GemmKernel::~GemmKernel() = default;

int GemmKernel::algorithm_count() const { return impl_->algorithms; }
int64_t GemmKernel::output_row_pitch() const { return impl_->y_row_pitch; }
size_t GemmKernel::run_scratch_bytes() const { return impl_->run_bytes; }

Status GemmKernel::can_implement(const GemmCandidate& candidate, const GemmKey& key, const GemmShape& shape) {
  return kernels::can_implement(candidate, key, shape);
}

Result<std::unique_ptr<GemmKernel>> GemmKernel::create(const GemmCandidate& c, const GemmKey& key,
                                                       const GemmShape& shape, const GemmCandidatePlanInputs& inputs) {
  LOKA_RETURN_IF_ERROR(can_implement(c, key, shape).with_context(c.name() + ": "));
  const int64_t pitch = inputs.y_row_pitch;
  if (pitch != 0) {
    // Y with a row pitch: cuBLASLt writes it through D's leading dimension. LoKA's small-M
    // kernel, the cuDNN graph, batched GEMMs and the passes after a GEMM (residual add, GELU,
    // scale epilogue) write packed rows.
    const bool cublaslt = c.library != kernels::GemmLibrary::kLoka && c.library != kernels::GemmLibrary::kCudnn;
    if (!cublaslt || shape.batch != 1 || key.residual || pitch < shape.n)
      return Status::error(c.name() + ": cannot write Y with a row pitch of " + std::to_string(pitch) + " (" +
                           shape.to_string() + ")");
  }
  auto impl = std::make_unique<Impl>();
  impl->y_row_pitch = pitch;
  impl->key = key;
  impl->shape = shape;
  impl->x_scale = inputs.x_scale;
  impl->lent_run_scratch = inputs.lent_run_scratch;
  impl->residual_in_gemm = key.residual && key.epilogue == GemmEpilogue::kNone;
  GemmOptions options;
  options.max_algorithms = std::max(inputs.max_algorithms, c.algorithm + 1);
  options.algorithm = c.algorithm;
  options.fast_accum = c.fast_accum;
  options.tf32 = c.precision == GemmPrecision::kTf32;
  options.split_k = c.split_k;
  options.tile = c.tile;
  options.stages = c.stages;
  options.tanh_gelu = c.tanh_gelu;
  const size_t mk = static_cast<size_t>(shape.m * shape.k * shape.batch);
  const bool bf16_y = key.output == DType::kBFloat16;  // a QuantizedGemm's Y held in BF16 (fp8_e4m3 only)
  if (c.library == kernels::GemmLibrary::kLoka) {
    // LoKA's small-M kernel: nothing to plan, no scratch; it adds the residual itself.
    impl->residual_in_gemm = key.residual;
    return std::unique_ptr<GemmKernel>(new GemmKernel(c, std::move(impl)));
  }
  const auto too_few = [&](int count) {
    return Status::error(c.name() + ": cuBLASLt offers " + std::to_string(count) + " algorithm(s) for " +
                         key.to_string() + " " + shape.to_string() + " on this device");
  };
  if (c.precision == GemmPrecision::kFp8E4M3 && c.library == kernels::GemmLibrary::kCudnn) {
    // One cuDNN graph applies the scales, bias, ReLU and residual (X quantized first unless E4M3).
    auto planned = CudnnFp8Gemm::create({shape.m, shape.n, shape.k, key.bias, key.epilogue, key.residual}, c.algorithm);
    if (!planned) return Status::error(c.name() + ": " + planned.status().message());
    impl->cudnn = std::move(planned).value();
    impl->algorithms = impl->cudnn->engine_count();
    impl->scales_in_gemm = true;
    impl->residual_in_gemm = key.residual;
  } else if (c.precision == GemmPrecision::kFp8E4M3 && (key.epilogue != GemmEpilogue::kGelu || c.tanh_gelu)) {
    // Scales, bias and ReLU (or, for a tanh_gelu candidate, cuBLASLt's tanh GELU) inside
    // cuBLASLt's GEMM where it has an algorithm for them: the output is written once. The exact
    // GELU and older cuBLASLt (no vector scales) take unit scales and LoKA's epilogue pass instead.
    // (A BF16 Y gets here only where one pass suffices: can_implement leaves the rest to the
    // node's own op.)
    auto scaled = Fp8Gemm::create(
        {shape.m, shape.n, shape.k, true, true, key.output, key.bias, key.epilogue, impl->residual_in_gemm, pitch},
        options);
    if (scaled) {
      impl->fp8 = std::move(scaled).value();
      impl->scales_in_gemm = true;
    } else if (pitch != 0) {  // the unit-scale path's epilogue pass writes packed rows
      return Status::error(c.name() + ": no row pitch: " + scaled.status().message());
    } else if (c.tanh_gelu) {
      // The epilogue pass computes the exact GELU: that would be another candidate under this name.
      return Status::error(c.name() + ": " + scaled.status().message());
    }
  }
  if (c.precision == GemmPrecision::kFp8E4M3) {
    if (!impl->fp8 && !impl->cudnn) {
      if (pitch != 0)  // the exact GELU: cuBLASLt's scaled GEMM was not asked, the epilogue pass runs
        return Status::error(c.name() + ": the scale epilogue writes packed rows: no row pitch (" + shape.to_string() + ")");
      impl->residual_in_gemm = false;  // the scale epilogue adds it
      const Fp8GemmProblem unit_scales{shape.m, shape.n, shape.k, false, false, DType::kFloat32, false, GemmEpilogue::kNone};
      LOKA_ASSIGN_OR_RETURN(impl->fp8, Fp8Gemm::create(unit_scales, options));
    }
    if (impl->fp8) impl->algorithms = impl->fp8->algorithm_count();
    if (c.algorithm >= impl->algorithms) return too_few(impl->algorithms);
    const bool per_row = key.input != DType::kFloat8E4M3FN && c.granularity == ScaleGranularity::kRow;
    const size_t m_floats = static_cast<size_t>(shape.m) * sizeof(float);
    impl->unit_offset = 0;
    impl->copies_offset = 256;
    impl->bias_offset = impl->copies_offset + device_aligned(per_row ? 0 : m_floats);
    LOKA_RETURN_IF_ERROR(impl->scratch.allocate(impl->bias_offset + static_cast<size_t>(shape.n) * sizeof(uint16_t)));
    impl->codes_offset = 0;
    impl->row_scales_offset = device_aligned(key.input == DType::kFloat8E4M3FN ? 0 : mk);
    // The unit-scale path sums into Y when Y is FP32; a BF16 Y (a cuBLASLt here without vector
    // scales) is too small for the FP32 sums.
    impl->accumulator_offset = impl->row_scales_offset + device_aligned(per_row ? m_floats : 0);
    const size_t accumulator_bytes =
        bf16_y && !impl->scales_in_gemm ? static_cast<size_t>(shape.m * shape.n) * sizeof(float) : 0;
    LOKA_RETURN_IF_ERROR(impl->plan_run_scratch(impl->accumulator_offset + accumulator_bytes));
    const float one = 1.0f;
    LOKA_RETURN_IF_ERROR(check(cudaMemcpy(impl->scratch.at(0), &one, sizeof one, cudaMemcpyHostToDevice), "unit scale"));
    if (impl->scales_in_gemm && !per_row) {
      // cuBLASLt pairs the weights' scale vector with a per-row one: the static scale, M times
      // (the cuDNN graph reads the first as its per-tensor scale).
      const std::vector<float> copies(static_cast<size_t>(shape.m), inputs.x_scale);
      LOKA_RETURN_IF_ERROR(check(cudaMemcpy(impl->scratch.at(impl->copies_offset), copies.data(),
                                            copies.size() * sizeof(float), cudaMemcpyHostToDevice),
                                 "activation scale vector"));
    }
    if (impl->fp8 && impl->scales_in_gemm && key.bias) {  // cuDNN reads the FP32 bias as it is
      if (inputs.host_bias != nullptr && inputs.host_bias->element_count() == shape.n) {
        const std::vector<float> bias = inputs.host_bias->to_floats();
        std::vector<uint16_t> codes(bias.size());
        for (size_t i = 0; i < bias.size(); ++i) codes[i] = float_to_bf16(bias[i]);
        LOKA_RETURN_IF_ERROR(check(cudaMemcpy(impl->scratch.at(impl->bias_offset), codes.data(),
                                              codes.size() * sizeof(uint16_t), cudaMemcpyHostToDevice),
                                   "BF16 bias"));
      } else {
        impl->bias_per_run = true;
      }
    }
    return std::unique_ptr<GemmKernel>(new GemmKernel(c, std::move(impl)));
  }
  if (c.precision == GemmPrecision::kBf16x2) return create_split_weights(c, key, shape, inputs, options, std::move(impl));
  GemmProblem problem;
  problem.m = shape.m;
  problem.n = shape.n;
  problem.k = shape.k;
  problem.batch = shape.batch;
  problem.input = c.precision == GemmPrecision::kBf16 ? DType::kBFloat16 : DType::kFloat32;
  problem.output = DType::kFloat32;
  problem.transpose_w = stores_w_transposed(key.layout);
  problem.has_bias = key.bias;
  problem.epilogue = key.epilogue;
  problem.has_addend = impl->residual_in_gemm;
  problem.y_row_pitch = pitch;
  LOKA_ASSIGN_OR_RETURN(impl->gemm, Gemm::create(problem, options));
  impl->algorithms = c.precision == GemmPrecision::kFp8Emulated ? 1 : impl->gemm->algorithm_count();
  if (c.algorithm >= impl->algorithms) return too_few(impl->algorithms);
  const bool bf16_input = key.input == DType::kBFloat16;
  if (c.precision == GemmPrecision::kFp32 || c.precision == GemmPrecision::kTf32) {
    LOKA_RETURN_IF_ERROR(impl->scratch.allocate(0));
    // A BF16 activation is widened into the run scratch: the GEMM reads FP32, as for an FP32 X.
    impl->x_offset = 0;
    LOKA_RETURN_IF_ERROR(impl->plan_run_scratch(bf16_input ? mk * sizeof(float) : 0));
    return std::unique_ptr<GemmKernel>(new GemmKernel(c, std::move(impl)));
  }
  // bf16 and emulation keep converted weights and a converted activation. A computed W
  // (activation x activation, BF16 only) has no host copy: it is cast on the device per run.
  const bool bf16 = c.precision == GemmPrecision::kBf16;
  std::vector<float> weights;
  size_t weight_count = static_cast<size_t>(shape.n * shape.k * (is_batched(key.layout) ? shape.batch : 1));
  if (key.constant_weight) {
    Result<std::vector<float>> host_values = host_weight_values(key, shape, inputs);
    if (!host_values.is_ok()) return host_values.status().with_context(c.name() + ": ");
    weights = std::move(host_values).value();
    weight_count = weights.size();
  }
  const size_t weight_bytes = weight_count * (bf16 ? 2 : 4);
  // Constant weights are converted once and kept; a computed W is cast on every run.
  impl->weights_offset = 0;
  LOKA_RETURN_IF_ERROR(impl->scratch.allocate(key.constant_weight ? weight_bytes : 0));
  impl->computed_w_offset = 0;
  impl->x_offset = device_aligned(key.constant_weight ? 0 : weight_bytes);
  // A BF16 activation needs no copy: the BF16 GEMM reads it as it is.
  impl->codes_offset = impl->x_offset + device_aligned(bf16_input ? 0 : mk * (bf16 ? 2 : 4));
  impl->row_scales_offset = impl->codes_offset + device_aligned(bf16 ? 0 : mk);
  LOKA_RETURN_IF_ERROR(impl->plan_run_scratch(
      impl->row_scales_offset + (bf16 ? 0 : static_cast<size_t>(shape.m + 1) * sizeof(float))));
  if (!key.constant_weight) return std::unique_ptr<GemmKernel>(new GemmKernel(c, std::move(impl)));
  if (bf16) {
    std::vector<uint16_t> codes(weights.size());
    for (size_t i = 0; i < weights.size(); ++i) codes[i] = float_to_bf16(weights[i]);
    LOKA_RETURN_IF_ERROR(check(cudaMemcpy(impl->scratch.at(0), codes.data(), weight_bytes, cudaMemcpyHostToDevice),
                               "uploading BF16 weights"));
  } else {
    LOKA_RETURN_IF_ERROR(check(cudaMemcpy(impl->scratch.at(0), weights.data(), weight_bytes, cudaMemcpyHostToDevice),
                               "uploading decoded weights"));
  }
  return std::unique_ptr<GemmKernel>(new GemmKernel(c, std::move(impl)));
}

Result<std::unique_ptr<GemmKernel>> GemmKernel::create_split_weights(const GemmCandidate& c, const GemmKey& key,
                                                                     const GemmShape& shape,
                                                                     const GemmCandidatePlanInputs& inputs,
                                                                     const GemmOptions& options,
                                                                     std::unique_ptr<Impl> impl) {
  // Both terms write Y, so neither can be the single last pass a row pitch needs.
  if (inputs.y_row_pitch != 0)
    return Status::error(c.name() + ": two GEMMs write Y: no row pitch (" + shape.to_string() + ")");
  GemmProblem high;
  high.m = shape.m;
  high.n = shape.n;
  high.k = shape.k;
  high.batch = shape.batch;
  high.input = DType::kBFloat16;
  high.output = DType::kFloat32;
  high.transpose_w = stores_w_transposed(key.layout);
  high.has_addend = impl->residual_in_gemm;  // a residual with no activation rides in the first term's C
  GemmProblem low = high;
  low.has_addend = false;
  low.accumulate = true;  // C = the first term's sums, added before the bias and activation
  low.has_bias = key.bias;
  low.epilogue = key.epilogue;
  LOKA_ASSIGN_OR_RETURN(impl->gemm, Gemm::create(high, options));
  LOKA_ASSIGN_OR_RETURN(impl->low_term, Gemm::create(low, options));
  impl->algorithms = std::min(impl->gemm->algorithm_count(), impl->low_term->algorithm_count());
  if (c.algorithm >= impl->algorithms)
    return Status::error(c.name() + ": cuBLASLt offers " + std::to_string(impl->algorithms) + " algorithm(s) for " +
                         key.to_string() + " " + shape.to_string() + " on this device");
  Result<std::vector<float>> host_values = host_weight_values(key, shape, inputs);
  if (!host_values.is_ok()) return host_values.status().with_context(c.name() + ": ");
  const std::vector<float>& weights = host_values.value();
  // W_hi = bf16(W), W_lo = bf16(W - W_hi): the remainder is exact in FP32 (W_hi is W's leading
  // bits), and W_hi + W_lo is W to 2^-17 of itself.
  std::vector<uint16_t> high_codes(weights.size()), low_codes(weights.size());
  for (size_t i = 0; i < weights.size(); ++i) {
    high_codes[i] = float_to_bf16(weights[i]);
    low_codes[i] = float_to_bf16(weights[i] - bf16_to_float(high_codes[i]));
  }
  const size_t bytes = weights.size() * sizeof(uint16_t);
  impl->weights_offset = 0;
  impl->low_weights_offset = device_aligned(bytes);
  LOKA_RETURN_IF_ERROR(impl->scratch.allocate(impl->low_weights_offset + bytes));
  LOKA_RETURN_IF_ERROR(check(cudaMemcpy(impl->scratch.at(impl->weights_offset), high_codes.data(), bytes,
                                        cudaMemcpyHostToDevice),
                             "uploading the weights' BF16 leading terms"));
  LOKA_RETURN_IF_ERROR(check(cudaMemcpy(impl->scratch.at(impl->low_weights_offset), low_codes.data(), bytes,
                                        cudaMemcpyHostToDevice),
                             "uploading the weights' BF16 remainders"));
  LOKA_RETURN_IF_ERROR(impl->plan_run_scratch(0));  // X is read as it is
  return std::unique_ptr<GemmKernel>(new GemmKernel(c, std::move(impl)));
}

Status GemmKernel::run(const GemmCandidateArgs& args, void* workspace, cudaStream_t stream) const {
  const Impl& p = *impl_;
  if (p.key.residual && args.residual == nullptr) return Status::error(candidate_.name() + ": the residual is missing");
  LOKA_RETURN_IF_ERROR(run_gemm(args, workspace, stream));
  // A residual neither cuBLASLt nor the scale epilogue took: after the activation, as the op says.
  const bool scale_epilogue = candidate_.precision == GemmPrecision::kFp8E4M3 && !p.scales_in_gemm;
  if (!p.key.residual || p.residual_in_gemm || scale_epilogue) return Status::ok();
  const std::vector<int64_t> shape{p.shape.m * p.shape.batch, p.shape.n};
  return launch_binary(BinaryOp::kAdd, args.y, shape, args.residual, shape, p.key.output, args.y, stream);
}

Status GemmKernel::run_gemm(const GemmCandidateArgs& args, void* workspace, cudaStream_t stream) const {
  const Impl& p = *impl_;
  const void* addend = p.residual_in_gemm ? args.residual : nullptr;
  const int64_t count = p.shape.m * p.shape.k * p.shape.batch;
  const bool bf16_input = p.key.input == DType::kBFloat16;
  if (candidate_.library == kernels::GemmLibrary::kLoka)
    return launch_small_m_gemm(small_m_args(p.key, p.shape, candidate_.granularity, args), stream);
  switch (candidate_.precision) {
    case GemmPrecision::kFp32:
    case GemmPrecision::kTf32: {  // the same cuBLASLt call; TF32 was chosen when planned (compute type)
      const void* x = args.x;
      if (bf16_input) {  // widened exactly (bits << 16): the op's FP32 arithmetic on the stored values
        LOKA_ASSIGN_OR_RETURN(std::byte* const run, p.run_base(args));
        void* widened = run + p.x_offset;
        LOKA_RETURN_IF_ERROR(
            launch_unary(UnaryOp::kIdentity, args.x, DType::kBFloat16, widened, DType::kFloat32, count, stream));
        x = widened;
      }
      GemmArgs gemm{x, args.w, args.bias, args.y, addend};
      return p.gemm->run(gemm, workspace, stream);
    }
    case GemmPrecision::kBf16: {
      LOKA_ASSIGN_OR_RETURN(std::byte* const run, p.run_base(args));
      const void* x = args.x;  // a BF16 activation is read as it is
      void* w = p.key.constant_weight ? p.scratch.at(p.weights_offset) : run + p.computed_w_offset;
      if (!bf16_input) {
        void* cast = run + p.x_offset;
        LOKA_RETURN_IF_ERROR(
            launch_unary(UnaryOp::kIdentity, args.x, DType::kFloat32, cast, DType::kBFloat16, count, stream));
        x = cast;
      }
      if (!p.key.constant_weight)
        LOKA_RETURN_IF_ERROR(launch_unary(UnaryOp::kIdentity, args.w, DType::kFloat32, w, DType::kBFloat16,
                                          p.shape.n * p.shape.k * (is_batched(p.key.layout) ? p.shape.batch : 1),
                                          stream));
      GemmArgs gemm{x, w, args.bias, args.y, addend};
      return p.gemm->run(gemm, workspace, stream);
    }
    case GemmPrecision::kBf16x2: {  // X · W_hi (+ the residual), then X · W_lo + Y with the bias and activation
      LOKA_RETURN_IF_ERROR(p.gemm->run(GemmArgs{args.x, p.scratch.at(p.weights_offset), nullptr, args.y, addend},
                                       workspace, stream));
      return p.low_term->run(GemmArgs{args.x, p.scratch.at(p.low_weights_offset), args.bias, args.y, nullptr},
                             workspace, stream);
    }
    case GemmPrecision::kFp8E4M3: {
      LOKA_ASSIGN_OR_RETURN(std::byte* const run, p.run_base(args));
      const float* unit = reinterpret_cast<const float*>(p.scratch.at(p.unit_offset));
      uint8_t* codes = reinterpret_cast<uint8_t*>(run + p.codes_offset);
      float* row_scales = reinterpret_cast<float*>(run + p.row_scales_offset);
      const float* copies = reinterpret_cast<const float*>(p.scratch.at(p.copies_offset));
      const uint8_t* x_codes = codes;
      const float* x_scale = args.x_scale;
      const bool per_row = p.key.input != DType::kFloat8E4M3FN && candidate_.granularity == ScaleGranularity::kRow;
      if (p.key.input == DType::kFloat8E4M3FN) {
        x_codes = static_cast<const uint8_t*>(args.x);
      } else if (per_row) {  // from FP32 or a BF16 X alike
        LOKA_RETURN_IF_ERROR(launch_quantize_rows(args.x, p.key.input, p.shape.m, p.shape.k, codes, row_scales, stream));
        x_scale = row_scales;
      } else {
        LOKA_RETURN_IF_ERROR(check(
            launch_quantize_fp8(args.x, p.key.input, codes, count, p.x_scale, Fp8Kind::kE4M3FN, stream), "FP8 quantize"));
      }
      if (p.cudnn) {
        const CudnnFp8GemmArgs graph{x_codes,
                                     static_cast<const uint8_t*>(args.w),
                                     copies,
                                     args.w_scale,
                                     args.bias,
                                     static_cast<const float*>(args.residual),
                                     static_cast<float*>(args.y)};  // FP32 (can_implement)
        return p.cudnn->run(graph, workspace, stream);
      }
      Fp8GemmArgs gemm;
      gemm.x = x_codes;
      gemm.w = static_cast<const uint8_t*>(args.w);
      if (p.scales_in_gemm) {
        gemm.x_scale = per_row ? row_scales : copies;
        gemm.w_scale = args.w_scale;
        gemm.y = args.y;
        if (p.key.bias) {
          void* bias = p.scratch.at(p.bias_offset);
          if (p.bias_per_run)
            LOKA_RETURN_IF_ERROR(launch_unary(UnaryOp::kIdentity, args.bias, DType::kFloat32, bias, DType::kBFloat16,
                                              p.shape.n, stream));
          gemm.bias = bias;
        }
        gemm.addend = addend;
        return p.fp8->run(gemm, workspace, stream);
      }
      gemm.x_scale = unit;
      gemm.w_scale = unit;
      // The FP32 sums: in Y itself (the epilogue rewrites it in place), or beside a BF16 Y.
      void* sums = p.key.output == DType::kBFloat16 ? static_cast<void*>(run + p.accumulator_offset) : args.y;
      gemm.y = sums;
      LOKA_RETURN_IF_ERROR(p.fp8->run(gemm, workspace, stream));
      DequantEpilogueArgs epilogue;
      epilogue.acc = sums;
      epilogue.x_scale = x_scale;
      epilogue.per_row_x_scale = per_row;
      epilogue.w_scale = args.w_scale;
      epilogue.bias = args.bias;
      epilogue.activation = p.key.epilogue;
      epilogue.residual = p.key.residual ? args.residual : nullptr;
      epilogue.residual_type = p.key.output;  // a residual is in Y's dtype (gemm_kernel_key.h)
      epilogue.y = args.y;
      epilogue.y_type = p.key.output;
      epilogue.rows = p.shape.m;
      epilogue.cols = p.shape.n;
      return launch_dequant_epilogue(epilogue, stream);
    }
    case GemmPrecision::kFp8Emulated: {
      LOKA_ASSIGN_OR_RETURN(std::byte* const run, p.run_base(args));
      float* xq = reinterpret_cast<float*>(run + p.x_offset);
      uint8_t* codes = reinterpret_cast<uint8_t*>(run + p.codes_offset);
      float* row_scales = reinterpret_cast<float*>(run + p.row_scales_offset);
      if (p.key.input == DType::kFloat8E4M3FN) {
        LOKA_RETURN_IF_ERROR(check(launch_dequantize_fp8(static_cast<const uint8_t*>(args.x), xq, count, p.x_scale,
                                                         Fp8Kind::kE4M3FN, stream),
                                   "FP8 dequantize"));
      } else if (p.key.activation_scale == ScaleGranularity::kRow) {
        LOKA_RETURN_IF_ERROR(launch_quantize_rows(args.x, DType::kFloat32, p.shape.m, p.shape.k, codes, row_scales, stream));
        LOKA_RETURN_IF_ERROR(check(launch_dequantize_fp8(codes, xq, count, 1.0f, Fp8Kind::kE4M3FN, stream), "FP8 dequantize"));
        LOKA_RETURN_IF_ERROR(launch_binary(BinaryOp::kMul, xq, {p.shape.m, p.shape.k}, row_scales, {p.shape.m, 1},
                                           DType::kFloat32, xq, stream));
      } else {
        LOKA_RETURN_IF_ERROR(check(launch_quantize_fp8(static_cast<const float*>(args.x), codes, count, p.x_scale,
                                                       Fp8Kind::kE4M3FN, stream),
                                   "FP8 quantize"));
        LOKA_RETURN_IF_ERROR(check(launch_dequantize_fp8(codes, xq, count, p.x_scale, Fp8Kind::kE4M3FN, stream),
                                   "FP8 dequantize"));
      }
      GemmArgs gemm{xq, p.scratch.at(p.weights_offset), args.bias, args.y, addend};
      return p.gemm->run(gemm, workspace, stream);
    }
  }
  return Status::error("unknown GEMM candidate precision");
}

}  // namespace loka::cuda
