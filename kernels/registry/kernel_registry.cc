// ============================================================================
// kernels/registry/kernel_registry.cc — the GEMM families and their expansion.
// ============================================================================
#include "kernels/registry/kernel_registry.h"

#include <array>

#include "kernels/registry/cublaslt_tiles.h"

namespace loka::kernels {
namespace {

/// Where a family's candidates come from: cuBLASLt (heuristic algorithms, explicit
/// configurations), cuDNN (heuristic engine configurations) or LoKA (one each: the emulation,
/// the small-M kernel).
enum class Source { kCublasLt, kCudnn, kLoka };

/// One family: a precision, its source, whether it is the fast-accumulation FP8 variant, and
/// the library its candidates name (the emulation's GEMM is cuBLASLt's FP32 one).
struct Family {
  GemmPrecision precision;
  Source source;
  bool fast_accum;
  GemmLibrary library = GemmLibrary::kCublasLt;
};

// Fixed order: the nodes' own arithmetic first (FP32, or FP8 for QuantizedGemm), then by
// growing error (TF32 before BF16), so ties in time go to the more accurate family. Families
// added later come last, so plans measured before them keep their order: cuDNN, then LoKA's
// small-M kernel, then the split-weight BF16 GEMMs of a BF16 activation.
constexpr std::array<Family, 9> kFamilies = {{
    {GemmPrecision::kFp32, Source::kCublasLt, false},
    {GemmPrecision::kFp8E4M3, Source::kCublasLt, false},
    {GemmPrecision::kTf32, Source::kCublasLt, false},
    {GemmPrecision::kBf16, Source::kCublasLt, false},
    {GemmPrecision::kFp8E4M3, Source::kCublasLt, true},
    {GemmPrecision::kFp8Emulated, Source::kLoka, false},
    {GemmPrecision::kFp8E4M3, Source::kCudnn, false, GemmLibrary::kCudnn},
    {GemmPrecision::kFp8E4M3, Source::kLoka, false, GemmLibrary::kLoka},
    {GemmPrecision::kBf16x2, Source::kCublasLt, false},
}};

}  // namespace

std::vector<GemmCandidate> gemm_candidates(const GemmKey& key, const GemmShape& shape, const CandidateOptions& options) {
  std::vector<GemmCandidate> out;
  const ScaleGranularity granularity =
      key.input == DType::kFloat8E4M3FN ? ScaleGranularity::kTensor : key.activation_scale;
  for (const Family& family : kFamilies) {
    if (family.fast_accum && !options.fast_accum) continue;
    if (family.precision == GemmPrecision::kBf16 && !options.bf16) continue;
    if (family.precision == GemmPrecision::kTf32 && !options.tf32) continue;
    if (family.library == GemmLibrary::kLoka && !options.small_m) continue;
    // Heuristic algorithm `algorithm`, or algorithm 0 with an explicit split-K or tile; with
    // `tanh_gelu`, cuBLASLt's tanh GELU in the GEMM.
    const auto offer = [&](int algorithm, int split_k, int tile, bool tanh_gelu = false) {
      GemmCandidate c;
      c.tanh_gelu = tanh_gelu;
      c.precision = family.precision;
      c.fast_accum = family.fast_accum;
      c.algorithm = algorithm;
      c.split_k = split_k;
      c.tile = tile;
      c.library = family.library;
      c.granularity = family.precision == GemmPrecision::kFp8E4M3 ? granularity : ScaleGranularity::kNone;
      if (can_implement(c, key, shape).is_ok()) out.push_back(c);
    };
    const int algorithms = options.algorithms < 1 ? 1 : options.algorithms;
    const int count = family.source == Source::kCublasLt ? algorithms
                      : family.source == Source::kCudnn  ? options.cudnn_engines
                                                         : 1;
    for (int algorithm = 0; algorithm < count; ++algorithm) offer(algorithm, 0, 0);
    if (family.source != Source::kCublasLt) continue;
    if (options.tanh_gelu && key.epilogue == cuda::GemmEpilogue::kGelu)
      for (int algorithm = 0; algorithm < count; ++algorithm) offer(algorithm, 0, 0, true);
    for (int split_k : options.split_k) offer(0, split_k, 0);
    for (int tile : offered_tiles(shape, options.tiles)) offer(0, 0, tile);
  }
  return out;
}

bool has_gemm_candidate(const GemmKey& key, const GemmShape& shape) {
  CandidateOptions exact;  // the node's own arithmetic: no tanh GELU standing in for its exact one
  exact.fast_accum = true;
  return !gemm_candidates(key, shape, exact).empty();
}

GemmPrecision reference_precision(const GemmKey& key) {
  return key.weight == DType::kFloat8E4M3FN ? GemmPrecision::kFp8E4M3 : GemmPrecision::kFp32;
}

}  // namespace loka::kernels
