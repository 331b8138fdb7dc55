// ============================================================================
// kernels/cuda/quantize_rows.h — per-row dynamic FP8 E4M3 quantization, the
// "row" activation recipe of ai.loka QuantizedGemm on the GPU.
//
//   scale[r]    = amax_r / 448   (amax over the row's finite values; 1 when 0 or none)
//   codes[r, j] = E4M3(x[r, j] / scale[r])   (round to nearest even, saturating)
//
// The same formulas, in the same order, as the CPU reference
// (kernels/cpu/fp8_quantize.cc: fake_quantize_per_row), so the GPU and the
// Probe agree code for code. One warp per row for rows up to 256 wide, a
// block per row beyond; rows up to 8192 wide are read from memory once.
// Enqueue only: graph-capturable.
// ============================================================================
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "loka/dtype.h"
#include "loka/status.h"

namespace loka::cuda {

/// Quantizes row-major x [rows, k] (FP32 or BF16) into codes [rows, k] and row_scales [rows].
Status launch_quantize_rows(const void* x, DType dtype, int64_t rows, int64_t k, uint8_t* codes, float* row_scales,
                            cudaStream_t stream);

}  // namespace loka::cuda
