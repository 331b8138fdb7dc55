// ============================================================================
// passes/probe/probe_model.h — the model the Probe measures with on the GPU.
//
// The CPU path substitutes quantized operands through Observer hooks; a GPU
// run has no per-node host hooks, so the substitution is planted in the model
// instead: every quantized operand of every site goes through an
// ai.loka.ProbeFakeQuant switch (docs/loka_ops.md) reading one entry of a new
// INT32 input, `Mode` ([sites]: 0 off, r + 1 recipe r). Each site's output is
// tapped as an extra graph output, for its local error (not a storage switch's:
// SiteSwitches::tap). Switches planted later on one output run first. One Engine, one CUDA
// graph per bucket, and every (site, recipe) is a run with a different Mode.
// ============================================================================
#pragma once

#include <array>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loka/status.h"
#include "passes/ir/graph.h"
#include "passes/probe/sites.h"
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
  bool tap = true;   ///< the node's output becomes a graph output (the site's local error)
};

struct ProbeModel {
  std::string bytes;                ///< serialized ModelProto
  size_t model_outputs = 0;         ///< the original outputs come first, in order
  size_t mode_input = 0;            ///< position of Mode among the inputs
  std::vector<long> site_output;    ///< per site: its tap's output position, -1 when not float or not tapped
};

/// The static scales a site's recipes use: E4M3 per tensor of the first operand (or the
/// table, for embeddings) and of the second, and their E5M2 counterparts.
struct SiteScales {
  float a = 1.0f, b = 1.0f, e5m2_a = 1.0f, e5m2_b = 1.0f;
};

/// The operands each recipe of `site` quantizes, exactly as the Probe measures them
/// (recipes in the Probe's order: e4m3_tensor, e4m3_row, e5m2_tensor).
SiteSwitches switches_for(const Site& site, const SiteScales& scales);

/// The scales the Probe recorded in `site`'s annotation (stats.*.scale_e4m3 and amax).
Result<SiteScales> scales_from_annotation(const Site& site, const nlohmann::json& annotation);

/// A copy of `graph` with the switches and taps planted (sites in Mode order).
Result<ProbeModel> build_probe_model(const ir::Graph& graph, const std::vector<SiteSwitches>& sites);

}  // namespace loka::probe
