// ============================================================================
// kernels/cpu/e4m3_encode.h — a few-instruction FLOAT8E4M3FN encoder for the
// CPU, bit-identical to loka/float8.h's float_to_fp8e4m3fn (saturating), and
// the decoded value of each of the 256 codes as a table.
//
// Why: insert-scales encodes every element of the embedding tables it turns
// into FP8 (325 M values for full-size DLRM-DCNv2). The portable codec in
// loka/float8.h is written for clarity and for CUDA device code: frexpf and
// ldexpf per value, about 20 ns each on the CPU, which made insert-scales the
// largest pass of a warm loka-opt. Here the normal range rounds on the float's
// bits (add half a unit of the 4th mantissa bit, ties to even, and let a
// carry move the exponent), and the subnormal range, multiples of 2^-9, is
// one exact multiply and rint.
// Same semantics as ONNX QuantizeLinear to E4M3FN with saturate=1: round to
// nearest even; |v| >= 448 and infinities become +-448 (0x7E/0xFE); NaN keeps
// its sign (0x7F/0xFF); zeros keep theirs. Saturating only: the non-saturating
// mode stays in loka/float8.h.
// The same goes for decoding (ldexpf per value): a FP8 quantize-dequantize
// round trip through the portable codec was three quarters of the Probe's
// and pin-precision's CPU time (perf, dlrm_dcnv2, 2026-12-07).
// ============================================================================
#pragma once

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>

#include "loka/float8.h"

namespace loka::cpu {

/// The E4M3FN code of `value`, exactly float_to_fp8e4m3fn(value) (saturate=true).
inline uint8_t e4m3fn_code(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const auto sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return sign | 0x7F;  // NaN
  if (magnitude >= 0x43E00000u) return sign | 0x7E;  // 448 and up, infinity: the largest finite
  if (magnitude >= 0x3C800000u) {                   // 2^-6 and up: normal
    // Keep 3 of the 23 mantissa bits, rounding to nearest even; a carry into the exponent is
    // the next binade's code. Below 448 the result is at most 448 (0x7E).
    const uint32_t rounded = magnitude + 0x7FFFFu + ((magnitude >> 20) & 1u);
    // Float exponent (bias 127) to E4M3 exponent (bias 7): 120 binades down.
    return sign | static_cast<uint8_t>((rounded >> 20) - (120u << 3));
  }
  // Below 2^-6 the codes are multiples of 2^-9 (8 of them is 2^-6, code 0x08). Scaling by a
  // power of two is exact; rint rounds ties to even in the default rounding mode.
  return sign | static_cast<uint8_t>(std::rint(std::bit_cast<float>(magnitude) * 512.0f));
}

/// The value of each E4M3FN code, exactly fp8e4m3fn_to_float (NaN codes decode to NaN).
/// Take the reference once outside a loop: each call checks the table's one-time initialization.
inline const std::array<float, 256>& e4m3fn_values() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> values{};
    for (int code = 0; code < 256; ++code)
      values[static_cast<size_t>(code)] = fp8e4m3fn_to_float(static_cast<uint8_t>(code));
    return values;
  }();
  return table;
}

}  // namespace loka::cpu
