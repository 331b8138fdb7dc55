// ============================================================================
// kernels/registry/kernel_plan.h — the chosen kernels as the runtime reads
// them: model metadata key "loka.kernels", a small line format.
//
//   loka.kernels 1
//   device<TAB>NVIDIA H100 80GB HBM3 / driver 13000 / cuBLASLt 130100   (or "cost-model")
//   <node name><TAB><rows><TAB><candidate name>                          (one per node and bucket)
//
// rows is, at the bucket the choice was made for, a GEMM's output rows over
// all its batches (GemmShape::rows(): M, or M × batch for a batched MatMul,
// whose M is the same at every bucket) or a norm's rows (NormShape::rows). The
// candidate is a GemmCandidate's or a NormCandidate's name
// (kernels/registry/norm_kernel_key.h), by the node's op. The
// Dispatch pass writes it (with the richer JSON in "loka.annotations" for
// tools); the runtime parses it without a JSON library. The format is plain
// text so that a standard ONNX node needs no non-standard attribute (onnx's
// checker and onnxruntime reject unknown attributes on Gemm/MatMul).
// ============================================================================
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "loka/status.h"

namespace loka::kernels {

inline constexpr const char* kKernelPlanKey = "loka.kernels";
/// The device line of a plan made by the cost model (no algorithm index other than 0 is written then).
inline constexpr const char* kCostModelDevice = "cost-model";

struct KernelChoice {
  int64_t m = 0;          ///< GemmShape::rows() (or NormShape::rows) at the bucket it was chosen for
  std::string candidate;  ///< GemmCandidate::name() or NormCandidate::name()
  bool operator==(const KernelChoice&) const = default;
};

struct KernelPlan {
  std::string device;  ///< the fingerprint the measurements belong to, or kCostModelDevice
  std::map<std::string, std::vector<KernelChoice>> nodes;  ///< by node name, ascending M

  std::string to_text() const;
  /// The choice for `m` rows: the exact rows, else the nearest (ties: the larger).
  const KernelChoice* choose(const std::string& node, int64_t m) const;
};

/// Parses to_text()'s output; errors name the line.
Result<KernelPlan> parse_kernel_plan(const std::string& text);

}  // namespace loka::kernels
