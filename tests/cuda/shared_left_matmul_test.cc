// ============================================================================
// tests/cuda/shared_left_matmul_test.cc — Y[b] = A · X[b] on the GPU
// (kernels/cuda/shared_left_matmul.h) against the CPU runtime's MatMul.
//
// Both kernels (SIMT and the 3xTF32 tensor cores, each where it holds A) on
// fresh random operands per case; every K tier (multiples of 8) and its edges
// (1, 5, 8, 16, 17, 25, 32, 34, 40, 48, 49, 56, 64), M from 1 to the
// shared-memory limit (M not a multiple of 16), N below, at and above a slab
// and a column block (1, 15, 16, 17, 127, 128, 129), batch 1 and 65536; a sum
// that overflows; the CUDA MatMul op
// takes the kernel for a 2-D left operand and keeps cuBLASLt beyond K = 64,
// both matching the CPU. Skips visibly without a GPU.
// ============================================================================
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "kernels/cuda/shared_left_matmul.h"
#include "loka/engine.h"
#include "model_builder.h"
#include "runtime/single_node_util.h"
#include "test_support.h"

namespace loka {
namespace {

using testing::DeviceBytes;

class CudaSharedLeftMatMul : public testing::CudaTest {};

/// FP32 sums of K products in another order (FMA against mul + add) differ by a few units of
/// the largest partial sum: K · 2⁻²³ · Σ|a·x| bounds it, with room. The tensor cores' 3xTF32
/// products are each within 3 · 2⁻²⁰ of FP32's (kernels/cuda/tf32_mma.cuh): K of them more.
float tolerance(const Tensor& a, const Tensor& x, int64_t k) {
  float largest = 0;
  for (float v : a.to_floats()) largest = std::max(largest, std::fabs(v));
  float largest_x = 0;
  for (float v : x.to_floats()) largest_x = std::max(largest_x, std::fabs(v));
  const float kf = static_cast<float>(k);
  return (4.0f * kf * kf * 0x1p-23f + 4.0f * kf * 0x1p-20f) * largest * largest_x;
}

struct Shape4 {
  int64_t batch, m, k, n;
};

/// Both kernels, each where it can hold A.
constexpr cuda::SharedLeftPath kPaths[] = {cuda::SharedLeftPath::kSimt, cuda::SharedLeftPath::kTensorCores};

const char* path_name(cuda::SharedLeftPath path) {
  return path == cuda::SharedLeftPath::kSimt ? "SIMT" : "tensor cores";
}

/// Y = A · X[b] on `path` against the CPU runtime's MatMul.
void expect_path_matches_cpu(const Shape4& s, cuda::SharedLeftPath path, std::mt19937& rng) {
  SCOPED_TRACE(std::string(path_name(path)) + " batch=" + std::to_string(s.batch) + " M=" + std::to_string(s.m) +
               " K=" + std::to_string(s.k) + " N=" + std::to_string(s.n));
  const Tensor a = testing::random_tensor(rng, {s.m, s.k});
  const Tensor x = testing::random_tensor(rng, {s.batch, s.k, s.n});
  auto expected = testing::run_single_node("MatMul", 17, {a, x});
  ASSERT_TRUE(expected) << expected.status().message();
  DeviceBytes d_a(a), d_x(x), d_y(static_cast<size_t>(s.batch * s.m * s.n) * sizeof(float));
  cuda::SharedLeftMatMulArgs args;
  args.a = d_a.as<float>();
  args.x = d_x.as<float>();
  args.y = d_y.as<float>();
  args.batch = s.batch, args.m = s.m, args.k = s.k, args.n = s.n;
  args.path = path;
  const Status launched = cuda::launch_shared_left_matmul(args, nullptr);
  ASSERT_TRUE(launched) << launched.message();
  const Tensor y = d_y.download_tensor(DType::kFloat32, {s.batch, s.m, s.n});
  testing::expect_close(y, (*expected)[0], 0, tolerance(a, x, s.k));
}

TEST_F(CudaSharedLeftMatMul, MatchesTheCpuMatMulOnEveryTierAndAwkwardShape) {
  std::mt19937 rng(29);
  for (const Shape4 s : {Shape4{1, 1, 1, 1}, Shape4{3, 7, 16, 127}, Shape4{2, 34, 17, 128}, Shape4{5, 34, 34, 129},
                         Shape4{4, 32, 48, 130}, Shape4{2, 64, 49, 33}, Shape4{3, 192, 64, 100},
                         Shape4{1, 256, 48, 5}, Shape4{65536, 3, 5, 2}, Shape4{7, 1, 64, 1000},
                         Shape4{3, 32, 32, 128}, Shape4{2, 9, 25, 40}, Shape4{2, 5, 56, 129},
                         Shape4{4099, 32, 64, 128},  // Wukong's shape, many samples a block
                         Shape4{3, 17, 8, 15}, Shape4{2, 48, 40, 17}, Shape4{5, 64, 64, 16},
                         Shape4{3, 80, 64, 17}, Shape4{2, 128, 40, 33}, Shape4{2, 500, 8, 17}}) {  // many row tiles
    ASSERT_TRUE(cuda::shared_left_matmul_can_implement(s.m, s.k)) << cuda::shared_left_matmul_can_implement(s.m, s.k).message();
    for (const cuda::SharedLeftPath path : kPaths) {
      if (path == cuda::SharedLeftPath::kTensorCores && !cuda::shared_left_fits_tensor_cores(s.m, s.k)) continue;
      expect_path_matches_cpu(s, path, rng);
    }
  }
}

TEST_F(CudaSharedLeftMatMul, TheTensorCoresTakeUpToEightyRowsAtKSixtyFourAndTheRestFallsBack) {
  EXPECT_TRUE(cuda::shared_left_fits_tensor_cores(64, 34));   // Wukong's residual projection
  EXPECT_TRUE(cuda::shared_left_fits_tensor_cores(80, 64));   // 80 x 68 pairs: 43 520 bytes
  EXPECT_FALSE(cuda::shared_left_fits_tensor_cores(81, 64));  // 96 rows of parts: past 48 KiB
  EXPECT_TRUE(cuda::shared_left_fits_tensor_cores(34, 34));   // DHEN's linear module
  EXPECT_FALSE(cuda::shared_left_fits_tensor_cores(192, 64));  // SIMT only
  // Asked for the tensor cores where A's parts do not fit: a reason, not a launch.
  std::mt19937 rng(37);
  const Tensor a = testing::random_tensor(rng, {192, 64});
  const Tensor x = testing::random_tensor(rng, {1, 64, 4});
  DeviceBytes d_a(a), d_x(x), d_y(192 * 4 * sizeof(float));
  cuda::SharedLeftMatMulArgs args{d_a.as<float>(), d_x.as<float>(), d_y.as<float>(), 1, 192, 64, 4};
  args.path = cuda::SharedLeftPath::kTensorCores;
  const Status refused = cuda::launch_shared_left_matmul(args, nullptr);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.message().find("too large"), std::string::npos) << refused.message();
  // Auto runs the SIMT kernel there, and for fewer than 16 rows.
  expect_path_matches_cpu(Shape4{1, 192, 64, 4}, cuda::SharedLeftPath::kAuto, rng);
  expect_path_matches_cpu(Shape4{9, 5, 34, 128}, cuda::SharedLeftPath::kAuto, rng);
}

TEST_F(CudaSharedLeftMatMul, NanAndInfinityReachOnlyTheirColumns) {
  for (const cuda::SharedLeftPath path : kPaths) {
    SCOPED_TRACE(path_name(path));
    std::mt19937 rng(31);
    const Tensor a = testing::random_tensor(rng, {4, 6});
    Tensor x = testing::random_tensor(rng, {2, 6, 8});
    const float finite_tolerance = tolerance(a, x, 6);
    x.data<float>()[1 * 48 + 2 * 8 + 3] = NAN;       // sample 1, k 2, column 3
    x.data<float>()[0 * 48 + 5 * 8 + 6] = INFINITY;  // sample 0, k 5, column 6
    auto expected = testing::run_single_node("MatMul", 17, {a, x});
    ASSERT_TRUE(expected) << expected.status().message();
    DeviceBytes d_a(a), d_x(x), d_y(2 * 4 * 8 * sizeof(float));
    cuda::SharedLeftMatMulArgs args{d_a.as<float>(), d_x.as<float>(), d_y.as<float>(), 2, 4, 6, 8};
    args.path = path;
    ASSERT_TRUE(cuda::launch_shared_left_matmul(args, nullptr));
    const Tensor y = d_y.download_tensor(DType::kFloat32, {2, 4, 8});
    testing::expect_close(y, (*expected)[0], 0, finite_tolerance);  // NaN matches NaN, ±inf must be equal
  }
}

TEST_F(CudaSharedLeftMatMul, ASumThatOverflowsIsInfinityOnTheTensorCoresToo) {
  // Finite operands whose FP32 sum overflows (3e38 + 3e38: +inf in FP32 FMAs and on the tensor
  // cores), inf inputs (whose split makes the MMA's result NaN, recomputed in FP32 FMAs: ±inf,
  // or NaN where a 0 meets the inf).
  const Tensor a = Tensor::from_floats({3, 2}, std::vector<float>{3e38f, 3e38f, 0.0f, 1.0f, 0.0f, 0.0f});
  const Tensor x = Tensor::from_floats({1, 2, 2}, std::vector<float>{1.0f, 2.0f, 1.0f, INFINITY});
  for (const cuda::SharedLeftPath path : kPaths) {
    SCOPED_TRACE(path_name(path));
    DeviceBytes d_a(a), d_x(x), d_y(6 * sizeof(float));
    cuda::SharedLeftMatMulArgs args{d_a.as<float>(), d_x.as<float>(), d_y.as<float>(), 1, 3, 2, 2};
    args.path = path;
    ASSERT_TRUE(cuda::launch_shared_left_matmul(args, nullptr));
    const std::vector<float> y = d_y.download_vector<float>(6);
    EXPECT_EQ(y[0], INFINITY);       // 3e38·1 + 3e38·1
    EXPECT_EQ(y[1], INFINITY);       // 3e38·2 + 3e38·inf
    EXPECT_EQ(y[2], 1.0f);           // 0·1 + 1·1
    EXPECT_EQ(y[3], INFINITY);       // 0·2 + 1·inf
    EXPECT_EQ(y[4], 0.0f);           // 0·1 + 0·1
    EXPECT_TRUE(std::isnan(y[5])) << y[5];  // 0·2 + 0·inf
  }
}

TEST_F(CudaSharedLeftMatMul, RowsLandAtTheirRowStrideAndTheGapsStayUntouched) {
  // Y's rows of N written `row_stride` apart (a Concat along the features, DHEN's join of its
  // modules), alone and with a sample stride beyond M rows; the gaps keep their fill.
  std::mt19937 rng(41);
  for (const cuda::SharedLeftPath path : kPaths)
    for (const auto& [m, k, n, row_stride, sample_stride] :
         std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>>{
             {34, 34, 16, 80, 0}, {17, 9, 13, 20, 0}, {32, 64, 16, 24, 32 * 24 + 8}, {5, 3, 7, 7, 0}}) {
      SCOPED_TRACE(std::string(path_name(path)) + " M=" + std::to_string(m) + " N=" + std::to_string(n) +
                   " row stride " + std::to_string(row_stride) + " sample stride " + std::to_string(sample_stride));
      const int64_t batch = 3;
      const Tensor a = testing::random_tensor(rng, {m, k});
      const Tensor x = testing::random_tensor(rng, {batch, k, n});
      auto expected = testing::run_single_node("MatMul", 17, {a, x});
      ASSERT_TRUE(expected) << expected.status().message();
      const int64_t samples_apart = sample_stride != 0 ? sample_stride : m * row_stride;
      const size_t elements = static_cast<size_t>(batch * samples_apart);
      DeviceBytes d_a(a), d_x(x), d_y(std::vector<float>(elements, -7.0f));
      cuda::SharedLeftMatMulArgs args{d_a.as<float>(), d_x.as<float>(), d_y.as<float>(), batch, m, k, n, sample_stride};
      args.y_row_stride = row_stride;
      args.path = path;
      const Status launched = cuda::launch_shared_left_matmul(args, nullptr);
      ASSERT_TRUE(launched) << launched.message();
      const std::vector<float> y = d_y.download_vector<float>(elements);
      const std::vector<float> want = (*expected)[0].to_floats();
      const float tol = tolerance(a, x, k);
      size_t mismatches = 0;
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t r = 0; r < m; ++r)
          for (int64_t c = 0; c < row_stride; ++c) {
            const float got = y[static_cast<size_t>(b * samples_apart + r * row_stride + c)];
            const bool ok = c < n ? std::fabs(got - want[static_cast<size_t>((b * m + r) * n + c)]) <= tol : got == -7.0f;
            if (!ok && mismatches++ < 5) ADD_FAILURE() << "sample " << b << " row " << r << " column " << c << ": " << got;
          }
      for (int64_t b = 0; b < batch; ++b)  // past a sample's M rows, before the next sample
        for (int64_t i = m * row_stride; i < samples_apart; ++i)
          EXPECT_EQ(y[static_cast<size_t>(b * samples_apart + i)], -7.0f) << "sample " << b << " element " << i;
      EXPECT_EQ(mismatches, 0u);
    }
  // A row stride below N would overlap rows; a sample stride below M rows, samples.
  cuda::SharedLeftMatMulArgs overlapping{nullptr, nullptr, nullptr, 2, 4, 4, 8};
  overlapping.y_row_stride = 7;
  EXPECT_FALSE(cuda::launch_shared_left_matmul(overlapping, nullptr));
  overlapping.y_row_stride = 10;
  overlapping.y_sample_stride = 39;
  EXPECT_FALSE(cuda::launch_shared_left_matmul(overlapping, nullptr));
}

