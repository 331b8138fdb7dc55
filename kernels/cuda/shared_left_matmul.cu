// ============================================================================
// kernels/cuda/shared_left_matmul.cu — Y[b] = A · X[b]: SIMT, a column per
// thread, and on the tensor cores (3xTF32, below).
//
// SIMT grid: x = column blocks of kThreads columns, y = sample groups; a block
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
#include "kernels/cuda/tf32_mma.cuh"

namespace loka::cuda {
namespace {

constexpr int kThreads = 128;

template <int kMaxK>
__global__ void shared_left_matmul_kernel(SharedLeftMatMulArgs args) {
  extern __shared__ float4 a_tile4[];  // [M, kMaxK] floats, zero beyond K (float4: 16-byte aligned rows)
  float* a_tile = reinterpret_cast<float*>(a_tile4);
  const int64_t m = args.m, k = args.k, n = args.n;
  const int64_t row_stride = args.y_row_stride, sample_stride = args.y_sample_stride;  // resolved by the launch
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
      y[row * row_stride] = sum;
    }
  }
}

// ------------------------------------------------------- tensor cores --
//
// The same product in 3xTF32 MMAs (tf32_mma.cuh: each product within 3·2^-20
// of FP32's, sums in FP32): the SIMT kernel issues M·K FMAs and M·K/4 shared
// loads a column, about its bytes' worth of time (~45 µs beside ~47 µs of
// bytes at Wukong's M = 32, K = 64, batch 4096 on an H200), and the two do
// not overlap; here a warp's m16n8k8 MMA does 1024 products.
//
// A is split into its TF32 parts once per block and kept in shared memory,
// rows padded with zeros to a multiple of 16 and K to the step count's 8s.
// A warp's unit is one sample's slab of 16 columns: it loads the slab's X
// straight into the B fragments (rows t and t + 4 of each 8-row step, column
// g of each 8-column tile: a load instruction covers four 32-byte runs) and
// splits them once, then for each 16-row tile of A sums two 16x8 tiles over
// K and stores them. Slabs of 16, not 32: a slab's parts live in registers
// through every row tile (128 of them at K = 64 for 32 columns: 255 registers
// a thread, two blocks an SM).
//
// A result the MMAs make inf or NaN is recomputed in FP32 FMAs in the SIMT
// kernel's order. An inf or NaN input always makes it so (the split's lo is
// NaN there), so such a column is FP32's exactly; a finite sum whose FP32 FMA
// chain would overflow part-way (3e38 + 3e38 − 3e38) may stay finite here, as
// the tensor cores order their sums their own way.

constexpr int kTensorCoreWarps = 4;
constexpr int kSlabColumns = 16;                ///< a warp's columns of one sample
constexpr int kSlabTiles = kSlabColumns / 8;    ///< its 8-column MMA tiles

/// Row stride of A's parts in shared memory (8-byte {hi, lo} pairs): K padded to the steps,
/// plus 4, an odd multiple of 4, so the 16 lanes of a half-warp's fragment load (rows g < 4 at
/// columns t < 4) read 16 different bank pairs.
__host__ __device__ constexpr int parts_stride(int k_steps) { return k_steps * 8 + 4; }

size_t tensor_core_shared_bytes(int64_t m, int k_steps) {
  return static_cast<size_t>((m + 15) / 16 * 16 * parts_stride(k_steps)) * sizeof(uint2);
}

/// Σ_j a[row, j]·x[j, column] over j < k in FP32 FMAs, j ascending from +0: the SIMT kernel's
/// sum. Not inlined: it runs only where a result is inf or NaN.
__device__ __noinline__ float exact_sum(const float* a, const float* x, int64_t k, int64_t n, int64_t row,
                                        int64_t column) {
  float sum = 0.0f;
  for (int64_t j = 0; j < k; ++j) sum = fmaf(a[row * k + j], x[j * n + column], sum);
  return sum;
}

