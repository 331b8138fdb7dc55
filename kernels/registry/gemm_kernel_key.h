// ============================================================================
// kernels/registry/gemm_kernel_key.h — the functional key of a GEMM node and
// the descriptor of one kernel candidate for it (CPU-side, no CUDA needed).
//
// As CUTLASS's library keys its operations, a GEMM is described by what it
// computes — op, input/weight/output dtypes, scale granularity, layout and
// epilogue — and every kernel that computes exactly that is a candidate. A
// candidate has a stable name that the Dispatch pass writes into the model
// and the runtime parses back:
//
//   cublaslt.fp32.algo0                      FP32 cuBLASLt, heuristic algorithm 0
//   cublaslt.tf32.algo1                      FP32 operands on the TF32 tensor cores
//   cublaslt.bf16.algo2                      BF16 operands, FP32 accumulation
//   cublaslt.bf16x2.algo0                    a BF16 X times W split in two BF16 terms (W_hi + W_lo):
//                                            two BF16 GEMMs, FP32-class accuracy, no widening of X
//   cublaslt.fp8.e4m3.tensor.algo3           E4M3, per-tensor activation scale
//   cublaslt.fp8.e4m3.row.fast_accum.algo1   E4M3, per-row scale, FAST_ACCUM
//   cublaslt.bf16.tanh_gelu.algo0            a GELU node's GELU as cuBLASLt's tanh epilogue
//   cublaslt.bf16.algo0.splitk4              algorithm 0 configured explicitly: split-K 4
//   cublaslt.fp8.e4m3.row.algo0.tile20       ... or another tile (a cublasLtMatmulTile_t value,
//   cublaslt.tf32.algo0.tile20.stages8       20 = 128x128), with its stages (cublasLtMatmulStages_t)
//   cudnn.fp8.e4m3.tensor.engine0            E4M3 as a cuDNN graph, heuristic engine configuration 0
//   loka.fp8_emulated_fp32                   FP8 rounding, FP32 arithmetic (any K)
//   loka.fp8.e4m3.row.small_m                LoKA's own kernel: quantize + E4M3 GEMM in one launch,
//                                            up to kSmallMMaxRows rows, any K and N
//
// Algorithm (and cuDNN engine) indices are positions in the library's
// heuristic list for the same problem, GPU and library version: meaningful
// only with the device fingerprint the plan records (passes/dispatch/perf_db.h).
// ============================================================================
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kernels/cuda/gemm_types.h"
#include "kernels/cuda/small_m_tiling.h"
#include "loka/dtype.h"
#include "loka/status.h"

namespace loka::kernels {

/// How the arithmetic of a candidate is done. kTf32: FP32 operands and sums, products of
/// operands rounded to TF32's 10-bit mantissa (CUBLAS_COMPUTE_32F_FAST_TF32). kBf16x2: a BF16
/// activation (exact in BF16) times constant FP32 weights split as W_hi = bf16(W) and W_lo =
/// bf16(W − W_hi), two BF16 GEMMs summed in FP32: W is carried to 2^-17 of itself (about 16
/// significant bits), finer than TF32's 2^-11, at the BF16 tensor-core rate and without the FP32
/// copy of X that the FP32 and TF32 families need for a BF16 X.
enum class GemmPrecision { kFp32, kTf32, kBf16, kFp8E4M3, kFp8Emulated, kBf16x2 };

/// Which library runs a candidate's GEMM. LoKA's FP8 emulation (a cuBLASLt FP32 GEMM on
/// de-quantized operands) is told apart by its precision, not here. kLoka: LoKA's own CUDA
/// kernel, FP8 E4M3 for few rows (kernels/cuda/small_m_gemm.h), one configuration.
enum class GemmLibrary { kCublasLt, kCudnn, kLoka };

/// Granularity of the activation scale of an FP8 GEMM (weights are always per output channel).
enum class ScaleGranularity { kNone, kTensor, kRow };

/// Operand layout: W stored [N,K] ("nt", QuantizedGemm and Gemm transB=1), [K,N] ("nn"),
/// or a strided batch of [M,K]x[K,N] ("batched", MatMul of two activations) or of [M,K]x[N,K]ᵀ
/// ("batched_nt", a batched FusedGemm with transB=1: fold-transposes' X·Yᵀ).
enum class GemmLayout { kNT, kNN, kBatched, kBatchedNT };

/// The layout of a GEMM whose W is one matrix (or, `batched`, one per batch), stored [N,K] when
/// `w_transposed`.
constexpr GemmLayout gemm_layout(bool batched, bool w_transposed) {
  return batched ? (w_transposed ? GemmLayout::kBatchedNT : GemmLayout::kBatched)
                 : (w_transposed ? GemmLayout::kNT : GemmLayout::kNN);
}

/// W holds one matrix per batch (a strided batch of activation × activation products).
constexpr bool is_batched(GemmLayout layout) { return layout == GemmLayout::kBatched || layout == GemmLayout::kBatchedNT; }
/// W's matrices are stored [N,K], read transposed.
constexpr bool stores_w_transposed(GemmLayout layout) {
  return layout == GemmLayout::kNT || layout == GemmLayout::kBatchedNT;
}

/// What one GEMM node computes (the registry's functional key).
struct GemmKey {
  std::string op;                          ///< "Gemm", "MatMul", "FusedGemm" or "QuantizedGemm"
  /// Activation dtype as stored: FP32, E4M3 from LayerNormQuant, or BF16 (BF16 activation storage:
  /// FusedGemm's X, whose op is FP32 on the widened values, run by the FP32, TF32, BF16 and
  /// split-weight BF16 candidates; QuantizedGemm's X, quantized from it by cuBLASLt's FP8 family).
  DType input = DType::kFloat32;
  DType weight = DType::kFloat32;          ///< FP32, or E4M3 codes for QuantizedGemm
  /// Y's dtype: FP32, or BF16 for a QuantizedGemm holding Y in BF16 (output_dtype 16; cuBLASLt's
  /// FP8 family writes it, as D or through its scale epilogue); a residual is in Y's dtype.
  DType output = DType::kFloat32;
  ScaleGranularity activation_scale = ScaleGranularity::kNone;
  GemmLayout layout = GemmLayout::kNT;
  bool constant_weight = true;             ///< W is a constant (converted once when planned; else cast per run)
  bool bias = false;
  cuda::GemmEpilogue epilogue = cuda::GemmEpilogue::kNone;
  bool residual = false;                   ///< a full-size addend after the activation (Y + R)

