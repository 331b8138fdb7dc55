// ============================================================================
// kernels/cuda/shared_left_matmul.cu — Y[b] = A · X[b], a column per thread.
//
// Grid: x = column blocks of kThreads columns, y = sample groups; a block
// stages A once (zero-padded to [M, kMaxK], so the unrolled K loop needs no
// bound) and then walks samples b = blockIdx.y, blockIdx.y + gridDim.y, ...:
// staging A per block costs M·K loads from L2, so a block serves many samples.
// K is a template tier (16, 32, 48, 64): the column lives in kMaxK registers,
// and the padding FMAs (K = 34 runs the 48 tier) are cheap next to the bytes.
// ============================================================================
#include "kernels/cuda/shared_left_matmul.h"

#include <algorithm>
#include <string>

#include "kernels/cuda/device_util.cuh"

namespace loka::cuda {
namespace {

constexpr int kThreads = 128;

template <int kMaxK>
__global__ void shared_left_matmul_kernel(SharedLeftMatMulArgs args) {
  extern __shared__ float a_tile[];  // [M, kMaxK], zero beyond K
  const int64_t m = args.m, k = args.k, n = args.n;
  for (int64_t i = threadIdx.x; i < m * kMaxK; i += blockDim.x) {
    const int64_t row = i / kMaxK, col = i % kMaxK;
    a_tile[i] = col < k ? args.a[row * k + col] : 0.0f;
  }
  __syncthreads();
  const int64_t column = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (column >= n) return;  // no barrier below
  for (int64_t b = blockIdx.y; b < args.batch; b += gridDim.y) {
    const float* x = args.x + b * k * n + column;
    float* y = args.y + b * m * n + column;
    float x_column[kMaxK];
#pragma unroll
    for (int j = 0; j < kMaxK; ++j) x_column[j] = j < k ? x[j * n] : 0.0f;
    for (int64_t row = 0; row < m; ++row) {
      const float* a_row = a_tile + row * kMaxK;
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kMaxK; ++j) sum = fmaf(a_row[j], x_column[j], sum);
      y[row * n] = sum;
    }
  }
}

int k_tier(int64_t k) { return k <= 16 ? 16 : (k <= 32 ? 32 : (k <= 48 ? 48 : 64)); }

template <int kMaxK>
void launch(const SharedLeftMatMulArgs& args, cudaStream_t stream) {
  const int64_t column_blocks = (args.n + kThreads - 1) / kThreads;
  // About 8 blocks per SM of 132 when every sample gets one; beyond that blocks loop over samples,
  // each staging A once. gridDim.y is limited to 65535.
  const int64_t sample_blocks = std::min<int64_t>({args.batch, std::max<int64_t>(1, 1056 / column_blocks), 65535});
  const size_t shared_bytes = static_cast<size_t>(args.m * kMaxK) * sizeof(float);
  shared_left_matmul_kernel<kMaxK><<<dim3(static_cast<unsigned>(column_blocks), static_cast<unsigned>(sample_blocks)),
                                     kThreads, shared_bytes, stream>>>(args);
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
  LOKA_RETURN_IF_ERROR(shared_left_matmul_can_implement(args.m, args.k));
  if (args.batch == 0 || args.n == 0) return Status::ok();
  if (!args.a || !args.x || !args.y) return Status::error("shared-left MatMul: null pointer");
  switch (k_tier(args.k)) {
    case 16: launch<16>(args, stream); break;
    case 32: launch<32>(args, stream); break;
    case 48: launch<48>(args, stream); break;
    default: launch<64>(args, stream); break;
  }
  return launch_status("shared-left MatMul");
}

}  // namespace loka::cuda
