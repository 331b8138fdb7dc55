// ============================================================================
// runtime/ops/attention.cc — ai.loka Attention on the CPU (docs/loka_ops.md):
// scaled dot-product attention with heads read in place from token-major
// projections, the reference the CUDA kernel (kernels/cuda/attention.h) is
// tested against.
//
// Each step does what the unfused chain's op does, in the same precision:
// the dot product in FP32 (MatMul), one FP32 multiply by the scale (Mul),
// then the Softmax of runtime/ops/normalization.cc (row maximum subtracted,
// exp and sum in double, a NaN anywhere makes the row NaN) and the FP32
// weighted sum of values (MatMul). So the fused op equals its chain up to
// summation order, which `fuse-attention`'s tests check on the zoo.
// ============================================================================
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "runtime/op_kernel.h"
#include "runtime/ops/op_helpers.h"

namespace loka {
namespace {

struct AttentionAttributes {
  int64_t heads = 1, head_dim = 1;
  float scale = 1.0f;
  int64_t offset[3] = {0, 0, 0};  ///< q, k, v
};

constexpr const char* kInputNames[3] = {"Q", "K", "V"};

/// Error unless input `index` is float32 [B, N, C] with room for every head from its offset.
Status check_operand(const Tensor& tensor, size_t index, const AttentionAttributes& attrs) {
  const char* what = kInputNames[index];
  LOKA_RETURN_IF_ERROR(ops::require_float32(tensor, what));
  if (tensor.rank() != 3)
    return Status::error(std::string(what) + " must be 3-D [B, N, C], got " + shape_to_string(tensor.shape()));
  const int64_t needed = attrs.offset[index] + attrs.heads * attrs.head_dim;
  if (tensor.dim(2) < needed)
    return Status::error(std::string(what) + " " + shape_to_string(tensor.shape()) + " has " +
                         std::to_string(tensor.dim(2)) + " columns; heads * head_dim from its offset need " +
                         std::to_string(needed));
  return Status::ok();
}

Status run_attention(const AttentionAttributes& attrs, std::span<const Tensor> in, std::span<Tensor> out,
                     KernelContext& context) {
  for (size_t i = 0; i < 3; ++i) {
    LOKA_RETURN_IF_ERROR(ops::require_input(in, i, kInputNames[i]));
    LOKA_RETURN_IF_ERROR(check_operand(in[i], i, attrs));
  }
  const Tensor& q = in[0];
  const Tensor& k = in[1];
  const Tensor& v = in[2];
  const int64_t batch = q.dim(0), nq = q.dim(1), nk = k.dim(1);
  if (k.dim(0) != batch || v.dim(0) != batch)
    return Status::error("Q, K and V must share B: " + shape_to_string(q.shape()) + ", " + shape_to_string(k.shape()) +
                         ", " + shape_to_string(v.shape()));
  if (v.dim(1) != nk)
    return Status::error("K " + shape_to_string(k.shape()) + " and V " + shape_to_string(v.shape()) +
                         " must have the same number of keys");
  if (nk == 0 && batch * nq > 0) return Status::error("K has no keys: a softmax over no keys is undefined");
  const int64_t heads = attrs.heads, dim = attrs.head_dim;
  LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(DType::kFloat32, {batch, nq, heads * dim}));
  const float* pq = q.data<float>();
  const float* pk = k.data<float>();
  const float* pv = v.data<float>();
  float* py = out[0].data<float>();
  const int64_t cq = q.dim(2), ck = k.dim(2), cv = v.dim(2);
  std::vector<float> scores(static_cast<size_t>(nk));
  std::vector<double> exps(static_cast<size_t>(nk));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      const float* keys = pk + b * nk * ck + attrs.offset[1] + h * dim;
      const float* values = pv + b * nk * cv + attrs.offset[2] + h * dim;
      for (int64_t i = 0; i < nq; ++i) {
        const float* query = pq + (b * nq + i) * cq + attrs.offset[0] + h * dim;
        float max = -std::numeric_limits<float>::infinity();
        bool has_nan = false;
        for (int64_t j = 0; j < nk; ++j) {
          float dot = 0.0f;
          for (int64_t e = 0; e < dim; ++e) dot += query[e] * keys[j * ck + e];
          const float s = dot * attrs.scale;
          scores[static_cast<size_t>(j)] = s;
          max = std::fmax(max, s);
          has_nan |= std::isnan(s);
        }
        if (has_nan) max = std::numeric_limits<float>::quiet_NaN();  // the whole row is NaN, as Softmax
        // Each exponential once, for the sum and the weights (as Softmax).
        double sum = 0.0;
        for (int64_t j = 0; j < nk; ++j) {
          exps[static_cast<size_t>(j)] = std::exp(static_cast<double>(scores[static_cast<size_t>(j)] - max));
          sum += exps[static_cast<size_t>(j)];
        }
        float* y = py + (b * nq + i) * heads * dim + h * dim;
        for (int64_t e = 0; e < dim; ++e) y[e] = 0.0f;
        for (int64_t j = 0; j < nk; ++j) {
          const float p = static_cast<float>(exps[static_cast<size_t>(j)] / sum);
          for (int64_t e = 0; e < dim; ++e) y[e] += p * values[j * cv + e];
        }
      }
    }
  }
  return Status::ok();
}

Result<std::unique_ptr<OpKernel>> make_attention(const KernelInit& init) {
  if (init.input_count != 3 || init.output_count != 1)
    return Status::error("Attention takes 3 inputs (Q, K, V) and has 1 output, got " +
                         std::to_string(init.input_count) + " and " + std::to_string(init.output_count));
  AttentionAttributes attrs;
  LOKA_ASSIGN_OR_RETURN(attrs.heads, init.attributes.get_int("heads", 0));
  LOKA_ASSIGN_OR_RETURN(attrs.head_dim, init.attributes.get_int("head_dim", 0));
  LOKA_ASSIGN_OR_RETURN(attrs.scale, init.attributes.get_float("scale", 1.0f));
  if (attrs.heads < 1) return Status::error("attribute 'heads' must be >= 1, got " + std::to_string(attrs.heads));
  if (attrs.head_dim < 1)
    return Status::error("attribute 'head_dim' must be >= 1, got " + std::to_string(attrs.head_dim));
  if (!std::isfinite(attrs.scale)) return Status::error("attribute 'scale' must be finite");
  const char* offset_names[3] = {"q_offset", "k_offset", "v_offset"};
  for (size_t i = 0; i < 3; ++i) {
    LOKA_ASSIGN_OR_RETURN(attrs.offset[i], init.attributes.get_int(offset_names[i], 0));
    if (attrs.offset[i] < 0)
      return Status::error(std::string("attribute '") + offset_names[i] + "' must be >= 0, got " +
                           std::to_string(attrs.offset[i]));
  }
  return make_function_kernel([attrs](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
    return run_attention(attrs, in, out, context);
  });
}

}  // namespace

void register_attention_ops(OpRegistry& registry) { registry.add("ai.loka", "Attention", 1, 1, make_attention); }

}  // namespace loka
