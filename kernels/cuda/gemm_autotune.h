// ============================================================================
// kernels/cuda/gemm_autotune.h — time and check every registry candidate of
// one GEMM problem on this GPU (what the Dispatch pass measures).
//
// For a key and shape: synthetic inputs (normal activations, weights scaled
// 1/√K, quantized as insert-scales does: per output channel, and the
// activation's static scale from its amax; a BF16 activation rounded to BF16,
// whose values the reference reads too); the FP32 cuBLASLt GEMM of the
// unquantized operands is the reference. Each candidate the registry offers
// (every heuristic algorithm cuBLASLt returns, FAST_ACCUM variants, TF32,
// BF16, emulation, explicit split-K and tile configurations, cuDNN graphs,
// LoKA's small-M FP8 kernel) is planned, run once for its relative L2 error
// against the reference, then captured in CUDA graphs (one per input set, as the runtime
// replays whole-model graphs) and timed with CUDA events: warm-up launches,
// then `repeats` timed launches rotating through enough input sets to exceed
// `rotate_bytes` (more than the 50 MB L2), the median kept. Candidates
// cuBLASLt cannot plan here are left out (not errors).
// ============================================================================
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/autotune_timing.h"
#include "kernels/registry/cublaslt_tiles.h"
#include "kernels/registry/gemm_kernel_key.h"
#include "kernels/registry/kernel_registry.h"
#include "loka/status.h"

namespace loka::cuda {

/// What measurements are valid for.
struct TuningDevice {
  std::string gpu;       ///< cudaDeviceProp::name of device 0
  std::string driver;    ///< cudaDriverGetVersion
  std::string cublaslt;  ///< cublasLtGetVersion, "+loka" kGemmKernelRevision (gemm_candidate.h), "+cudnn" its version
  std::string pci_bus_id;  ///< "dddd:bb:dd" of device 0: which physical GPU, whatever CUDA_VISIBLE_DEVICES says
};

/// Device 0's fingerprint; an error when no GPU is usable.
Result<TuningDevice> tuning_device();

struct AutotuneOptions {
  int max_algorithms = 8;  ///< heuristic algorithms per cuBLASLt family
  bool fast_accum = false;  ///< also time FP8 FAST_ACCUM variants (biased sums: see docs/dispatch.md)
  bool bf16 = true;        ///< also time BF16 candidates
  bool tf32 = true;        ///< also time TF32 candidates (FP32 keys)
  std::vector<int> split_k = {2, 4};  ///< explicit split-K configurations of each family's algorithm 0
  /// Explicit tile configurations of each family's algorithm 0: this many of the tiles
  /// kernels/registry/cublaslt_tiles.h ranks best for the shape (0: none).
  int tiles = kernels::kOfferedTilesPerFamily;
  /// cuDNN FP8 graph candidates: engine configurations 0..N-1 (0: none; none in a build without cuDNN).
  int cudnn_engines = kernels::kOfferedCudnnEngines;
  bool tanh_gelu = true;  ///< GELU keys: also time cuBLASLt's tanh GELU in the GEMM (its error is measured)
  bool small_m = true;    ///< QuantizedGemm keys of up to kSmallMMaxRows rows: also time LoKA's small-M kernel
  int warmup = 3;
  int repeats = 15;                       ///< timed launches; the median is kept
  int refine_rounds = 2;                  ///< further rounds of `repeats` for the close winners
  size_t rotate_bytes = size_t{96} << 20; ///< input sets rotated through at least this much memory
  uint64_t seed = 1;
  TimingHold hold_gpu_for_timing;         ///< held around each timing (autotune_timing.h)
};

struct GemmMeasurement {
  kernels::GemmCandidate candidate;
  double median_us = 0;
  double rel_error = 0;  ///< relative L2 of the output against the FP32 reference
  int samples = 0;
};

/// Measures every viable candidate of `key` at `shape`, in registry order.
Result<std::vector<GemmMeasurement>> autotune_gemm(const kernels::GemmKey& key, const kernels::GemmShape& shape,
                                                   const AutotuneOptions& options = {});

}  // namespace loka::cuda