TEST_F(CudaSharedLeftMatMul, RefusesWhatItCannotHoldWithAReason) {
  EXPECT_FALSE(cuda::shared_left_matmul_can_implement(0, 4));
  EXPECT_FALSE(cuda::shared_left_matmul_can_implement(4, 0));
  const Status long_k = cuda::shared_left_matmul_can_implement(4, 65);
  ASSERT_FALSE(long_k);
  EXPECT_NE(long_k.message().find("K=65"), std::string::npos) << long_k.message();
  EXPECT_FALSE(cuda::shared_left_matmul_can_implement(193, 64));  // A beyond 48 KiB
  EXPECT_TRUE(cuda::shared_left_matmul_can_implement(192, 64));
  // Empty batches or columns launch nothing; a null operand of a real launch is refused.
  EXPECT_TRUE(cuda::launch_shared_left_matmul({nullptr, nullptr, nullptr, 0, 4, 4, 4}, nullptr));
  EXPECT_FALSE(cuda::launch_shared_left_matmul({nullptr, nullptr, nullptr, 2, 4, 4, 4}, nullptr));
}

/// The MatMul op as a model sees it: W [M,K] initializer on the left of x [batch,K,N].
void expect_matmul_model_matches_cpu(int64_t m, int64_t k, int64_t n, int64_t batch) {
  SCOPED_TRACE("M=" + std::to_string(m) + " K=" + std::to_string(k));
  std::mt19937 rng(static_cast<unsigned>(m * 1000 + k));
  testing::ModelBuilder builder(17);
  const Tensor w = testing::random_tensor(rng, {m, k});
  builder.input("x", DType::kFloat32, {-1, k, n})
      .initializer("w", w)
      .node("MatMul", {"w", "x"}, {"y"}, {}, "mix")
      .output("y", DType::kFloat32, {-1, m, n});
  const Tensor x = testing::random_tensor(rng, {batch, k, n});
  auto cpu = builder.build_engine();
  ASSERT_TRUE(cpu) << cpu.status().message();
  EngineOptions options;
  options.device = Device::kCuda;
  options.max_batch = batch;
  auto gpu = builder.build_engine(options);
  ASSERT_TRUE(gpu) << gpu.status().message();
  auto expected = testing::run_once(**cpu, {x});
  auto actual = testing::run_once(**gpu, {x});
  ASSERT_TRUE(expected) << expected.status().message();
  ASSERT_TRUE(actual) << actual.status().message();
  testing::expect_close((*actual)[0], (*expected)[0], 0, tolerance(w, x, k));
}

