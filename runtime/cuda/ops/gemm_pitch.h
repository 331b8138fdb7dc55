// ============================================================================
// runtime/cuda/ops/gemm_pitch.h — which steps' GEMM ops will write their
// output with a row pitch (into their slice of a Concat's output).
//
// The Concat placement's peak rule (runtime/concat_placement.h) counts on
// what will be planned, so this mirrors the op factories of gemm.cc and
// dispatched_gemm.cc at a bucket's shapes: one cuBLASLt GEMM writes the
// output, with no pass after it reading packed rows (a broadcast addend, a
// residual, the exact GELU, a DCN multiplier) and no strided batch. An op may
// still decline when planned: a positional cuBLASLt algorithm, LoKA's
// small-M kernel, no cuBLASLt algorithm for the pitch.
// ============================================================================
#pragma once

#include "runtime/batch_shapes.h"
#include "runtime/execution_plan.h"

namespace loka::cuda {

/// Whether the step's op will take a row pitch for its first output at these shapes.
bool gemm_writes_pitched_rows(const PlanStep& step, const BucketShapes& shapes);

}  // namespace loka::cuda
