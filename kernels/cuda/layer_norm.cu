// ============================================================================
// kernels/cuda/layer_norm.cu — LayerNorm (FP32 or E4M3 output) kernel.
//
// Three passes over each row (sum, squared deviations, write), as the CPU
// reference does; re-reads hit L1/L2. Explicit _rn intrinsics keep nvcc from
// contracting the element formula into an FMA, which would change bits.
// ============================================================================
#include <cuda_fp8.h>

#include <cmath>
#include <string>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/layer_norm.h"
#include "kernels/cuda/row_reduce.cuh"

namespace loka::cuda {
namespace {

template <int kThreads>
__global__ void layer_norm_kernel(LayerNormArgs args) {
  __shared__ double shared_sum[kThreads / 32 > 0 ? kThreads / 32 : 1];
  __shared__ float shared_max[kThreads / 32 > 0 ? kThreads / 32 : 1];
  constexpr int kRowsPerBlock = kThreadsPerBlock / kThreads;
  const int lane = static_cast<int>(threadIdx.x) % kThreads;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kThreads;
  if (row >= args.rows) return;  // whole rows leave together
  const int64_t n = args.cols;
  const float* in = args.x + row * n;
  const auto plus = [](double a, double b) { return a + b; };

  double sum = 0.0;
  for (int64_t j = lane; j < n; j += kThreads) sum += in[j];
  const double mean = row_reduce<kThreads>(sum, plus, shared_sum) / static_cast<double>(n);
  double squares = 0.0;
  for (int64_t j = lane; j < n; j += kThreads) {
    const double d = static_cast<double>(in[j]) - mean;
    squares += d * d;
  }
  const double variance = row_reduce<kThreads>(squares, plus, shared_sum) / static_cast<double>(n);
  const float mean_f = static_cast<float>(mean);
  const float inv_std = static_cast<float>(1.0 / sqrt(variance + static_cast<double>(args.epsilon)));

  float amax = 0.0f;
  for (int64_t j = lane; j < n; j += kThreads) {
    float v = __fmul_rn(__fmul_rn(__fsub_rn(in[j], mean_f), inv_std), args.scale[j]);
    if (args.bias) v = __fadd_rn(v, args.bias[j]);
    if (args.y_codes) {
      args.y_codes[row * n + j] = __nv_cvt_float_to_fp8(__fdiv_rn(v, args.y_scale), __NV_SATFINITE, __NV_E4M3);
    } else {
      args.y[row * n + j] = v;
    }
    if (isfinite(v)) amax = fmaxf(amax, fabsf(v));
  }
  if (args.amax) {
    amax = row_reduce<kThreads>(amax, [](float a, float b) { return fmaxf(a, b); }, shared_max);
    // Non-negative floats order like their bit patterns, so an integer max is a float max.
    if (lane == 0) atomicMax(reinterpret_cast<int*>(args.amax), __float_as_int(amax));
  }
}

}  // namespace

Status launch_layer_norm(const LayerNormArgs& args, cudaStream_t stream) {
  if (args.rows < 0 || args.cols < 0)
    return Status::error("layer_norm: dims must be >= 0, got [" + std::to_string(args.rows) + "," +
                         std::to_string(args.cols) + "]");
  if ((args.y == nullptr) == (args.y_codes == nullptr))
    return Status::error("layer_norm: exactly one of y (FP32) and y_codes (FP8) must be set");
  if (args.y_codes && !(args.y_scale > 0.0f && std::isfinite(args.y_scale)))
    return Status::error("layer_norm: y_scale must be finite and > 0, got " + std::to_string(args.y_scale));
  if (args.rows == 0 || args.cols == 0) return Status::ok();
  if (args.cols <= 1024) {
    constexpr int kRowsPerBlock = kThreadsPerBlock / 32;
    const int64_t blocks = (args.rows + kRowsPerBlock - 1) / kRowsPerBlock;
    layer_norm_kernel<32><<<static_cast<unsigned>(blocks), kThreadsPerBlock, 0, stream>>>(args);
  } else {
    layer_norm_kernel<kThreadsPerBlock><<<static_cast<unsigned>(args.rows), kThreadsPerBlock, 0, stream>>>(args);
  }
  return launch_status("layer_norm");
}

}  // namespace loka::cuda
