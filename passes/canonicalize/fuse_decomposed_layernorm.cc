// ============================================================================
// passes/canonicalize/fuse_decomposed_layernorm.cc — `fuse-decomposed-layernorm`
// (see header). Matching walks forward from the first ReduceMean; nothing is
// changed until a whole match (and the opset upgrade) is known to work.
// ============================================================================
#include "passes/canonicalize/fuse_decomposed_layernorm.h"

#include <algorithm>
#include <set>

#include "passes/canonicalize/rewrite_utils.h"
#include "passes/canonicalize/upgrade_opset.h"

namespace loka {
namespace {

constexpr int64_t kLayerNormOpset = 17;

struct Match {
  ir::Node* mean = nullptr;
  ir::Value* x = nullptr;
  std::vector<ir::Node*> nodes;  ///< every absorbed node
  ir::Value* root = nullptr;     ///< the value the LayerNormalization replaces
  int64_t axis = -1;
  float epsilon = 0;
  Shape normalized;              ///< static dims [axis, rank)
  const Tensor* gamma = nullptr;
  const Tensor* beta = nullptr;
};

/// The axes a keepdims ReduceMean reduces, normalised against `rank`, sorted; nullopt if not a
/// plain reduction of known axes (or keepdims=0).
std::optional<std::vector<int64_t>> reduced_axes(const ir::Node& reduce, int rank) {
  auto keepdims = reduce.attributes().get_int("keepdims", 1);
  if (!keepdims || *keepdims != 1 || rank <= 0) return std::nullopt;
  auto listed = canonicalize::attribute_or_input_ints(reduce, "axes", 1);
  if (!listed) return std::nullopt;
  std::vector<int64_t> axes = std::move(*listed);
  if (axes.empty()) {
    auto noop = reduce.attributes().get_int("noop_with_empty_axes", 0);
    if (!noop || *noop != 0) return std::nullopt;
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);  // no axes: all of them
  }
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank) return std::nullopt;
    if (a < 0) a += rank;
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) return std::nullopt;
  return axes;
}

/// One-element constant of at most rank 1 (so it cannot raise a result's rank).
std::optional<double> small_scalar(const ir::Value* value) {
  const Tensor* data = canonicalize::constant_data(value);
  if (data == nullptr || data->rank() > 1) return std::nullopt;
  return canonicalize::scalar_constant(value);
}

/// A FP32 constant that broadcasts to `normalized` without growing a rank-`rank` operand.
const Tensor* affine_operand(const ir::Value* value, const Shape& normalized, int rank) {
  const Tensor* data = canonicalize::constant_data(value);
  if (data == nullptr || data->dtype() != DType::kFloat32 || data->rank() > rank) return nullptr;
  const int k = static_cast<int>(normalized.size());
  for (int i = 0; i < data->rank(); ++i) {
    const int from_right = data->rank() - 1 - i;
    const int64_t d = data->dim(i);
    if (from_right >= k) {
      if (d != 1) return nullptr;  // varies over a non-normalised dim: not a per-feature affine
    } else if (d != 1 && d != normalized[static_cast<size_t>(k - 1 - from_right)]) {
      return nullptr;
    }
  }
  return data;
}

/// `data` broadcast to exactly `shape` (which it is known to broadcast to), as FP32.
Tensor broadcast_to(const Tensor& data, const Shape& shape) {
  Tensor out = Tensor::zeros(DType::kFloat32, shape);
  const int rank = static_cast<int>(shape.size());
  std::vector<int64_t> strides(shape.size(), 0);
  int64_t stride = 1;
  for (int i = data.rank() - 1, j = rank - 1; i >= 0; --i, --j) {
    if (j >= 0 && data.dim(i) != 1) strides[static_cast<size_t>(j)] = stride;
    stride *= data.dim(i);
  }
  const float* src = data.data<float>();
  float* dst = out.data<float>();
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t flat = 0; flat < out.element_count(); ++flat) {
    int64_t offset = 0;
    for (size_t d = 0; d < shape.size(); ++d) offset += index[d] * strides[d];
    dst[flat] = src[offset];
    for (int d = rank - 1; d >= 0; --d) {
      if (++index[static_cast<size_t>(d)] < shape[static_cast<size_t>(d)]) break;
      index[static_cast<size_t>(d)] = 0;
    }
  }
  return out;
}