template <int kKSteps>
__global__ void shared_left_tensor_core_kernel(SharedLeftMatMulArgs args) {
  constexpr int kStride = parts_stride(kKSteps);
  extern __shared__ uint2 a_parts[];  // [M rounded up to 16, kStride]
  const int64_t m = args.m, k = args.k, n = args.n;
  const int m_tiles = static_cast<int>((m + 15) / 16);
  for (int i = threadIdx.x; i < m_tiles * 16 * kStride; i += blockDim.x) {
    const int row = i / kStride, col = i % kStride;
    const Tf32Parts parts = split_tf32(row < m && col < k ? args.a[row * k + col] : 0.0f);
    a_parts[i] = make_uint2(parts.hi, parts.lo);
  }
  __syncthreads();
  const int lane = static_cast<int>(threadIdx.x % 32), g = lane / 4, t = lane % 4;
  const int64_t slabs = (n + kSlabColumns - 1) / kSlabColumns, units = args.batch * slabs;
  const int64_t row_stride = args.y_row_stride, sample_stride = args.y_sample_stride;  // resolved by the launch
  // A lane's two columns (2t, 2t + 1) as one 8-byte store where every row starts 8-byte aligned:
  // a warp's store then fills its 32-byte sectors instead of half of each.
  const bool paired = ((row_stride | sample_stride) & 1) == 0 && (reinterpret_cast<uintptr_t>(args.y) & 7) == 0;
  for (int64_t unit = static_cast<int64_t>(blockIdx.x) * kTensorCoreWarps + threadIdx.x / 32; unit < units;
       unit += static_cast<int64_t>(gridDim.x) * kTensorCoreWarps) {
    const int64_t b = unit / slabs, first_column = unit % slabs * kSlabColumns;
    const float* x = args.x + b * k * n;
    float x_fragment[kKSteps][kSlabTiles][2];  // every load in flight before the first split
#pragma unroll
    for (int step = 0; step < kKSteps; ++step)
#pragma unroll
      for (int tile = 0; tile < kSlabTiles; ++tile)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int64_t row = step * 8 + t + 4 * half, column = first_column + tile * 8 + g;
          x_fragment[step][tile][half] = row < k && column < n ? x[row * n + column] : 0.0f;
        }
    Tf32Parts x_parts[kKSteps][kSlabTiles][2];  // split once, read by every row tile
#pragma unroll
    for (int step = 0; step < kKSteps; ++step)
#pragma unroll
      for (int tile = 0; tile < kSlabTiles; ++tile)
#pragma unroll
        for (int half = 0; half < 2; ++half) x_parts[step][tile][half] = split_tf32(x_fragment[step][tile][half]);
    float* y = args.y + b * sample_stride;
    for (int m_tile = 0; m_tile < m_tiles; ++m_tile) {
      float acc[kSlabTiles][4] = {};
#pragma unroll
      for (int step = 0; step < kKSteps; ++step) {
        const uint2* at = a_parts + (m_tile * 16 + g) * kStride + step * 8 + t;
        const uint2 a0 = at[0], a1 = at[8 * kStride], a2 = at[4], a3 = at[8 * kStride + 4];
        const Tf32Parts a[4] = {{a0.x, a0.y}, {a1.x, a1.y}, {a2.x, a2.y}, {a3.x, a3.y}};
#pragma unroll
        for (int tile = 0; tile < kSlabTiles; ++tile) {
          mma_3xtf32(acc[tile], acc[tile], a, x_parts[step][tile]);
        }
      }
#pragma unroll
      for (int tile = 0; tile < kSlabTiles; ++tile)
#pragma unroll
        for (int half = 0; half < 2; ++half) {  // rows g and g + 8, each at columns 2t and 2t + 1
          const int64_t row = m_tile * 16 + g + 8 * half, column = first_column + tile * 8 + 2 * t;
          if (row >= m || column >= n) continue;
          float first = acc[tile][2 * half], second = acc[tile][2 * half + 1];
          if (!isfinite(first)) first = exact_sum(args.a, x, k, n, row, column);
          float* out = y + row * row_stride + column;
          if (column + 1 >= n) {
            out[0] = first;
            continue;
          }
          if (!isfinite(second)) second = exact_sum(args.a, x, k, n, row, column + 1);
          if (paired) {
            *reinterpret_cast<float2*>(out) = make_float2(first, second);
          } else {
            out[0] = first;
            out[1] = second;
          }
        }
    }
  }
}

