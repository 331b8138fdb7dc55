// ============================================================================
// runtime/ops/probe_fake_quant_spec.h — the attributes of ai.loka.ProbeFakeQuant.
//
// ProbeFakeQuant (docs/loka_ops.md) is the switch the Probe plants on every
// operand of every FP8 candidate site when it measures on the GPU: one model,
// whose `Mode` input says which site runs which recipe in this run. The CPU and
// CUDA kernels read the same parsed attributes from here.
// ============================================================================
#pragma once

#include <array>
#include <cstdint>

#include "loka/status.h"
#include "runtime/attributes.h"

namespace loka {

/// How a recipe quantizes the operand (always dequantized back to float). kBFloat16 is not
/// FP8: it is how pin-precision measures keeping a tensor (an activation, or a table's
/// gathered rows) in BF16 storage, jointly with the FP8 sites.
enum class FakeQuantForm : int64_t {
  kIdentity = 0,  ///< untouched
  kTensor = 1,    ///< one static scale (the attribute)
  kRows = 2,      ///< a dynamic scale per row of the last dim
  kColumns = 3,   ///< a dynamic scale per column of each trailing [K, N] matrix
  kBFloat16 = 4,  ///< rounded to BF16 (nearest even) and widened back: BF16 storage of the tensor
};

struct FakeQuantRecipe {
  FakeQuantForm form = FakeQuantForm::kIdentity;
  bool e5m2 = false;   ///< E5M2, else E4M3FN (FP8 forms only)
  float scale = 1.0f;  ///< kTensor only
};

/// Mode values are 0 (every operand untouched) or 1..kProbeRecipes (recipe Mode - 1).
inline constexpr size_t kProbeRecipes = 3;

struct ProbeFakeQuantSpec {
  int64_t site = 0;  ///< the Mode entry this node reads
  std::array<FakeQuantRecipe, kProbeRecipes> recipes{};
};

/// Parses and checks `site`, `forms`, `formats` and `scales` (kTensor scales finite and > 0).
Result<ProbeFakeQuantSpec> parse_probe_fake_quant(const Attributes& attributes);

}  // namespace loka