TEST_F(CudaSharedLeftMatMul, ItWritesItsSamplesIntoATokenConcatInPlace) {
  // Wukong's concat(FMB, LCB) along the token axis: the LCB MatMul's [B, M, N] samples land at
  // their slice of the Concat's output with the Concat's sample stride (no copy), beside a
  // GEMM's Reshape-d rows, matching the CPU runtime at awkward batches.
  std::mt19937 rng(37);
  testing::ModelBuilder builder(17);
  builder.input("x", DType::kFloat32, {-1, 12, 8})
      .initializer("mix", testing::random_tensor(rng, {4, 12}))
      .initializer("w", testing::random_tensor(rng, {96, 48}))
      .initializer("shape", Tensor::from_int64s({3}, std::vector<int64_t>{-1, 6, 8}))
      .initializer("flat", Tensor::from_int64s({2}, std::vector<int64_t>{-1, 96}))
      .node("Reshape", {"x", "flat"}, {"x_flat"}, {}, "flatten")
      .node("MatMul", {"x_flat", "w"}, {"fm"}, {}, "fm")
      .node("Reshape", {"fm", "shape"}, {"fm_tokens"}, {}, "fm_tokens")
      .node("MatMul", {"mix", "x"}, {"lc"}, {}, "lc")
      .node("Concat", {"fm_tokens", "lc"}, {"y"}, {{"axis", int64_t{1}}}, "concat")
      .output("y", DType::kFloat32, {-1, 10, 8});
  testing::expect_runtimes_agree(builder.serialize(), {testing::random_tensor(rng, {4099, 12, 8})}, {1, 7, 4099}, 1e-4f);
}

