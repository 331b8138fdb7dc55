// ============================================================================
// tests/kernels/tensor_test.cc — Tensor construction edge cases the sanitizer
// build (scripts/sanitize.sh) found: empty tensors from empty spans.
// ============================================================================
#include <gtest/gtest.h>

#include <span>
#include <vector>

#include "loka/tensor.h"

namespace loka {
namespace {

// UBSan: memcpy(dst, nullptr, 0) from an empty span's null data() is undefined behaviour.
TEST(Tensor, EmptyTensorsFromEmptySpans) {
  const Tensor floats = Tensor::from_floats({0, 3}, std::span<const float>());
  EXPECT_TRUE(floats.defined());
  EXPECT_EQ(floats.element_count(), 0);
  EXPECT_TRUE(floats.to_floats().empty());
  const Tensor ids = Tensor::from_int64s({0}, std::vector<int64_t>{});
  EXPECT_TRUE(ids.defined());
  EXPECT_EQ(ids.byte_size(), 0u);
  EXPECT_EQ(ids.clone().shape(), (Shape{0}));
}

}  // namespace
}  // namespace loka
