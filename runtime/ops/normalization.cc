// ============================================================================
// runtime/ops/normalization.cc — LayerNormalization, Softmax and LogSoftmax, FP32.
//
// LayerNormalization (opset 17+): X is normalized over its dims [axis, rank);
// Y = (X - mean) * InvStdDev * Scale + B with InvStdDev = 1 / sqrt(var + eps)
// (population variance). Scale and B broadcast to X (numpy rules, the result
// must be X's shape). The optional outputs Mean and InvStdDev have shape
// X.shape[:axis] + [1] * (rank - axis). The row arithmetic (statistics in
// double, elements in float) lives in kernels/cpu/layer_norm.h, shared with
// ai.loka LayerNormQuant; only stash_type = 1 (FLOAT) exists.
//
// Softmax / LogSoftmax: from opset 13 along the single dim `axis` (default
// -1); before 13 the input is viewed as 2-D [prod(dims < axis), prod(dims >=
// axis)] and normalized along the second dim (default axis 1), as those
// opsets define. The row maximum is subtracted before exp, as the reference.
// ============================================================================
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/layer_norm.h"
#include "runtime/op_kernel.h"
#include "runtime/ops/op_helpers.h"

namespace loka {
namespace {

// ----------------------------------------------------------------------------
// LayerNormalization.

struct LayerNormAttributes {
  int64_t axis = -1;
  float epsilon = 1e-5f;
};

/// Offsets of a broadcast operand (Scale or B) for every element of X, split
/// into a per-row part and a within-row part so the inner loop is a lookup.
struct BroadcastOperand {
  const float* data = nullptr;
  std::vector<int64_t> row_offset;     ///< per outer row
  std::vector<int64_t> inner_offset;   ///< per element of a row
};

Result<BroadcastOperand> broadcast_operand(const Tensor& operand, const Shape& x_shape, int axis, const char* what) {
  LOKA_RETURN_IF_ERROR(ops::require_float32(operand, what));
  auto shape = ops::broadcast_shapes(operand.shape(), x_shape);
  if (!shape || *shape != x_shape)
    return Status::error(std::string(what) + " of shape " + shape_to_string(operand.shape()) +
                         " does not broadcast to X's shape " + shape_to_string(x_shape));
  const std::vector<int64_t> strides = ops::broadcast_strides(operand.shape(), x_shape);
  const size_t split = static_cast<size_t>(axis);
  // Enumerates offsets of the dims [begin, end) in row-major order.
  const auto offsets = [&](size_t begin, size_t end) {
    std::vector<int64_t> out{0};
    for (size_t d = begin; d < end; ++d) {
      std::vector<int64_t> next;
      next.reserve(out.size() * static_cast<size_t>(x_shape[d]));
      for (int64_t base : out)
        for (int64_t i = 0; i < x_shape[d]; ++i) next.push_back(base + i * strides[d]);
      out = std::move(next);
    }
    return out;
  };
  BroadcastOperand result;
  result.data = operand.data<float>();
  result.row_offset = offsets(0, split);
  result.inner_offset = offsets(split, x_shape.size());
  return result;
}

Status run_layer_norm(const LayerNormAttributes& attrs, std::span<const Tensor> in, std::span<Tensor> out,
                      KernelContext& context) {
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "X"));
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 1, "Scale"));
  const Tensor& x = in[0];
  LOKA_RETURN_IF_ERROR(ops::require_float32(x, "X"));
  LOKA_ASSIGN_OR_RETURN(const int axis, ops::normalize_axis(attrs.axis, x.rank()));
  LOKA_ASSIGN_OR_RETURN(const BroadcastOperand scale, broadcast_operand(in[1], x.shape(), axis, "Scale"));
  const bool has_bias = in.size() > 2 && in[2].defined();
  BroadcastOperand bias;
  if (has_bias) {
    LOKA_ASSIGN_OR_RETURN(bias, broadcast_operand(in[2], x.shape(), axis, "B"));
  }

  Shape stats_shape(x.shape().begin(), x.shape().begin() + axis);
  stats_shape.resize(x.shape().size(), 1);
  LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(DType::kFloat32, x.shape()));
  Tensor mean_out, inv_std_out;
  if (out.size() > 1) {
    LOKA_ASSIGN_OR_RETURN(mean_out, context.allocate(DType::kFloat32, stats_shape));
  }
  if (out.size() > 2) {
    LOKA_ASSIGN_OR_RETURN(inv_std_out, context.allocate(DType::kFloat32, stats_shape));
  }

  const int64_t rows = static_cast<int64_t>(scale.row_offset.size());
  const int64_t n = static_cast<int64_t>(scale.inner_offset.size());
  const float* px = x.data<float>();
  float* py = out[0].data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = px + r * n;
    const cpu::LayerNormRowStats stats = cpu::layer_norm_row_stats(row, n, attrs.epsilon);
    const float* s = scale.data + scale.row_offset[static_cast<size_t>(r)];
    const float* b = has_bias ? bias.data + bias.row_offset[static_cast<size_t>(r)] : nullptr;
    float* y = py + r * n;
    for (int64_t j = 0; j < n; ++j) {
      const size_t k = static_cast<size_t>(j);
      float value = cpu::layer_norm_element(row[j], stats, s[scale.inner_offset[k]]);
      if (b) value += b[bias.inner_offset[k]];
      y[j] = value;
    }
    if (mean_out.defined()) mean_out.data<float>()[r] = stats.mean;
    if (inv_std_out.defined()) inv_std_out.data<float>()[r] = stats.inv_std;
  }
  if (out.size() > 1) out[1] = mean_out;
  if (out.size() > 2) out[2] = inv_std_out;
  return Status::ok();
}

