// ============================================================================
// passes/dispatch/norm_problems.cc — keys and per-bucket rows of norm nodes.
// ============================================================================
#include "passes/dispatch/norm_problems.h"

#include "passes/dispatch/gemm_problems.h"

namespace loka::dispatch {
namespace {

bool is_float32(const ir::Value* value) { return value != nullptr && value->type().dtype == DType::kFloat32; }

/// Why the CUDA runtime has no kernel for this norm's form; empty when it has.
std::string unsupported_form(const ir::Node& node, size_t scale_index) {
  if (!is_float32(node.input(0)) || !is_float32(node.input(scale_index)))
    return "X and Scale must be FP32 for a CUDA kernel";
  if (node.input(scale_index + 1) != nullptr && !is_float32(node.input(scale_index + 1))) return "B must be FP32";
  for (size_t i = 1; i < node.outputs().size(); ++i)
    if (const ir::Value* extra = node.output(i); extra != nullptr && (extra->has_uses() || extra->is_graph_output()))
      return "its Mean / InvStdDev outputs are read: no CUDA kernel computes them";
  if (node.is("LayerNormalization")) {
    const Result<int64_t> stash = node.attributes().get_int("stash_type", 1);
    if (!stash.is_ok() || stash.value() != 1) return "stash_type other than 1 (FLOAT) has no CUDA kernel";
  }
  return "";
}

}  // namespace

std::optional<NormProblem> describe_norm(const ir::Node& node, const std::vector<int64_t>& buckets) {
  NormProblem problem;
  problem.node = &node;
  kernels::NormKey& key = problem.key;
  key.op = node.op_type();
  size_t scale_index = 1;
  int64_t axis = -1;
  if (node.is("LayerNormalization")) {
    const Result<int64_t> value = node.attributes().get_int("axis", -1);
    axis = value.is_ok() ? value.value() : -1;
  } else if (node.is("LayerNormQuant", "ai.loka")) {
    key.fp8_output = true;
  } else if (node.is("ResidualLayerNorm", "ai.loka")) {
    key.residual = true;
    scale_index = 2;
  } else {
    return std::nullopt;
  }
  key.bias = node.input(scale_index + 1) != nullptr;
  if (std::string form = unsupported_form(node, scale_index); !form.empty()) {
    problem.reason = form;
    return problem;
  }
  for (int64_t bucket : buckets) {
    const auto x = dims_at_bucket(node.input(0), bucket);
    if (!x || x->empty()) {
      problem.shapes.clear();
      problem.reason = "shapes unknown at batch " + std::to_string(bucket) + " (run infer-shapes first)";
      return problem;
    }
    const int64_t rank = static_cast<int64_t>(x->size());
    const int64_t first = axis < 0 ? axis + rank : axis;
    if (first < 0 || first >= rank) {
      problem.shapes.clear();
      problem.reason = "axis " + std::to_string(axis) + " out of range for X of rank " + std::to_string(rank);
      return problem;
    }
    const int64_t cols = dims_product(*x, static_cast<size_t>(first), x->size());
    const int64_t rows = cols == 0 ? 0 : dims_product(*x, 0, x->size()) / cols;
    if (rows < 1 || cols < 1 || (key.cols != 0 && key.cols != cols)) {
      problem.shapes.clear();
      problem.reason = rows < 1 || cols < 1 ? "nothing to normalize at batch " + std::to_string(bucket) + " (" +
                                                  std::to_string(rows) + " rows of " + std::to_string(cols) + ")"
                                            : "the normalized width differs between buckets (" +
                                                  std::to_string(key.cols) + " and " + std::to_string(cols) + ")";
      return problem;
    }
    for (size_t i : {scale_index, scale_index + 1}) {
      const auto parameter = dims_at_bucket(node.input(i), bucket);
      if (node.input(i) != nullptr && (!parameter || dims_product(*parameter, 0, parameter->size()) != cols)) {
        problem.shapes.clear();
        problem.reason = std::string(i == scale_index ? "Scale" : "B") +
                         " does not hold exactly the normalized width (" + std::to_string(cols) +
                         " values): broadcast Scale/B have no CUDA kernel";
        return problem;
      }
    }
    key.cols = cols;
    problem.shapes.emplace_back(bucket, kernels::NormShape{rows});
  }
  return problem;
}

}  // namespace loka::dispatch
