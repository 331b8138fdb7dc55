// ============================================================================
// passes/canonicalize/canonicalize.h — `canonicalize`: bring an exported
// model into the one form the rest of the compiler expects.
//
// Runs, in rounds until a round changes nothing (or `max-iterations` rounds
// ran): infer-shapes, lower-einsum, decompose-ops, fold-constants,
// fold-shape-chains, remove-identities, fuse-matmul-add, normalize-gemm,
// fuse-decomposed-layernorm, fuse-decomposed-gelu, eliminate-dead-code. Each
// rewrite exposes the next (a folded Shape makes a Gather constant, a removed
// Identity lets a MatMul meet its Add, a fused LayerNorm leaves its shape
// chain dead, a lowered Einsum is a MatMul the later rounds see), hence the
// fixpoint. The IR is
// verified after every round; a broken invariant is an error naming the
// round. Statistics are the sub-passes' own, prefixed "<pass>.".
//
// Requires: an imported, verified graph. Guarantees: at a fixpoint (running
// it again reports "unchanged") unless the bound was hit, which is counted
// as "iteration-bound-reached"; outputs equal the input model's up to FP32
// rounding (folded Gemm scales, fused LayerNorm and GELU, decomposed
// BatchNormalization). Does not:
// quantize or change precision, or upgrade the opset except where a fusion
// needs it.
// ============================================================================
#pragma once

#include <memory>

#include "passes/pass.h"

namespace loka {

PassInfo canonicalize_pass_info();
std::unique_ptr<Pass> make_canonicalize_pass();

}  // namespace loka
