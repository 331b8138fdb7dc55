// ============================================================================
// passes/mods/center_norm_weights.cc — `center-norm-weights`.
// ============================================================================
#include "passes/mods/center_norm_weights.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "passes/mods/rewrite_helpers.h"

namespace loka {
namespace {

using mods::float_constant;
using mods::sole_reader;

/// A mean this small against the group's largest magnitude is rounding noise
/// left by an earlier centring: leaving it keeps the pass idempotent.
constexpr double kCentredRelativeMean = 1e-6;

/// A GEMM -> [constant Add] -> LayerNorm chain the pass may rewrite.
struct Match {
  mods::WeightGemm gemm;   ///< its n is the normalized dim
  ir::Node* add = nullptr;  ///< the constant Add between them, if any
  size_t add_constant_slot = 0;
};

/// The data's last dim when it broadcasts as a per-output vector (1 for a scalar).
int64_t last_dim(const Tensor& tensor) { return tensor.rank() == 0 ? 1 : tensor.dim(tensor.rank() - 1); }

std::optional<Match> match(ir::Node* node) {
  const std::optional<mods::WeightGemm> gemm = mods::as_weight_gemm(*node);
  if (!gemm || gemm->n < 2) return std::nullopt;  // one feature: nothing to centre across
  Match m{*gemm};
  ir::Value* normalized = node->output(0);
  ir::Node* reader = sole_reader(normalized);
  if (reader != nullptr && reader->is("Add")) {
    const size_t other = reader->input(0) == normalized ? 1 : 0;
    const Tensor* constant = float_constant(reader->input(other));
    if (constant == nullptr || (last_dim(*constant) != 1 && last_dim(*constant) != gemm->n)) return std::nullopt;
    m.add = reader;
    m.add_constant_slot = other;
    normalized = reader->output(0);
    reader = sole_reader(normalized);
  }
  if (reader == nullptr || !mods::normalizes_last_axis_only(*reader) || reader->input(0) != normalized)
    return std::nullopt;
  return m;
}

/// `data` seen as [outer, n, inner]: subtracts from every (outer, inner) group
/// its mean over n, computed in double. Null when every group is already centred.
std::optional<Tensor> centred(const Tensor& data, int64_t outer, int64_t n, int64_t inner) {
  Tensor out = data.clone();
  float* values = out.data<float>();
  bool changed = false;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      float* group = values + o * n * inner + i;
      double sum = 0, amax = 0;
      for (int64_t j = 0; j < n; ++j) {
        sum += group[j * inner];
        amax = std::max(amax, std::fabs(static_cast<double>(group[j * inner])));
      }
      const double mean = sum / static_cast<double>(n);
      if (!std::isfinite(mean) || std::fabs(mean) <= kCentredRelativeMean * amax) continue;
      for (int64_t j = 0; j < n; ++j) group[j * inner] = static_cast<float>(group[j * inner] - mean);
      changed = true;
    }
  if (!changed) return std::nullopt;
  return out;
}

/// Centres a per-output constant (last dim n) over its last axis; null when not
/// a per-output vector or already centred.
std::optional<Tensor> centred_over_last_axis(const Tensor& data, int64_t n) {
  if (data.rank() == 0 || last_dim(data) != n) return std::nullopt;
  return centred(data, data.element_count() / n, n, 1);
}

class CenterNormWeightsPass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    bool changed = false;
    for (ir::Node* node : graph.nodes()) {
      const std::optional<Match> m = match(node);
      if (!m) continue;
      bool rewritten = false;
      const Tensor& w = *m->gemm.weight;
      const int64_t n = m->gemm.n;
      const std::optional<Tensor> w_centred = m->gemm.transposed ? centred(w, 1, n, m->gemm.k) : centred(w, m->gemm.k, n, 1);
      if (w_centred) {
        mods::replace_constant(graph, node, 1, *w_centred, "_centered");
        rewritten = true;
      }
      if (const Tensor* bias = node->is("Gemm") ? float_constant(node->input(2)) : nullptr)
        if (auto bias_centred = centred_over_last_axis(*bias, n)) {
          mods::replace_constant(graph, node, 2, *bias_centred, "_centered");
          rewritten = true;
        }
      if (m->add != nullptr)
        if (auto added = centred_over_last_axis(*float_constant(m->add->input(m->add_constant_slot)), n)) {
          mods::replace_constant(graph, m->add, m->add_constant_slot, *added, "_centered");
          rewritten = true;
        }
      if (rewritten) context.add_statistic("gemms-centered");
      changed |= rewritten;
    }
    return changed;
  }
};

}  // namespace

PassInfo center_norm_weights_pass_info() {
  return PassInfo{"center-norm-weights",
                  "subtract, per input row, the mean over outputs of the weights (and bias) of a GEMM feeding a "
                  "LayerNorm over its outputs: exact, and removes the common mode FP8 error scales with",
                  {},
                  {"gemms-centered"}};
}

std::unique_ptr<Pass> make_center_norm_weights_pass() { return std::make_unique<CenterNormWeightsPass>(); }

}  // namespace loka
