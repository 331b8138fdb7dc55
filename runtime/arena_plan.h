// ============================================================================
// runtime/arena_plan.h — offsets of every buffer in one device arena.
//
// A device Session runs a bucket's plan out of one allocation made before
// the first run, so steady-state runs allocate nothing and a CUDA graph can
// capture fixed pointers. Buffers whose lifetimes (first and last step, both
// inclusive) do not overlap share bytes. Placement is greedy by size: the
// largest buffer first, each at the lowest aligned offset that clears every
// placed buffer alive at the same time (as TFLite's arena planner does); at
// the zoo's sizes it stays within a few percent of the peak live bytes.
// ============================================================================
#pragma once

#include <cstddef>
#include <vector>

namespace loka {

struct ArenaRequest {
  size_t bytes = 0;
  int first_step = 0;  ///< the step that writes it (-1: before the first step, e.g. a graph input)
  int last_step = 0;   ///< the last step that reads it (a large number: alive to the end)
};

struct ArenaPlan {
  std::vector<size_t> offsets;  ///< per request, a multiple of the alignment
  size_t total_bytes = 0;
};

/// 256 bytes: what cuBLASLt and vectorized kernels want.
inline constexpr size_t kArenaAlignment = 256;

ArenaPlan plan_arena(const std::vector<ArenaRequest>& requests, size_t alignment = kArenaAlignment);

/// The step at which the most requested bytes are alive together (the first such step; -1 when
/// that is before the first step), those bytes, and the requests alive then, largest first: what
/// any arena must hold at once, and so what a smaller one has to do without.
struct ArenaPeak {
  int step = -1;
  size_t live_bytes = 0;
  std::vector<size_t> live;  ///< request indices
};
ArenaPeak arena_peak(const std::vector<ArenaRequest>& requests);

}  // namespace loka