TEST_F(CudaSharedLeftMatMul, ItWritesItsRowsIntoAFeatureConcatInPlace) {
  // DHEN's join of its modules along the features: the linear module's [B, M, N] rows land in
  // their slice of the Concat's [B, M, N + N2] output with the Concat's row pitch, beside a
  // weight MatMul's rows, matching the CPU runtime at awkward batches (M = 34: tensor cores).
  std::mt19937 rng(43);
  testing::ModelBuilder builder(17);
  builder.input("x", DType::kFloat32, {-1, 34, 16})
      .initializer("mix", testing::random_tensor(rng, {34, 34}))
      .initializer("w", testing::random_tensor(rng, {16, 8}))
      .node("MatMul", {"mix", "x"}, {"lc"}, {}, "lc")
      .node("MatMul", {"x", "w"}, {"proj"}, {}, "proj")
      .node("Concat", {"lc", "proj"}, {"y"}, {{"axis", int64_t{-1}}}, "concat")
      .output("y", DType::kFloat32, {-1, 34, 24});
  testing::expect_runtimes_agree(builder.serialize(), {testing::random_tensor(rng, {4099, 34, 16})}, {1, 7, 4099}, 1e-4f);
}

TEST_F(CudaSharedLeftMatMul, TheMatMulOpRunsItAndKeepsCublasBeyondItsLimits) {
  expect_matmul_model_matches_cpu(34, 34, 128, 300);  // DHEN's linear module: LoKA's kernel
  expect_matmul_model_matches_cpu(32, 64, 128, 64);   // Wukong's linear compression: LoKA's kernel
  expect_matmul_model_matches_cpu(8, 80, 24, 64);     // K beyond the registers: cuBLASLt
}

}  // namespace
}  // namespace loka
