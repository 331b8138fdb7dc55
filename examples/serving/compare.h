// ============================================================================
// examples/serving/compare.h — is a served output the reference output?
//
// Sessions of one Engine run the same kernels on the same inputs, so by
// default loka-serve demands bitwise equality with the single-thread run: any
// difference means state leaked between threads. A tolerance is there for
// backends where that does not hold by construction.
// ============================================================================
#pragma once

#include <string>

#include "loka/tensor.h"

namespace serving {

/// Empty when `actual` equals `expected` (same dtype and shape, and bitwise equal
/// bytes when `tolerance` is 0, else every element within `tolerance`); otherwise
/// a phrase saying where they first differ: "element 5 is 0.25 but the reference is 0.5".
std::string describe_difference(const loka::Tensor& actual, const loka::Tensor& expected, double tolerance);

}  // namespace serving
