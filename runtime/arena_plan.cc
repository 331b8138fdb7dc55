// ============================================================================
// runtime/arena_plan.cc — greedy-by-size offset assignment.
// ============================================================================
#include "runtime/arena_plan.h"

#include <algorithm>
#include <cstdint>
#include <numeric>

namespace loka {
namespace {

size_t round_up(size_t bytes, size_t alignment) { return (bytes + alignment - 1) / alignment * alignment; }

bool overlap_in_time(const ArenaRequest& a, const ArenaRequest& b) {
  return a.first_step <= b.last_step && b.first_step <= a.last_step;
}

}  // namespace

ArenaPlan plan_arena(const std::vector<ArenaRequest>& requests, size_t alignment) {
  ArenaPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return requests[a].bytes > requests[b].bytes; });
  std::vector<size_t> placed;
  struct Busy {
    size_t begin, end;
  };
  std::vector<Busy> busy;
  for (size_t r : order) {
    const size_t size = round_up(std::max<size_t>(requests[r].bytes, 1), alignment);
    busy.clear();
    for (size_t p : placed)
      if (overlap_in_time(requests[r], requests[p]))
        busy.push_back({plan.offsets[p], plan.offsets[p] + round_up(std::max<size_t>(requests[p].bytes, 1), alignment)});
    std::sort(busy.begin(), busy.end(), [](const Busy& a, const Busy& b) { return a.begin < b.begin; });
    // The lowest gap that fits.
    size_t offset = 0;
    for (const Busy& b : busy) {
      if (b.begin >= offset + size) break;
      offset = std::max(offset, b.end);
    }
    plan.offsets[r] = offset;
    plan.total_bytes = std::max(plan.total_bytes, offset + size);
    placed.push_back(r);
  }
  return plan;
}

ArenaPeak arena_peak(const std::vector<ArenaRequest>& requests) {
  // A sweep over the steps where the live bytes change: a request adds its bytes at its first step
  // and takes them away after its last (64-bit steps: a last step may be INT_MAX).
  struct Change {
    int64_t step;
    int64_t bytes;
  };
  std::vector<Change> changes;
  changes.reserve(2 * requests.size());
  for (const ArenaRequest& r : requests) {
    changes.push_back({r.first_step, static_cast<int64_t>(r.bytes)});
    changes.push_back({static_cast<int64_t>(r.last_step) + 1, -static_cast<int64_t>(r.bytes)});
  }
  std::sort(changes.begin(), changes.end(), [](const Change& a, const Change& b) { return a.step < b.step; });
  ArenaPeak peak;
  int64_t alive = 0;
  for (size_t i = 0; i < changes.size();) {
    const int64_t step = changes[i].step;
    for (; i < changes.size() && changes[i].step == step; ++i) alive += changes[i].bytes;
    if (alive > static_cast<int64_t>(peak.live_bytes)) {  // strictly: ties keep the first step
      peak.step = static_cast<int>(step);
      peak.live_bytes = static_cast<size_t>(alive);
    }
  }
  for (size_t i = 0; i < requests.size(); ++i)
    if (peak.live_bytes > 0 && requests[i].first_step <= peak.step && peak.step <= requests[i].last_step)
      peak.live.push_back(i);
  std::stable_sort(peak.live.begin(), peak.live.end(),
                   [&](size_t a, size_t b) { return requests[a].bytes > requests[b].bytes; });
  return peak;
}

}  // namespace loka
