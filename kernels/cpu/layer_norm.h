// ============================================================================
// kernels/cpu/layer_norm.h — the LayerNorm row arithmetic shared by the CPU
// kernels of ONNX LayerNormalization, ai.loka LayerNormQuant and
// ResidualLayerNorm, and by the references the GPU's norm kernels are timed
// and checked against.
//
// LayerNormQuant promises "LayerNorm exactly as ONNX LayerNormalization, then
// quantize", so both kernels must perform the same float operations in the
// same order; keeping the statistics and the per-element formula here, in one
// place, makes that a fact rather than a convention. Statistics accumulate in
// double (population variance) so long rows stay accurate; the mean and
// 1/sqrt(var + eps) are then rounded to float once, and every element is
// (x - mean) * inv_std * scale (+ bias) in float, as ONNX's stash_type=1.
// Header-only: small inline routines called from the runtime's op kernels.
// ============================================================================
#pragma once

#include <cmath>
#include <cstdint>

namespace loka::cpu {

/// Mean and inverse standard deviation of one normalized row, rounded to float.
struct LayerNormRowStats {
  float mean = 0.0f;
  float inv_std = 0.0f;
};

/// Statistics of `row[0..n)` with `epsilon` added to the (population) variance.
inline LayerNormRowStats layer_norm_row_stats(const float* row, int64_t n, float epsilon) {
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) sum += row[j];
  const double mean = sum / static_cast<double>(n);
  double squares = 0.0;
  for (int64_t j = 0; j < n; ++j) squares += (row[j] - mean) * (row[j] - mean);
  const double variance = squares / static_cast<double>(n);
  return {static_cast<float>(mean),
          static_cast<float>(1.0 / std::sqrt(variance + static_cast<double>(epsilon)))};
}

/// One normalized element without bias: (x - mean) * inv_std * scale, in float.
inline float layer_norm_element(float x, const LayerNormRowStats& stats, float scale) {
  return (x - stats.mean) * stats.inv_std * scale;
}

/// LayerNorm of one row of `n` values with per-column Scale and optional B (added as ONNX adds
/// it), each normalized value of column j handed to store(j, value).
template <typename Store>
void layer_norm_row(const float* row, int64_t n, float epsilon, const float* scale, const float* bias, Store store) {
  const LayerNormRowStats stats = layer_norm_row_stats(row, n, epsilon);
  for (int64_t j = 0; j < n; ++j) {
    float value = layer_norm_element(row[j], stats, scale[j]);
    if (bias) value += bias[j];
    store(j, value);
  }
}

}  // namespace loka::cpu
