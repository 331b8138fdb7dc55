// ============================================================================
// runtime/node_schedule.h — the order a plan runs its nodes in.
//
// Any topological order computes the same values; they differ in how many
// bytes are alive at once, which is what the device arena must hold. Two
// cheap rules:
//  - depth first: the node made ready last runs next (ties in file order), so a
//    model that branches runs branch by branch. Breadth first, DHEN's five
//    modules, all reading one input and joined by a Concat, ran each one's
//    first layer, then each one's second, all of their intermediates alive at
//    once. A heuristic: a graph can be built where it holds more (a large
//    input kept alive down a long first branch), but on the zoo's models the
//    peak of live bytes is never higher than breadth first's, and lower on
//    three of four (counted as runtime/concat_placement.cc counts them,
//    Concats placed, batch 4096, 2026-11-28: tiny Wukong 11.0 -> 7.9 MB, tiny
//    DHEN 42.3 -> 36.7 MB, FP32 DLRM-DCNv2 28.8 -> 21.0 MB, the ranker equal);
//  - sinking: a node moves later, up to just before its first reader and no
//    later than just after the last other reader of each value it reads
//    (constants and graph outputs aside), and past views there. The step it
//    lands at holds what the step before it held, less the node's outputs,
//    which now live through fewer steps: no step's live bytes grow (a value
//    it reads may live through the steps it passes, whose bytes that step
//    held anyway). Not modelled: a device op's per-step scratch, which moves
//    with it. A node with an output nobody reads stays: that output would
//    move into a busier step. DHEN's linear module (one MatMul of the modules'
//    shared input) ran first in each layer, its [B, 34, 128] output alive
//    through the other four modules; sunk, it runs after the shared input's
//    last other reader, near the join, where the join's output takes it in
//    place (runtime/concat_placement.h): DHEN's arena at batch 4096 714 ->
//    578 MB (H200, 2026-11-28).
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
/// values whose bytes are held whatever the order (constants, graph outputs); every value id a
/// node reads or writes is below its size. Returns fewer than nodes.size() indices when the
/// nodes' dependencies have a cycle: those on it, and after it, never run. Time: each node scans
/// the readers of what it reads (0.5 s for 20k nodes all reading one value).
/// `sink_toward_readers` false: the depth-first order alone (what the tests compare the sinking
/// with).
std::vector<int> schedule_nodes(const std::vector<ScheduledNode>& nodes, const std::vector<bool>& held_anyway,
                                bool sink_toward_readers = true);

}  // namespace loka
