// ============================================================================
// passes/dispatch/gemm_problems.h — the GEMM nodes Dispatch chooses kernels
// for, with their functional key and their shape at each batch bucket.
//
// Gemm (transA = 0, FP32), MatMul (FP32; a 2-D right operand, or equal
// leading dims: a strided batch), ai.loka FusedGemm (FP32, bias and
// activation fused) and ai.loka QuantizedGemm (E4M3 weights [N,K],
// act_recipe tensor|row, optional bias and fused activation). Shapes
// come from shape inference: a symbolic dim ("batch", "batch*26") is
// evaluated with the symbol set to the bucket. A GEMM node whose shape
// cannot be evaluated, or whose operand form has no GEMM kernel (a MatMul
// with broadcast batch dims, as the CUDA runtime's), is returned with the
// reason, so the plan says why it has no kernel. A matrix on the left of every
// sample (W [M,K] · X [B,K,N]) is such a form: the runtime runs it in FP32
// with LoKA's shared-left kernel, which has nothing to trade.
// ============================================================================
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernels/registry/gemm_kernel_key.h"
#include "passes/ir/graph.h"

namespace loka::dispatch {

struct GemmProblem {
  const ir::Node* node = nullptr;
  kernels::GemmKey key;
  std::vector<std::pair<int64_t, kernels::GemmShape>> shapes;  ///< (bucket, shape), buckets ascending
  std::string reason;  ///< non-empty: no shapes (why)
};

/// The node's problem, or nothing when it is not a GEMM Dispatch handles.
std::optional<GemmProblem> describe_gemm(const ir::Node& node, const std::vector<int64_t>& buckets);

/// A dim's size with every symbol set to `bucket`; nothing when unknown.
std::optional<int64_t> dim_at_bucket(const ir::Dim& dim, int64_t bucket);

/// The shape of `value` at `bucket` (every dim known then), or nothing.
std::optional<std::vector<int64_t>> dims_at_bucket(const ir::Value* value, int64_t bucket);

/// The product of dims[begin, end).
int64_t dims_product(const std::vector<int64_t>& dims, size_t begin, size_t end);

}  // namespace loka::dispatch
