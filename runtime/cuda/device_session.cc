// ============================================================================
// runtime/cuda/device_session.cc — planning buckets, staging, graphs, runs.
// ============================================================================
#include "runtime/cuda/device_session.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <numeric>

#include "runtime/arena_plan.h"
#include "runtime/concat_placement.h"
#include "runtime/cpu_executor.h"
#include "runtime/cuda/cuda_status.h"
#include "runtime/execution_plan.h"
#include "runtime/node_profile.h"

namespace loka {

Result<std::shared_ptr<const DeviceModel>> create_device_model(const Engine& engine) {
  LOKA_ASSIGN_OR_RETURN(auto model, cuda::CudaDeviceModel::create(engine));
  return std::shared_ptr<const DeviceModel>(std::move(model));
}

Result<std::unique_ptr<DeviceSession>> create_device_session(const Engine& engine, const DeviceModel& model) {
  LOKA_ASSIGN_OR_RETURN(auto session,
                        cuda::CudaDeviceSession::create(engine, static_cast<const cuda::CudaDeviceModel&>(model)));
  return std::unique_ptr<DeviceSession>(std::move(session));
}

namespace cuda {

struct CudaDeviceSession::Bucket {
  int64_t batch = 0;
  std::vector<DevicePlan> ops;      ///< per plan step (empty for host-computed steps)
  std::vector<DeviceTensor> values;  ///< per value id: dtype, shape at this bucket, device pointer
  std::vector<void*> run_scratch;    ///< per plan step: its DevicePlan::run_scratch_bytes in the arena, or null
  DeviceBuffer arena;
  DeviceBuffer uploads;      ///< host-computed values the ops read
  DeviceBuffer error_flags;  ///< one int per step
  PinnedBuffer staging;      ///< inputs, then outputs, then the error flags
  ArenaReport arena_report;  ///< the arena at its peak, named
  /// Per step: the (ConcatQuant step, input slot) encodes enqueued right after it (EarlyEncode).
  std::vector<std::vector<std::pair<int, int>>> encodes_after;
  std::vector<size_t> input_offsets, output_offsets;
  size_t flags_offset = 0;
  cudaGraphExec_t graph = nullptr;

