// ============================================================================
// runtime/cuda/ops/output_pitch.h — which steps' ops will write their output
// with a row pitch (into their slice of a Concat's output), and rows of what.
//
// The Concat placement's peak rule (runtime/concat_placement.h) counts on
// what will be planned, so this mirrors the op factories at a bucket's shapes:
//  - GEMM ops (gemm.cc, dispatched_gemm.cc) write rows of their last dim when
//    one cuBLASLt GEMM writes the output, with no pass after it reading packed
//    rows (a broadcast addend, a residual, the exact GELU, a DCN multiplier)
//    and no strided batch. They may still decline when planned: a positional
//    cuBLASLt algorithm, LoKA's small-M kernel, no cuBLASLt algorithm for the
//    pitch.
//  - EmbeddingBags (data_movement.cc) writes each sample's [T, D] as one row:
//    its kernel takes an output row stride, and always does.
// ============================================================================
#pragma once

#include <cstdint>

#include "runtime/batch_shapes.h"
#include "runtime/execution_plan.h"

namespace loka::cuda {

/// Whether the step's GEMM op will take a row pitch for its first output at these shapes.
bool gemm_writes_pitched_rows(const PlanStep& step, const BucketShapes& shapes);

/// Elements in each row the step's op writes with a pitch, or 0 where it writes packed rows only.
int64_t pitched_row_width(const PlanStep& step, const BucketShapes& shapes);

}  // namespace loka::cuda