std::optional<Match> match(ir::Node* mean) {
  Match m;
  m.mean = mean;
  m.x = mean->input(0);
  if (m.x == nullptr || m.x->type().dtype != DType::kFloat32) return std::nullopt;
  const int rank = m.x->type().rank();
  auto axes = reduced_axes(*mean, rank);
  if (!axes) return std::nullopt;
  const int k = static_cast<int>(axes->size());
  for (int i = 0; i < k; ++i)
    if ((*axes)[static_cast<size_t>(i)] != rank - k + i) return std::nullopt;  // trailing dims only
  for (int i = rank - k; i < rank; ++i) {
    const ir::Dim& dim = (*m.x->type().shape)[static_cast<size_t>(i)];
    if (!dim.is_known()) return std::nullopt;
    m.normalized.push_back(dim.value);
  }
  m.axis = -k;

  // Sub(x, mean) = d, read by the square and the normaliser only.
  ir::Node* sub = canonicalize::sole_reader_of(mean->output(0), "Sub");
  if (!sub || sub->input(0) != m.x || sub->input(1) != mean->output(0)) return std::nullopt;
  ir::Value* d = sub->output(0);
  if (d->is_graph_output()) return std::nullopt;
  std::set<ir::Node*> readers;
  for (const ir::Use& use : d->uses()) readers.insert(use.node);
  if (readers.size() != 2) return std::nullopt;
  ir::Node* square = nullptr;
  ir::Node* normalizer = nullptr;
  for (ir::Node* reader : readers) {
    const bool mul_self = reader->is("Mul") && reader->inputs().size() == 2 && reader->input(0) == d && reader->input(1) == d;
    const bool pow_two = reader->is("Pow") && reader->input(0) == d && small_scalar(reader->input(1)) == 2.0;
    if (mul_self || pow_two) square = reader;
    else normalizer = reader;
  }
  if (!square || !normalizer || d->uses().size() != (square->is("Mul") ? 3u : 2u)) return std::nullopt;

  ir::Node* variance = canonicalize::sole_reader_of(square->output(0), "ReduceMean");
  if (!variance || reduced_axes(*variance, rank) != axes) return std::nullopt;
  ir::Node* add_eps = canonicalize::sole_reader_of(variance->output(0), "Add");
  if (!add_eps) return std::nullopt;
  auto eps = small_scalar(canonicalize::other_operand(add_eps, variance->output(0)));
  if (!eps || *eps < 0) return std::nullopt;
  m.epsilon = static_cast<float>(*eps);
  ir::Node* root_node = canonicalize::sole_reader_of(add_eps->output(0), "Sqrt");
  if (!root_node) return std::nullopt;
  m.nodes = {mean, sub, square, variance, add_eps, root_node};

  // d / sqrt(...) or d * Reciprocal(sqrt(...)).
  ir::Value* std_dev = root_node->output(0);
  if (normalizer->is("Div")) {
    if (normalizer->input(0) != d || normalizer->input(1) != std_dev || !canonicalize::has_exactly_uses(std_dev, 1))
      return std::nullopt;
  } else if (normalizer->is("Mul")) {
    ir::Node* reciprocal = canonicalize::sole_reader_of(std_dev, "Reciprocal");
    if (!reciprocal || canonicalize::other_operand(normalizer, d) != reciprocal->output(0) ||
        !canonicalize::has_exactly_uses(reciprocal->output(0), 1))
      return std::nullopt;
    m.nodes.push_back(reciprocal);
  } else {
    return std::nullopt;
  }
  m.nodes.push_back(normalizer);
  m.root = normalizer->output(0);

  // Optional affine tail: Mul(gamma) then Add(beta); a misfit stays outside.
  if (ir::Node* mul = canonicalize::sole_reader_of(m.root, "Mul")) {
    if ((m.gamma = affine_operand(canonicalize::other_operand(mul, m.root), m.normalized, rank))) {
      m.nodes.push_back(mul);
      m.root = mul->output(0);
    }
  }
  if (ir::Node* add = canonicalize::sole_reader_of(m.root, "Add")) {
    if ((m.beta = affine_operand(canonicalize::other_operand(add, m.root), m.normalized, rank))) {
      m.nodes.push_back(add);
      m.root = add->output(0);
    }
  }
  return m;
}

std::vector<Match> find_matches(const ir::Graph& graph) {
  std::vector<Match> matches;
  for (ir::Node* node : graph.nodes())
    if (node->is("ReduceMean"))
      if (auto m = match(node)) matches.push_back(std::move(*m));
  return matches;
}

/// The stored Scale/B: the constant reshaped (or expanded) to exactly the normalised dims.
ir::Value* affine_input(ir::Graph& graph, const Tensor* data, const Shape& normalized, const std::string& name,
                        float fill) {
  if (data == nullptr) {
    Tensor ones = Tensor::zeros(DType::kFloat32, normalized);
    for (float& v : ones.values<float>()) v = fill;
    return graph.add_initializer(name, ones);
  }
  if (data->element_count() == element_count(normalized)) return graph.add_initializer(name, data->reshaped(normalized));
  return graph.add_initializer(name, broadcast_to(*data, normalized));
}

class FuseDecomposedLayerNormPass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    std::vector<Match> matches = find_matches(graph);
    if (matches.empty()) return false;
    LOKA_ASSIGN_OR_RETURN(const FusionOpset opset, require_opset_for_fusion(graph, kLayerNormOpset, matches.size(), context));
    if (opset == FusionOpset::kNotUpgradable) return false;
    if (opset == FusionOpset::kRaised) matches = find_matches(graph);  // the upgrade may have rewritten nodes
    for (Match& m : matches) {
      const std::string name = m.mean->name();
      ir::Value* scale = affine_input(graph, m.gamma, m.normalized, name + "_scale", 1.0f);
      std::vector<ir::Value*> inputs = {m.x, scale};
      if (m.beta) inputs.push_back(affine_input(graph, m.beta, m.normalized, name + "_bias", 0.0f));
      Attributes attributes;
      attributes.set("axis", m.axis);
      attributes.set("epsilon", m.epsilon);
      LOKA_RETURN_IF_ERROR(canonicalize::replace_with_node(
                               graph, m.root, m.nodes,
                               canonicalize::NodeSpec{"LayerNormalization", std::move(inputs), std::move(attributes), name, ""})
                               .status());
      context.add_statistic("layernorms-fused");
    }
    return true;
  }
};

}  // namespace

PassInfo fuse_decomposed_layernorm_pass_info() {
  return PassInfo{"fuse-decomposed-layernorm",
                  "fuse ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div(/Mul/Add) into LayerNormalization (raises the "
                  "opset to 17)",
                  {},
                  {"layernorms-fused", "opset-raised-to-17", "nodes-converted-by-upgrade", "skipped-opset-not-upgradable"}};
}

std::unique_ptr<Pass> make_fuse_decomposed_layernorm_pass() { return std::make_unique<FuseDecomposedLayerNormPass>(); }

}  // namespace loka
