// ============================================================================
// kernels/cuda/gemm_autotune.cc — synthetic inputs, the FP32 reference, and
// the graph-captured, event-timed runs of every candidate.
// ============================================================================
#include "kernels/cuda/gemm_autotune.h"

#include <cublasLt.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_candidate.h"
#include "kernels/cuda/gemm_types.h"
#include "kernels/registry/kernel_registry.h"
#include "loka/float8.h"

namespace loka::cuda {
namespace {

using kernels::GemmKey;
using kernels::GemmLayout;
using kernels::GemmShape;

Status check(cudaError_t error, const char* what) {
  return error == cudaSuccess ? Status::ok() : Status::error(std::string("autotune: ") + what + ": " + cudaGetErrorString(error));
}

/// A device allocation freed on scope exit.
struct DeviceBytes {
  void* data = nullptr;
  DeviceBytes() = default;
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  DeviceBytes(DeviceBytes&& other) noexcept : data(std::exchange(other.data, nullptr)) {}
  ~DeviceBytes() {
    if (data) cudaFree(data);
  }
  Status upload(const void* host, size_t bytes) {
    LOKA_RETURN_IF_ERROR(check(cudaMalloc(&data, std::max<size_t>(bytes, 256)), "cudaMalloc"));
    if (host && bytes) return check(cudaMemcpy(data, host, bytes, cudaMemcpyHostToDevice), "upload");
    return Status::ok();
  }
};

/// One input set (rotated through to defeat the L2 cache).
struct InputSet {
  DeviceBytes x, w, y;
};

double rel_l2(const std::vector<float>& y, const std::vector<float>& reference) {
  double error = 0, norm = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double d = static_cast<double>(y[i]) - reference[i];
    error += d * d;
    norm += static_cast<double>(reference[i]) * reference[i];
  }
  if (!std::isfinite(error)) return std::numeric_limits<double>::infinity();
  return norm > 0 ? std::sqrt(error / norm) : std::sqrt(error);
}

constexpr size_t kDrawnValues = size_t{1} << 22;
constexpr size_t kErrorValues = size_t{1} << 20;

/// values[i] = draw() for the first kDrawnValues, then those values again, cyclically.
template <typename Draw>
void fill_repeating(std::vector<float>& values, Draw draw) {
  const size_t drawn = std::min(values.size(), kDrawnValues);
  for (size_t i = 0; i < drawn; ++i) values[i] = draw();
  for (size_t i = drawn; i < values.size(); i += drawn)
    std::copy_n(values.begin(), std::min(drawn, values.size() - i), values.begin() + static_cast<long>(i));
}

}  // namespace

