// ============================================================================
// kernels/cuda/probe_fake_quant.cu — ai.loka.ProbeFakeQuant kernels.
//
// Two launches, each deciding on the device from Mode[site] whether it has
// work: a block per row (copy, tensor and rows forms: a row's amax is reduced
// in the block, then its values are quantized with it), and a thread per column
// of each trailing [K, N] matrix for the columns form (two passes over K,
// coalesced across the columns). The Probe runs small calibration batches, so
// these favour simplicity over bandwidth.
// ============================================================================
#include <algorithm>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/fp8_codec.cuh"
#include "kernels/cuda/probe_fake_quant.h"
#include "kernels/cuda/row_reduce.cuh"

namespace loka::cuda {
namespace {

constexpr int kRowThreads = 256;
constexpr int kFormIdentity = 0, kFormRows = 2, kFormColumns = 3, kFormBFloat16 = 4;  // 1: tensor (the static scale)

__device__ __forceinline__ float fp8_max_finite(bool e5m2) { return e5m2 ? 57344.0f : 448.0f; }

/// As the CPU's fp8_scale_for_amax: amax / max finite, or 1 when amax is 0.
__device__ __forceinline__ float dynamic_scale(float amax, bool e5m2) {
  return amax > 0.0f ? amax / fp8_max_finite(e5m2) : 1.0f;
}

/// round_trip(v / scale) * scale, as cpu::fake_quantize_per_tensor.
__device__ __forceinline__ float fake_quantize(float v, float scale, bool e5m2) {
  return fp8_decode(fp8_encode(v / scale, !e5m2), !e5m2) * scale;
}

/// The recipe this run applies, or null for a copy; flags a Mode outside 0..3.
__device__ __forceinline__ const FakeQuantRecipeArgs* selected_recipe(const ProbeFakeQuantArgs& args) {
  const int32_t mode = args.mode[args.site];
  if (mode < 0 || mode > 3) {
    if (args.error_flag != nullptr && threadIdx.x == 0 && blockIdx.x == 0) *args.error_flag = 1;
    return nullptr;
  }
  return mode == 0 ? nullptr : &args.recipes[mode - 1];
}

__global__ void __launch_bounds__(kRowThreads) probe_rows_kernel(ProbeFakeQuantArgs args) {
  __shared__ float shared[kRowThreads / 32];
  const FakeQuantRecipeArgs* recipe = selected_recipe(args);
  const int form = recipe ? recipe->form : kFormIdentity;
  if (form == kFormColumns) return;  // probe_columns_kernel writes Y
  const int64_t rows = args.count / args.cols;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* in = args.x + row * args.cols;
    float* out = args.y + row * args.cols;
    if (form == kFormIdentity) {
      for (int64_t j = threadIdx.x; j < args.cols; j += kRowThreads) out[j] = in[j];
      continue;
    }
    if (form == kFormBFloat16) {  // BF16 storage: NaN stays NaN, whatever its payload
      for (int64_t j = threadIdx.x; j < args.cols; j += kRowThreads) out[j] = __bfloat162float(__float2bfloat16_rn(in[j]));
      continue;
    }
    float scale = recipe->scale;
    if (form == kFormRows) {
      float amax = 0.0f;
      for (int64_t j = threadIdx.x; j < args.cols; j += kRowThreads)
        if (isfinite(in[j])) amax = fmaxf(amax, fabsf(in[j]));
      scale = dynamic_scale(row_reduce<kRowThreads>(amax, [](float a, float b) { return fmaxf(a, b); }, shared),
                            recipe->e5m2);
    }
    for (int64_t j = threadIdx.x; j < args.cols; j += kRowThreads) out[j] = fake_quantize(in[j], scale, recipe->e5m2);
  }
}

__global__ void probe_columns_kernel(ProbeFakeQuantArgs args) {
  const int32_t mode = args.mode[args.site];
  if (mode < 1 || mode > 3 || args.recipes[mode - 1].form != kFormColumns) return;
  const bool e5m2 = args.recipes[mode - 1].e5m2;
  const int64_t matrix = args.k * args.cols;
  const int64_t columns = args.count / args.k;  // over every matrix
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < columns;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t base = (c / args.cols) * matrix + c % args.cols;
    float amax = 0.0f;
    for (int64_t r = 0; r < args.k; ++r) {
      const float v = args.x[base + r * args.cols];
      if (isfinite(v)) amax = fmaxf(amax, fabsf(v));
    }
    const float scale = dynamic_scale(amax, e5m2);
    for (int64_t r = 0; r < args.k; ++r) args.y[base + r * args.cols] = fake_quantize(args.x[base + r * args.cols], scale, e5m2);
  }
}

}  // namespace

cudaError_t launch_probe_fake_quant(const ProbeFakeQuantArgs& args, cudaStream_t stream) {
  if (args.count <= 0 || args.cols <= 0) return cudaSuccess;
  const int64_t rows = args.count / args.cols;
  probe_rows_kernel<<<static_cast<unsigned>(std::min<int64_t>(rows, 65535)), kRowThreads, 0, stream>>>(args);
  if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess) return error;
  bool any_columns = false;
  for (const FakeQuantRecipeArgs& recipe : args.recipes) any_columns |= recipe.form == kFormColumns;
  if (any_columns && args.k > 0) probe_columns_kernel<<<blocks_for(args.count / args.k), kThreadsPerBlock, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace loka::cuda
