// ============================================================================
// kernels/cuda/index_policy.h — what a gather kernel does with an id that is
// outside its table.
//
// Ids come from data, so a launch can never trust them, and a kernel inside a
// CUDA graph cannot return an error. Each gathering kernel therefore resolves
// every id with one of two policies, chosen per launch:
//   kError  an id outside [-rows, rows) reads nothing: its row counts as zeros
//           and *error_flag (a device int, may be null) is set to 1. The host
//           reads the flag after the run and reports "embedding ids out of
//           range in <tensor>"; the flag is never cleared by a kernel.
//   kClamp  such an id is clamped to the nearest valid row (below -rows: row 0;
//           at or above rows: row rows-1). A table with 0 rows has no valid
//           row, so kClamp behaves as kError there.
// Ids in [-rows, 0) count from the end, as ONNX Gather allows.
// ============================================================================
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define LOKA_INDEX_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define LOKA_INDEX_HOST_DEVICE inline
#endif

namespace loka::cuda {

enum class IndexPolicy { kError, kClamp };

/// The row `id` reads under `policy`, or -1 when it reads none (the caller
/// zero-fills and raises the error flag).
LOKA_INDEX_HOST_DEVICE int64_t resolve_index(int64_t id, int64_t rows, IndexPolicy policy) {
  if (id >= -rows && id < rows) return id < 0 ? id + rows : id;
  if (policy == IndexPolicy::kClamp && rows > 0) return id < 0 ? 0 : rows - 1;
  return -1;
}

}  // namespace loka::cuda