Result<std::unique_ptr<OpKernel>> make_layer_norm(const KernelInit& init) {
  LayerNormAttributes attrs;
  LOKA_ASSIGN_OR_RETURN(attrs.axis, init.attributes.get_int("axis", -1));
  LOKA_ASSIGN_OR_RETURN(attrs.epsilon, init.attributes.get_float("epsilon", 1e-5f));
  LOKA_ASSIGN_OR_RETURN(const int64_t stash_type, init.attributes.get_int("stash_type", 1));
  if (stash_type != static_cast<int64_t>(DType::kFloat32))
    return Status::error("stash_type " + std::to_string(stash_type) + " is not supported (only 1, FLOAT)");
  if (init.output_count > 3) return Status::error("LayerNormalization has at most 3 outputs");
  return make_function_kernel([attrs](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
    return run_layer_norm(attrs, in, out, context);
  });
}

// ----------------------------------------------------------------------------
// Softmax / LogSoftmax.

struct SoftmaxAttributes {
  int64_t axis = -1;
  bool flatten = false;  ///< opset < 13: normalize over all dims from axis on
  bool log = false;
};

Status run_softmax(const SoftmaxAttributes& attrs, std::span<const Tensor> in, std::span<Tensor> out,
                   KernelContext& context) {
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "input"));
  const Tensor& x = in[0];
  LOKA_RETURN_IF_ERROR(ops::require_float32(x, "input"));
  LOKA_ASSIGN_OR_RETURN(const int axis, ops::normalize_axis(attrs.axis, x.rank()));
  int64_t outer = 1, n = 1, inner = 1;
  for (int d = 0; d < x.rank(); ++d) {
    if (d < axis) outer *= x.dim(d);
    else if (d == axis || attrs.flatten) n *= x.dim(d);
    else inner *= x.dim(d);
  }
  LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(DType::kFloat32, x.shape()));
  const float* px = x.data<float>();
  float* py = out[0].data<float>();
  // Each row's exponentials, computed once for the sum and the outputs (the Probe runs attention
  // models' Softmax once per site and batch: exp was a fifth of its time on tiny DHEN).
  std::vector<double> exps(static_cast<size_t>(n));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const float* row = px + o * n * inner + i;
      float* y = py + o * n * inner + i;
      float max = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < n; ++j) max = row[j * inner] > max ? row[j * inner] : max;  // skips NaN as fmax does
      // A NaN anywhere makes the whole row NaN, as exp/sum would.
      for (int64_t j = 0; j < n; ++j)
        if (std::isnan(row[j * inner])) max = row[j * inner];
      double sum = 0.0;
      for (int64_t j = 0; j < n; ++j) {
        exps[static_cast<size_t>(j)] = std::exp(static_cast<double>(row[j * inner] - max));
        sum += exps[static_cast<size_t>(j)];
      }
      if (attrs.log) {
        const float log_sum = static_cast<float>(std::log(sum));
        for (int64_t j = 0; j < n; ++j) y[j * inner] = (row[j * inner] - max) - log_sum;
      } else {
        for (int64_t j = 0; j < n; ++j) y[j * inner] = static_cast<float>(exps[static_cast<size_t>(j)] / sum);
      }
    }
  }
  return Status::ok();
}

void add_softmax(OpRegistry& registry, const char* name, bool log) {
  registry.add("", name, 1, 22, [log](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
    SoftmaxAttributes attrs;
    attrs.log = log;
    attrs.flatten = init.opset < 13;
    LOKA_ASSIGN_OR_RETURN(attrs.axis, init.attributes.get_int("axis", attrs.flatten ? 1 : -1));
    return make_function_kernel([attrs](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
      return run_softmax(attrs, in, out, context);
    });
  });
}

}  // namespace

void register_normalization_ops(OpRegistry& registry) {
  registry.add("", "LayerNormalization", 17, 22, make_layer_norm);
  add_softmax(registry, "Softmax", false);
  add_softmax(registry, "LogSoftmax", true);
}

}  // namespace loka
