// ============================================================================
// kernels/cuda/fast_divmod.cuh — division by a launch-time constant without a
// divide instruction, for the index math of the data kernels.
//
// A GPU has no integer divider: a 64-bit `/` or `%` is a ~70-instruction
// subroutine, a 32-bit one ~20. Kernels that turn a linear element index into
// per-dimension coordinates did one of each per dimension per element and ran
// far below memory bandwidth. Here the host precomputes, per divisor d, a
// multiplier m and shift s (Granlund–Montgomery, as CUTLASS's FastDivmod) so
// that n / d == umulhi(n, m) >> s exactly for every n < 2^31; the device then
// spends a multiply-high, a shift and a multiply-subtract. Callers must keep
// their dividends below 2^31 (they switch to Divmod64 beyond).
// Included by .cu files (and by a host test of the arithmetic).
// ============================================================================
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace loka::cuda {

/// n / d and n % d for 0 <= n < 2^31 and a fixed 1 <= d < 2^31.
struct FastDivmod {
  uint32_t divisor = 1;
  uint32_t multiplier = 0;  ///< 0 encodes d == 1 (the quotient is n itself)
  uint32_t shift = 0;

  FastDivmod() = default;
  __host__ __device__ explicit FastDivmod(uint32_t d) : divisor(d) {
    if (d <= 1) return;
    uint32_t log2_ceil = 0;
    while ((uint64_t{1} << log2_ceil) < d) ++log2_ceil;
    const uint32_t p = 31 + log2_ceil;
    multiplier = static_cast<uint32_t>(((uint64_t{1} << p) + d - 1) / d);
    shift = p - 32;
  }

  __host__ __device__ __forceinline__ uint32_t divmod(uint32_t n, uint32_t& remainder) const {
#if defined(__CUDA_ARCH__)
    const uint32_t high = __umulhi(n, multiplier);
#else  // the host spelling, so tests can check the arithmetic without a GPU
    const auto high = static_cast<uint32_t>((static_cast<uint64_t>(n) * multiplier) >> 32);
#endif
    const uint32_t quotient = multiplier == 0 ? n : (high >> shift);
    remainder = n - quotient * divisor;
    return quotient;
  }
};

/// The same interface with 64-bit operands and a plain division, for iterations
/// of 2^31 elements or more (rare; correctness over speed).
struct Divmod64 {
  int64_t divisor = 1;

  Divmod64() = default;
  __host__ __device__ explicit Divmod64(int64_t d) : divisor(d) {}

  __host__ __device__ __forceinline__ int64_t divmod(int64_t n, int64_t& remainder) const {
    const int64_t quotient = n / divisor;
    remainder = n - quotient * divisor;
    return quotient;
  }
};

}  // namespace loka::cuda