  ~Bucket() {
    if (graph) cudaGraphExecDestroy(graph);
  }
  size_t device_bytes() const { return arena.bytes() + uploads.bytes() + error_flags.bytes(); }
};

namespace {

size_t aligned(size_t bytes) { return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

size_t byte_size(const DeviceTensor& t) { return static_cast<size_t>(t.element_count()) * dtype_size(t.dtype); }

const ConcatPlacement* get_if_placed(const std::vector<std::optional<ConcatPlacement>>& placements, size_t value) {
  return placements[value] ? &*placements[value] : nullptr;
}

/// The batch of a run: the first dim of the first input whose first dim is symbolic (1 when none is).
int64_t batch_of(const Engine& engine, std::span<const Shape* const> shapes) {
  for (size_t i = 0; i < engine.inputs().size(); ++i) {
    const TensorInfo& info = engine.inputs()[i];
    if (!info.shape.empty() && info.shape[0] < 0 && !shapes[i]->empty()) return (*shapes[i])[0];
  }
  return 1;
}

/// The shape an output has for a run of `batch` rows in a bucket of `bucket` rows.
Shape run_shape(const Shape& bucket_shape, int64_t bucket, int64_t batch) {
  Shape shape = bucket_shape;
  if (!shape.empty() && shape[0] == bucket) shape[0] = batch;
  return shape;
}

}  // namespace

Result<std::unique_ptr<CudaDeviceSession>> CudaDeviceSession::create(const Engine& engine,
                                                                    const CudaDeviceModel& model) {
  std::unique_ptr<CudaDeviceSession> session(new CudaDeviceSession(engine, model));
  LOKA_CUDA_RETURN_IF_ERROR(cudaSetDevice(model.device_index()));
  LOKA_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&session->stream_, cudaStreamNonBlocking));
  LOKA_ASSIGN_OR_RETURN(session->workspace_, DeviceBuffer::allocate(kWorkspaceBytes));
  session->buckets_.resize(model.buckets().size());
  return session;
}

CudaDeviceSession::~CudaDeviceSession() {
  buckets_.clear();
  if (stream_) cudaStreamDestroy(stream_);
}

size_t CudaDeviceSession::device_bytes() const {
  size_t total = workspace_.bytes();
  for (const auto& bucket : buckets_)
    if (bucket) total += bucket->device_bytes();
  return total;
}

Result<ArenaReport> CudaDeviceSession::arena_report(int64_t batch) {
  LOKA_ASSIGN_OR_RETURN(const Bucket* bucket, bucket_for(batch));
  return bucket->arena_report;
}

Result<CudaDeviceSession::Bucket*> CudaDeviceSession::bucket_for(int64_t batch) {
  LOKA_ASSIGN_OR_RETURN(const size_t index, model_.bucket_for(batch));
  if (!buckets_[index]) {
    auto planned = plan_bucket(index);
    if (!planned)
      return planned.status().with_context("planning batch bucket " + std::to_string(model_.buckets()[index]) + ": ");
    buckets_[index] = std::move(planned).value();
  }
  return buckets_[index].get();
}

Result<std::unique_ptr<CudaDeviceSession::Bucket>> CudaDeviceSession::plan_bucket(size_t index) {
  const ExecutionPlan& plan = engine_.plan();
  const BucketShapes& shapes = model_.shapes(index);
  const size_t value_count = plan.values().size();
  const auto& steps = plan.steps();
  auto bucket = std::make_unique<Bucket>();
  bucket->batch = model_.buckets()[index];
  bucket->values.resize(value_count);
  for (size_t v = 0; v < value_count; ++v) bucket->values[v] = DeviceTensor{shapes.dtypes[v], shapes.shapes[v], nullptr};

  const auto is_host = [&](int id) { return shapes.host_resident[static_cast<size_t>(id)]; };
  const auto host_contents = [&](int id) -> Tensor {
    if (plan.values()[static_cast<size_t>(id)].is_constant) return plan.constant(id);
    return shapes.host_values[static_cast<size_t>(id)];
  };

  // Plan an op for every step with device work, and note which host values they read. A value
  // lives in its root's buffer, `byte_offset` bytes in: views share their input's; a GEMM or
  // EmbeddingBags that writes its rows into a Concat's output (runtime/concat_placement.h) lives
  // in that output.
  const DeviceOpRegistry& registry = DeviceOpRegistry::builtin();
  bucket->ops.resize(steps.size());
  std::vector<int> root(value_count);
  std::iota(root.begin(), root.end(), 0);
  std::vector<size_t> byte_offset(value_count, 0);
  std::vector<bool> uploaded(value_count, false);
  std::vector<std::optional<ConcatPlacement>> placements(value_count);
  if (engine_.options().concat_in_place)
    placements = plan_concat_placements(plan, shapes, [&](const PlanStep& producer, const BucketShapes& at) {
      return registry.pitched_row_widths(producer, at);
    });
  // ConcatQuant inputs encoded right after the step that makes them: their buffers end there, the
  // ConcatQuant's codes start at the first such step, and the ConcatQuant encodes only the rest.
  const std::vector<EarlyEncode> early_encodes =
      engine_.options().concat_in_place ? plan_early_encodes(plan, shapes, placements) : std::vector<EarlyEncode>{};
  std::vector<int> encoded_after(value_count, -1);       // per ConcatQuant input: the step it follows
  std::vector<int> first_encode(value_count, INT_MAX);   // per ConcatQuant output: its first early encode's step
  bucket->encodes_after.assign(steps.size(), {});
  for (const EarlyEncode& e : early_encodes) {
    const PlanStep& concat = steps[static_cast<size_t>(e.concat_quant_step)];
    encoded_after[static_cast<size_t>(concat.inputs[static_cast<size_t>(e.input)])] = e.after_step;
    int& first = first_encode[static_cast<size_t>(concat.outputs[0])];
    first = std::min(first, e.after_step);
    bucket->encodes_after[static_cast<size_t>(e.after_step)].emplace_back(e.concat_quant_step, e.input);
  }
  for (size_t s = 0; s < steps.size(); ++s) {
    const PlanStep& step = steps[s];
    const bool device_step =
        std::any_of(step.outputs.begin(), step.outputs.end(), [&](int id) { return id != kNoValue && !is_host(id); });
    if (!device_step) continue;
    const std::string where = "node '" + step.name + "' (" + step.op_type + "): ";
    LOKA_ASSIGN_OR_RETURN(const DeviceOpFactory* factory, registry.find(step.domain, step.op_type));
    DeviceOpInit init{step.name, step.op_type, step.domain, step.opset, step.attributes, {}, {}};
    for (int id : step.inputs) {
      if (id == kNoValue) {
        init.inputs.push_back(DeviceValueInfo{DType::kUndefined, {}, Tensor(), false});
        continue;
      }
      const DeviceTensor& value = bucket->values[static_cast<size_t>(id)];
      init.inputs.push_back(DeviceValueInfo{value.dtype, value.shape, is_host(id) ? host_contents(id) : Tensor(), true});
      if (is_host(id) && !plan.values()[static_cast<size_t>(id)].is_constant) uploaded[static_cast<size_t>(id)] = true;
      // Its producer wrote it into this step's output already (a Concat's placed input), or an
      // early encode will have (a ConcatQuant's input).
      init.inputs.back().written_in_place =
          (!step.outputs.empty() && step.outputs[0] != kNoValue && root[static_cast<size_t>(id)] == step.outputs[0]) ||
          (encoded_after[static_cast<size_t>(id)] >= 0 && step.op_type == "ConcatQuant");
    }
    for (int id : step.outputs) {
      if (id == kNoValue) {
        init.outputs.push_back(DeviceValueInfo{DType::kUndefined, {}, Tensor(), false});
        continue;
      }
      const DeviceTensor& value = bucket->values[static_cast<size_t>(id)];
      init.outputs.push_back(DeviceValueInfo{value.dtype, value.shape, Tensor(), true});
    }
    const int first_output = step.outputs.empty() ? kNoValue : step.outputs[0];
    const ConcatPlacement* placement =
        first_output == kNoValue ? nullptr : get_if_placed(placements, static_cast<size_t>(first_output));
    if (placement) {
      init.outputs[0].row_pitch = placement->row_pitch;
      init.outputs[0].row_width = placement->row_width;
    }
    auto planned = (*factory)(init);
    if (!planned) return planned.status().with_context(where);
    for (const EarlyEncode& e : early_encodes)
      if (e.concat_quant_step == static_cast<int>(s) &&
          (static_cast<size_t>(e.input) >= planned->input_parts.size() || !planned->input_parts[static_cast<size_t>(e.input)]))
        return Status::error(where + "input " + std::to_string(e.input) + " was planned to be encoded early, which the op cannot do");
    if (planned->output_pitched) {
      if (!placement) return Status::error(where + "wrote a pitched output it was not asked for");
      root[static_cast<size_t>(first_output)] = placement->concat_output;
      byte_offset[static_cast<size_t>(first_output)] =
          static_cast<size_t>(placement->offset) * dtype_size(shapes.dtypes[static_cast<size_t>(first_output)]);
    }
    if (planned->alias_input >= 0) {
      const int source = step.inputs[static_cast<size_t>(planned->alias_input)];
      if (source == kNoValue || first_output == kNoValue) return Status::error(where + "a view needs its input and output");
      root[static_cast<size_t>(first_output)] = root[static_cast<size_t>(source)];
      byte_offset[static_cast<size_t>(first_output)] = byte_offset[static_cast<size_t>(source)];
    }
    bucket->ops[s] = std::move(planned).value();
  }

  // Host-computed values read on the device: uploaded once per bucket.
  size_t upload_bytes = 0;
  std::vector<size_t> upload_offset(value_count, 0);
  for (size_t v = 0; v < value_count; ++v)
    if (uploaded[v]) {
      upload_offset[v] = upload_bytes;
      upload_bytes += aligned(shapes.host_values[v].byte_size());
    }
  LOKA_ASSIGN_OR_RETURN(bucket->uploads, DeviceBuffer::allocate(upload_bytes));
  for (size_t v = 0; v < value_count; ++v)
    if (uploaded[v]) {
      void* device = static_cast<std::byte*>(bucket->uploads.data()) + upload_offset[v];
      bucket->values[v].data = device;
      if (shapes.host_values[v].byte_size() > 0)
        LOKA_CUDA_RETURN_IF_ERROR(cudaMemcpy(device, shapes.host_values[v].raw(), shapes.host_values[v].byte_size(),
                                             cudaMemcpyHostToDevice));
    }
  for (size_t v = 0; v < value_count; ++v)
    if (plan.values()[v].is_constant) bucket->values[v].data = model_.constant(static_cast<int>(v));

  // Arena: one request per root buffer, alive from its producer to its last reader (of any alias).
  std::vector<int> producer(value_count, -1);
  for (size_t s = 0; s < steps.size(); ++s)
    for (int id : steps[s].outputs)
      if (id != kNoValue) producer[static_cast<size_t>(id)] = static_cast<int>(s);
  std::vector<int> request_of(value_count, -1);
  std::vector<ArenaRequest> requests;
  for (size_t v = 0; v < value_count; ++v) {
    if (plan.values()[v].is_constant || shapes.host_resident[v] || shapes.dtypes[v] == DType::kUndefined) continue;
    const size_t r = static_cast<size_t>(root[v]);
    if (plan.values()[r].is_constant || shapes.host_resident[r]) continue;  // a view of a constant or upload
    if (request_of[r] < 0) {
      request_of[r] = static_cast<int>(requests.size());
      requests.push_back(ArenaRequest{byte_size(bucket->values[r]), producer[r], producer[r]});
    }
    ArenaRequest& request = requests[static_cast<size_t>(request_of[r])];
    const PlanValue& value = plan.values()[v];
    // A Concat's output is written first by the earliest GEMM placed in it; a ConcatQuant's by its
    // first early encode.
    if (producer[v] >= 0) request.first_step = std::min(request.first_step, producer[v]);
    request.first_step = std::min(request.first_step, first_encode[v]);
    // An input encoded early is done with after the step it follows; the ConcatQuant reads the codes.
    const int last_reader = encoded_after[v] >= 0 ? encoded_after[v] : value.last_reader;
    request.last_step = std::max({request.last_step, last_reader, value.is_graph_output ? INT_MAX : -1});
  }
  // Each step's run scratch: alive during that step alone, so steps share the bytes, and share
  // them with values that are dead by then (an op's own scratch would stay allocated for good).
  std::vector<int> scratch_request(steps.size(), -1);
  for (size_t s = 0; s < steps.size(); ++s) {
    const size_t bytes = bucket->ops[s].op ? bucket->ops[s].run_scratch_bytes : 0;
    if (bytes == 0) continue;
    scratch_request[s] = static_cast<int>(requests.size());
    requests.push_back(ArenaRequest{bytes, static_cast<int>(s), static_cast<int>(s)});
  }
  const ArenaPlan arena = plan_arena(requests);
  LOKA_ASSIGN_OR_RETURN(bucket->arena, DeviceBuffer::allocate(arena.total_bytes));
  {  // Named for Session::arena_report: each request is a root value's buffer or a step's scratch.
    std::vector<std::string> request_name(requests.size());
    for (size_t v = 0; v < value_count; ++v)
      if (request_of[v] >= 0) request_name[static_cast<size_t>(request_of[v])] = plan.values()[v].name;
    for (size_t s = 0; s < steps.size(); ++s)
      if (scratch_request[s] >= 0) request_name[static_cast<size_t>(scratch_request[s])] = "scratch of " + steps[s].name;
    const ArenaPeak peak = arena_peak(requests);
    ArenaReport& report = bucket->arena_report;
    report.batch = bucket->batch;
    report.arena_bytes = arena.total_bytes;
    report.peak_bytes = peak.live_bytes;
    report.peak_node = peak.step >= 0 ? steps[static_cast<size_t>(peak.step)].name : "";
    for (size_t r : peak.live) report.live_at_peak.push_back({request_name[r], requests[r].bytes});
  }
  bucket->run_scratch.assign(steps.size(), nullptr);
  for (size_t s = 0; s < steps.size(); ++s)
    if (scratch_request[s] >= 0)
      bucket->run_scratch[s] = static_cast<std::byte*>(bucket->arena.data()) +
                               arena.offsets[static_cast<size_t>(scratch_request[s])];
  for (size_t v = 0; v < value_count; ++v) {
    const size_t r = static_cast<size_t>(root[v]);
    if (request_of[r] >= 0)
      bucket->values[v].data = static_cast<std::byte*>(bucket->arena.data()) +
                               arena.offsets[static_cast<size_t>(request_of[r])] + byte_offset[v];
    else if (r != v)
      bucket->values[v].data = bucket->values[r].data;
  }
  for (int id : plan.output_ids())
    if (shapes.host_resident[static_cast<size_t>(id)])
      return Status::error("graph output '" + plan.values()[static_cast<size_t>(id)].name +
                           "' is computed on the host; the CUDA backend cannot return it");

  // Staging: inputs, outputs, error flags.
  LOKA_ASSIGN_OR_RETURN(bucket->error_flags, DeviceBuffer::allocate(sizeof(int) * std::max<size_t>(1, steps.size())));
  size_t staging = 0;
  for (int id : plan.input_ids()) {
    bucket->input_offsets.push_back(staging);
    staging += aligned(byte_size(bucket->values[static_cast<size_t>(id)]));
  }
  for (int id : plan.output_ids()) {
    bucket->output_offsets.push_back(staging);
    staging += aligned(byte_size(bucket->values[static_cast<size_t>(id)]));
  }
  bucket->flags_offset = staging;
  staging += sizeof(int) * std::max<size_t>(1, steps.size());
  LOKA_ASSIGN_OR_RETURN(bucket->staging, PinnedBuffer::allocate(staging));

  if (engine_.options().cuda_graphs) {
    cudaGraph_t graph = nullptr;
    LOKA_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    const Status enqueued = enqueue_steps(*bucket);
    const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
    LOKA_RETURN_IF_ERROR(enqueued);
    LOKA_RETURN_IF_ERROR(cuda_status(ended, "capturing the bucket's CUDA graph"));
    const cudaError_t instantiated = cudaGraphInstantiate(&bucket->graph, graph, 0);
    cudaGraphDestroy(graph);
    LOKA_RETURN_IF_ERROR(cuda_status(instantiated, "instantiating the bucket's CUDA graph"));
  }
  return bucket;
}

Status CudaDeviceSession::enqueue_steps(const Bucket& bucket, std::span<const cudaEvent_t> step_ends) const {
  const auto& steps = engine_.plan().steps();
  DeviceRunContext context{stream_, workspace_.data(), workspace_.bytes(), static_cast<int*>(bucket.error_flags.data())};
  std::vector<DeviceTensor> inputs, outputs;
  const auto tensors_of = [&](size_t s) {
    inputs.clear();
    outputs.clear();
    for (int id : steps[s].inputs) inputs.push_back(id == kNoValue ? DeviceTensor{} : bucket.values[static_cast<size_t>(id)]);
    for (int id : steps[s].outputs)
      outputs.push_back(id == kNoValue ? DeviceTensor{} : bucket.values[static_cast<size_t>(id)]);
  };
  for (size_t s = 0; s < steps.size(); ++s) {
    const DevicePlan& planned = bucket.ops[s];
    if (planned.op) {
      tensors_of(s);
      context.run_scratch = bucket.run_scratch[s];
      if (Status status = planned.op->enqueue(inputs, outputs, context, static_cast<int>(s)); !status)
        return status.with_context("node '" + steps[s].name + "' (" + steps[s].op_type + "): ");
    }
    // ConcatQuant inputs this step made (a view step too), encoded now rather than at the ConcatQuant.
    for (const auto& [concat, slot] : bucket.encodes_after[s]) {
      tensors_of(static_cast<size_t>(concat));
      context.run_scratch = nullptr;
      const DeviceOp& part = *bucket.ops[static_cast<size_t>(concat)].input_parts[static_cast<size_t>(slot)];
      if (Status status = part.enqueue(inputs, outputs, context, concat); !status)
        return status.with_context("node '" + steps[static_cast<size_t>(concat)].name + "' (early encode of input " +
                                   std::to_string(slot) + "): ");
    }
    if (!step_ends.empty()) LOKA_CUDA_RETURN_IF_ERROR(cudaEventRecord(step_ends[s], stream_));
  }
  return cuda_status(cudaGetLastError(), "launching the bucket's kernels");
}

Status CudaDeviceSession::launch(Bucket& bucket) {
  LOKA_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(bucket.error_flags.data(), 0, bucket.error_flags.bytes(), stream_));
  if (bucket.graph) return cuda_status(cudaGraphLaunch(bucket.graph, stream_), "launching the bucket's CUDA graph");
  return enqueue_steps(bucket);
}

