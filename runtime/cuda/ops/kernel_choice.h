// ============================================================================
// runtime/cuda/ops/kernel_choice.h — reading a node's Dispatch choice, and
// falling back when it cannot run here (GEMM and norm ops alike).
//
// A node carries the choice as the attribute loka_kernel = ["<rows>:<name>", ...]
// (from the model's "loka.kernels" metadata, see runtime/execution_plan.cc)
// and loka_kernel_device, the GPU / driver / cuBLASLt the times were measured
// on. The choice for the planned rows is the exact entry, else the nearest
// (kernels/registry/kernel_plan.h). An index into a library's heuristic list
// (a cuBLASLt algorithm, a cuDNN engine configuration) belongs to one problem
// on one device: callers fall back to the family's index 0 when the rows or
// the device differ. A fallback prints one warning per node on stderr; with
// LOKA_STRICT_KERNELS=1 in the environment it is an error instead.
// ============================================================================
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "runtime/cuda/device_op.h"

namespace loka::cuda {

/// One node's choice for the rows being planned.
struct PlannedKernelChoice {
  std::string candidate;  ///< the candidate's name
  bool same_rows = true;  ///< chosen for exactly these rows (else the nearest bucket's)
  bool same_device = true;  ///< measured on this device (or by the cost model, which names no index)
  std::string device;     ///< where it was measured
};

/// The node's choice for `rows`; nothing when it has none; an error on malformed attributes.
Result<std::optional<PlannedKernelChoice>> planned_kernel_choice(const DeviceOpInit& init, int64_t rows);

/// This device as the perf DB writes it (kernels/cuda/gemm_autotune.h), computed once.
const std::string& this_tuning_device();

/// True when LOKA_STRICT_KERNELS is set (not "0"): fallbacks are errors.
bool strict_kernels();

/// Prints "loka: node 'NODE': MESSAGE" once per node.
void warn_kernel_once(const std::string& node, const std::string& message);

/// A fallback: an error in strict mode, else a warning and `fallback`.
template <typename T>
Result<T> fall_back(const std::string& node, const std::string& message, T fallback) {
  if (strict_kernels()) return Status::error(message + " (LOKA_STRICT_KERNELS is set)");
  warn_kernel_once(node, message);
  return fallback;
}

}  // namespace loka::cuda
