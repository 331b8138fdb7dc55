// ============================================================================
// runtime/ops/matmul.cc — Gemm and MatMul (batched, numpy broadcast), FP32.
// ============================================================================
#include "kernels/cpu/gemm.h"
#include "runtime/op_kernel.h"
#include "runtime/ops/op_helpers.h"

namespace loka {
namespace {

struct GemmAttributes {
  float alpha = 1.0f;
  float beta = 1.0f;
  bool trans_a = false;
  bool trans_b = false;
};

Status run_gemm(const GemmAttributes& attrs, std::span<const Tensor> in, std::span<Tensor> out,
                KernelContext& context) {
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "A"));
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 1, "B"));
  const Tensor& a = in[0];
  const Tensor& b = in[1];
  LOKA_RETURN_IF_ERROR(ops::require_float32(a, "A"));
  LOKA_RETURN_IF_ERROR(ops::require_float32(b, "B"));
  if (a.rank() != 2 || b.rank() != 2)
    return Status::error("A and B must be 2-D, got " + shape_to_string(a.shape()) + " and " + shape_to_string(b.shape()));
  const int64_t m = attrs.trans_a ? a.dim(1) : a.dim(0);
  const int64_t k = attrs.trans_a ? a.dim(0) : a.dim(1);
  const int64_t kb = attrs.trans_b ? b.dim(1) : b.dim(0);
  const int64_t n = attrs.trans_b ? b.dim(0) : b.dim(1);
  if (k != kb)
    return Status::error("inner dims differ: A " + shape_to_string(a.shape()) + (attrs.trans_a ? " (transposed)" : "") +
                         " and B " + shape_to_string(b.shape()) + (attrs.trans_b ? " (transposed)" : ""));
  LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(DType::kFloat32, {m, n}));
  float* y = out[0].data<float>();
  float beta = 0.0f;
  if (in.size() > 2 && in[2].defined() && attrs.beta != 0.0f) {
    const Tensor& c = in[2];
    LOKA_RETURN_IF_ERROR(ops::require_float32(c, "C"));
    LOKA_ASSIGN_OR_RETURN(const Shape broadcast, ops::broadcast_shapes(c.shape(), {m, n}));
    if (broadcast != Shape{m, n} || c.rank() > 2)
      return Status::error("C of shape " + shape_to_string(c.shape()) + " does not broadcast to [" +
                           std::to_string(m) + "," + std::to_string(n) + "]");
    const std::vector<int64_t> strides = ops::broadcast_strides(c.shape(), {m, n});
    const float* pc = c.data<float>();
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) y[i * n + j] = pc[i * strides[0] + j * strides[1]];
    beta = attrs.beta;
  }
  cpu::gemm_f32({m, n, k}, attrs.trans_a, attrs.trans_b, attrs.alpha, a.data<float>(), a.dim(1), b.data<float>(),
                b.dim(1), beta, y, n);
  return Status::ok();
}

/// MatMul with numpy semantics: 1-D operands are promoted and the added dim dropped;
/// leading (batch) dims broadcast.
Status run_matmul(std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "A"));
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 1, "B"));
  LOKA_RETURN_IF_ERROR(ops::require_float32(in[0], "A"));
  LOKA_RETURN_IF_ERROR(ops::require_float32(in[1], "B"));
  if (in[0].rank() == 0 || in[1].rank() == 0) return Status::error("MatMul operands must have rank >= 1");
  Shape a_shape = in[0].shape();
  Shape b_shape = in[1].shape();
  const bool a_vector = a_shape.size() == 1;
  const bool b_vector = b_shape.size() == 1;
  if (a_vector) a_shape.insert(a_shape.begin(), 1);
  if (b_vector) b_shape.push_back(1);
  const int64_t m = a_shape[a_shape.size() - 2], k = a_shape.back();
  const int64_t n = b_shape.back();
  if (b_shape[b_shape.size() - 2] != k)
    return Status::error("inner dims differ: " + shape_to_string(in[0].shape()) + " x " + shape_to_string(in[1].shape()));
  const Shape a_batch(a_shape.begin(), a_shape.end() - 2);
  const Shape b_batch(b_shape.begin(), b_shape.end() - 2);
  LOKA_ASSIGN_OR_RETURN(const Shape batch, ops::broadcast_shapes(a_batch, b_batch));
  Shape out_shape = batch;
  if (!a_vector) out_shape.push_back(m);
  if (!b_vector) out_shape.push_back(n);
  LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(DType::kFloat32, out_shape));

  const std::vector<int64_t> a_strides = ops::broadcast_strides(a_batch, batch);
  const std::vector<int64_t> b_strides = ops::broadcast_strides(b_batch, batch);
  const int64_t batches = element_count(batch);
  std::vector<int64_t> index(batch.size(), 0);
  for (int64_t t = 0; t < batches; ++t) {
    int64_t a_offset = 0, b_offset = 0;
    for (size_t d = 0; d < batch.size(); ++d) {
      a_offset += index[d] * a_strides[d];
      b_offset += index[d] * b_strides[d];
    }
    cpu::gemm_f32({m, n, k}, false, false, 1.0f, in[0].data<float>() + a_offset * m * k, k,
                  in[1].data<float>() + b_offset * k * n, n, 0.0f, out[0].data<float>() + t * m * n, n);
    for (size_t d = batch.size(); d-- > 0;) {
      if (++index[d] < batch[d]) break;
      index[d] = 0;
    }
  }
  return Status::ok();
}

}  // namespace

void register_matmul_ops(OpRegistry& registry) {
  registry.add("", "Gemm", 11, 22, [](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
    GemmAttributes attrs;
    LOKA_ASSIGN_OR_RETURN(attrs.alpha, init.attributes.get_float("alpha", 1.0f));
    LOKA_ASSIGN_OR_RETURN(attrs.beta, init.attributes.get_float("beta", 1.0f));
    LOKA_ASSIGN_OR_RETURN(const int64_t trans_a, init.attributes.get_int("transA", 0));
    LOKA_ASSIGN_OR_RETURN(const int64_t trans_b, init.attributes.get_int("transB", 0));
    attrs.trans_a = trans_a != 0;
    attrs.trans_b = trans_b != 0;
    return make_function_kernel([attrs](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
      return run_gemm(attrs, in, out, context);
    });
  });
  add_stateless_op(registry, "MatMul", 1, 22, run_matmul);
}

}  // namespace loka
