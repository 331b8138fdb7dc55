// ============================================================================
// kernels/cuda/gemm_autotune.cc — synthetic inputs, the FP32 reference, and
// the graph-captured, event-timed runs of every candidate.
// ============================================================================
#include "kernels/cuda/gemm_autotune.h"

#include <cublasLt.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "kernels/cuda/autotune_timing.h"
#include "kernels/cuda/cudnn_fp8_gemm.h"  // cudnn_runtime_version()
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_candidate.h"
#include "kernels/cuda/gemm_types.h"
#include "kernels/registry/kernel_registry.h"
#include "loka/bfloat16.h"
#include "loka/float8.h"

namespace loka::cuda {
namespace {

using kernels::GemmKey;
using kernels::GemmLayout;
using kernels::GemmShape;

/// One input set (rotated through to defeat the L2 cache).
struct InputSet {
  DeviceBytes x, w, y;
};

/// The error is measured on about this many outputs (whole rows).
constexpr size_t kErrorValues = size_t{1} << 20;

/// An operand held in BF16 (BF16 activation storage): its codes, with `values` replaced by what
/// they hold, so the reference and the error are taken on the values the candidates read.
std::vector<uint16_t> round_to_bf16(std::vector<float>& values) {
  std::vector<uint16_t> codes(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    codes[i] = float_to_bf16(values[i]);
    values[i] = bf16_to_float(codes[i]);
  }
  return codes;
}

}  // namespace

Result<TuningDevice> tuning_device() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return Status::error("no usable CUDA device");
  cudaDeviceProp properties{};
  LOKA_RETURN_IF_ERROR(autotune_check(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties"));
  int driver = 0;
  LOKA_RETURN_IF_ERROR(autotune_check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion"));
  // "130100+loka5+cudnn91400": cuBLASLt's version, the revision of LoKA's candidate kernels and,
  // where built, cuDNN's (its engine indices and times are the library's: an upgrade re-tunes).
  const int cudnn = cudnn_runtime_version();
  char pci[32];
  std::snprintf(pci, sizeof pci, "%04x:%02x:%02x", properties.pciDomainID, properties.pciBusID, properties.pciDeviceID);
  return TuningDevice{properties.name, std::to_string(driver),
                      std::to_string(cublasLtGetVersion()) + "+loka" + std::to_string(kGemmKernelRevision) +
                          (cudnn > 0 ? "+cudnn" + std::to_string(cudnn) : ""),
                      pci};
}

Result<std::vector<GemmMeasurement>> autotune_gemm(const GemmKey& key, const GemmShape& shape,
                                                   const AutotuneOptions& options) {
  const int64_t m = shape.m, n = shape.n, k = shape.k, batch = shape.batch;
  const bool fp8_w = key.weight == DType::kFloat8E4M3FN, fp8_x = key.input == DType::kFloat8E4M3FN;
  const bool bf16_x = key.input == DType::kBFloat16;
  const bool bf16_y = key.output == DType::kBFloat16;  // a QuantizedGemm's Y held in BF16 (and its residual)
  const size_t x_count = static_cast<size_t>(batch * m * k);
  const size_t w_count = static_cast<size_t>((is_batched(key.layout) ? batch : 1) * n * k);
  const size_t y_count = static_cast<size_t>(batch * m * n);

  // Synthetic operands: unit-normal activations, weights ~ N(0, 1/K), bias ~ N(0, 0.1). Drawn for
  // the first kDrawnValues of each operand and repeated beyond: drawing every value of a batch-16384
  // problem cost about a second per problem, and the speed of a GEMM does not depend on them.
  std::mt19937_64 random(options.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(x_count), w(w_count), bias(static_cast<size_t>(n));
  const float w_std = 1.0f / std::sqrt(static_cast<float>(k));
  fill_repeating(x, [&] { return normal(random); });
  fill_repeating(w, [&] { return normal(random) * w_std; });
  for (float& v : bias) v = 0.1f * normal(random);
  // The error is measured on the first output rows only (whole rows, about kErrorValues outputs,
  // computed from drawn values): more rows add no information, only host time.
  const size_t error_count =
      static_cast<size_t>(n) * std::clamp<size_t>(kErrorValues / static_cast<size_t>(std::max(n, k)), 1,
                                                  static_cast<size_t>(batch * m));

  const std::vector<uint16_t> x_bf16 = bf16_x ? round_to_bf16(x) : std::vector<uint16_t>();

  // Quantized forms, as insert-scales writes them.
  std::vector<uint8_t> w_codes, x_codes;
  std::vector<float> w_scales;
  float x_scale = 1.0f;
  if (fp8_w) {
    w_codes.resize(w_count);
    w_scales.resize(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      float amax = 0;
      for (int64_t p = 0; p < k; ++p) amax = std::max(amax, std::fabs(w[static_cast<size_t>(j * k + p)]));
      const float scale = amax > 0 ? amax / 448.0f : 1.0f;
      w_scales[static_cast<size_t>(j)] = scale;
      for (int64_t p = 0; p < k; ++p)
        w_codes[static_cast<size_t>(j * k + p)] = float_to_fp8e4m3fn(w[static_cast<size_t>(j * k + p)] / scale);
    }
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    x_scale = amax > 0 ? amax / 448.0f : 1.0f;
    if (fp8_x) {
      x_codes.resize(x_count);
      for (size_t i = 0; i < x_count; ++i) x_codes[i] = float_to_fp8e4m3fn(x[i] / x_scale);
    }
  }

  // Shared device operands and the workspace.
  DeviceBytes d_bias, d_w_scale, d_x_scale, d_residual, workspace;
  LOKA_RETURN_IF_ERROR(d_bias.upload(bias.data(), bias.size() * sizeof(float)));
  // A residual (the same values for every input set: a GEMM's speed does not depend on them).
  std::vector<float> residual;
  if (key.residual) {
    residual.resize(y_count);
    fill_repeating(residual, [&] { return normal(random); });
    if (bf16_y) {  // in Y's dtype
      const std::vector<uint16_t> codes = round_to_bf16(residual);
      LOKA_RETURN_IF_ERROR(d_residual.upload(codes.data(), codes.size() * sizeof(uint16_t)));
    } else {
      LOKA_RETURN_IF_ERROR(d_residual.upload(residual.data(), residual.size() * sizeof(float)));
    }
  }
  LOKA_RETURN_IF_ERROR(d_w_scale.upload(w_scales.data(), w_scales.size() * sizeof(float)));
  LOKA_RETURN_IF_ERROR(d_x_scale.upload(&x_scale, sizeof x_scale));
  LOKA_RETURN_IF_ERROR(workspace.upload(nullptr, kGemmWorkspaceBytes));

  // Input sets: as many as it takes to rotate through rotate_bytes.
  const void* x_host = fp8_x    ? static_cast<const void*>(x_codes.data())
                       : bf16_x ? static_cast<const void*>(x_bf16.data())
                                : x.data();
  const size_t x_bytes = x_count * (fp8_x ? 1 : bf16_x ? 2 : 4);
  const void* w_host = fp8_w ? static_cast<const void*>(w_codes.data()) : w.data();
  const size_t w_bytes = w_count * (fp8_w ? 1 : 4);
  const size_t y_bytes = y_count * (bf16_y ? 2 : 4);
  const size_t set_bytes = x_bytes + w_bytes + y_bytes;
  std::vector<InputSet> sets(rotating_set_count(set_bytes, options.rotate_bytes));
  for (InputSet& set : sets) {
    LOKA_RETURN_IF_ERROR(set.x.upload(x_host, x_bytes));
    LOKA_RETURN_IF_ERROR(set.w.upload(w_host, w_bytes));
    LOKA_RETURN_IF_ERROR(set.y.upload(nullptr, y_bytes));
  }

  AutotuneStream owned_stream;
  LOKA_RETURN_IF_ERROR(owned_stream.create());
  cudaStream_t stream = owned_stream.stream;

  // The reference: FP32 GEMM of the unquantized operands.
  std::vector<float> reference(error_count);
  {
    GemmProblem problem;
    problem.m = m;
    problem.n = n;
    problem.k = k;
    problem.batch = batch;
    problem.transpose_w = stores_w_transposed(key.layout);
    problem.has_bias = key.bias;
    problem.epilogue = key.epilogue;
    LOKA_ASSIGN_OR_RETURN(auto gemm, Gemm::create(problem));
    DeviceBytes rx, rw, ry;
    LOKA_RETURN_IF_ERROR(rx.upload(x.data(), x_count * 4));
    LOKA_RETURN_IF_ERROR(rw.upload(w.data(), w_count * 4));
    LOKA_RETURN_IF_ERROR(ry.upload(nullptr, y_count * 4));
    LOKA_RETURN_IF_ERROR(gemm->run(GemmArgs{rx.data, rw.data, key.bias ? d_bias.data : nullptr, ry.data}, workspace.data, stream));
    LOKA_RETURN_IF_ERROR(autotune_check(cudaMemcpyAsync(reference.data(), ry.data, error_count * 4, cudaMemcpyDeviceToHost, stream), "download"));
    LOKA_RETURN_IF_ERROR(autotune_check(cudaStreamSynchronize(stream), "reference GEMM"));
    if (key.residual)  // Y = act(...) + R: the residual comes after the activation
      for (size_t i = 0; i < error_count; ++i) reference[i] += residual[i];
  }

  // Host constants for the candidates that convert weights when planned.
  Tensor host_w, host_w_scale;
  if (fp8_w) {
    host_w = Tensor::zeros(DType::kFloat8E4M3FN, {n, k});
    std::copy(w_codes.begin(), w_codes.end(), host_w.values<uint8_t>().begin());
    host_w_scale = Tensor::from_floats({n}, w_scales);
  } else {
    host_w = Tensor::from_floats({static_cast<int64_t>(w_count)}, w);
  }
  const Tensor host_bias = Tensor::from_floats({n}, bias);
  GemmCandidatePlanInputs plan_inputs{&host_w, fp8_w ? &host_w_scale : nullptr, key.bias ? &host_bias : nullptr, x_scale,
                                      options.max_algorithms};

  kernels::CandidateOptions expand{options.max_algorithms, options.fast_accum, options.bf16,
                                   options.tf32, options.split_k, options.tiles, options.cudnn_engines,
                                   options.tanh_gelu, options.small_m};
  // Every candidate that plans, runs and captures here: its error on set 0, then its graphs
  // timed; the close winners again (kernels/cuda/autotune_timing.h says why). Only a candidate that
  // may be re-timed keeps its kernel and graphs meanwhile (the graphs go first: they name the
  // kernel's scratch), so memory stays that of a few candidates however many there are.
  struct Kept {
    std::unique_ptr<GemmKernel> kernel;
    std::shared_ptr<const CapturedCandidate> runs;
  };
  std::vector<Kept> kept;
  std::vector<kernels::GemmCandidate> candidates;
  std::vector<double> errors;
  std::vector<TimedCandidate> timed;
  for (const kernels::GemmCandidate& candidate : kernels::gemm_candidates(key, shape, expand)) {
    auto planned = GemmKernel::create(candidate, key, shape, plan_inputs);
    if (!planned) continue;  // e.g. an algorithm index this problem does not have
    const GemmKernel& kernel = **planned;
    const auto args_for = [&](const InputSet& set) {
      GemmCandidateArgs args;
      args.x = set.x.data;
      args.w = set.w.data;
      args.w_scale = static_cast<const float*>(d_w_scale.data);
      args.x_scale = static_cast<const float*>(d_x_scale.data);
      args.bias = key.bias ? static_cast<const float*>(d_bias.data) : nullptr;
      args.y = set.y.data;
      args.residual = key.residual ? d_residual.data : nullptr;
      return args;
    };
    // Error: one run on set 0 against the reference.
    if (!kernel.run(args_for(sets[0]), workspace.data, stream)) {
      cudaStreamSynchronize(stream);
      continue;
    }
    std::vector<float> y(error_count);
    std::vector<uint16_t> y_codes(bf16_y ? error_count : 0);
    void* y_host = bf16_y ? static_cast<void*>(y_codes.data()) : static_cast<void*>(y.data());
    LOKA_RETURN_IF_ERROR(autotune_check(
        cudaMemcpyAsync(y_host, sets[0].y.data, error_count * (bf16_y ? 2 : 4), cudaMemcpyDeviceToHost, stream), "download"));
    LOKA_RETURN_IF_ERROR(autotune_check(cudaStreamSynchronize(stream), candidate.name().c_str()));
    for (size_t i = 0; i < y_codes.size(); ++i) y[i] = bf16_to_float(y_codes[i]);  // a BF16 Y: its values
    // One CUDA graph per input set, as the runtime replays a model.
    auto runs = CapturedCandidate::capture(
        sets.size(), [&](size_t set, cudaStream_t s) { return kernel.run(args_for(sets[set]), workspace.data, s); }, stream);
    if (!runs) continue;
    auto shared_runs = std::make_shared<const CapturedCandidate>(std::move(runs).value());
    TimedCandidate timing;
    LOKA_ASSIGN_OR_RETURN(timing.samples,
                          shared_runs->time(options.warmup, options.repeats, stream, options.hold_gpu_for_timing));
    timing.family = static_cast<int>(candidate.precision) * 2 + (candidate.fast_accum ? 1 : 0);
    if (may_be_retimed(timing.median_us())) {
      timing.runs = shared_runs;
      kept.push_back(Kept{std::move(planned).value(), std::move(shared_runs)});
    }
    candidates.push_back(candidate);
    errors.push_back(rel_l2(y, reference));
    timed.push_back(std::move(timing));
  }
  LOKA_RETURN_IF_ERROR(
      refine_close_winners(timed, options.refine_rounds, options.repeats, stream, options.hold_gpu_for_timing));
  std::vector<GemmMeasurement> measurements;
  for (size_t i = 0; i < timed.size(); ++i)
    measurements.push_back(
        GemmMeasurement{candidates[i], timed[i].median_us(), errors[i], static_cast<int>(timed[i].samples.size())});
  return measurements;
}

}  // namespace loka::cuda
