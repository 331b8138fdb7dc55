// ============================================================================
// loka/engine.h — the embeddable runtime's entry point.
//
// An Engine loads an ONNX model (file or bytes), checks it and builds an
// execution plan once; it is immutable afterwards and shared by any number of
// threads. Each thread runs the model through its own Session, which owns the
// activation buffers. Serving code links `loka_runtime` alone.
// ============================================================================
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "loka/observer.h"
#include "loka/status.h"
#include "loka/tensor.h"

namespace loka {

enum class Device { kCpu, kCuda };

struct EngineOptions {
  Device device = Device::kCpu;
  /// Largest batch (first dim of symbolic-batch inputs) a Session accepts; 0 = no limit
  /// on the CPU, the largest bucket on CUDA.
  int64_t max_batch = 0;
  /// CUDA: the batch sizes planned ahead, each with its own arena and CUDA graph; a run
  /// pads its batch up to the smallest bucket that holds it. Empty: powers of 8 from 1
  /// to max_batch (1, 8, 64, 512, 4096, 16384 by default), plus max_batch itself.
  std::vector<int64_t> batch_buckets;
  /// CUDA: which device.
  int device_index = 0;
  /// CUDA: replay each bucket's kernels as one CUDA graph (off: launch them one by one).
  bool cuda_graphs = true;
  /// CUDA: GEMMs that can write their output straight into its slice of a Concat's output do,
  /// and the Concat copies only the rest (off: every Concat copies all its inputs).
  bool concat_in_place = true;
};

/// A graph input or output as declared by the model. Symbolic dims are -1
/// with their name in `dim_names` (empty for static dims).
struct TensorInfo {
  std::string name;
  DType dtype = DType::kUndefined;
  std::vector<int64_t> shape;
  std::vector<std::string> dim_names;
  bool has_shape = false;  ///< false when the model declares no shape at all
};

class Session;
class ExecutionPlan;
class DeviceModel;

class Engine {
 public:
  /// Loads a model file; external data is resolved next to it and never outside its folder.
  static Result<std::shared_ptr<const Engine>> load_file(const std::filesystem::path& path,
                                                         EngineOptions options = {});
  /// Loads a serialized ModelProto; `external_data_dir` (may be empty: then external data
  /// is refused) is where external tensors live. `source_name` names the model in errors.
  static Result<std::shared_ptr<const Engine>> load_bytes(std::span<const std::byte> bytes,
                                                          EngineOptions options = {},
                                                          const std::filesystem::path& external_data_dir = {},
                                                          const std::string& source_name = "<memory>");
  ~Engine();

  const std::vector<TensorInfo>& inputs() const;
  const std::vector<TensorInfo>& outputs() const;
  const EngineOptions& options() const { return options_; }
  /// Number of nodes in the execution order.
  size_t node_count() const;
  /// A new Session; cheap, one per thread.
  std::unique_ptr<Session> new_session() const;

  const ExecutionPlan& plan() const { return *plan_; }
  /// The device backend's state (null for CPU engines).
  const DeviceModel* device_model() const { return device_model_.get(); }

 private:
  Engine(std::unique_ptr<ExecutionPlan> plan, EngineOptions options);
  std::unique_ptr<ExecutionPlan> plan_;
  EngineOptions options_;
  std::shared_ptr<const DeviceModel> device_model_;
};

}  // namespace loka
