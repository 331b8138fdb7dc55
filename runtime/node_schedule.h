// ============================================================================
// runtime/node_schedule.h — the order a plan runs its nodes in.
//
// Any topological order computes the same values; they differ in how many
// bytes are alive at once, which is what the device arena must hold. Two
// rules, each cheap and neither raising the live bytes of any step:
//  - depth first: the node made ready last runs next (ties in file order), so a
//    model that branches runs branch by branch. Breadth first, DHEN's five
//    modules, all reading one input and joined by a Concat, ran each one's
//    first layer, then each one's second, all of their intermediates alive at
//    once;
//  - sinking: a node moves later, up to just before its first reader and no
//    later than just after the last other reader of each value it reads
//    (constants and graph outputs aside). Its outputs then live through fewer
//    steps and no value through more. DHEN's linear module (one MatMul of the
//    modules' shared input) ran first in each layer, its [B, 34, 128] output
//    alive through the other four modules; sunk, it runs after the shared
//    input's last other reader, near the join, where the join's output can
//    take it in place (runtime/concat_placement.h). A node landing right
//    before views goes past them too: their steps hold no new bytes, and a
//    producer's views stay next to it (an early ConcatQuant encode of a view
//    waits for the view).
// ============================================================================
#pragma once

#include <vector>

namespace loka {

/// A node as the scheduler sees it: the value ids it reads and writes (a value written by no
/// node is a graph input or a constant).
struct ScheduledNode {
  std::vector<int> reads;
  std::vector<int> writes;
  bool is_view = false;  ///< its output aliases its input (runtime/view_ops.h): its step holds no new bytes
};

/// An execution order of `nodes` (indices into it) by the rules above. `held_anyway[v]` marks
/// values whose bytes are held whatever the order (constants, graph outputs). Returns fewer than
/// nodes.size() indices when the nodes' dependencies have a cycle: those on it never run.
std::vector<int> schedule_nodes(const std::vector<ScheduledNode>& nodes, const std::vector<bool>& held_anyway);

}  // namespace loka
