// ============================================================================
// kernels/registry/cublaslt_tiles.h — which explicit cuBLASLt tile
// configurations Dispatch times for a problem (CPU-side, no CUDA needed).
//
// cuBLASLt's heuristic picks one tile shape per algorithm; an explicit
// configuration (cublaslt.<family>.algo0.tile<ID>) forces another one on the
// heuristic's algorithm 0. A tile is a cublasLtMatmulTile_t value: `rows` x
// `cols` of cuBLASLt's D, which is LoKA's Yᵀ (A = W, B = X: see
// kernels/cuda/gemm.h), so rows run along N and cols along M. The ids are
// cuBLASLt's enum values (kernels/cuda/cublaslt_util.cc checks them against
// the header at compile time); a plan naming one is valid for the cuBLASLt
// version its fingerprint records.
//
// The menu holds the eight tiles every Hopper tensor-core algorithm offers
// (64..256 on each side; TF32's classic kernels have exactly these) and six
// narrow ones (8..32 columns: few rows of X per tile) that only nvjet, the
// FP8/BF16 kernels of cuBLASLt 13, has — small-M recommendation GEMMs leave
// most SMs idle with 64-wide tiles. Each problem gets a few of them, ranked by
// a wave model, so the number of timed candidates stays bounded; the GPU
// timer decides, and tiles an algorithm refuses are no candidates.
// ============================================================================
#pragma once

#include <array>
#include <vector>

#include "kernels/registry/gemm_kernel_key.h"

namespace loka::kernels {

/// One cublasLtMatmulTile_t: its enum value and its extent in D (rows along N, cols along M).
struct CublasLtTile {
  int id;
  int rows;
  int cols;
  bool every_algorithm;  ///< one of the eight tiles classic tensor-core algorithms have too
};

/// The tiles Dispatch may offer, in tie-break order.
inline constexpr std::array<CublasLtTile, 14> kCublasLtTileMenu = {{
    {20, 128, 128, true},  // CUBLASLT_MATMUL_TILE_128x128
    {23, 128, 256, true},  // 128x256
    {24, 256, 128, true},  // 256x128
    {18, 128, 64, true},   // 128x64
    {17, 64, 128, true},   // 64x128
    {19, 64, 256, true},   // 64x256
    {21, 256, 64, true},   // 256x64
    {15, 64, 64, true},    // 64x64
    {16, 128, 32, false},  // 128x32
    {13, 64, 32, false},   // 64x32
    {394, 128, 16, false}, // 128x16
    {312, 64, 16, false},  // 64x16
    {393, 128, 8, false},  // 128x8
    {10, 64, 8, false},    // 64x8
}};

/// How many tiles per cuBLASLt family the GPU timer offers (each is planned, and timed when
/// cuBLASLt accepts it: about as many candidates as the split-K configurations add).
inline constexpr int kOfferedTilesPerFamily = 3;

/// The ids of the `count` menu tiles the wave model ranks best for `shape`: fewest waves of
/// output tiles times the slower of a tile's tensor-core work (rows x cols) and its operand
/// loads (64 x (rows + cols): the loads of a tile thinner than 128x128 outlast its MMAs at
/// Hopper's ratio of tensor-core rate to shared-memory bandwidth, about the same for FP8,
/// BF16 and TF32). Ties keep menu order. At least one tile every tensor-core algorithm has is
/// among them (else the narrow tiles would leave TF32 nothing to try). Deterministic: a perf
/// DB's entries are found again by expanding the same names.
std::vector<int> offered_tiles(const GemmShape& shape, int count);

}  // namespace loka::kernels
