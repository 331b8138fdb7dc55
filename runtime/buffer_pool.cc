// ============================================================================
// runtime/buffer_pool.cc — best-fit reuse of storage no tensor refers to.
// ============================================================================
#include "runtime/buffer_pool.h"

namespace loka {

std::shared_ptr<Storage> BufferPool::acquire(size_t bytes) {
  std::shared_ptr<Storage>* best = nullptr;
  for (auto& block : blocks_) {
    if (block.use_count() != 1 || block->capacity() < bytes) continue;
    if (best == nullptr || block->capacity() < (*best)->capacity()) best = &block;
  }
  // A block far larger than the request would be wasted on it; keep it for a big tensor.
  if (best != nullptr && (*best)->capacity() <= 2 * bytes + 4096) return *best;
  blocks_.push_back(std::make_shared<Storage>(bytes));
  return blocks_.back();
}

size_t BufferPool::held_bytes() const {
  size_t total = 0;
  for (const auto& block : blocks_) total += block->capacity();
  return total;
}

}  // namespace loka
