// ============================================================================
// passes/onnx/qdq_lowering.h — `lower-qdq`: ai.loka ops -> standard ONNX QDQ ops.
//
// Rewrites every op of the ai.loka domain (docs/loka_ops.md) into standard
// ONNX ops at ai.onnx opset >= 19 (QuantizeLinear / DequantizeLinear / Cast
// with FLOAT8E4M3FN), so the exported model runs on any ONNX runtime:
//
//   QuantizedGemm(X, W, Ws, B, Xs)            X ─Q(Xs)─DQ(Xs)─┐            ("tensor")
//                                   W ─DQ(Ws, axis 0)─ Gemm(transB=1) ─ act ─ Y
//   LayerNormQuant(X, g, b, Ys)     X ─ LayerNormalization(axis -1) ─ Q(Ys) ─ Y (fp8)
//   QuantizedGather(T, s, idx)      T ─ DQ(s, axis 0) ─ Gather(idx) ─ Y   (Gather takes no FP8)
//   EmbeddingBags(ids, T0, s0, ...) per table: Slice(ids) ─ Gather(T or DQ(T)) (─ Cast(f32) for BF16 T) ─ ReduceSum(1) ─┐ Concat(1) ─ Y
//
// "row" recipes become the row's finite amax / 448 (1 when 0) in standard ops
// and Cast(X / s -> FP8, saturate) -> f32 * s; activations of rank != 2 use
// MatMul (+ Add) with the transposed dequantized weight instead of Gemm.
// Requires: a verified graph (types are inferred first). Guarantees: no
// ai.loka node remains and the ai.loka opset import is dropped; ai.onnx is at
// opset max(current, 19), raised by upgrade_opset (passes/canonicalize), which
// converts the standard ops whose signature changed; quantized values equal
// the ai.loka reference kernels' bit for bit (only GEMM summation order may
// differ); each chain's last node keeps the lowered node's name and output.
// All checks run before the first rewrite, so an error changes no node or
// opset (inferred types may have been filled in).
// Does not: fold constants, fuse QDQ pairs, or touch standard ops otherwise
// (except a Relu feeding a static quantize, see qdq_lowering.cc); a graph
// with no ai.loka node keeps its opset and ops.
// ============================================================================
#pragma once

#include <memory>

#include "loka/status.h"
#include "passes/ir/graph.h"
#include "passes/pass.h"

namespace loka {

/// What one lowering did (for the pass's statistics and its "changed" answer).
struct QdqLoweringStats {
  size_t ops_lowered = 0;     ///< ai.loka nodes rewritten
  size_t ops_upgraded = 0;    ///< standard nodes rewritten for the new opset (axes attribute -> input, ...)
  bool changed = false;       ///< anything changed (nodes, opset imports)
};

/// Rewrites every ai.loka op of `graph` into standard ONNX ops (opset >= 19).
/// A graph without ai.loka nodes keeps its ops and ai.onnx opset (only a dangling ai.loka
/// import is dropped). On error no node or opset has changed (all checks run before any rewrite).
Status lower_to_qdq(ir::Graph& graph, QdqLoweringStats* stats = nullptr);

/// The `lower-qdq` pass: lower_to_qdq as a pipeline step (statistics "ops-lowered", "ops-upgraded").
PassInfo lower_qdq_pass_info();
std::unique_ptr<Pass> make_lower_qdq_pass();

}  // namespace loka
