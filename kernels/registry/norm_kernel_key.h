// ============================================================================
// kernels/registry/norm_kernel_key.h — the functional key of a LayerNorm node
// and its kernel candidates (CPU-side, no CUDA needed).
//
// Dispatch chooses a kernel for the norms as for the GEMMs: LayerNormalization
// (dims [axis, rank) flattened into the normalized width), ai.loka
// LayerNormQuant (E4M3 codes out) and ai.loka ResidualLayerNorm (X + Residual
// normalized, the last axis) are keyed by what they compute —
// op, normalized width, bias, residual, output dtype — and every kernel that
// computes exactly that is a candidate with a stable name:
//
//   loka.layernorm             LoKA's kernel (kernels/cuda/layer_norm.h): two rows a warp in
//                              registers up to 128 columns, a warp per row up to 1024, a block beyond
//   cudnn.layernorm.engine0    a cuDNN graph (kernels/cuda/cudnn_layer_norm.h), engine configuration
//                              0 of cuDNN's heuristic (an index valid for one problem and device);
//                              FP32 outputs only
//
// A norm's candidates trade no precision: they differ in summation order
// only, so Dispatch takes the fastest whose error matches LoKA's kernel's.
// ============================================================================
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loka/status.h"

namespace loka::kernels {

/// What one norm node computes (the registry's functional key).
struct NormKey {
  std::string op;            ///< "LayerNormalization", "LayerNormQuant" or "ResidualLayerNorm"
  int64_t cols = 0;          ///< the normalized width (Scale and B hold exactly this many values)
  bool bias = false;         ///< a B input
  bool residual = false;     ///< X + Residual is normalized (ResidualLayerNorm)
  bool fp8_output = false;   ///< E4M3 codes of the values divided by the constant Y_scale (LayerNormQuant)

  /// "ResidualLayerNorm:c=128:bias+residual->f32" — stable, used in perf DB keys.
  std::string to_string() const;
  bool operator==(const NormKey&) const = default;
};

/// The problem size at one batch bucket: the rows normalized.
struct NormShape {
  int64_t rows = 0;
  std::string to_string() const;  ///< "rows=262144"
  bool operator==(const NormShape&) const = default;
};

enum class NormLibrary { kLoka, kCudnn };

/// One norm kernel candidate (a descriptor).
struct NormCandidate {
  NormLibrary library = NormLibrary::kLoka;
  int engine = 0;  ///< kCudnn: the heuristic's engine configuration index (0: its best estimate)

  std::string name() const;  ///< see the banner
  bool operator==(const NormCandidate&) const = default;
};

/// Parses a name written by NormCandidate::name(); errors quote it.
Result<NormCandidate> parse_norm_candidate(const std::string& name);

/// Static rules: a key LoKA's kernel computes (cols >= 1, rows >= 0; the FP8 output has no
/// residual), and for cuDNN an engine index >= 0 and an FP32 output. cuDNN may still refuse the
/// graph at run time.
Status can_implement(const NormCandidate& candidate, const NormKey& key, const NormShape& shape);

/// LoKA's kernel, then cuDNN engines 0..cudnn_engines-1, those passing can_implement.
std::vector<NormCandidate> norm_candidates(const NormKey& key, const NormShape& shape, int cudnn_engines);

/// How many cuDNN engine configurations Dispatch times per norm problem on the GPU. One: each
/// plan compiles kernels when built (tens to hundreds of ms, on the cold loka-opt's clock), and
/// engines 0 and 1 timed within 2% of each other at every zoo shape (H100, cuDNN 9.14).
inline constexpr int kOfferedCudnnNormEngines = 1;

}  // namespace loka::kernels
