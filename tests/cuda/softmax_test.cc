// ============================================================================
// tests/cuda/softmax_test.cc — GPU Softmax/LogSoftmax vs the CPU runtime.
//
// Random shapes (seeded, printed on failure) with the axis anywhere, so both
// the row kernels (last axis; 8/16/32 lanes a row up to 1024, block rows beyond) and the
// column kernel (inner > 1) run; widths 1, odd, 1024/1025 and 5000; batch 1
// and 65536; rows with huge values (stability), -inf and NaN. Both sides
// evaluate exp and the sum in double, so results agree within 2 ulp (or 1e-30
// absolute for values that underflow). Skips visibly without a GPU.
// ============================================================================
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "kernels/cuda/softmax.h"
#include "runtime/single_node_util.h"
#include "test_support.h"

namespace loka {
namespace {

using testing::DeviceBytes;

class CudaSoftmax : public testing::CudaTest {};

void check_softmax(const Tensor& x, int axis, bool log) {
  SCOPED_TRACE(std::string(log ? "LogSoftmax" : "Softmax") + " shape " + shape_to_string(x.shape()) + " axis " +
               std::to_string(axis));
  auto expected = testing::run_single_node(log ? "LogSoftmax" : "Softmax", 13, {x}, {{"axis", int64_t{axis}}});
  ASSERT_TRUE(expected) << expected.status().message();
  int64_t outer = 1, n = x.dim(axis), inner = 1;
  for (int d = 0; d < x.rank(); ++d) {
    if (d < axis) outer *= x.dim(d);
    if (d > axis) inner *= x.dim(d);
  }
  DeviceBytes d_x(x), d_y(x.byte_size());
  const Status status = cuda::launch_softmax(d_x.as<float>(), d_y.as<float>(), outer, n, inner, log, nullptr);
  ASSERT_TRUE(status.is_ok()) << status.message();
  // LogSoftmax of a row's dominant element is -log(1 + tiny): its absolute
  // error is that of log near 1 (~1e-16), but relative to a ~1e-11 result it
  // spans many ulps, so log-space results get an absolute floor as well.
  testing::expect_close(d_y.download_tensor(DType::kFloat32, x.shape()), (*expected)[0], 2, log ? 1e-7f : 1e-30f);
}

TEST_F(CudaSoftmax, RandomShapesAndAxesMatchTheCpuRuntime) {
  std::mt19937 rng(2026);
  for (int trial = 0; trial < 120; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial) + " (seed 2026)");
    const int rank = std::uniform_int_distribution<int>(1, 4)(rng);
    const Shape shape = testing::random_shape(rng, rank, 1, 9);
    const int axis = std::uniform_int_distribution<int>(0, rank - 1)(rng);
    check_softmax(testing::random_tensor(rng, shape, -10.0f, 10.0f), axis, trial % 2 == 1);
  }
}

TEST_F(CudaSoftmax, AwkwardWidthsAndBatches) {
  std::mt19937 rng(11);
  const std::vector<Shape> shapes = {{1, 1}, {1, 7}, {65536, 13}, {300, 1024}, {300, 1025}, {3, 5000}, {1, 100000},
                                     {2, 2000, 3}, {65536, 4, 2}};
  for (const Shape& shape : shapes)
    for (bool log : {false, true}) check_softmax(testing::random_tensor(rng, shape, -30.0f, 30.0f), 1, log);
}

TEST_F(CudaSoftmax, ShortRowKernelsAtEveryWidthBoundary) {
  // Rows up to 1024 take 8 lanes (n <= 64), 16 (n <= 128) or a warp, with 1..32
  // values per lane: each boundary and its neighbours, 1001 rows (no whole number
  // of rows per block or warp: idle groups beside working ones) and batch 1.
  std::mt19937 rng(17);
  for (const int64_t n : {1, 2, 5, 8, 9, 16, 17, 27, 31, 32, 33, 40, 63, 64, 65, 100, 127, 128, 129, 255, 256, 257, 511,
                          512, 513, 1000, 1023, 1024})
    for (const int64_t rows : {1, 1001})
      for (bool log : {false, true}) check_softmax(testing::random_tensor(rng, {rows, n}, -20.0f, 20.0f), 1, log);
  // Attention scores [batch, heads, queries, keys], softmax over the keys.
  for (bool log : {false, true}) check_softmax(testing::random_tensor(rng, {3, 4, 27, 27}, -8.0f, 8.0f), 3, log);
}

TEST_F(CudaSoftmax, NaNAndInfinityRowsInsideAShortRowWarp) {
  // 8 rows of 5 take 8 lanes each, 4 rows to a warp: a NaN or infinity in one row
  // must not leak into the rows sharing its warp.
  std::vector<float> values(8 * 5);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 7) - 3.0f;
  values[5 * 1 + 2] = NAN;
  values[5 * 3 + 0] = INFINITY;
  for (int j = 0; j < 5; ++j) values[5 * 5 + j] = -INFINITY;
  const Tensor x = Tensor::from_floats({8, 5}, values);
  for (bool log : {false, true}) check_softmax(x, 1, log);
}

TEST_F(CudaSoftmax, HugeValuesInfinitiesAndNaNsBehaveAsOnTheCpu) {
  // Row 0: huge values (no overflow after subtracting the max). Row 1: one NaN (whole row NaN).
  // Row 2: all -inf (NaN, as exp(-inf - -inf)). Row 3: one +inf. Row 4: -inf among finite values.
  const std::vector<float> values = {1e30f, -1e30f, 3e38f, 0.0f, 1.0f,
                                     1.0f, NAN, 2.0f, 3.0f, 4.0f,
                                     -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY,
                                     1.0f, INFINITY, 2.0f, 3.0f, 4.0f,
                                     1.0f, -INFINITY, 2.0f, 3.0f, 4.0f};
  const Tensor x = Tensor::from_floats({5, 5}, values);
  for (bool log : {false, true}) {
    check_softmax(x, 1, log);
    check_softmax(x, 0, log);  // the same values through the column kernel
  }
}

TEST(CudaSoftmaxArgs, NegativeDimsAreRefused) {
  const Status status = cuda::launch_softmax(nullptr, nullptr, 2, -1, 1, false, nullptr);
  EXPECT_NE(status.message().find("softmax: dims must be >= 0, got [2,-1,1]"), std::string::npos) << status.message();
}

}  // namespace
}  // namespace loka