template <int kKSteps>
Status launch_tensor_cores(const SharedLeftMatMulArgs& args, cudaStream_t stream) {
  const auto kernel = shared_left_tensor_core_kernel<kKSteps>;
  const size_t shared_bytes = tensor_core_shared_bytes(args.m, kKSteps);
  LOKA_ASSIGN_OR_RETURN(const KernelFit fit, kernel_fit(reinterpret_cast<const void*>(kernel), kTensorCoreWarps * 32,
                                                        shared_bytes, "shared-left MatMul (tensor cores)"));
  const int64_t units = args.batch * ((args.n + kSlabColumns - 1) / kSlabColumns);
  const int64_t blocks = std::min<int64_t>({(units + kTensorCoreWarps - 1) / kTensorCoreWarps, fit.resident, INT32_MAX});
  kernel<<<static_cast<unsigned>(blocks), kTensorCoreWarps * 32, shared_bytes, stream>>>(args);
  return launch_status("shared-left MatMul (tensor cores)");
}

Status launch_on_tensor_cores(const SharedLeftMatMulArgs& args, cudaStream_t stream) {
  switch ((args.k + 7) / 8) {
    case 1: return launch_tensor_cores<1>(args, stream);
    case 2: return launch_tensor_cores<2>(args, stream);
    case 3: return launch_tensor_cores<3>(args, stream);
    case 4: return launch_tensor_cores<4>(args, stream);
    case 5: return launch_tensor_cores<5>(args, stream);
    case 6: return launch_tensor_cores<6>(args, stream);
    case 7: return launch_tensor_cores<7>(args, stream);
    default: return launch_tensor_cores<8>(args, stream);
  }
}

// ------------------------------------------------------------ dispatch --

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

bool shared_left_fits_tensor_cores(int64_t m, int64_t k) {
  return m >= 1 && k >= 1 && k <= kSharedLeftMaxK &&
         tensor_core_shared_bytes(m, static_cast<int>((k + 7) / 8)) <= kSharedLeftTensorCoreBytes;
}

Status launch_shared_left_matmul(const SharedLeftMatMulArgs& requested, cudaStream_t stream) {
  if (requested.batch < 0 || requested.n < 0) return Status::error("shared-left MatMul: negative shape");
  if (requested.y_row_stride < 0 || (requested.y_row_stride != 0 && requested.y_row_stride < requested.n))
    return Status::error("shared-left MatMul: a Y row stride below N overlaps rows");
  // The kernels take both Y strides resolved (a zero default means packed), worked out here once.
  SharedLeftMatMulArgs args = requested;
  if (args.y_row_stride == 0) args.y_row_stride = args.n;
  if (args.y_sample_stride < 0 || (args.y_sample_stride != 0 && args.y_sample_stride < args.m * args.y_row_stride))
    return Status::error("shared-left MatMul: a Y sample stride below M rows overlaps samples");
  if (args.y_sample_stride == 0) args.y_sample_stride = args.m * args.y_row_stride;
  LOKA_RETURN_IF_ERROR(shared_left_matmul_can_implement(args.m, args.k));
  if (args.batch == 0 || args.n == 0) return Status::ok();
  if (!args.a || !args.x || !args.y) return Status::error("shared-left MatMul: null pointer");
  // Auto: below 16 rows most of each MMA's rows would be padding.
  const bool tensor_cores =
      args.path == SharedLeftPath::kTensorCores ||
      (args.path == SharedLeftPath::kAuto && args.m >= 16 && shared_left_fits_tensor_cores(args.m, args.k));
  if (tensor_cores) {
    if (!shared_left_fits_tensor_cores(args.m, args.k))
      return Status::error("shared-left MatMul on the tensor cores holds A's TF32 parts [" + std::to_string(args.m) +
                           "," + std::to_string(args.k) + "] in 48 KiB of shared memory: too large");
    return launch_on_tensor_cores(args, stream);
  }
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
