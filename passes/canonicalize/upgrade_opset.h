// ============================================================================
// passes/canonicalize/upgrade_opset.h — `upgrade-opset{target=N}`: raise the
// graph's ai.onnx opset, rewriting the nodes whose signature changed.
//
// ONNX moved several arguments from attributes to inputs and changed a few
// semantics between opsets 7 and 22; for the ops LoKA runs, each step is
// converted exactly:
//   Slice@10 starts/ends/axes → inputs      Dropout@10 mask becomes bool (only if unread)
//   Clip@11 min/max → inputs                Pad@11 pads/value → inputs
//   Dropout@12 ratio → input                ReduceSum@13, other Reduce*@18: axes → input
//   Squeeze/Unsqueeze@13 axes → input       Split@13 split → input; @18 num_outputs when even
//   Softmax/LogSoftmax@13: the old "flatten from axis" semantics are kept: the
//     axis attribute is made explicit when it is provably the last dim,
//     otherwise Flatten → Softmax(axis=1) → Reshape(Shape(x)).
// Every other default-domain op must have a LoKA kernel at the target opset
// (its signature did not change for LoKA's purposes); anything else is an
// error naming the node. Ops of other domains are untouched.
//
// Requires: a source opset >= 7; for Clip/Pad value, the data dtype
// (infer-shapes). Guarantees: all-or-nothing — the conversion is tried on a
// clone first, so on error the graph is unchanged; the pass (not the bare
// function) re-infers types so the nodes it added are typed. Does not: downgrade
// (a target at or below the current opset changes nothing).
// ============================================================================
#pragma once

#include <cstdint>
#include <memory>

#include "loka/status.h"
#include "passes/pass.h"

namespace loka {

/// Oldest ai.onnx opset upgrade-opset converts from, and the newest it converts to.
inline constexpr int64_t kOldestUpgradableOpset = 7;
inline constexpr int64_t kNewestOpset = 22;

/// Raises the graph's ai.onnx opset to `target`; returns how many nodes were rewritten, or an
/// error naming the first node that cannot be converted (the graph is then unchanged).
Result<size_t> upgrade_opset(ir::Graph& graph, int64_t target);
/// Whether upgrade_opset(graph, target) would succeed (the graph itself is not changed).
Status check_opset_upgrade(const ir::Graph& graph, int64_t target);

/// What require_opset_for_fusion found or did.
enum class FusionOpset { kAlready, kRaised, kNotUpgradable };

/// For a fusion that found `matches` sites of an op introduced at ai.onnx `opset`: raises the
/// graph to it when older (all or nothing), counting "opset-raised-to-<opset>" and
/// "nodes-converted-by-upgrade"; when the graph cannot be upgraded it is left unchanged and
/// the matches are counted as "skipped-opset-not-upgradable". After kRaised the caller matches
/// again (the upgrade may have rewritten nodes).
Result<FusionOpset> require_opset_for_fusion(ir::Graph& graph, int64_t opset, size_t matches, PassContext& context);

PassInfo upgrade_opset_pass_info();
std::unique_ptr<Pass> make_upgrade_opset_pass();

}  // namespace loka
