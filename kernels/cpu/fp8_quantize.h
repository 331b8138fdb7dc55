// ============================================================================
// kernels/cpu/fp8_quantize.h — FP8 quantize-dequantize emulation on the CPU.
//
// The Probe and the CPU runtime emulate FP8 GEMM inputs bit-exactly: each
// value is divided by its scale, encoded to FP8 (round to nearest even,
// saturating, as ONNX QuantizeLinear), decoded, and multiplied back. A GEMM
// on the emulated operands with FP32 accumulation is what an FP8 tensor-core
// GEMM computes. Scales follow the ONNX convention: x ≈ decode(code) * scale.
// ============================================================================
#pragma once

#include <cstdint>
#include <span>

namespace loka::cpu {

enum class Fp8Format { kE4M3FN, kE5M2 };

/// Largest finite magnitude of the format (448 or 57344).
float fp8_max(Fp8Format format);
/// Smallest normal magnitude of the format (2^-6 or 2^-14): below it codes keep fewer mantissa bits.
float fp8_smallest_normal(Fp8Format format);
/// Smallest subnormal magnitude of the format (2^-9 or 2^-16): half of it and less round to zero.
float fp8_smallest_subnormal(Fp8Format format);
/// The scale that maps `amax` onto the format's largest finite value (1 when amax is 0 or not finite).
float fp8_scale_for_amax(float amax, Fp8Format format);

/// In place: v = decode(encode(v / scale)) * scale, one scale for all.
void fake_quantize_per_tensor(std::span<float> values, float scale, Fp8Format format);
/// In place over a row-major [rows, cols] matrix, one dynamic scale per row from its own amax.
void fake_quantize_per_row(std::span<float> values, int64_t rows, int64_t cols, Fp8Format format);
/// In place over a row-major [rows, cols] matrix, one scale per column from its amax
/// (per-output-channel weights stored [K, N]).
void fake_quantize_per_column(std::span<float> values, int64_t rows, int64_t cols, Fp8Format format);

/// Largest finite |v| (NaN and infinities ignored).
float finite_amax(std::span<const float> values);

/// codes[i] = the E4M3FN code of values[i] / scale, rounded to nearest even and saturating (ONNX
/// QuantizeLinear): exactly float_to_fp8e4m3fn(values[i] / scale), at a few instructions an
/// element (e4m3_encode.h), for the compile-time quantization of whole embedding tables.
void quantize_e4m3fn(std::span<const float> values, float scale, uint8_t* codes);

}  // namespace loka::cpu
