// ============================================================================
// kernels/registry/norm_kernel_key.cc — norm keys, candidate names, rules and
// the expansion.
// ============================================================================
#include "kernels/registry/norm_kernel_key.h"

#include <charconv>

namespace loka::kernels {
namespace {

constexpr const char* kLokaName = "loka.layernorm";
constexpr const char* kCudnnPrefix = "cudnn.layernorm.engine";

}  // namespace

std::string NormKey::to_string() const {
  std::string text = op + ":c=" + std::to_string(cols);
  std::string inputs;
  if (bias) inputs += "bias";
  if (residual) inputs += std::string(inputs.empty() ? "" : "+") + "residual";
  if (!inputs.empty()) text += ":" + inputs;
  return text + (fp8_output ? "->f8e4m3fn" : "->f32");
}

std::string NormShape::to_string() const { return "rows=" + std::to_string(rows); }

std::string NormCandidate::name() const {
  return library == NormLibrary::kLoka ? kLokaName : kCudnnPrefix + std::to_string(engine);
}

Result<NormCandidate> parse_norm_candidate(const std::string& name) {
  if (name == kLokaName) return NormCandidate{};
  const std::string prefix = kCudnnPrefix;
  if (name.rfind(prefix, 0) == 0 && name.size() > prefix.size()) {
    int engine = -1;
    const char* last = name.data() + name.size();
    const auto [end, error] = std::from_chars(name.data() + prefix.size(), last, engine);
    if (error == std::errc() && end == last && engine >= 0) return NormCandidate{NormLibrary::kCudnn, engine};
  }
  return Status::error("unknown norm kernel '" + name + "' (expected loka.layernorm or cudnn.layernorm.engineN)");
}

Status can_implement(const NormCandidate& candidate, const NormKey& key, const NormShape& shape) {
  if (key.op != "LayerNormalization" && key.op != "LayerNormQuant" && key.op != "ResidualLayerNorm")
    return Status::error("not a norm op: '" + key.op + "'");
  if (key.cols < 1) return Status::error("the normalized width must be >= 1, got " + std::to_string(key.cols));
  if (shape.rows < 0) return Status::error("rows must be >= 0, got " + std::to_string(shape.rows));
  if (key.fp8_output && key.residual)
    return Status::error("an FP8 output with a residual is no op's: LayerNormQuant takes no residual");
  if (candidate.library == NormLibrary::kCudnn && candidate.engine < 0)
    return Status::error("cuDNN engine index must be >= 0, got " + std::to_string(candidate.engine));
  if (candidate.library == NormLibrary::kCudnn && key.fp8_output)
    return Status::error("no cuDNN graph for an E4M3 output: it faulted on an H100 with cuDNN 9.14 "
                         "(kernels/cuda/cudnn_layer_norm.h)");
  return Status::ok();
}

std::vector<NormCandidate> norm_candidates(const NormKey& key, const NormShape& shape, int cudnn_engines) {
  std::vector<NormCandidate> out;
  const auto offer = [&](NormCandidate candidate) {
    if (can_implement(candidate, key, shape).is_ok()) out.push_back(candidate);
  };
  offer(NormCandidate{});
  for (int engine = 0; engine < cudnn_engines; ++engine) offer(NormCandidate{NormLibrary::kCudnn, engine});
  return out;
}

}  // namespace loka::kernels