Result<TuningDevice> tuning_device() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return Status::error("no usable CUDA device");
  cudaDeviceProp properties{};
  LOKA_RETURN_IF_ERROR(check(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties"));
  int driver = 0;
  LOKA_RETURN_IF_ERROR(check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion"));
  // "130100+loka3": the library's version and the revision of LoKA's candidate kernels.
  return TuningDevice{properties.name, std::to_string(driver),
                      std::to_string(cublasLtGetVersion()) + "+loka" + std::to_string(kGemmKernelRevision)};
}

Result<std::vector<GemmMeasurement>> autotune_gemm(const GemmKey& key, const GemmShape& shape,
                                                   const AutotuneOptions& options) {
  const int64_t m = shape.m, n = shape.n, k = shape.k, batch = shape.batch;
  const bool fp8_w = key.weight == DType::kFloat8E4M3FN, fp8_x = key.input == DType::kFloat8E4M3FN;
  const size_t x_count = static_cast<size_t>(batch * m * k);
  const size_t w_count = static_cast<size_t>((key.layout == GemmLayout::kBatched ? batch : 1) * n * k);
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
    LOKA_RETURN_IF_ERROR(d_residual.upload(residual.data(), residual.size() * sizeof(float)));
  }
  LOKA_RETURN_IF_ERROR(d_w_scale.upload(w_scales.data(), w_scales.size() * sizeof(float)));
  LOKA_RETURN_IF_ERROR(d_x_scale.upload(&x_scale, sizeof x_scale));
  LOKA_RETURN_IF_ERROR(workspace.upload(nullptr, kGemmWorkspaceBytes));

  // Input sets: as many as it takes to rotate through rotate_bytes.
  const void* x_host = fp8_x ? static_cast<const void*>(x_codes.data()) : x.data();
  const size_t x_bytes = x_count * (fp8_x ? 1 : 4);
  const void* w_host = fp8_w ? static_cast<const void*>(w_codes.data()) : w.data();
  const size_t w_bytes = w_count * (fp8_w ? 1 : 4);
  const size_t y_bytes = y_count * 4;
  const size_t set_bytes = x_bytes + w_bytes + y_bytes;
  const size_t set_count = std::clamp<size_t>((options.rotate_bytes + set_bytes - 1) / set_bytes, 1, 64);
  std::vector<InputSet> sets(set_count);
  for (InputSet& set : sets) {
    LOKA_RETURN_IF_ERROR(set.x.upload(x_host, x_bytes));
    LOKA_RETURN_IF_ERROR(set.w.upload(w_host, w_bytes));
    LOKA_RETURN_IF_ERROR(set.y.upload(nullptr, y_bytes));
  }

  cudaStream_t stream = nullptr;
  LOKA_RETURN_IF_ERROR(check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"));
  struct StreamGuard {
    cudaStream_t s;
    ~StreamGuard() { cudaStreamDestroy(s); }
  } stream_guard{stream};

  // The reference: FP32 GEMM of the unquantized operands.
  std::vector<float> reference(error_count);
  {
    GemmProblem problem;
    problem.m = m;
    problem.n = n;
    problem.k = k;
    problem.batch = batch;
    problem.transpose_w = key.layout == GemmLayout::kNT;
    problem.has_bias = key.bias;
    problem.epilogue = key.epilogue;
    LOKA_ASSIGN_OR_RETURN(auto gemm, Gemm::create(problem));
    DeviceBytes rx, rw, ry;
    LOKA_RETURN_IF_ERROR(rx.upload(x.data(), x_count * 4));
    LOKA_RETURN_IF_ERROR(rw.upload(w.data(), w_count * 4));
    LOKA_RETURN_IF_ERROR(ry.upload(nullptr, y_bytes));
    LOKA_RETURN_IF_ERROR(gemm->run(GemmArgs{rx.data, rw.data, key.bias ? d_bias.data : nullptr, ry.data}, workspace.data, stream));
    LOKA_RETURN_IF_ERROR(check(cudaMemcpyAsync(reference.data(), ry.data, error_count * 4, cudaMemcpyDeviceToHost, stream), "download"));
    LOKA_RETURN_IF_ERROR(check(cudaStreamSynchronize(stream), "reference GEMM"));
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
                                   options.tanh_gelu};
  std::vector<GemmMeasurement> measurements;
  // One event pair per timed launch, all enqueued before waiting: the GPU never
  // idles between launches waiting for the host, so host launch cost stays out.
  const size_t repeats = static_cast<size_t>(std::max(options.repeats, 1));
  std::vector<cudaEvent_t> events(2 * repeats, nullptr);
  struct EventGuard {
    std::vector<cudaEvent_t>& events;
    ~EventGuard() {
      for (cudaEvent_t event : events)
        if (event) cudaEventDestroy(event);
    }
  } event_guard{events};
  for (cudaEvent_t& event : events) LOKA_RETURN_IF_ERROR(check(cudaEventCreate(&event), "cudaEventCreate"));
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
      args.y = static_cast<float*>(set.y.data);
      args.residual = key.residual ? static_cast<const float*>(d_residual.data) : nullptr;
      return args;
    };
    // Error: one run on set 0 against the reference.
    if (!kernel.run(args_for(sets[0]), workspace.data, stream)) {
      cudaStreamSynchronize(stream);
      continue;
    }
    std::vector<float> y(error_count);
    LOKA_RETURN_IF_ERROR(check(cudaMemcpyAsync(y.data(), sets[0].y.data, error_count * 4, cudaMemcpyDeviceToHost, stream), "download"));
    LOKA_RETURN_IF_ERROR(check(cudaStreamSynchronize(stream), candidate.name().c_str()));
    const double error = rel_l2(y, reference);

    // One CUDA graph per input set, as the runtime replays a model.
    std::vector<cudaGraphExec_t> graphs;
    bool captured = true;
    for (const InputSet& set : sets) {
      cudaGraph_t graph = nullptr;
      if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        captured = false;
        break;
      }
      const Status status = kernel.run(args_for(set), workspace.data, stream);
      const cudaError_t end = cudaStreamEndCapture(stream, &graph);
      cudaGraphExec_t exec = nullptr;
      if (!status || end != cudaSuccess || cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) captured = false;
      if (graph) cudaGraphDestroy(graph);
      if (!captured) break;
      graphs.push_back(exec);
    }
    if (!captured) {
      for (cudaGraphExec_t exec : graphs) cudaGraphExecDestroy(exec);
      cudaGetLastError();
      continue;
    }
    for (int i = 0; i < options.warmup; ++i) cudaGraphLaunch(graphs[static_cast<size_t>(i) % graphs.size()], stream);
    for (size_t i = 0; i < repeats; ++i) {
      cudaEventRecord(events[2 * i], stream);
      cudaGraphLaunch(graphs[(i + static_cast<size_t>(options.warmup)) % graphs.size()], stream);
      cudaEventRecord(events[2 * i + 1], stream);
    }
    std::vector<float> times;
    if (cudaStreamSynchronize(stream) == cudaSuccess) {
      for (size_t i = 0; i < repeats; ++i) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]) == cudaSuccess) times.push_back(ms * 1000.0f);
      }
    }
    for (cudaGraphExec_t exec : graphs) cudaGraphExecDestroy(exec);
    LOKA_RETURN_IF_ERROR(check(cudaStreamSynchronize(stream), candidate.name().c_str()));
    if (times.empty()) continue;
    std::nth_element(times.begin(), times.begin() + static_cast<long>(times.size() / 2), times.end());
    measurements.push_back(GemmMeasurement{candidate, times[times.size() / 2], error, static_cast<int>(times.size())});
  }
  return measurements;
}

}  // namespace loka::cuda
