// ============================================================================
// runtime/cuda/device_op.h — the interface every op implements on the GPU.
//
// A DeviceOp is planned for one node at one batch bucket, with every input
// and output shape static (runtime/batch_shapes.h) and the contents of
// constant and host-computed inputs at hand, so it resolves attributes,
// broadcasting, cuBLASLt descriptors and algorithms once. `enqueue` then only
// launches work on the stream: no allocation, no synchronisation, so a
// bucket's steps can be captured into a CUDA graph. A DeviceOp belongs to one
// Session (cuBLASLt descriptors are not shared across threads).
//
// View ops (Reshape, Flatten, Squeeze, Unsqueeze, Identity) do no work: their
// output aliases their first input's bytes (DevicePlan::alias_input). An op
// asked for a pitched output (DeviceValueInfo::row_pitch) writes its rows
// straight into a Concat's output where it can (DevicePlan::output_pitched);
// which ops will, and rows of what, each op family says where it registers
// its factory (PitchedRowRule), so the Concat placement's peak rule
// (runtime/concat_placement.h) counts on what will be planned.
// ============================================================================
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loka/status.h"
#include "loka/tensor.h"
#include "runtime/attributes.h"
#include "runtime/batch_shapes.h"
#include "runtime/execution_plan.h"

namespace loka::cuda {

/// A value as a planned op sees it.
struct DeviceValueInfo {
  DType dtype = DType::kUndefined;
  Shape shape;
  /// Host contents when the value is a constant or host-computed for this
  /// bucket (Reshape targets, Slice starts, weights); undefined otherwise.
  Tensor host;
  bool present = true;  ///< false for an omitted optional input
  /// An output: elements between consecutive rows when the op can write it so (into its slice of
  /// a Concat's output, runtime/concat_placement.h); a row is `row_width` elements, one of the
  /// widths the op's PitchedRowRule offers (a GEMM's last dim, a sample of EmbeddingBags); 0:
  /// packed. An op that honours it says so in DevicePlan::output_pitched, else it writes packed
  /// rows elsewhere.
  int64_t row_pitch = 0;
  int64_t row_width = 0;
  /// A Concat's input its producer already wrote into the Concat's output (nothing to copy), or a
  /// ConcatQuant's input encoded by its DevicePlan::input_parts entry right after it was made.
  bool written_in_place = false;
};

/// A device buffer handed to enqueue.
struct DeviceTensor {
  DType dtype = DType::kUndefined;
  Shape shape;
  void* data = nullptr;
  int64_t element_count() const { return loka::element_count(shape); }
};

struct DeviceOpInit {
  std::string_view node_name;
  std::string_view op_type;
  std::string_view domain;
  int opset = 0;
  const Attributes& attributes;
  std::vector<DeviceValueInfo> inputs;
  std::vector<DeviceValueInfo> outputs;
};

/// Per-run resources a Session lends its ops.
struct DeviceRunContext {
  cudaStream_t stream = nullptr;
  void* workspace = nullptr;  ///< kWorkspaceBytes, 256-byte aligned
  size_t workspace_bytes = 0;
  int* error_flags = nullptr;  ///< device int per step; an op sets its own to report bad data (e.g. ids)
  /// DevicePlan::run_scratch_bytes for this step, 256-byte aligned: bytes the op may write and read
  /// within its enqueued work only (steps run one after another: the next step's may be the same).
  void* run_scratch = nullptr;
};

class DeviceOp {
 public:
  virtual ~DeviceOp() = default;
  virtual Status enqueue(std::span<const DeviceTensor> inputs, std::span<const DeviceTensor> outputs,
                         const DeviceRunContext& context, int step) const = 0;
  /// What a nonzero error flag of this op's step means, for the run's error.
  virtual std::string error_text(int flag) const { return "error flag " + std::to_string(flag); }
};

/// An op planned for one node: either work to enqueue, or a view of an input.
struct DevicePlan {
  std::unique_ptr<DeviceOp> op;
  int alias_input = -1;  ///< >= 0: output 0 is input `alias_input`'s bytes, reshaped
  bool output_pitched = false;  ///< output 0 is written with the row_pitch its DeviceValueInfo asked for
  /// Bytes the op's work writes and reads within one step (a GEMM's activation codes or BF16 copy):
  /// lent in DeviceRunContext::run_scratch from the bucket's arena, live for this step only, so
  /// the steps share them instead of each op keeping its own.
  size_t run_scratch_bytes = 0;
  /// Per input slot, work that writes that input's share of the output alone, enqueued with the
  /// op's own inputs and outputs: a session may run it right after the input is made and plan
  /// the op with that input written_in_place (ai.loka ConcatQuant, runtime/concat_placement.h's
  /// EarlyEncode). Empty, or null entries, where an op has none.
  std::vector<std::unique_ptr<DeviceOp>> input_parts = {};
};

using DeviceOpFactory = std::function<Result<DevicePlan>(const DeviceOpInit&)>;

/// The row widths (elements) the op planned for `step` at these shapes can write with a pitch
/// when asked (its first output): usually one, none where it writes packed rows only. It
/// mirrors the factory beside it, so the two are registered together; the factory may still
/// decline when planned.
using PitchedRowRule = std::function<std::vector<int64_t>(const PlanStep& step, const BucketShapes& shapes)>;

/// The PitchedRowRule of an op that writes rows of one width (`width` 0: packed rows only).
inline PitchedRowRule single_row_width(std::function<int64_t(const PlanStep&, const BucketShapes&)> width) {
  return [width = std::move(width)](const PlanStep& step, const BucketShapes& shapes) {
    const int64_t elements = width(step, shapes);
    return elements > 0 ? std::vector<int64_t>{elements} : std::vector<int64_t>{};
  };
}

/// (domain, op_type) -> factory and pitched-row rule; populated once by register_device_ops().
class DeviceOpRegistry {
 public:
  static const DeviceOpRegistry& builtin();
  /// `pitched_rows` empty: the op writes packed rows only.
  void add(std::string domain, std::string op_type, DeviceOpFactory factory, PitchedRowRule pitched_rows = {});
  /// The factory, or an error saying the op has no CUDA kernel yet.
  Result<const DeviceOpFactory*> find(std::string_view domain, std::string_view op_type) const;
  /// The step's op's PitchedRowRule at these shapes; none for an op without one or without a kernel.
  std::vector<int64_t> pitched_row_widths(const PlanStep& step, const BucketShapes& shapes) const;

