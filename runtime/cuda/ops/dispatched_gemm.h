// ============================================================================
// runtime/cuda/ops/dispatched_gemm.h — running the kernel the Dispatch pass
// chose for a Gemm / MatMul / QuantizedGemm node.
//
// A node carries the choice as the attribute loka_kernel = ["<rows>:<name>", ...]
// (from the model's "loka.kernels" metadata, see runtime/execution_plan.cc;
// rows = M, times the batch count for a batched MatMul, whose M is the same at
// every bucket) and loka_kernel_device, the GPU / driver / cuBLASLt the times
// were measured on. The choice for the planned bucket's rows (else the nearest, with the
// family's heuristic-best algorithm: an index belongs to one problem) is
// built with kernels/cuda/gemm_candidate.h (any family: FP32, TF32, BF16 — for
// activation x activation MatMuls too — FP8, emulation). When the plan was measured on
// another device, or the choice cannot be built here (no such algorithm,
// weights not constant), the node falls back — to the same family's
// algorithm 0, else to the op's default path — with one warning per node on
// stderr; with LOKA_STRICT_KERNELS=1 in the environment it is an error instead.
// ============================================================================
#pragma once

#include <optional>

#include "kernels/cuda/gemm_candidate.h"
#include "kernels/registry/gemm_kernel_key.h"
#include "runtime/cuda/device_op.h"

namespace loka::cuda {

/// Where the operands are among the node's inputs (-1: absent).
struct GemmInputSlots {
  int x = 0, w = 1, w_scale = -1, bias = -1, x_scale = -1;
  int addend = -1;    ///< Gemm's C when it is no bias: broadcast-added after the GEMM
  int residual = -1;  ///< a full-size residual the kernel adds after the activation (key.residual)
};

/// `plan(pitch)`, and `plan(0)` (packed rows, which the Concat then copies) when that fails or
/// no pitch was asked for: the GEMM ops' one fallback from a pitched output
/// (runtime/concat_placement.h).
template <typename Plan>
auto plan_pitched_or_packed(int64_t pitch, const Plan& plan) -> decltype(plan(int64_t{0})) {
  if (pitch != 0) {
    auto pitched = plan(pitch);
    if (pitched) return pitched;
  }
  return plan(0);
}

/// GemmKernel::create with the requested row pitch where the candidate takes one (Y written
/// straight into its slice of a Concat's output), else with packed rows. Its runs borrow their
/// scratch: give it to gemm_kernel_plan, whose plan asks the bucket's arena for it.
Result<std::unique_ptr<GemmKernel>> create_gemm_kernel(const kernels::GemmCandidate& candidate,
                                                       const kernels::GemmKey& key, const kernels::GemmShape& shape,
                                                       GemmCandidatePlanInputs inputs, const DeviceOpInit& init,
                                                       const GemmInputSlots& slots);

/// `kernel` as the node's device op, reading its operands from `slots` (the addend, if any,
/// is added by a broadcast pass after the GEMM); output_pitched when the kernel writes a pitch.
DevicePlan gemm_kernel_plan(std::unique_ptr<GemmKernel> kernel, const GemmInputSlots& slots, const DeviceOpInit& init);

/// The op for the node's Dispatch choice; nothing when it has none (or falls
/// back to the default path); an error in strict mode or on bad attributes.
Result<std::optional<DevicePlan>> plan_dispatched_gemm(const DeviceOpInit& init, const kernels::GemmKey& key,
                                                       const kernels::GemmShape& shape, const GemmInputSlots& slots);

}  // namespace loka::cuda
