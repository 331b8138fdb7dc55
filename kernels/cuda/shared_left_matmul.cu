// ============================================================================
// kernels/cuda/shared_left_matmul.cu — Y[b] = A · X[b], a column per thread.
//
// Grid: x = column blocks of kThreads columns, y = sample groups; a block
// stages A once (zero-padded to [M, kMaxK], so the unrolled K loop needs no
// bound) and then walks samples b = blockIdx.y, blockIdx.y + gridDim.y, ...:
// staging A per block costs M·K loads from L2, so a block serves many samples;
// the grid is one wave of resident blocks (kernel_fit.h).
// K is a template tier (multiples of 8 up to 64): the column lives in kMaxK
// registers, zero-padded (K = 34 runs the 40 tier).
//
// Issue-bound, not waiting on memory: on an H200 at Wukong's M = 32, K = 64
// the FMAs and broadcast loads are ~45 µs of issue beside ~47 µs of bytes,
// and streaming the next sample's column into shared memory (cp.async) while
// this one is summed made it slower (108 -> 116.5 µs, 2026-11-28). Fewer
// FMAs is what helps, hence tiers every 8 (K = 34 ran the 48 tier); what
// would help further is the tensor cores (3xTF32 keeps FP32's accuracy).
// ============================================================================
#include "kernels/cuda/shared_left_matmul.h"

#include <algorithm>
#include <string>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/kernel_fit.h"

namespace loka::cuda {
namespace {

constexpr int kThreads = 128;

template <int kMaxK>
__global__ void shared_left_matmul_kernel(SharedLeftMatMulArgs args) {
  extern __shared__ float4 a_tile4[];  // [M, kMaxK] floats, zero beyond K (float4: 16-byte aligned rows)
  float* a_tile = reinterpret_cast<float*>(a_tile4);
  const int64_t m = args.m, k = args.k, n = args.n;
  const int64_t sample_stride = args.y_sample_stride > 0 ? args.y_sample_stride : m * n;
  for (int64_t i = threadIdx.x; i < m * kMaxK; i += blockDim.x) {
    const int64_t row = i / kMaxK, col = i % kMaxK;
    a_tile[i] = col < k ? args.a[row * k + col] : 0.0f;
  }
  __syncthreads();
  const int64_t column = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (column >= n) return;  // no barrier below
  for (int64_t b = blockIdx.y; b < args.batch; b += gridDim.y) {
    const float* x = args.x + b * k * n + column;
    float x_column[kMaxK];
#pragma unroll
    for (int j = 0; j < kMaxK; ++j) x_column[j] = j < k ? x[j * n] : 0.0f;
    float* y = args.y + b * sample_stride + column;
    for (int64_t row = 0; row < m; ++row) {
      // Four A values a load, every lane reading the same address (a broadcast): a shared-memory
      // load instruction costs the SM a cycle whatever its width.
      const float4* a_row = reinterpret_cast<const float4*>(a_tile + row * kMaxK);
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kMaxK / 4; ++j) {
        const float4 a4 = a_row[j];
        sum = fmaf(a4.x, x_column[4 * j], sum);
        sum = fmaf(a4.y, x_column[4 * j + 1], sum);
        sum = fmaf(a4.z, x_column[4 * j + 2], sum);
        sum = fmaf(a4.w, x_column[4 * j + 3], sum);
      }
      y[row * n] = sum;
    }
  }
}

int k_tier(int64_t k) { return static_cast<int>(std::max<int64_t>(8, (k + 7) / 8 * 8)); }

template <int kMaxK>
Status launch(const SharedLeftMatMulArgs& args, cudaStream_t stream) {
  const auto kernel = shared_left_matmul_kernel<kMaxK>;
  const int64_t column_blocks = (args.n + kThreads - 1) / kThreads;
  const size_t shared_bytes = static_cast<size_t>(args.m * kMaxK) * sizeof(float);
  // One wave of blocks, each walking its share of the samples and staging A once: a fixed 8 blocks
  // per SM, where registers let fewer reside, ran a second wave mostly empty. gridDim.y is
  // limited to 65535.
  LOKA_ASSIGN_OR_RETURN(const KernelFit fit,
                        kernel_fit(reinterpret_cast<const void*>(kernel), kThreads, shared_bytes, "shared-left MatMul"));
  const int64_t sample_blocks = std::min<int64_t>({args.batch, std::max<int64_t>(1, fit.resident / column_blocks), 65535});
  kernel<<<dim3(static_cast<unsigned>(column_blocks), static_cast<unsigned>(sample_blocks)), kThreads, shared_bytes,
           stream>>>(args);
  return launch_status("shared-left MatMul");
}

}  // namespace

Status shared_left_matmul_can_implement(int64_t m, int64_t k) {
  if (m < 1 || k < 1) return Status::error("shared-left MatMul needs M and K of at least 1");
  if (k > kSharedLeftMaxK)
    return Status::error("shared-left MatMul keeps K <= " + std::to_string(kSharedLeftMaxK) + " in registers (K=" +
                         std::to_string(k) + ")");
  if (m * k_tier(k) > kSharedLeftMaxElements)
    return Status::error("shared-left MatMul holds A [" + std::to_string(m) + "," + std::to_string(k_tier(k)) +
                         "] in 48 KiB of shared memory: too large");
  return Status::ok();
}

Status launch_shared_left_matmul(const SharedLeftMatMulArgs& args, cudaStream_t stream) {
  if (args.batch < 0 || args.n < 0) return Status::error("shared-left MatMul: negative shape");
  if (args.y_sample_stride != 0 && args.y_sample_stride < args.m * args.n)
    return Status::error("shared-left MatMul: a Y sample stride below M·N overlaps samples");
  LOKA_RETURN_IF_ERROR(shared_left_matmul_can_implement(args.m, args.k));
  if (args.batch == 0 || args.n == 0) return Status::ok();
  if (!args.a || !args.x || !args.y) return Status::error("shared-left MatMul: null pointer");
  switch (k_tier(args.k)) {
    case 8: return launch<8>(args, stream);
    case 16: return launch<16>(args, stream);
    case 24: return launch<24>(args, stream);
    case 32: return launch<32>(args, stream);
    case 40: return launch<40>(args, stream);
    case 48: return launch<48>(args, stream);
    case 56: return launch<56>(args, stream);
    default: return launch<64>(args, stream);
  }
}

}  // namespace loka::cuda
