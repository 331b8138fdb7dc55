// ============================================================================
// examples/serving/compare.cc — comparing a served output with the reference.
// ============================================================================
#include "compare.h"

#include <cmath>
#include <cstring>
#include <sstream>
#include <vector>

namespace serving {

std::string describe_difference(const loka::Tensor& actual, const loka::Tensor& expected, double tolerance) {
  if (actual.dtype() != expected.dtype())
    return "dtype is " + std::string(loka::dtype_name(actual.dtype())) + " but the reference is " +
           std::string(loka::dtype_name(expected.dtype()));
  if (actual.shape() != expected.shape())
    return "shape is " + loka::shape_to_string(actual.shape()) + " but the reference is " +
           loka::shape_to_string(expected.shape());
  if (tolerance == 0 && std::memcmp(actual.raw(), expected.raw(), actual.byte_size()) == 0) return "";
  // Slow path, only on a mismatch or with a tolerance: find the first element out of bounds.
  const std::vector<float> a = actual.to_floats();
  const std::vector<float> b = expected.to_floats();
  for (size_t i = 0; i < a.size(); ++i) {
    const bool same_nan = std::isnan(a[i]) && std::isnan(b[i]);
    const bool off = tolerance == 0 ? std::memcmp(&a[i], &b[i], sizeof(float)) != 0
                                    : !same_nan && !(std::fabs(a[i] - b[i]) <= tolerance);
    if (!off) continue;
    std::ostringstream text;
    text.precision(9);
    text << "element " << i << " is " << a[i] << " but the reference is " << b[i];
    return text.str();
  }
  // Bytes differ but no element does: an encoding float32 cannot tell apart (float64 low bits).
  return tolerance == 0 ? "bytes differ from the reference" : "";
}

}  // namespace serving
