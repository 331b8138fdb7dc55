// ============================================================================
// runtime/batch_shapes.h — every value's static shape at a given batch size.
//
// A device backend plans each batch bucket ahead of time (kernel configs,
// arena offsets, a CUDA graph), so it needs every value's shape, and the
// contents of the small shape-like values that ops such as Reshape read, for
// batch sizes it never ran. Recommendation models' shapes are affine in the
// batch size, so three CPU runs at batch 1, 2 and 3 on zero inputs pin them
// down: batch 1 and 2 give the line, batch 3 checks it. A model whose shapes
// are not affine (data-dependent shapes) is refused, naming the value.
//
// Host-resident values are the ones the host can compute ahead of time:
// constants, Shape/Size outputs, and outputs of nodes reading only
// host-resident values, except floats whose size grows with the batch (data,
// such as an Expand of a constant token). Their contents are extrapolated the
// same way.
// ============================================================================
#pragma once

#include <cstdint>
#include <vector>

#include "loka/engine.h"
#include "loka/status.h"
#include "loka/tensor.h"

namespace loka {

/// Shapes and host-resident contents of every plan value at one batch size.
struct BucketShapes {
  int64_t batch = 0;
  std::vector<DType> dtypes;        ///< per value id (kUndefined: never produced)
  std::vector<Shape> shapes;        ///< per value id
  std::vector<bool> host_resident;  ///< per value id
  std::vector<Tensor> host_values;  ///< per value id: contents of non-constant host-resident values
};

class BatchShapeModel {
 public:
  /// Traces `engine`'s plan on the CPU at batch 1, 2 and 3. The batch is the
  /// first dim of every input whose first dim is symbolic; any other symbolic
  /// dim is an error naming it.
  static Result<BatchShapeModel> trace(const Engine& engine);

  /// Every value at `batch` (>= 1).
  Result<BucketShapes> at(int64_t batch) const;

 private:
  std::vector<BucketShapes> traces_;  ///< at batch 1, 2, 3
};

/// Which values the host computes ahead of time (see the file comment);
/// values marked in `on_device` (may be empty) are computed on the device.
std::vector<bool> host_resident_values(const ExecutionPlan& plan, const std::vector<bool>& on_device = {});

}  // namespace loka
