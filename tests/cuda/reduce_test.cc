// ============================================================================
// tests/cuda/reduce_test.cc — GPU ReduceSum/ReduceMean vs the CPU runtime.
//
// Random shapes up to rank 6 with random axis subsets (seeded, printed on
// failure) reach both kernels (warp rows for a contiguous innermost run, one
// thread per output otherwise); the zoo's [batch, bag, dim] bag sums at batch
// 65536, long rows, all axes, empty reductions (Sum 0, Mean NaN) and the empty
// axis list (identity). The runtime sums in double and the kernel in FP32, so
// elements agree within 4 ulp or 2^-22 absolute (times the reduced count for
// sums; inputs in [-1, 1]): far below what one misplaced element would cost. Skips visibly without a GPU.
// ============================================================================
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "kernels/cuda/reduce.h"
#include "runtime/single_node_util.h"
#include "test_support.h"

namespace loka {
namespace {

using testing::DeviceBytes;

class CudaReduce : public testing::CudaTest {};

void check_reduce(cuda::ReduceOp op, const Tensor& x, const std::vector<int64_t>& axes) {
  const bool mean = op == cuda::ReduceOp::kMean;
  SCOPED_TRACE(std::string(mean ? "ReduceMean " : "ReduceSum ") + shape_to_string(x.shape()) + " axes " +
               shape_to_string(axes));
  auto expected = testing::run_single_node(mean ? "ReduceMean" : "ReduceSum", 18, {x, testing::int_tensor(axes)},
                                           {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(expected) << expected.status().message();
  int64_t reduced = 1;
  for (int64_t axis : axes) reduced *= x.dim(static_cast<int>(axis < 0 ? axis + x.rank() : axis));
  DeviceBytes d_x(x), d_y((*expected)[0].byte_size());
  const Status status = cuda::launch_reduce(op, d_x.as<float>(), x.shape(), axes,
                                            d_y.as<float>(), nullptr);
  ASSERT_TRUE(status.is_ok()) << status.message();
  const Tensor got = d_y.download_tensor(DType::kFloat32, (*expected)[0].shape());
  // A sum's error grows with the count; a mean's is the sum's divided by it.
  const float tolerance = std::ldexp(1.0f, -22) * (mean ? 1.0f : static_cast<float>(std::max<int64_t>(reduced, 1)));
  testing::expect_close(got, (*expected)[0], 4, tolerance);
}

TEST_F(CudaReduce, RandomShapesAndAxesMatchTheCpuRuntime) {
  std::mt19937 rng(77);
  for (int trial = 0; trial < 200; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial) + " (seed 77)");
    const int rank = std::uniform_int_distribution<int>(1, 6)(rng);
    const Shape shape = testing::random_shape(rng, rank, 1, 6);
    std::vector<int64_t> axes;
    for (int d = 0; d < rank; ++d)
      if (std::bernoulli_distribution(0.5)(rng)) axes.push_back(std::bernoulli_distribution(0.3)(rng) ? d - rank : d);
    if (axes.empty()) axes.push_back(std::uniform_int_distribution<int64_t>(0, rank - 1)(rng));
    check_reduce(trial % 2 ? cuda::ReduceOp::kMean : cuda::ReduceOp::kSum, testing::random_tensor(rng, shape), axes);
  }
}

TEST_F(CudaReduce, ZooBagSumsLongRowsAndWholeTensors) {
  std::mt19937 rng(78);
  for (cuda::ReduceOp op : {cuda::ReduceOp::kSum, cuda::ReduceOp::kMean}) {
    check_reduce(op, testing::random_tensor(rng, {65536, 3, 16}), {1});
    check_reduce(op, testing::random_tensor(rng, {65536, 1, 16}), {1});
    check_reduce(op, testing::random_tensor(rng, {1, 26, 16}), {1});
    check_reduce(op, testing::random_tensor(rng, {1000, 777}), {-1});
    check_reduce(op, testing::random_tensor(rng, {7, 50000}), {1});
    check_reduce(op, testing::random_tensor(rng, {65536, 13}), {0});
    check_reduce(op, testing::random_tensor(rng, {3, 4, 5, 6}), {0, 1, 2, 3});
    check_reduce(op, testing::random_tensor(rng, {4, 1, 5}), {1});
    // One thread per output: one strided reduced dim (unrolled loop) and two (the odometer).
    check_reduce(op, testing::random_tensor(rng, {4096, 26, 16}), {1});
    check_reduce(op, testing::random_tensor(rng, {6, 5, 7, 3}), {0, 2});
    check_reduce(op, testing::random_tensor(rng, {3, 40, 2, 9, 4}), {1, 3});
  }
}

TEST_F(CudaReduce, EmptyReductionsAndEmptyAxisLists) {
  std::mt19937 rng(79);
  const Tensor empty = Tensor::zeros(DType::kFloat32, {3, 0});
  check_reduce(cuda::ReduceOp::kSum, empty, {1});   // 0 each
  check_reduce(cuda::ReduceOp::kMean, empty, {1});  // NaN each
  // No axes: each output is its input.
  const Tensor x = testing::random_tensor(rng, {5, 7});
  DeviceBytes d_x(x), d_y(x.byte_size());
  ASSERT_TRUE(cuda::launch_reduce(cuda::ReduceOp::kMean, d_x.as<float>(), x.shape(), {}, d_y.as<float>(), nullptr).is_ok());
  testing::expect_close(d_y.download_tensor(DType::kFloat32, x.shape()), x, 0);
}

TEST(CudaReduceArgs, RepeatedOrOutOfRangeAxesAreRefused) {
  Status status = cuda::launch_reduce(cuda::ReduceOp::kSum, nullptr, {2, 3}, {1, -1}, nullptr, nullptr);
  EXPECT_NE(status.message().find("axes [1,-1] are not distinct axes of [2,3]"), std::string::npos) << status.message();
  status = cuda::launch_reduce(cuda::ReduceOp::kSum, nullptr, {2, 3}, {2}, nullptr, nullptr);
  EXPECT_NE(status.message().find("are not distinct axes"), std::string::npos) << status.message();
}

}  // namespace
}  // namespace loka
