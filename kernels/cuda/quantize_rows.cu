// ============================================================================
// kernels/cuda/quantize_rows.cu — per-row dynamic FP8 quantization kernel.
//
// Two passes over the row (amax, then encode); the second re-reads it from
// L1/L2, which is cheaper than holding wide rows in registers.
// ============================================================================
#include <cuda_fp8.h>

#include <string>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/quantize_rows.h"
#include "kernels/cuda/row_reduce.cuh"

namespace loka::cuda {
namespace {

constexpr float kE4M3Max = 448.0f;

template <int kThreads, typename T>
__global__ void quantize_rows_kernel(const T* x, int64_t rows, int64_t k, uint8_t* codes, float* row_scales) {
  __shared__ float shared[kThreads / 32 > 0 ? kThreads / 32 : 1];
  constexpr int kRowsPerBlock = kThreadsPerBlock / kThreads;
  const int lane = static_cast<int>(threadIdx.x) % kThreads;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kThreads;
  if (row >= rows) return;  // whole rows leave together
  const T* in = x + row * k;
  float amax = 0.0f;
  for (int64_t j = lane; j < k; j += kThreads) {
    const float v = to_float(in[j]);
    if (isfinite(v)) amax = fmaxf(amax, fabsf(v));
  }
  amax = row_reduce<kThreads>(amax, [](float a, float b) { return fmaxf(a, b); }, shared);
  const float scale = amax > 0.0f ? amax / kE4M3Max : 1.0f;
  if (lane == 0) row_scales[row] = scale;
  uint8_t* out = codes + row * k;
  // Divide, not multiply by a reciprocal: bit-exact with ONNX QuantizeLinear and the CPU reference.
  for (int64_t j = lane; j < k; j += kThreads) out[j] = __nv_cvt_float_to_fp8(to_float(in[j]) / scale, __NV_SATFINITE, __NV_E4M3);
}

template <typename T>
void launch_typed(const T* x, int64_t rows, int64_t k, uint8_t* codes, float* row_scales, cudaStream_t stream) {
  if (k <= 2048) {
    constexpr int kRowsPerBlock = kThreadsPerBlock / 32;
    const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    quantize_rows_kernel<32, T><<<static_cast<unsigned>(blocks), kThreadsPerBlock, 0, stream>>>(x, rows, k, codes, row_scales);
  } else {
    quantize_rows_kernel<kThreadsPerBlock, T><<<static_cast<unsigned>(rows), kThreadsPerBlock, 0, stream>>>(x, rows, k, codes, row_scales);
  }
}

}  // namespace

Status launch_quantize_rows(const void* x, DType dtype, int64_t rows, int64_t k, uint8_t* codes, float* row_scales,
                            cudaStream_t stream) {
  if (rows < 0 || k < 0)
    return Status::error("quantize_rows: dims must be >= 0, got [" + std::to_string(rows) + "," + std::to_string(k) + "]");
  if (rows == 0) return Status::ok();
  if (dtype == DType::kFloat32)
    launch_typed(static_cast<const float*>(x), rows, k, codes, row_scales, stream);
  else if (dtype == DType::kBFloat16)
    launch_typed(static_cast<const __nv_bfloat16*>(x), rows, k, codes, row_scales, stream);
  else
    return Status::error("quantize_rows: input must be FLOAT or BFLOAT16, got " + std::string(dtype_name(dtype)));
  return launch_status("quantize_rows");
}

}  // namespace loka::cuda