Status CudaDeviceSession::check_error_flags(const Bucket& bucket) const {
  const auto& steps = engine_.plan().steps();
  const int* flags = reinterpret_cast<const int*>(static_cast<const std::byte*>(bucket.staging.data()) + bucket.flags_offset);
  for (size_t s = 0; s < steps.size(); ++s)
    if (flags[s] != 0 && bucket.ops[s].op)
      return Status::error("node '" + steps[s].name + "' (" + steps[s].op_type + "): " + bucket.ops[s].op->error_text(flags[s]));
  return Status::ok();
}

Result<std::vector<Tensor>> CudaDeviceSession::run(std::span<const Tensor> inputs) {
  std::vector<size_t> all(engine_.plan().output_ids().size());
  for (size_t o = 0; o < all.size(); ++o) all[o] = o;
  return run_selected(inputs, all);
}

Result<std::vector<Tensor>> CudaDeviceSession::run_selected(std::span<const Tensor> inputs,
                                                            std::span<const size_t> wanted) {
  for (size_t o : wanted)
    if (o >= engine_.plan().output_ids().size())
      return Status::error("output " + std::to_string(o) + " does not exist (the model has " +
                           std::to_string(engine_.plan().output_ids().size()) + ")");
  LOKA_ASSIGN_OR_RETURN(const StagedRun staged, stage_host_inputs(inputs));
  Bucket* bucket = staged.bucket;
  const int64_t batch = staged.batch;
  const ExecutionPlan& plan = engine_.plan();
  std::byte* staging = static_cast<std::byte*>(bucket->staging.data());
  LOKA_RETURN_IF_ERROR(launch(*bucket));

  std::vector<Tensor> outputs;
  for (size_t o : wanted) {
    const DeviceTensor& slot = bucket->values[static_cast<size_t>(plan.output_ids()[o])];
    Tensor output = Tensor::zeros(slot.dtype, run_shape(slot.shape, bucket->batch, batch));
    LOKA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(staging + bucket->output_offsets[o], slot.data, output.byte_size(),
                                              cudaMemcpyDeviceToHost, stream_));
    outputs.push_back(std::move(output));
  }
  LOKA_RETURN_IF_ERROR(wait_and_check_error_flags(*bucket));
  for (size_t i = 0; i < outputs.size(); ++i)
    std::memcpy(outputs[i].raw(), staging + bucket->output_offsets[wanted[i]], outputs[i].byte_size());
  return outputs;
}

