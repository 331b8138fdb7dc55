// ============================================================================
// passes/probe/probe_model.h — the model the Probe measures with on the GPU.
//
// The CPU path substitutes quantized operands through Observer hooks; a GPU
// run has no per-node host hooks, so the substitution is planted in the model
// instead: every quantized operand of every site goes through an
// ai.loka.ProbeFakeQuant switch (docs/loka_ops.md) reading one entry of a new
// INT32 input, `Mode` ([sites]: 0 off, r + 1 recipe r). Each site's output is
// tapped as an extra graph output, for its local error. One Engine, one CUDA
// graph per bucket, and every (site, recipe) is a run with a different Mode.
// ============================================================================
#pragma once

#include <array>
#include <string>
#include <vector>

#include "loka/status.h"
#include "passes/ir/graph.h"
#include "runtime/ops/probe_fake_quant_spec.h"

namespace loka::probe {

/// One switched operand of a site: a node input slot, or the node's output 0
/// (embeddings: fake-quantizing a Gather's rows equals gathering a fake-quantized
/// table, per tensor or per row, without copying the table every run).
struct OperandSwitch {
  static constexpr size_t kOutput = static_cast<size_t>(-1);
  size_t slot = 0;  ///< input slot, or kOutput
  std::array<FakeQuantRecipe, kProbeRecipes> recipes{};
};

struct SiteSwitches {
  std::string node;  ///< the site's node name
  std::vector<OperandSwitch> operands;
};

struct ProbeModel {
  std::string bytes;                ///< serialized ModelProto
  size_t model_outputs = 0;         ///< the original outputs come first, in order
  size_t mode_input = 0;            ///< position of Mode among the inputs
  std::vector<long> site_output;    ///< per site: its tap's output position, -1 when not float
};

/// A copy of `graph` with the switches and taps planted (sites in Mode order).
Result<ProbeModel> build_probe_model(const ir::Graph& graph, const std::vector<SiteSwitches>& sites);

}  // namespace loka::probe
