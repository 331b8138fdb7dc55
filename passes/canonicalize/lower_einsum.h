// ============================================================================
// passes/canonicalize/lower_einsum.h — `lower-einsum`: an Einsum of one or two
// operands becomes Transpose / Reshape / ReduceSum / MatMul nodes.
//
// Rec models written with torch.einsum (token mixing "bnd,nm->bmd", pairwise
// interactions "bnd,bmd->bnm", projections "bnd,dk->bnk") export an ONNX
// Einsum, which neither runtime executes. Lowered, the contraction is a
// MatMul — a GEMM site the Probe measures and Dispatch tunes like any other.
// Letters are classified as
//   batch     in both operands and the output   → MatMul's leading dims
//   left      in the first operand and output   → M
//   right     in the second operand and output  → N
//   contract  in both operands, not the output  → K
//   summed    in one operand only, not output   → a ReduceSum first
// and the operands are brought to [batch..., M, K] and [batch..., K, N]:
//
//   A ─▶ ReduceSum ─▶ Transpose ─▶ Reshape ─┐
//                                           MatMul ─▶ Reshape ─▶ Transpose ─▶ Y
//   B ─▶ ReduceSum ─▶ Transpose ─▶ Reshape ─┘
//
// with every step left out when it would be the identity (so "bij,bjk->bik"
// is one MatMul). One operand: ReduceSum over the summed letters, then a
// Transpose to the output order. Reshapes keep batch dims with 0 and need the
// sizes of the merged groups; one unknown size per target is written -1.
//
// Requires: infer-shapes (operand ranks; sizes of grouped dims). Guarantees:
// Y keeps its name and readers; the result equals the einsum up to FP32
// summation order (a contraction over several letters is one K). Does not:
// lower an equation with an ellipsis, a letter repeated within one operand (a
// diagonal), more than two operands, or groups whose sizes are unknown where a
// Reshape needs them; those stay Einsum and are counted ("einsum-kept"), and
// the runtime then names the node when it cannot run it.
// ============================================================================
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loka/status.h"
#include "passes/pass.h"

namespace loka {

/// An einsum equation split into its operand terms and the output term (the implicit
/// output — letters used once, in alphabetical order — made explicit).
struct EinsumEquation {
  std::vector<std::string> inputs;
  std::string output;
};

/// Parses `equation` for `operand_count` operands; errors name what LoKA does not lower
/// (an ellipsis, a repeated letter in one term, an output letter no operand has).
Result<EinsumEquation> parse_einsum_equation(const std::string& equation, size_t operand_count);

PassInfo lower_einsum_pass_info();
std::unique_ptr<Pass> make_lower_einsum_pass();

}  // namespace loka