Result<CudaDeviceSession::StagedRun> CudaDeviceSession::stage_host_inputs(std::span<const Tensor> inputs) {
  std::vector<InputDescription> described;
  std::vector<const Shape*> shapes;
  for (const Tensor& input : inputs) {
    described.push_back({input.defined(), input.dtype(), &input.shape()});
    shapes.push_back(&input.shape());
  }
  LOKA_RETURN_IF_ERROR(check_inputs(engine_, described));
  LOKA_CUDA_RETURN_IF_ERROR(cudaSetDevice(model_.device_index()));
  const int64_t batch = batch_of(engine_, shapes);
  LOKA_ASSIGN_OR_RETURN(Bucket* bucket, bucket_for(batch));
  const ExecutionPlan& plan = engine_.plan();
  std::byte* staging = static_cast<std::byte*>(bucket->staging.data());

  for (size_t i = 0; i < inputs.size(); ++i) {
    const DeviceTensor& slot = bucket->values[static_cast<size_t>(plan.input_ids()[i])];
    const size_t bytes = inputs[i].byte_size(), capacity = byte_size(slot);
    std::memcpy(staging + bucket->input_offsets[i], inputs[i].raw(), bytes);
    LOKA_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(slot.data, staging + bucket->input_offsets[i], bytes, cudaMemcpyHostToDevice, stream_));
    if (bytes < capacity)  // padding rows: zeros (valid ids, finite values)
      LOKA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(static_cast<std::byte*>(slot.data) + bytes, 0, capacity - bytes, stream_));
  }
  return StagedRun{bucket, batch};
}

