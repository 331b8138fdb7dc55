// ============================================================================
// runtime/buffer_pool.h — a Session's recycled activation storage.
//
// Liveness does the bookkeeping: the Session drops its handle on a value after
// the value's last reader, and a Storage whose only owner is the pool is free
// for reuse. Allocation takes the smallest free block that fits (best fit), so
// repeated runs with the same shapes reuse the same blocks and allocate nothing.
// ============================================================================
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "loka/tensor.h"

namespace loka {

class BufferPool {
 public:
  /// Storage of at least `bytes`, reused when a free block fits.
  std::shared_ptr<Storage> acquire(size_t bytes);
  size_t held_bytes() const;
  size_t block_count() const { return blocks_.size(); }

 private:
  std::vector<std::shared_ptr<Storage>> blocks_;
};

}  // namespace loka
