// ============================================================================
// kernels/registry/cost_model.h — a deterministic roofline model of a GEMM
// candidate's time on a Hopper GPU, for Dispatch without a GPU.
//
// time = Σ over the kernels the candidate launches of
//          fixed overhead + max(FLOPs / peak, waves · tile time, bytes / bandwidth)
// where a wave is one output tile per SM and a tile's time is its FLOPs at one
// SM's share of the peak: small GEMMs cannot use the whole GPU.
// The kernels are what the runtime actually enqueues (kernels/cuda/gemm_candidate.h):
// a separate activation quantize (FP8 from FP32 activations) and the GEMM,
// which applies the FP8 scales itself (plus LoKA's scale epilogue pass when
// the activation is the exact GELU); the BF16 path casts activations first (and
// a computed W: activation x activation); TF32 is the FP32 GEMM alone; a BF16
// activation (BF16 storage) is read as it is by the BF16 path and widened by
// a kernel of its own before an FP32 or TF32 GEMM; LoKA's
// small-M kernel is one launch (quantize, SIMT FP32 sums of E4M3 products,
// epilogue) whose CTAs run in waves at one SM's share of the FP32 rate.
// Figures (HopperFigures) come from ARCHITECTURE.md's measurements where there
// is one; docs/dispatch.md lists them with their sources and the derivation.
// The model ranks candidates; it does not predict absolute times closely.
// ============================================================================
#pragma once

#include "kernels/registry/gemm_kernel_key.h"
#include "kernels/registry/norm_kernel_key.h"

namespace loka::kernels {

/// Hardware figures of the model (defaults: H200/H100 SXM, see docs/dispatch.md).
struct HopperFigures {
  double fp32_tflops = 50.0;     ///< FP32 without TF32 (datasheet 67, sustained ~75%)
  double tf32_tflops = 400.0;    ///< TF32 dense: half the BF16 figure, as on the datasheet (assumed, not measured)
  double bf16_tflops = 800.0;    ///< measured, bf16 GEMM 8192³
  double fp8_tflops = 1461.0;    ///< measured, fp8 GEMM 8192³
  double bytes_per_second = 4.2e12;  ///< measured device copy (read + write bytes)
  double kernel_fixed_us = 3.0;  ///< per kernel inside a CUDA graph: launch, ramp-up, tail
  int sm_count = 132;            ///< output tiles fill waves of this many SMs
  int tile = 128;                ///< output tile edge of the tensor-core GEMM kernels (M and N)
  int fp32_tile = 64;            ///< output tile edge of the FP32 (SIMT) GEMM kernels
};

/// The modelled time of one candidate, with the parts it adds up.
struct ModelledTime {
  double total_us = 0;
  double gemm_us = 0;       ///< the GEMM kernel alone
  double extra_us = 0;      ///< quantize / cast / epilogue kernels
  int kernels = 0;          ///< kernels launched
};

/// Models `candidate` computing `key` at `shape`. Deterministic, monotonic in M, N and K.
ModelledTime model_gemm_time(const GemmCandidate& candidate, const GemmKey& key, const GemmShape& shape,
                             const HopperFigures& figures = {});

/// Models a norm candidate: one memory-bound kernel reading X (and the residual), writing Y
/// (4 bytes a value, 1 as E4M3 codes), plus Scale and B. The cost model offers LoKA's kernel only
/// (cuDNN's engines are measured, never modelled), so this prices the plan's annotation.
double model_norm_time_us(const NormKey& key, const NormShape& shape, const HopperFigures& figures = {});

}  // namespace loka::kernels
