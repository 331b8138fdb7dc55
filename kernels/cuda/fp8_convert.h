// ============================================================================
// kernels/cuda/fp8_convert.h — device-side FP32 (and BF16) <-> FP8 conversion launchers.
//
// The first CUDA kernels: quantize a float buffer to E4M3FN/E5M2 codes with a
// per-tensor scale (saturating, round to nearest even, as ONNX), and back.
// They are checked bit-exactly against the host codecs in loka/float8.h.
// ============================================================================
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "loka/dtype.h"

namespace loka::cuda {

enum class Fp8Kind { kE4M3FN, kE5M2 };

/// How x / scale is computed. kReciprocal multiplies by the host's 1 / scale (what the Probe's
/// measurements and the fused GEMM paths use; equal to the division for power-of-two scales, else
/// off by an ulp near a rounding boundary); kDivide is ONNX QuantizeLinear's FP32 division.
enum class ScaleDivision { kReciprocal, kDivide };

/// codes[i] = encode(values[i] / scale); `scale` is a host float.
cudaError_t launch_quantize_fp8(const float* values, uint8_t* codes, int64_t count, float scale, Fp8Kind kind,
                                cudaStream_t stream, ScaleDivision division = ScaleDivision::kReciprocal);
/// The same from values of `dtype`: FP32, or BF16 widened exactly (bits << 16) first, so a BF16
/// tensor's codes are its FP32 copy's (QuantizedGemm's BF16 X); cudaErrorInvalidValue for another dtype.
cudaError_t launch_quantize_fp8(const void* values, DType dtype, uint8_t* codes, int64_t count, float scale,
                                Fp8Kind kind, cudaStream_t stream, ScaleDivision division = ScaleDivision::kReciprocal);
/// codes[r · codes_pitch + c] = E4M3FN(values[r · cols + c] / scale), ONNX's division, for r < rows,
/// c < cols: a tensor's codes written into its slice of a wider one (ai.loka ConcatQuant).
cudaError_t launch_quantize_e4m3_rows_into(const float* values, int64_t rows, int64_t cols, float scale, uint8_t* codes,
                                          int64_t codes_pitch, cudaStream_t stream);
/// values[i] = decode(codes[i]) * scale.
cudaError_t launch_dequantize_fp8(const uint8_t* codes, float* values, int64_t count, float scale, Fp8Kind kind,
                                  cudaStream_t stream);

}  // namespace loka::cuda
