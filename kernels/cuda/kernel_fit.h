// ============================================================================
// kernels/cuda/kernel_fit.h — what the runtime says about a kernel on the
// current device: its opt-in shared-memory limit and how many blocks of a
// shape it holds at once, for kernels that size a persistent grid (each block
// walking its share of the work) to what fits in one wave.
//
// Why one wave: a grid of a fixed block count (say 8 per SM) that the
// registers or shared memory let only 7 per SM hold runs in two waves, the
// second an eighth full, while the first's SMs idle (the shared-left MatMul,
// sized so, ran 6-12% slower on an H100, 2026-11-27). Asked once per (kernel, device, block shape)
// and kept: the queries take microseconds, as long as a short launch, and a
// graph replay needs none of them. Host code only; thread-safe.
// ============================================================================
#pragma once

#include <cstddef>
#include <cstdint>

#include "loka/status.h"

namespace loka::cuda {

struct KernelFit {
  size_t max_dynamic = 0;  ///< dynamic shared memory the kernel may take (opted into)
  int64_t resident = 0;    ///< blocks of the asked shape resident on the device at once (at least one per SM)
};

/// Sets `kernel`'s maximum dynamic shared memory to the device's opt-in limit (always the same
/// value, so concurrent launchers agree) and, for `threads` and `shared_bytes` (threads 0: skip),
/// counts the blocks the device holds at once. Errors name `what`.
Result<KernelFit> kernel_fit(const void* kernel, int threads, size_t shared_bytes, const char* what);

}  // namespace loka::cuda
