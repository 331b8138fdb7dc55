// ============================================================================
// kernels/cpu/fp8_quantize.cc — FP8 quantize-dequantize emulation.
// ============================================================================
#include "kernels/cpu/fp8_quantize.h"

#include <array>
#include <cmath>
#include <vector>

#include "kernels/cpu/e4m3_encode.h"
#include "loka/float8.h"

namespace loka::cpu {
namespace {

/// decode(encode(value)) in one format. E4M3FN, the Probe's and the runtime's hot path, takes the
/// fast encoder and the decode table (bit-identical to loka/float8.h, tests/kernels/e4m3_encode_test.cc);
/// E5M2 the portable codec.
class RoundTrip {
 public:
  explicit RoundTrip(Fp8Format format) : format_(format), e4m3_values_(e4m3fn_values()) {}
  float operator()(float value) const {
    return format_ == Fp8Format::kE4M3FN ? e4m3_values_[e4m3fn_code(value)] : fp8e5m2_to_float(float_to_fp8e5m2(value));
  }

 private:
  Fp8Format format_;
  const std::array<float, 256>& e4m3_values_;
};

}  // namespace

float fp8_max(Fp8Format format) { return format == Fp8Format::kE4M3FN ? 448.0f : 57344.0f; }

float fp8_smallest_normal(Fp8Format format) {
  return std::ldexp(1.0f, format == Fp8Format::kE4M3FN ? E4M3FN::min_exponent : E5M2::min_exponent);
}

float fp8_smallest_subnormal(Fp8Format format) {
  return std::ldexp(fp8_smallest_normal(format),
                    -(format == Fp8Format::kE4M3FN ? E4M3FN::mantissa_bits : E5M2::mantissa_bits));
}

float fp8_scale_for_amax(float amax, Fp8Format format) {
  if (!(amax > 0.0f) || !std::isfinite(amax)) return 1.0f;
  return amax / fp8_max(format);
}

float finite_amax(std::span<const float> values) {
  float amax = 0.0f;
  for (float v : values)
    if (std::isfinite(v)) amax = std::max(amax, std::fabs(v));
  return amax;
}

void quantize_e4m3fn(std::span<const float> values, float scale, uint8_t* codes) {
  // Divide (not multiply by a reciprocal): bit-exact with ONNX QuantizeLinear.
  for (size_t i = 0; i < values.size(); ++i) codes[i] = e4m3fn_code(values[i] / scale);
}

void fake_quantize_per_tensor(std::span<float> values, float scale, Fp8Format format) {
  const RoundTrip round_trip(format);
  // Divide (not multiply by a reciprocal): bit-exact with ONNX QuantizeLinear.
  for (float& v : values) v = round_trip(v / scale) * scale;
}

void fake_quantize_per_row(std::span<float> values, int64_t rows, int64_t cols, Fp8Format format) {
  for (int64_t r = 0; r < rows; ++r) {
    std::span<float> row = values.subspan(static_cast<size_t>(r * cols), static_cast<size_t>(cols));
    fake_quantize_per_tensor(row, fp8_scale_for_amax(finite_amax(row), format), format);
  }
}

void fake_quantize_per_column(std::span<float> values, int64_t rows, int64_t cols, Fp8Format format) {
  std::vector<float> amax(static_cast<size_t>(cols), 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float v = values[static_cast<size_t>(r * cols + c)];
      if (std::isfinite(v)) amax[static_cast<size_t>(c)] = std::max(amax[static_cast<size_t>(c)], std::fabs(v));
    }
  std::vector<float> scale(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) scale[static_cast<size_t>(c)] = fp8_scale_for_amax(amax[static_cast<size_t>(c)], format);
  const RoundTrip round_trip(format);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float& v = values[static_cast<size_t>(r * cols + c)];
      const float s = scale[static_cast<size_t>(c)];
      v = round_trip(v / s) * s;
    }
}

}  // namespace loka::cpu
