// ============================================================================
// kernels/cuda/async_copy.cuh — cp.async, global to shared memory without
// passing through registers, so a block's next loads stream in while it
// computes. Shared by the attention kernels. Included by .cu files only.
// ============================================================================
#pragma once

namespace loka::cuda {

/// Copies kW floats (4: 16 bytes past L1, both ends 16-byte aligned; 1: 4 bytes through it).
template <int kW>
__device__ __forceinline__ void copy_async(float* to, const float* from) {
  const auto to_shared = static_cast<unsigned>(__cvta_generic_to_shared(to));
  if constexpr (kW == 4)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(to_shared), "l"(from) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(to_shared), "l"(from) : "memory");
}

/// Closes this thread's copies issued so far into one group.
__device__ __forceinline__ void commit_async() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

/// Waits for this thread's copies of all but the `kPending` most recent groups.
template <int kPending>
__device__ __forceinline__ void wait_async() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

}  // namespace loka::cuda
