// ============================================================================
// runtime/concat_placement.h — which Concat inputs their producers can write
// straight into the Concat's output.
//
// A Concat copies every input into its output. At batch 4096 DHEN's 17 such
// copies were 15% of its GPU time and Wukong's 10 were 11% (H100,
// 2026-11-27). A producer that can write its rows with a pitch (a cuBLASLt
// GEMM: D's leading dimension; the embedding-bag kernel: its output row
// stride) can write them into its slice of the output instead, and the copy
// goes away with the input's own buffer.
//
// An input is placed when:
//  - it comes from the first output of a node the backend can have write
//    pitched rows (`PitchedRowWidths`: the CUDA backend's GEMM ops, the
//    shared-left MatMul and EmbeddingBags, each op family's PitchedRowRule in
//    runtime/cuda/device_op.h),
//    through views only
//    (runtime/view_ops.h), and every value on that chain is read once (by
//    the next view, or by the Concat as one of its inputs) and is neither a
//    graph output, a constant nor host-resident;
//  - its slice is one of the producer's pitched row widths (a GEMM's last
//    dim, a sample of EmbeddingBags, a sample of the shared-left MatMul:
//    Wukong's LCB [B, 32, 128] into concat(FMB, LCB) along the tokens, 2.503
//    -> 2.366 ms for the model at batch 4096 on an H200, 2026-11-27, or a row
//    of it: DHEN's linear module [B, 34, 128] into its [B, 34, 640] join along
//    features): from the Concat axis on, the input holds as
//    many elements as one such row, so row r of the producer lands at
//    offset + r * row_pitch of the output;
//  - the slice's start and pitch are 16-byte multiples (cuBLASLt's aligned
//    algorithms; the arena's buffers start 256-byte aligned);
//  - the peak of live bytes does not grow (as counted here, see below): the placed bytes belong to the
//    Concat's output from the producer's step on, and a large output alive
//    early can cost more than the slice saves (placements are tried in value
//    order, each kept where the peak with it is no higher).
// The device backend offers each placement to the producer's op, which may
// decline (runtime/cuda/device_op.h, DevicePlan::output_pitched); the Concat
// then copies only what was not written in place.
// ============================================================================
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "runtime/batch_shapes.h"
#include "runtime/execution_plan.h"

namespace loka {

struct ConcatPlacement {
  int concat_output = -1;  ///< value id of the Concat's output
  int input = -1;          ///< which of its inputs this is
  int64_t offset = 0;      ///< elements from the output's start to the slice's first row
  int64_t row_pitch = 0;   ///< elements between consecutive rows of the slice
  int64_t row_width = 0;   ///< elements in each row: which of the producer's PitchedRowWidths it writes
};

/// The row widths (elements) the backend's op for a step can write with a pitch (its first
/// output, at these shapes): usually one, none where it writes packed rows only. The closer to
/// what the op then does, the truer the peak rule below.
using PitchedRowWidths = std::function<std::vector<int64_t>(const PlanStep&, const BucketShapes&)>;

/// Per value id: where a producer's first output can be written (the chain's first value), or
/// nothing. `shapes` are one bucket's. The peak rule counts live bytes, a lower bound of the
/// arena (which aligns and packs them greedily), and assumes every placement is taken: one the
/// op declines after all (no cuBLASLt algorithm for the pitch) keeps its own buffer besides.
std::vector<std::optional<ConcatPlacement>> plan_concat_placements(const ExecutionPlan& plan,
                                                                   const BucketShapes& shapes,
                                                                   const PitchedRowWidths& pitched_row_widths);

/// An ai.loka ConcatQuant input encoded as soon as it is made. ConcatQuant writes each FP32
/// input's codes into its slice of the FP8 output; run at its own step, it keeps every input
/// alive until the last is made. DHEN joins five [B, 34, 128] module outputs so: at batch 4096
/// 356 MB of FP32 alive together for 89 MB of codes. Encoded right after the step that makes it,
/// an input's buffer is free from then on, and the output's codes are alive from the first
/// encode instead.
struct EarlyEncode {
  int concat_quant_step = -1;  ///< the ConcatQuant's step
  int input = -1;              ///< its input slot (1..n; 0 is Y_scale)
  int after_step = -1;         ///< the step that makes that input: the encode runs right after it
};

/// The ConcatQuant inputs to encode early, given the placements planned for the same bucket. An
/// input qualifies when it is made on the device and, back through views to the step making
/// its bytes, every value is read once (by the next view, or by the ConcatQuant) and is neither
/// a graph output, a constant nor host-resident; one is kept only where the peak of live bytes
/// (as plan_concat_placements counts it, with `placements`) does not grow.
std::vector<EarlyEncode> plan_early_encodes(const ExecutionPlan& plan, const BucketShapes& shapes,
                                            const std::vector<std::optional<ConcatPlacement>>& placements);

}  // namespace loka
