// ============================================================================
// kernels/registry/cost_model.cc — the roofline terms per kernel.
// ============================================================================
#include "kernels/registry/cost_model.h"

#include <algorithm>
#include <cmath>

namespace loka::kernels {
namespace {

/// One memory-bound elementwise kernel moving `bytes`.
double memory_kernel_us(double bytes, const HopperFigures& f) {
  return f.kernel_fixed_us + bytes / f.bytes_per_second * 1e6;
}

/// The GEMM kernel: the largest of the throughput bound, the wave bound (one
/// tile per SM per wave, each tile at one SM's share of the peak) and the
/// memory bound. Each term is non-decreasing in M, N and K, so is the sum.
double gemm_kernel_us(double tflops, int tile, double bytes, const GemmShape& s, const HopperFigures& f) {
  const double k = static_cast<double>(s.k);
  const double flops = 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * k * static_cast<double>(s.batch);
  const double peak = tflops * 1e12;
  const double tiles = std::ceil(static_cast<double>(s.m) / tile) * std::ceil(static_cast<double>(s.n) / tile) *
                       static_cast<double>(s.batch);
  const double waves = std::ceil(tiles / f.sm_count);
  const double tile_us = 2.0 * tile * tile * k / (peak / f.sm_count) * 1e6;
  const double compute = std::max(flops / peak * 1e6, waves * tile_us);
  const double memory = bytes / f.bytes_per_second * 1e6;
  return f.kernel_fixed_us + std::max(compute, memory);
}

/// LoKA's small-M kernel (kernels/cuda/small_m_gemm.h): one launch at the SIMT FP32 rate whose
/// CTAs (small_m_tiling.h: 32 columns x small_m_rows_per_cta(M) rows) run in waves of one per
/// SM, each at one SM's share of that rate; its memory is W's codes once, X (or its codes), the
/// per-column scales and bias, Y and the residual. It quantizes X itself and applies the scales,
/// bias, activation and residual to its sums: nothing else is launched. Non-decreasing in M
/// (where the rows per CTA double, the CTAs at most halve), N and K.
double small_m_kernel_us(const GemmKey& key, const GemmShape& s, const HopperFigures& f) {
  const double m = static_cast<double>(s.rows()), n = static_cast<double>(s.n), k = static_cast<double>(s.k);
  const double rows_per_cta = cuda::small_m_rows_per_cta(s.rows());
  const double ctas = std::ceil(n / cuda::kSmallMColumnsPerCta) * std::ceil(m / rows_per_cta);
  const double peak = f.fp32_tflops * 1e12;
  const double cta_us = 2.0 * rows_per_cta * cuda::kSmallMColumnsPerCta * k / (peak / f.sm_count) * 1e6;
  const double compute = std::max(2.0 * m * n * k / peak * 1e6, std::ceil(ctas / f.sm_count) * cta_us);
  const double in_bytes = key.input == DType::kFloat8E4M3FN ? 1.0 : 4.0;
  const double bytes = n * k + 8 * n + in_bytes * m * k + 4 * m * n * (key.residual ? 2 : 1);
  return f.kernel_fixed_us + std::max(compute, bytes / f.bytes_per_second * 1e6);
}

}  // namespace

ModelledTime model_gemm_time(const GemmCandidate& c, const GemmKey& key, const GemmShape& s, const HopperFigures& f) {
  const double m = static_cast<double>(s.m) * static_cast<double>(s.batch);  // rows over the whole batch
  const double n = static_cast<double>(s.n), k = static_cast<double>(s.k);
  const double w_batch = is_batched(key.layout) ? static_cast<double>(s.batch) : 1.0;
  const bool bf16_input = key.input == DType::kBFloat16;  // BF16 activation storage (FusedGemm's X)
  const double in_bytes = key.input == DType::kFloat8E4M3FN ? 1.0 : bf16_input ? 2.0 : 4.0;
  const double y_bytes = key.output == DType::kBFloat16 ? 2.0 : 4.0;  // a QuantizedGemm's Y held in BF16
  ModelledTime t;
  if (c.library == GemmLibrary::kLoka) {  // the small-M kernel: one launch, the residual included
    t.gemm_us = t.total_us = small_m_kernel_us(key, s, f);
    t.kernels = 1;
    return t;
  }
  switch (c.precision) {
    case GemmPrecision::kFp32:
    case GemmPrecision::kTf32: {
      // TF32: the FP32 GEMM's bytes on the tensor cores, no cast of its own. A BF16 activation is
      // widened first (read 2 bytes, write 4): the GEMM reads FP32 either way.
      const bool tf32 = c.precision == GemmPrecision::kTf32;
      t.gemm_us = gemm_kernel_us(tf32 ? f.tf32_tflops : f.fp32_tflops, tf32 ? f.tile : f.fp32_tile,
                                 4 * (m * k + w_batch * n * k + m * n), s, f);
      t.kernels = 1;
      if (bf16_input) {
        t.extra_us = memory_kernel_us(6 * m * k, f);
        ++t.kernels;
      }
      break;
    }
    case GemmPrecision::kBf16:
      // Cast the activation (read FP32, write BF16) unless it is stored in BF16 already — and a
      // computed W the same way (constant weights are converted when planned) — then
      // BF16 x BF16 -> FP32 with bias fused.
      t.kernels = 1;
      if (!bf16_input) {
        t.extra_us = memory_kernel_us(6 * m * k, f);
        ++t.kernels;
      }
      if (!key.constant_weight) {
        t.extra_us += memory_kernel_us(6 * w_batch * n * k, f);
        ++t.kernels;
      }
      t.gemm_us = gemm_kernel_us(f.bf16_tflops, f.tile, 2 * m * k + 2 * w_batch * n * k + 4 * m * n, s, f);
      break;
    case GemmPrecision::kBf16x2:
      // Two BF16 GEMMs on the stored X (constant weights split when planned): the first writes
      // its FP32 sums, the second reads them back as C, adds its own and the bias and activation.
      t.kernels = 2;
      t.gemm_us = gemm_kernel_us(f.bf16_tflops, f.tile, 2 * m * k + 2 * w_batch * n * k + 4 * m * n, s, f) +
                  gemm_kernel_us(f.bf16_tflops, f.tile, 2 * m * k + 2 * w_batch * n * k + 8 * m * n, s, f);
      break;
    case GemmPrecision::kFp8E4M3: {
      t.kernels = 1;
      // A separate quantize unless the producer already wrote FP8 (LayerNormQuant).
      if (key.input != DType::kFloat8E4M3FN) {
        const double row_scales = c.granularity == ScaleGranularity::kRow ? 4 * m : 0;
        t.extra_us += memory_kernel_us(in_bytes * m * k + m * k + row_scales, f);
        ++t.kernels;
      }
      // The E4M3 GEMM applies scales, bias and ReLU and writes Y (FP32, or BF16 for a Y held in
      // BF16); exact GELU (cuBLASLt's is tanh) takes unit scales into an FP32 accumulator and
      // LoKA's scale epilogue after it (read it, write Y).
      const bool exact_gelu = key.epilogue == cuda::GemmEpilogue::kGelu && !c.tanh_gelu;
      t.gemm_us = gemm_kernel_us(f.fp8_tflops, f.tile, m * k + n * k + (exact_gelu ? 4.0 : y_bytes) * m * n, s, f);
      if (exact_gelu) {
        t.extra_us += memory_kernel_us((4 + y_bytes) * m * n + 8 * n, f);
        ++t.kernels;
      }
      break;
    }
    case GemmPrecision::kFp8Emulated:
      // Quantize + dequantize the activation, then an FP32 GEMM on decoded weights.
      t.extra_us = memory_kernel_us(in_bytes * m * k + m * k, f) + memory_kernel_us(5 * m * k, f);
      t.gemm_us = gemm_kernel_us(f.fp32_tflops, f.fp32_tile, 4 * (m * k + n * k + m * n), s, f);
      t.kernels = 3;
      break;
  }
  // A residual (in Y's dtype): read by the GEMM as cuBLASLt's C (or by the scale epilogue) when
  // no activation comes between; after one, an elementwise add of its own (read Y and R, write Y).
  if (key.residual) {
    const bool scale_epilogue =
        c.precision == GemmPrecision::kFp8E4M3 && key.epilogue == cuda::GemmEpilogue::kGelu && !c.tanh_gelu;
    const bool own_pass = key.epilogue != cuda::GemmEpilogue::kNone && !scale_epilogue;
    if (own_pass) {
      t.extra_us += memory_kernel_us(3 * y_bytes * m * n, f);
      ++t.kernels;
    } else {
      t.extra_us += y_bytes * m * n / f.bytes_per_second * 1e6;
    }
  }
  t.total_us = t.gemm_us + t.extra_us;
  return t;
}

double model_norm_time_us(const NormKey& key, const NormShape& shape, const HopperFigures& figures) {
  const double values = static_cast<double>(shape.rows) * static_cast<double>(key.cols);
  const double per_value = 4.0 + (key.residual ? 4.0 : 0.0) + (key.fp8_output ? 1.0 : 4.0);
  const double parameters = static_cast<double>(key.cols) * (key.bias ? 8.0 : 4.0);
  return memory_kernel_us(values * per_value + parameters, figures);
}

}  // namespace loka::kernels
