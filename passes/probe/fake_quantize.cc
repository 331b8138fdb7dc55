// ============================================================================
// passes/probe/fake_quantize.cc — FP8 recipes over whole tensors.
// ============================================================================
#include "passes/probe/fake_quantize.h"

namespace loka::probe {

using cpu::Fp8Format;

Tensor quantize_rows(const Tensor& x) {
  Tensor copy = x.clone();
  const int64_t cols = x.rank() ? x.dim(x.rank() - 1) : 1;
  const int64_t rows = cols ? x.element_count() / cols : 0;
  cpu::fake_quantize_per_row(copy.values<float>(), rows, cols, Fp8Format::kE4M3FN);
  return copy;
}

Tensor quantize_tensor(const Tensor& x, float scale, Fp8Format format) {
  Tensor copy = x.clone();
  cpu::fake_quantize_per_tensor(copy.values<float>(), scale, format);
  return copy;
}

Tensor quantize_weight_channels(const Tensor& w, bool transposed) {
  if (transposed) return quantize_rows(w);
  Tensor copy = w.clone();
  const int64_t n = w.rank() ? w.dim(w.rank() - 1) : 1;
  const int64_t k = w.rank() >= 2 ? w.dim(w.rank() - 2) : 1;
  const int64_t matrices = k * n != 0 ? w.element_count() / (k * n) : 0;
  for (int64_t m = 0; m < matrices; ++m)
    cpu::fake_quantize_per_column(copy.values<float>().subspan(static_cast<size_t>(m * k * n), static_cast<size_t>(k * n)),
                                  k, n, Fp8Format::kE4M3FN);
  return copy;
}

}  // namespace loka::probe