Status CudaDeviceSession::wait_and_check_error_flags(Bucket& bucket) {
  std::byte* staging = static_cast<std::byte*>(bucket.staging.data());
  LOKA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(staging + bucket.flags_offset, bucket.error_flags.data(),
                                            bucket.error_flags.bytes(), cudaMemcpyDeviceToHost, stream_));
  LOKA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return check_error_flags(bucket);
}

namespace {

/// Events for timing steps, destroyed with it.
class StepEvents {
 public:
  ~StepEvents() {
    for (cudaEvent_t event : events_) cudaEventDestroy(event);
  }
  Status create(size_t count) {
    events_.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      cudaEvent_t event = nullptr;
      LOKA_CUDA_RETURN_IF_ERROR(cudaEventCreate(&event));
      events_.push_back(event);
    }
    return Status::ok();
  }
  std::span<const cudaEvent_t> all() const { return events_; }

 private:
  std::vector<cudaEvent_t> events_;
};

/// Holds a stream back until the host has enqueued a run's steps behind it, so the device runs
/// them back to back: enqueued one by one against a running device, a step's interval would also
/// hold the host's launch time of the next (longer than a small kernel). A host function the stream
/// waits on blocks until open(), or a deadline should the launch queue fill first (the host then
/// blocks in a launch while the stream waits: released_by_deadline() says so). The function and
/// the gate share its state, so neither outlives it; the destructor opens the gate.
class StreamGate {
 public:
  explicit StreamGate(cudaStream_t stream) : stream_(stream), state_(std::make_shared<State>()) {}
  ~StreamGate() { open(); }
  Status hold() {
    auto* shared = new std::shared_ptr<State>(state_);  // the host function's reference; it deletes it
    if (const cudaError_t error = cudaLaunchHostFunc(stream_, &StreamGate::wait, shared); error != cudaSuccess) {
      delete shared;
      return cuda_status(error, "holding the stream for the profile");
    }
    return Status::ok();
  }
  void open() {
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      state_->open = true;
    }
    state_->opened.notify_all();
  }
  /// After the stream passed the gate: whether the deadline, not open(), let it through.
  bool released_by_deadline() {
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->deadline_passed;
  }

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable opened;
    bool open = false;
    bool deadline_passed = false;
  };
  static void CUDART_CB wait(void* user_data) {
    const std::unique_ptr<std::shared_ptr<State>> shared(static_cast<std::shared_ptr<State>*>(user_data));
    State& state = **shared;
    std::unique_lock<std::mutex> lock(state.mutex);
    state.deadline_passed = !state.opened.wait_for(lock, std::chrono::seconds(2), [&state] { return state.open; });
  }
  cudaStream_t stream_;
  std::shared_ptr<State> state_;
};

}  // namespace

