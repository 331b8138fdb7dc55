// ============================================================================
// kernels/registry/cublaslt_tiles.cc — ranking the tile menu for a problem.
// ============================================================================
#include "kernels/registry/cublaslt_tiles.h"

#include <algorithm>

#include "kernels/registry/cost_model.h"

namespace loka::kernels {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// The wave model's time of `tile` on `shape`, in units of one MMA over a K step of one row x column.
int64_t modelled_work(const CublasLtTile& tile, const GemmShape& shape) {
  const int64_t sms = HopperFigures{}.sm_count;
  const int64_t tiles = ceil_div(shape.n, tile.rows) * ceil_div(shape.m, tile.cols) * shape.batch;
  const int64_t per_tile = std::max<int64_t>(int64_t{tile.rows} * tile.cols, int64_t{64} * (tile.rows + tile.cols));
  return ceil_div(tiles, sms) * per_tile;
}

}  // namespace

std::vector<int> offered_tiles(const GemmShape& shape, int count) {
  if (count <= 0 || shape.m <= 0 || shape.n <= 0 || shape.batch <= 0) return {};
  std::vector<size_t> order(kCublasLtTileMenu.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return modelled_work(kCublasLtTileMenu[a], shape) < modelled_work(kCublasLtTileMenu[b], shape);
  });
  order.resize(std::min(order.size(), static_cast<size_t>(count)));
  const auto classic = [](size_t i) { return kCublasLtTileMenu[i].every_algorithm; };
  if (std::none_of(order.begin(), order.end(), classic)) {
    // The best-ranked classic tile replaces the last pick.
    size_t best = kCublasLtTileMenu.size();
    for (size_t i = 0; i < kCublasLtTileMenu.size(); ++i)
      if (classic(i) && (best == kCublasLtTileMenu.size() ||
                         modelled_work(kCublasLtTileMenu[i], shape) < modelled_work(kCublasLtTileMenu[best], shape)))
        best = i;
    order.back() = best;
  }
  std::vector<int> ids;
  for (size_t i : order) ids.push_back(kCublasLtTileMenu[i].id);
  return ids;
}

}  // namespace loka::kernels
