// ============================================================================
// tests/dispatch/cublaslt_tiles_test.cc — which explicit cuBLASLt tiles a
// problem is offered (kernels/registry/cublaslt_tiles.h), and that only the
// GPU timer offers them (the cost model has no figures for them).
// ============================================================================
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "gemm_test_keys.h"
#include "kernels/registry/cublaslt_tiles.h"
#include "kernels/registry/kernel_registry.h"
#include "passes/dispatch/gemm_timer.h"

namespace loka::kernels {
namespace {

// Expected picks worked by hand from the wave model: waves of 132 SMs times
// max(rows x cols, 64 x (rows + cols)), rows along N, cols along M, ties in menu order.
TEST(CublasLtTiles, LargeProblemsGetTheLargeTilesThatFillWholeWaves) {
  // M=4096, N=1024: 128x128 (256 tiles, 2 waves), 128x256 and 256x128 (128 tiles, 1 wave) all
  // cost 32768; 64x256 and 256x64 cost 40960.
  EXPECT_EQ(offered_tiles({4096, 1024, 1024, 1}, 3), (std::vector<int>{20, 23, 24}));
  // M=16384, N=512: the same three at 4, 2 and 2 waves.
  EXPECT_EQ(offered_tiles({16384, 512, 256, 1}, 3), (std::vector<int>{20, 23, 24}));
}

TEST(CublasLtTiles, SmallMProblemsGetNarrowTiles) {
  // M=512, N=256: 64x16 (128 tiles, one wave, 5120) before 64x32 (6144) and 64x64 (8192).
  EXPECT_EQ(offered_tiles({512, 256, 512, 1}, 3), (std::vector<int>{312, 13, 15}));
  // M=1: 64x8, 64x16, then 64x32 ranks third — but one tile every algorithm has must be among
  // them, so the best of those (64x64) takes the last place.
  EXPECT_EQ(offered_tiles({1, 1024, 64, 1}, 3), (std::vector<int>{10, 312, 15}));
  EXPECT_EQ(offered_tiles({1, 1024, 64, 1}, 1), (std::vector<int>{15}));
}

TEST(CublasLtTiles, NegativeTwinNothingOfferedForZeroCountOrEmptyShape) {
  EXPECT_TRUE(offered_tiles({4096, 1024, 1024, 1}, 0).empty());
  EXPECT_TRUE(offered_tiles({0, 1024, 1024, 1}, 3).empty());
}

TEST(CublasLtTiles, EveryOfferedTileIsFromTheMenuAndDistinct) {
  for (const GemmShape shape : {GemmShape{1, 16, 16, 1}, GemmShape{64, 64, 512, 4096}, GemmShape{16384, 1024, 1024, 1},
                                GemmShape{333, 17, 5, 1}}) {
    const std::vector<int> ids = offered_tiles(shape, static_cast<int>(kCublasLtTileMenu.size()));
    EXPECT_EQ(ids.size(), kCublasLtTileMenu.size()) << shape.to_string();
    std::vector<int> sorted = ids;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << shape.to_string();
  }
}

TEST(CublasLtTiles, OnlyTheGpuTimerOffersTiles) {
  const GemmShape shape{512, 256, 512, 1};
  auto cost_model = dispatch::make_cost_model_timer();
  auto modelled = cost_model->time(testing::fp32_gemm_key(), shape);
  ASSERT_TRUE(modelled.is_ok()) << modelled.status().message();
  for (const dispatch::CandidateTiming& t : *modelled) {
    EXPECT_EQ(t.candidate.tile, 0) << t.candidate.name();
    EXPECT_EQ(t.candidate.split_k, 0) << t.candidate.name();
  }
  // What a measurement may record: the same tiles for every cuBLASLt family.
  size_t tiled = 0;
  for (const GemmCandidate& c : gemm_candidates(testing::fp32_gemm_key(), shape, dispatch::all_candidates()))
    tiled += c.tile > 0;
  EXPECT_EQ(tiled, 3u * kOfferedTilesPerFamily);  // FP32, TF32, BF16
}

}  // namespace
}  // namespace loka::kernels
