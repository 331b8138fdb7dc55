// ============================================================================
// passes/probe/drawn_labels.cc — labels drawn from the FP32 model (see header).
// ============================================================================
#include "passes/probe/drawn_labels.h"

#include "passes/probe/metrics.h"

namespace loka::probe {

bool first_output_is_probability(const ir::Graph& graph) {
  if (graph.outputs().empty()) return false;
  const ir::Value* output = graph.outputs()[0];
  const ir::Node* producer = output->producer();
  if (producer == nullptr || !producer->is("Sigmoid")) return false;
  const ir::TensorType& type = output->type();
  if (!type.has_rank() || type.rank() < 1) return false;
  for (size_t d = 1; d < type.shape->size(); ++d) {
    const ir::Dim& dim = (*type.shape)[d];
    if (!dim.is_known() || dim.value != 1) return false;
  }
  return true;
}

uint64_t drawn_label_seed(size_t index) { return 0x4C6F4B61ull * 1000003ull + index; }

std::vector<float> draw_labels(const Tensor& probabilities, uint64_t seed) {
  const std::vector<float> values = probabilities.to_floats();
  const bool logits = holds_logits(values);
  // SplitMix64: a fixed sequence for a seed (std::uniform_real_distribution is not portable).
  uint64_t state = seed;
  const auto next_uniform = [&state] {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-53;
  };
  std::vector<float> labels(values.size());
  for (size_t i = 0; i < values.size(); ++i) labels[i] = next_uniform() < probability(values[i], logits) ? 1.0f : 0.0f;
  return labels;
}

}  // namespace loka::probe
