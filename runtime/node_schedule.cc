// ============================================================================
// runtime/node_schedule.cc — depth-first order, then nodes sunk toward their readers.
// ============================================================================
#include "runtime/node_schedule.h"

#include <algorithm>
#include <functional>

namespace loka {
namespace {

/// Kahn's algorithm, depth first: a stack of ready nodes whose back runs next, each node's newly
/// ready dependents pushed so the first in file order is on top.
std::vector<int> depth_first_order(const std::vector<ScheduledNode>& nodes, const std::vector<int>& producer) {
  const size_t count = nodes.size();
  std::vector<int> pending(count, 0);
  std::vector<std::vector<int>> dependents(count);
  for (size_t n = 0; n < count; ++n)
    for (int v : nodes[n].reads)
      if (v >= 0 && producer[static_cast<size_t>(v)] >= 0) {
        ++pending[n];
        dependents[static_cast<size_t>(producer[static_cast<size_t>(v)])].push_back(static_cast<int>(n));
      }
  std::vector<int> ready;
  for (size_t n = count; n-- > 0;)
    if (pending[n] == 0) ready.push_back(static_cast<int>(n));
  std::vector<int> order;
  order.reserve(count);
  std::vector<int> now_ready;
  while (!ready.empty()) {
    const int n = ready.back();
    ready.pop_back();
    order.push_back(n);
    now_ready.clear();
    for (int dependent : dependents[static_cast<size_t>(n)])
      if (--pending[static_cast<size_t>(dependent)] == 0) now_ready.push_back(dependent);
    std::sort(now_ready.begin(), now_ready.end(), std::greater<>());
    ready.insert(ready.end(), now_ready.begin(), now_ready.end());
  }
  return order;
}

/// Moves each node, last first, later: up to just before its first reader, no later than just
/// after the last other reader of each value it reads (values held anyway aside), and on past
/// views there. No step's live bytes grow (node_schedule.h); the node's outputs live through fewer
/// steps. A node with an output nobody reads (and nobody holds) stays where it is.
void sink_toward_readers(const std::vector<ScheduledNode>& nodes, const std::vector<bool>& held_anyway,
                         std::vector<int>& order) {
  std::vector<std::vector<int>> readers(held_anyway.size());
  for (size_t n = 0; n < nodes.size(); ++n)
    for (int v : nodes[n].reads)
      if (v >= 0) readers[static_cast<size_t>(v)].push_back(static_cast<int>(n));
  std::vector<int> position(nodes.size(), -1);
  for (size_t i = 0; i < order.size(); ++i) position[static_cast<size_t>(order[i])] = static_cast<int>(i);

  for (size_t i = order.size(); i-- > 0;) {
    const int node = order[i];
    const ScheduledNode& current = nodes[static_cast<size_t>(node)];
    int first_reader = -1;
    for (int v : current.writes)
      if (v >= 0)
        for (int reader : readers[static_cast<size_t>(v)]) {
          const int at = position[static_cast<size_t>(reader)];
          first_reader = first_reader < 0 ? at : std::min(first_reader, at);
        }
    if (first_reader < 0) continue;  // read by no node: a graph output only
    const bool writes_unread = std::any_of(current.writes.begin(), current.writes.end(), [&](int v) {
      return v >= 0 && readers[static_cast<size_t>(v)].empty() && !held_anyway[static_cast<size_t>(v)];
    });
    if (writes_unread) continue;
    // Where the node lands once the nodes between slide up by one: a reader at position p ends
    // at p - 1, so landing at p puts the node right after it.
    int target = first_reader - 1;
    for (int v : current.reads) {
      if (v < 0 || held_anyway[static_cast<size_t>(v)]) continue;
      int last_other_reader = -1;
      for (int reader : readers[static_cast<size_t>(v)])
        if (reader != node) last_other_reader = std::max(last_other_reader, position[static_cast<size_t>(reader)]);
      target = std::min(target, last_other_reader);
    }
    if (target <= static_cast<int>(i)) continue;
    // Past views as well (up to the first reader): a view's step holds no new bytes, and views
    // stay next to the node whose bytes they alias.
    while (target + 1 < first_reader && nodes[static_cast<size_t>(order[static_cast<size_t>(target) + 1])].is_view) ++target;
    const auto from = order.begin() + static_cast<std::ptrdiff_t>(i);
    std::rotate(from, from + 1, order.begin() + static_cast<std::ptrdiff_t>(target) + 1);
    for (size_t j = i; j <= static_cast<size_t>(target); ++j) position[static_cast<size_t>(order[j])] = static_cast<int>(j);
  }
}

}  // namespace

std::vector<int> schedule_nodes(const std::vector<ScheduledNode>& nodes, const std::vector<bool>& held_anyway,
                                bool sink) {
  std::vector<int> producer(held_anyway.size(), -1);
  for (size_t n = 0; n < nodes.size(); ++n)
    for (int v : nodes[n].writes)
      if (v >= 0) producer[static_cast<size_t>(v)] = static_cast<int>(n);
  std::vector<int> order = depth_first_order(nodes, producer);
  if (sink && order.size() == nodes.size()) sink_toward_readers(nodes, held_anyway, order);
  return order;
}

}  // namespace loka
