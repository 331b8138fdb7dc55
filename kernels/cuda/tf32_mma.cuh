// ============================================================================
// kernels/cuda/tf32_mma.cuh — FP32-accurate products on the TF32 tensor cores
// (3xTF32): an operand split into TF32 parts, one m16n8k8 MMA, and the three
// MMAs whose sum is within 3·2^-20 of each FP32 product (the tensor cores sum
// in FP32). Shared by the attention and shared-left MatMul kernels, whose FP32
// FMAs issued far more instructions than their bytes needed. The split turns
// an inf or NaN operand into NaN: a caller that must keep FP32's inf and NaN
// semantics recomputes non-finite results in FP32 FMAs. Included by .cu files.
// ============================================================================
#pragma once

#include <cstdint>

namespace loka::cuda {

/// One FP32 operand as the TF32 parts of a 3xTF32 product: hi its leading 10 mantissa bits
/// (truncated), lo the rest, x − hi, exact in FP32 (the MMA reads its leading bits). Two
/// instructions, at each use of an operand split there: where an operand serves many MMAs
/// (a shared weight), split it once and keep the parts.
struct Tf32Parts {
  uint32_t hi, lo;
};

__device__ __forceinline__ Tf32Parts split_tf32(float x) {
  const uint32_t hi = __float_as_uint(x) & 0xFFFFE000u;
  return {hi, __float_as_uint(x - __uint_as_float(hi))};
}

/// acc += a·b for one 16x8x8 tile (PTX fragment layouts: a0..a3 rows g, g+8, g, g+8 at
/// columns t, t, t+4, t+4; b0, b1 rows t, t+4 at column g; acc rows g, g, g+8, g+8 at columns
/// 2t, 2t+1; g = lane / 4, t = lane % 4).
__device__ __forceinline__ void mma_tf32(float (&acc)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/// a·b at FP32 accuracy: the two cross terms into `cross` first, the large one into `large`
/// last. One accumulator for both, or two independent chains to be added afterwards.
__device__ __forceinline__ void mma_3xtf32(float (&cross)[4], float (&large)[4], const Tf32Parts (&a)[4],
                                           const Tf32Parts (&b)[2]) {
  mma_tf32(cross, a[0].hi, a[1].hi, a[2].hi, a[3].hi, b[0].lo, b[1].lo);
  mma_tf32(cross, a[0].lo, a[1].lo, a[2].lo, a[3].lo, b[0].hi, b[1].hi);
  mma_tf32(large, a[0].hi, a[1].hi, a[2].hi, a[3].hi, b[0].hi, b[1].hi);
}

}  // namespace loka::cuda