  /// "QuantizedGemm:f8e4m3fn*f8e4m3fn->f32:tensor:nt:bias+relu" ("nn~act" when W is computed,
  /// "+residual" appended with a residual) — stable, used in perf DB keys.
  std::string to_string() const;
  bool operator==(const GemmKey&) const = default;
};

/// The problem size at one batch bucket.
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;  ///< strided batch count (activation MatMuls)
  std::string to_string() const;  ///< "m=4096,n=256,k=512[,batch=8]"
  /// Output rows over every batch (M × batch): what grows with the model's batch size, so
  /// what a kernel plan tells buckets apart by (a batched MatMul's M stays the same).
  int64_t rows() const { return m * batch; }
  bool operator==(const GemmShape&) const = default;
};

/// One kernel candidate (a descriptor: what to run, not the running object).
struct GemmCandidate {
  GemmPrecision precision = GemmPrecision::kFp32;
  ScaleGranularity granularity = ScaleGranularity::kNone;  ///< FP8: the activation scale
  int algorithm = 0;        ///< cuBLASLt heuristic index, or cuDNN engine configuration index (0: the heuristic's best)
  bool fast_accum = false;  ///< FP8: CUBLASLT_MATMUL_DESC_FAST_ACCUM
  /// An explicit configuration of the heuristic's algorithm: CUBLASLT_ALGO_CONFIG_SPLITK_NUM
  /// forced to this (0: the heuristic's own). Small-M recommendation GEMMs leave most SMs idle
  /// with one output tile per SM; splitting K fills them.
  int split_k = 0;
  /// An explicit configuration of the heuristic's algorithm: CUBLASLT_ALGO_CONFIG_TILE_ID forced
  /// to this cublasLtMatmulTile_t value (0: the heuristic's own; kernels/registry/cublaslt_tiles.h
  /// says which are offered). Not combined with split_k.
  int tile = 0;
  /// With a tile: CUBLASLT_ALGO_CONFIG_STAGES_ID forced to this cublasLtMatmulStages_t value
  /// (0: the heuristic's stages if cuBLASLt accepts them with the tile, else the first of the
  /// algorithm's stage ids it accepts).
  int stages = 0;
  /// kCudnn: the FP8 GEMM as a cuDNN graph (kernels/cuda/cudnn_fp8_gemm.h), `algorithm` indexing
  /// cuDNN's heuristic engine configurations; FP8 with a per-tensor activation scale only.
  /// kLoka: LoKA's small-M FP8 kernel (precision kFp8E4M3, the node's own arithmetic), algorithm 0.
  GemmLibrary library = GemmLibrary::kCublasLt;
  /// A GELU node's activation as cuBLASLt's epilogue, the tanh approximation (GemmOptions::tanh_gelu),
  /// instead of the exact GELU pass after the GEMM: one less pass over the output, a measured error.
  bool tanh_gelu = false;

  /// The stable name (see the file banner).
  std::string name() const;
  /// The same candidate with algorithm (engine) 0 as the heuristic configures it: what to run
  /// when an index or configuration is not valid here. Same library.
  GemmCandidate family_default() const;
  bool operator==(const GemmCandidate&) const = default;
};

/// Parses a name written by GemmCandidate::name(); errors quote it.
Result<GemmCandidate> parse_gemm_candidate(const std::string& name);

/// Whether `candidate` can compute `key` at `shape` (static constraints only:
/// cuBLASLt may still find no algorithm at run time). Errors say why not.
Status can_implement(const GemmCandidate& candidate, const GemmKey& key, const GemmShape& shape);

const char* precision_name(GemmPrecision precision);
const char* granularity_name(ScaleGranularity granularity);

}  // namespace loka::kernels
