// ============================================================================
// runtime/cuda/ops/attention.cc — ai.loka.Attention (docs/loka_ops.md) on the
// GPU: LoKA's fused kernel (kernels/cuda/attention.h), FP32.
//
// Everything that could send the kernel out of bounds is checked when the
// bucket is planned — rank-3 FLOAT inputs of one batch, K and V of one Nk,
// each input's offset + heads·head_dim within its last dim, a head the kernel
// holds (head_dim ≤ 128), the planned output [B, Nq, heads·head_dim] — so a
// bad model fails with a one-line reason before any launch.
// ============================================================================
#include <cmath>

#include "kernels/cuda/attention.h"
#include "runtime/cuda/ops/op_args.h"

namespace loka::cuda {
namespace {

class AttentionOp final : public DeviceOp {
 public:
  explicit AttentionOp(AttentionArgs args) : args_(args) {}
  Status enqueue(std::span<const DeviceTensor> in, std::span<const DeviceTensor> out, const DeviceRunContext& context,
                 int) const override {
    AttentionArgs args = args_;
    args.q = static_cast<const float*>(in[0].data);
    args.k = static_cast<const float*>(in[1].data);
    args.v = static_cast<const float*>(in[2].data);
    args.y = static_cast<float*>(out[0].data);
    return launch_attention(args, context.stream);
  }

 private:
  AttentionArgs args_;  ///< everything but the pointers
};

Result<DevicePlan> plan_attention(const DeviceOpInit& init) {
  if (init.inputs.size() != 3 || init.outputs.size() != 1)
    return Status::error("Attention takes Q, K and V and gives one output");
  static const char* const kNames[] = {"Q", "K", "V"};
  for (size_t i = 0; i < 3; ++i) {
    LOKA_RETURN_IF_ERROR(require_float32(init, i));
    if (init.inputs[i].shape.size() != 3)
      return Status::error(std::string(kNames[i]) + " must be rank 3 [B, N, C], got " +
                           shape_to_string(init.inputs[i].shape));
  }
  if (init.outputs[0].dtype != DType::kFloat32) return Status::error("Attention's output must be FLOAT");
  const Shape &q = init.inputs[0].shape, &k = init.inputs[1].shape, &v = init.inputs[2].shape;
  if (k[0] != q[0] || v[0] != q[0])
    return Status::error("Q, K and V must share the batch dim: " + shape_to_string(q) + ", " + shape_to_string(k) +
                         ", " + shape_to_string(v));
  if (v[1] != k[1])
    return Status::error("K and V must have the same number of keys: " + shape_to_string(k) + " and " +
                         shape_to_string(v));

  AttentionArgs args;
  LOKA_ASSIGN_OR_RETURN(args.heads, init.attributes.get_int("heads"));
  LOKA_ASSIGN_OR_RETURN(args.head_dim, init.attributes.get_int("head_dim"));
  LOKA_ASSIGN_OR_RETURN(args.scale, init.attributes.get_float("scale"));
  LOKA_ASSIGN_OR_RETURN(args.q_offset, init.attributes.get_int("q_offset", 0));
  LOKA_ASSIGN_OR_RETURN(args.k_offset, init.attributes.get_int("k_offset", 0));
  LOKA_ASSIGN_OR_RETURN(args.v_offset, init.attributes.get_int("v_offset", 0));
  if (!std::isfinite(args.scale)) return Status::error("attribute 'scale' must be finite");
  args.batch = q[0];
  args.nq = q[1];
  args.nk = k[1];
  args.q_stride = q[2];
  args.k_stride = k[2];
  args.v_stride = v[2];
  // The head the kernel holds, offsets (>= 0, within each input's last dim), Nk >= 1: the kernel's
  // own check, in one place.
  LOKA_RETURN_IF_ERROR(attention_check_args(args));
  const Shape expected{args.batch, args.nq, args.heads * args.head_dim};
  if (init.outputs[0].shape != expected)
    return Status::error("the planned output " + shape_to_string(init.outputs[0].shape) +
                         " is not [B, Nq, heads*head_dim] = " + shape_to_string(expected));
  return DevicePlan{std::make_unique<AttentionOp>(args), -1};
}

}  // namespace

void register_attention_device_ops(DeviceOpRegistry& registry) {
  registry.add("ai.loka", "Attention", plan_attention);
}

}  // namespace loka::cuda
