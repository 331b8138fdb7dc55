// ============================================================================
// kernels/cuda/embedding_bag.h — embedding gather with sum pooling on the GPU.
//
//   out[i, offset + d] = Σ_{k < bag} T(ids[i, k])[d]            i < batch, d < dim
//
// where T(r) is row r of the table decoded to FP32: FP32 and BF16 rows as
// stored, FP8 E4M3FN rows as D(code) · row_scale[r] (docs/loka_ops.md,
// QuantizedGather's table format). Sums accumulate in FP32 in bag order and
// round once into the FP32 or BF16 output; bag = 1 is a plain Gather and
// reproduces ai.loka QuantizedGather / ONNX Gather bit for bit.
//
// Ids are int32 or int64, [batch, bag] with a row stride, so a kernel can read
// a column range of a wider id matrix (the zoo slices [batch, 54] into one
// range per table). The output row stride and column offset let each table
// write straight into its slice of a concatenation's destination
// ([batch, total_width], offset = the column where this table starts).
//
// Out-of-range ids follow an IndexPolicy chosen per launch (index_policy.h):
//   kError  the id contributes a zero row and *error_flag is set to 1 (the
//           host reports "embedding ids out of range in <tensor>" after the run);
//   kClamp  the id is clamped to row 0 or rows-1.
// Either way nothing is read outside the table.
//
// Launchers only enqueue work: no allocation, no host synchronisation, so they
// can be captured in a CUDA graph. Rows whose dim divides into loads of 4 to 8
// elements (16, 8 or 4 bytes, with aligned bases) move in those; any other dim
// works element by element.
// launch_embedding_bags runs several tables in one launch per (format, vector
// width) group, up to kMaxTablesPerLaunch tables each.
// ============================================================================
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/index_policy.h"
#include "loka/dtype.h"
#include "loka/status.h"

namespace loka::cuda {

enum class EmbeddingFormat { kFloat32, kBFloat16, kFp8E4M3 };

/// One table's lookup. Counts are in elements; strides of 0 mean "dense".
struct EmbeddingBagArgs {
  const void* table = nullptr;        ///< [rows, dim] row-major, in `format`
  EmbeddingFormat format = EmbeddingFormat::kFloat32;
  const float* row_scales = nullptr;  ///< kFp8E4M3: FP32 scales, one per row or one in all
  bool per_row_scales = true;         ///< false: row_scales[0] scales every row
  int64_t rows = 0;
  int64_t dim = 0;

  const void* ids = nullptr;          ///< sample i's ids at ids + i * ids_row_stride
  bool ids_int64 = true;              ///< int64 ids, else int32
  int64_t bag = 1;                    ///< ids per sample (>= 1)
  int64_t ids_row_stride = 0;         ///< >= bag; 0 means bag

  void* out = nullptr;                ///< sample i at out + i * out_row_stride + out_column_offset
  DType out_dtype = DType::kFloat32;  ///< kFloat32 or kBFloat16
  int64_t out_row_stride = 0;         ///< >= out_column_offset + dim; 0 means dim
  int64_t out_column_offset = 0;

  IndexPolicy policy = IndexPolicy::kError;
  int* error_flag = nullptr;          ///< device int set to 1 on an out-of-range id (kError); may be null
};

/// Tables in one launch (kernel parameters stay under the 4 KiB classic limit).
inline constexpr int kMaxTablesPerLaunch = 32;

/// Error unless `args` describes a lookup the kernel can run; `index` names the table.
Status check_embedding_bag(const EmbeddingBagArgs& args, int index = 0);
/// Enqueues one table's lookup for `batch` samples on `stream`.
Status launch_embedding_bag(const EmbeddingBagArgs& args, int64_t batch, cudaStream_t stream);
/// Enqueues `count` lookups over the same `batch` samples with as few launches as
/// their formats and vector widths allow.
Status launch_embedding_bags(const EmbeddingBagArgs* tables, int count, int64_t batch, cudaStream_t stream);

}  // namespace loka::cuda