 private:
  struct Entry {
    std::string domain, op_type;
    DeviceOpFactory factory;
    PitchedRowRule pitched_rows;
  };
  const Entry* entry(std::string_view domain, std::string_view op_type) const;
  std::vector<Entry> entries_;
};

/// Registers every op family in runtime/cuda/ops/ (ops/register_all.cc).
void register_device_ops(DeviceOpRegistry& registry);

/// A DeviceOp whose enqueue is a function (most ops).
template <typename Fn>
class FunctionDeviceOp final : public DeviceOp {
 public:
  explicit FunctionDeviceOp(Fn fn) : fn_(std::move(fn)) {}
  Status enqueue(std::span<const DeviceTensor> inputs, std::span<const DeviceTensor> outputs,
                 const DeviceRunContext& context, int step) const override {
    return fn_(inputs, outputs, context, step);
  }

 private:
  Fn fn_;
};

template <typename Fn>
std::unique_ptr<DeviceOp> device_op(Fn fn) {
  return std::make_unique<FunctionDeviceOp<Fn>>(std::move(fn));
}

template <typename Fn>
DevicePlan device_function(Fn fn) {
  return DevicePlan{device_op(std::move(fn)), -1, false};
}

inline DevicePlan device_view(int input = 0) { return DevicePlan{nullptr, input, false}; }

}  // namespace loka::cuda
