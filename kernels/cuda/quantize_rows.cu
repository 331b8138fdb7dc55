// ============================================================================
// kernels/cuda/quantize_rows.cu — per-row dynamic FP8 quantization kernels.
//
// Rows up to 8192 wide are read once: the threads owning a row (a warp up to
// 256 columns, eight rows to a block; a block of up to 1024 threads beyond)
// keep it in registers, 8 values each, between the amax reduction and
// the encode; wider rows are read twice. When k % 4 == 0 and the bases are
// aligned, those values are loaded 4 columns at a time and 4 codes stored at
// once. Few values per thread keep registers low and occupancy high (see
// layer_norm.cu).
// ============================================================================
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <string>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/fp8_codec.cuh"
#include "kernels/cuda/quantize_rows.h"
#include "kernels/cuda/row_reduce.cuh"

namespace loka::cuda {
namespace {

/// kVec = 4 (k % 4 == 0, x and codes aligned to 4 elements): each thread holds its values
/// as kPerThread / 4 packs of 4 consecutive columns and stores 4 codes at once. Which
/// thread holds which value does not change a result: the amax is a max (exact in any
/// order) and each code depends on its value and the row scale only.
template <int kThreads, int kPerThread, int kVec, typename T>
__global__ void __launch_bounds__(kRowBlockThreads<kThreads>) quantize_rows_registers_kernel(const T* x, int64_t rows, int64_t k, uint8_t* codes, float* row_scales) {
  __shared__ float shared[kThreads / 32];
  constexpr int kRowsPerBlock = kRowBlockThreads<kThreads> / kThreads;
  constexpr int kPacks = kPerThread / kVec;
  const int lane = static_cast<int>(threadIdx.x) % kThreads;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kThreads;
  if (row >= rows) return;  // whole rows leave together
  const T* in = x + row * k;
  float values[kPerThread];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < kPacks; ++i) {
    const int64_t j = (lane + static_cast<int64_t>(i) * kThreads) * kVec;  // a pack is whole or past the row
    Pack<T, kVec> pack{};
    if (j < k) pack = *reinterpret_cast<const Pack<T, kVec>*>(in + j);
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      values[i * kVec + v] = j < k ? to_float(pack.v[v]) : 0.0f;
      if (isfinite(values[i * kVec + v])) amax = fmaxf(amax, fabsf(values[i * kVec + v]));
    }
  }
  const float scale = e4m3_row_scale(row_reduce<kThreads>(amax, [](float a, float b) { return fmaxf(a, b); }, shared));
  if (lane == 0) row_scales[row] = scale;
  uint8_t* out = codes + row * k;
#pragma unroll
  for (int i = 0; i < kPacks; ++i) {
    const int64_t j = (lane + static_cast<int64_t>(i) * kThreads) * kVec;
    if (j >= k) continue;
    Pack<uint8_t, kVec> pack;
#pragma unroll
    for (int v = 0; v < kVec; ++v) pack.v[v] = e4m3_encode_divided(values[i * kVec + v], scale);
    *reinterpret_cast<Pack<uint8_t, kVec>*>(out + j) = pack;
  }
}

/// Rows too wide for registers: a block per row, reading it twice.
template <typename T>
__global__ void quantize_rows_wide_kernel(const T* x, int64_t k, uint8_t* codes, float* row_scales) {
  __shared__ float shared[kThreadsPerBlock / 32];
  const int64_t row = blockIdx.x;
  const T* in = x + row * k;
  float amax = 0.0f;
  for (int64_t j = threadIdx.x; j < k; j += kThreadsPerBlock) {
    const float v = to_float(in[j]);
    if (isfinite(v)) amax = fmaxf(amax, fabsf(v));
  }
  const float scale = e4m3_row_scale(row_reduce<kThreadsPerBlock>(amax, [](float a, float b) { return fmaxf(a, b); }, shared));
  if (threadIdx.x == 0) row_scales[row] = scale;
  for (int64_t j = threadIdx.x; j < k; j += kThreadsPerBlock) codes[row * k + j] = e4m3_encode_divided(to_float(in[j]), scale);
}

template <int kThreads, int kPerThread, typename T>
void launch_registers(const T* x, int64_t rows, int64_t k, uint8_t* codes, float* row_scales, cudaStream_t stream) {
  constexpr int kBlock = kRowBlockThreads<kThreads>;
  constexpr int kRowsPerBlock = kBlock / kThreads;
  const unsigned blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  if (k % 4 == 0 && is_aligned(x, 4 * sizeof(T)) && is_aligned(codes, 4))
    quantize_rows_registers_kernel<kThreads, kPerThread, 4, T><<<blocks, kBlock, 0, stream>>>(x, rows, k, codes, row_scales);
  else
    quantize_rows_registers_kernel<kThreads, kPerThread, 1, T><<<blocks, kBlock, 0, stream>>>(x, rows, k, codes, row_scales);
}

template <typename T>
void launch_typed(const T* x, int64_t rows, int64_t k, uint8_t* codes, float* row_scales, cudaStream_t stream) {
  if (k <= 128) launch_registers<32, 4>(x, rows, k, codes, row_scales, stream);
  else if (k <= 256) launch_registers<32, 8>(x, rows, k, codes, row_scales, stream);
  else if (k <= 512) launch_registers<64, 8>(x, rows, k, codes, row_scales, stream);
  else if (k <= 1024) launch_registers<128, 8>(x, rows, k, codes, row_scales, stream);
  else if (k <= 2048) launch_registers<256, 8>(x, rows, k, codes, row_scales, stream);
  else if (k <= 4096) launch_registers<512, 8>(x, rows, k, codes, row_scales, stream);
  else if (k <= 8192) launch_registers<1024, 8>(x, rows, k, codes, row_scales, stream);
  else quantize_rows_wide_kernel<T><<<static_cast<unsigned>(rows), kThreadsPerBlock, 0, stream>>>(x, k, codes, row_scales);
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
