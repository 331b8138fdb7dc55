// ============================================================================
// runtime/cpu_executor.h — one run of an Engine's plan on the CPU.
//
// Session::run calls it for CPU engines; the CUDA backend calls it to trace
// the shapes of every value at small batch sizes (runtime/batch_shapes.h),
// and shares the input checks.
// ============================================================================
#pragma once

#include <span>
#include <vector>

#include "loka/engine.h"
#include "loka/observer.h"
#include "loka/status.h"
#include "loka/tensor.h"

namespace loka {

class BufferPool;

/// What the input checks look at, for host tensors and device views alike.
struct InputDescription {
  bool defined = false;
  DType dtype = DType::kUndefined;
  const Shape* shape = nullptr;
};

/// Checks inputs against the Engine's declarations (count, dtype, rank, static
/// dims, symbolic dims consistent across inputs, the maximum batch).
Status check_inputs(const Engine& engine, std::span<const InputDescription> inputs);

/// Checks `inputs` against the plan and runs every step; errors name the node.
Result<std::vector<Tensor>> execute_on_cpu(const Engine& engine, Observer* observer, BufferPool* pool,
                                           std::span<const Tensor> inputs);

}  // namespace loka
