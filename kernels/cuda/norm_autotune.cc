// ============================================================================
// kernels/cuda/norm_autotune.cc — synthetic rows, the CPU reference, and the
// timed runs of every norm candidate.
// ============================================================================
#include "kernels/cuda/norm_autotune.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>

#include "kernels/cpu/layer_norm.h"
#include "kernels/cuda/autotune_timing.h"
#include "kernels/cuda/cudnn_layer_norm.h"
#include "kernels/cuda/layer_norm.h"
#include "loka/float8.h"

namespace loka::cuda {
namespace {

using kernels::NormCandidate;
using kernels::NormKey;
using kernels::NormLibrary;
using kernels::NormShape;

/// About this many output values are compared with the reference (whole rows): more rows add
/// no information, only host time.
constexpr size_t kErrorValues = size_t{1} << 18;

/// A planned candidate: LoKA's kernel needs no planning; a cuDNN graph is built once, with a
/// workspace of its own (captured graphs keep its address).
struct PlannedNorm {
  NormCandidate candidate;
  std::unique_ptr<CudnnLayerNorm> cudnn;  ///< null for LoKA's kernel
  DeviceBytes workspace;
  Status run(const LayerNormArgs& args, cudaStream_t stream) const {
    return cudnn ? cudnn->run(args, workspace.data, stream) : launch_layer_norm(args, stream);
  }
};

Result<PlannedNorm> plan(const NormCandidate& candidate, const NormKey& key, const NormShape& shape, float epsilon) {
  if (candidate.library == NormLibrary::kLoka) return PlannedNorm{candidate, nullptr, {}};
  CudnnLayerNormProblem problem;
  problem.rows = shape.rows;
  problem.cols = key.cols;
  problem.has_bias = key.bias;
  problem.has_residual = key.residual;
  problem.fp8_output = key.fp8_output;
  problem.epsilon = epsilon;
  PlannedNorm planned{candidate, nullptr, {}};
  LOKA_ASSIGN_OR_RETURN(planned.cudnn, CudnnLayerNorm::create(problem, candidate.engine));
  LOKA_RETURN_IF_ERROR(planned.workspace.upload(nullptr, planned.cudnn->workspace_bytes()));
  return planned;
}

}  // namespace

Result<std::vector<NormMeasurement>> autotune_norm(const NormKey& key, const NormShape& shape,
                                                   const NormAutotuneOptions& options) {
  if (shape.rows < 1 || key.cols < 1) return Status::error("autotune: a norm problem needs rows and columns");
  const size_t rows = static_cast<size_t>(shape.rows), cols = static_cast<size_t>(key.cols);
  const size_t count = rows * cols;

  // Synthetic operands: each row a normal draw around an offset of its own (so subtracting the
  // mean matters, as after a GEMM), Scale near 1, a small B, a unit-normal residual.
  std::mt19937_64 random(options.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(count), residual(key.residual ? count : 0), scale(cols), bias(cols);
  size_t drawn = 0;
  float offset = 0.0f;
  fill_repeating(x, [&] {
    if (drawn++ % cols == 0) offset = 3.0f * normal(random);
    return offset + normal(random);
  });
  fill_repeating(residual, [&] { return normal(random); });
  for (float& v : scale) v = 1.0f + 0.1f * normal(random);
  for (float& v : bias) v = 0.1f * normal(random);

  // The reference on the first rows: the CPU arithmetic LoKA's CPU runtime performs.
  const size_t error_rows = std::clamp<size_t>(kErrorValues / cols, 1, rows);
  std::vector<float> reference(error_rows * cols);
  float amax = 0.0f;
  for (size_t r = 0; r < error_rows; ++r) {
    std::vector<float> row(x.begin() + static_cast<long>(r * cols), x.begin() + static_cast<long>((r + 1) * cols));
    if (key.residual)
      for (size_t j = 0; j < cols; ++j) row[j] += residual[r * cols + j];
    cpu::layer_norm_row(row.data(), key.cols, options.epsilon, scale.data(), key.bias ? bias.data() : nullptr,
                        [&](int64_t j, float v) {
                          reference[r * cols + static_cast<size_t>(j)] = v;
                          amax = std::max(amax, std::fabs(v));
                        });
  }
  // An FP8 output's static scale as insert-scales would calibrate it: the largest value at 448.
  const float y_scale = key.fp8_output && amax > 0 ? amax / 448.0f : 1.0f;

  // Device operands: X and Y per input set, the rest shared.
  const size_t y_bytes = count * (key.fp8_output ? 1 : 4);
  DeviceBytes d_scale, d_bias, d_residual;
  LOKA_RETURN_IF_ERROR(d_scale.upload(scale.data(), cols * 4));
  LOKA_RETURN_IF_ERROR(d_bias.upload(bias.data(), cols * 4));
  if (key.residual) LOKA_RETURN_IF_ERROR(d_residual.upload(residual.data(), count * 4));
  struct InputSet {
    DeviceBytes x, y;
  };
  std::vector<InputSet> sets(rotating_set_count(count * 4 + y_bytes, options.rotate_bytes));
  for (InputSet& set : sets) {
    LOKA_RETURN_IF_ERROR(set.x.upload(x.data(), count * 4));
    LOKA_RETURN_IF_ERROR(set.y.upload(nullptr, y_bytes));
  }
  AutotuneStream stream;
  LOKA_RETURN_IF_ERROR(stream.create());

  const auto args_for = [&](const InputSet& set) {
    LayerNormArgs args;
    args.x = static_cast<const float*>(set.x.data);
    args.residual = key.residual ? static_cast<const float*>(d_residual.data) : nullptr;
    args.scale = static_cast<const float*>(d_scale.data);
    args.bias = key.bias ? static_cast<const float*>(d_bias.data) : nullptr;
    args.rows = shape.rows;
    args.cols = key.cols;
    args.epsilon = options.epsilon;
    if (key.fp8_output) {
      args.y_codes = static_cast<uint8_t*>(set.y.data);
      args.y_scale = y_scale;
    } else {
      args.y = static_cast<float*>(set.y.data);
    }
    return args;
  };

  // A handful of candidates (LoKA's kernel and the cuDNN engines asked for): every one keeps its
  // kernel and graphs until the close winners are re-timed (the graphs go first).
  std::vector<PlannedNorm> planned;
  std::vector<double> errors;
  std::vector<TimedCandidate> timed;
  for (const NormCandidate& candidate : kernels::norm_candidates(key, shape, options.cudnn_engines)) {
    auto kernel = plan(candidate, key, shape, options.epsilon);
    if (!kernel) continue;  // e.g. a graph this cuDNN does not build
    // Error: one run on set 0 against the reference.
    if (!kernel->run(args_for(sets[0]), stream.stream)) {
      cudaStreamSynchronize(stream.stream);
      cudaGetLastError();
      continue;
    }
    std::vector<float> y(reference.size());
    if (key.fp8_output) {
      std::vector<uint8_t> codes(reference.size());
      LOKA_RETURN_IF_ERROR(autotune_check(
          cudaMemcpyAsync(codes.data(), sets[0].y.data, codes.size(), cudaMemcpyDeviceToHost, stream.stream), "download"));
      LOKA_RETURN_IF_ERROR(autotune_check(cudaStreamSynchronize(stream.stream), candidate.name().c_str()));
      for (size_t i = 0; i < codes.size(); ++i) y[i] = fp8e4m3fn_to_float(codes[i]) * y_scale;
    } else {
      LOKA_RETURN_IF_ERROR(autotune_check(
          cudaMemcpyAsync(y.data(), sets[0].y.data, y.size() * 4, cudaMemcpyDeviceToHost, stream.stream), "download"));
      LOKA_RETURN_IF_ERROR(autotune_check(cudaStreamSynchronize(stream.stream), candidate.name().c_str()));
    }
    auto runs = CapturedCandidate::capture(
        sets.size(), [&](size_t set, cudaStream_t s) { return kernel->run(args_for(sets[set]), s); },
        stream.stream);
    if (!runs) continue;
    TimedCandidate timing;
    timing.runs = std::make_shared<const CapturedCandidate>(std::move(runs).value());
    LOKA_ASSIGN_OR_RETURN(timing.samples, timing.runs->time(options.warmup, options.repeats, stream.stream,
                                                            options.hold_gpu_for_timing));
    planned.push_back(std::move(kernel).value());
    errors.push_back(rel_l2(y, reference));
    timed.push_back(std::move(timing));
  }
  LOKA_RETURN_IF_ERROR(
      refine_close_winners(timed, options.refine_rounds, options.repeats, stream.stream, options.hold_gpu_for_timing));
  std::vector<NormMeasurement> measurements;
  for (size_t i = 0; i < timed.size(); ++i)
    measurements.push_back(NormMeasurement{planned[i].candidate, timed[i].median_us(), errors[i],
                                           static_cast<int>(timed[i].samples.size())});
  return measurements;
}

}  // namespace loka::cuda