Result<std::vector<double>> CudaDeviceSession::profile_steps(std::span<const Tensor> inputs, int runs) {
  // Untimed: plans the bucket (and captures its graph), loads the kernels, warms the caches.
  LOKA_RETURN_IF_ERROR(run_selected(inputs, {}).status());
  const size_t steps = engine_.plan().steps().size();
  StepEvents events;  // [0] before the first step, [s + 1] after step s
  LOKA_RETURN_IF_ERROR(events.create(steps + 1));
  std::vector<std::vector<double>> samples(static_cast<size_t>(runs), std::vector<double>(steps, 0.0));
  for (auto& run_ms : samples) {
    // The inputs again each run: the arena reuses an input's bytes after its last reader.
    LOKA_ASSIGN_OR_RETURN(const StagedRun staged, stage_host_inputs(inputs));
    Bucket& bucket = *staged.bucket;
    LOKA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(bucket.error_flags.data(), 0, bucket.error_flags.bytes(), stream_));
    StreamGate gate(stream_);
    LOKA_RETURN_IF_ERROR(gate.hold());
    LOKA_CUDA_RETURN_IF_ERROR(cudaEventRecord(events.all()[0], stream_));
    // Step by step, not the graph: events between a graph's nodes would need a graph per profile.
    const Status enqueued = enqueue_steps(bucket, events.all().subspan(1));
    gate.open();  // the device runs the queued steps back to back
    LOKA_RETURN_IF_ERROR(wait_and_check_error_flags(bucket));
    LOKA_RETURN_IF_ERROR(enqueued);
    if (gate.released_by_deadline())
      return Status::error("profile: the CUDA launch queue filled before the " + std::to_string(steps) +
                           " steps were queued, so the device would wait on the host between steps and the "
                           "times would count the host's launches");
    for (size_t s = 0; s < steps; ++s) {
      float ms = 0;
      LOKA_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, events.all()[s], events.all()[s + 1]));
      run_ms[s] = ms;
    }
  }
  return median_per_step(samples);
}

Result<std::vector<DeviceView>> CudaDeviceSession::run_on_device(std::span<const DeviceView> inputs) {
  std::vector<InputDescription> described;
  std::vector<const Shape*> shapes;
  for (const DeviceView& input : inputs) {
    described.push_back({input.data != nullptr, input.dtype, &input.shape});
    shapes.push_back(&input.shape);
  }
  LOKA_RETURN_IF_ERROR(check_inputs(engine_, described));
  LOKA_CUDA_RETURN_IF_ERROR(cudaSetDevice(model_.device_index()));
  const int64_t batch = batch_of(engine_, shapes);
  LOKA_ASSIGN_OR_RETURN(Bucket* bucket, bucket_for(batch));
  const ExecutionPlan& plan = engine_.plan();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const DeviceTensor& slot = bucket->values[static_cast<size_t>(plan.input_ids()[i])];
    const size_t bytes = static_cast<size_t>(element_count(inputs[i].shape)) * dtype_size(inputs[i].dtype);
    const size_t capacity = byte_size(slot);
    LOKA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slot.data, inputs[i].data, bytes, cudaMemcpyDeviceToDevice, stream_));
    if (bytes < capacity)
      LOKA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(static_cast<std::byte*>(slot.data) + bytes, 0, capacity - bytes, stream_));
  }
  LOKA_RETURN_IF_ERROR(launch(*bucket));
  std::vector<DeviceView> outputs;
  for (int id : plan.output_ids()) {
    const DeviceTensor& slot = bucket->values[static_cast<size_t>(id)];
    outputs.push_back(DeviceView{slot.dtype, run_shape(slot.shape, bucket->batch, batch), slot.data});
  }
  return outputs;
}

}  // namespace cuda
}  // namespace loka
