// ============================================================================
// runtime/session.cc — running a plan: input checks, kernels, observers, liveness.
// ============================================================================
#include "loka/session.h"

#include <map>

#include "loka/engine.h"
#include "runtime/buffer_pool.h"
#include "runtime/cpu_executor.h"
#include "runtime/device_backend.h"
#include "runtime/error_text.h"
#include "runtime/execution_plan.h"
#include "runtime/node_profile.h"

namespace loka {
namespace {

/// Checks one input against its declaration; symbolic dims must agree across inputs.
Status check_input(const TensorInfo& info, const InputDescription& input, const EngineOptions& options,
                   std::map<std::string, int64_t>& bound_dims) {
  const std::string where = "input '" + info.name + "': ";
  if (!input.defined) return Status::error(where + "missing");
  if (input.dtype != info.dtype)
    return Status::error(where + "expected " + std::string(dtype_name(info.dtype)) + ", got " +
                         std::string(dtype_name(input.dtype)));
  if (!info.has_shape) return Status::ok();
  const Shape& shape = *input.shape;
  if (shape.size() != info.shape.size())
    return Status::error(where + "expected rank " + std::to_string(info.shape.size()) + ", got shape " +
                         shape_to_string(shape));
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    const int64_t declared = info.shape[axis];
    const int64_t actual = shape[axis];
    if (declared >= 0 && declared != actual)
      return Status::error(where + "dim " + std::to_string(axis) + " must be " + std::to_string(declared) +
                           ", got shape " + shape_to_string(shape));
    const std::string& name = info.dim_names[axis];
    if (declared < 0 && !name.empty()) {
      auto [it, inserted] = bound_dims.try_emplace(name, actual);
      if (!inserted && it->second != actual)
        return Status::error(where + "dim '" + name + "' is " + std::to_string(actual) + " here but " +
                             std::to_string(it->second) + " in another input");
    }
    if (axis == 0 && declared < 0 && options.max_batch > 0 && actual > options.max_batch)
      return Status::error(where + "batch " + std::to_string(actual) + " exceeds the engine's maximum of " +
                           std::to_string(options.max_batch));
  }
  return Status::ok();
}

}  // namespace

Status check_inputs(const Engine& engine, std::span<const InputDescription> inputs) {
  const auto& declared = engine.inputs();
  if (inputs.size() != declared.size())
    return Status::error("the model takes " + std::to_string(declared.size()) + " inputs, got " +
                         std::to_string(inputs.size()));
  std::map<std::string, int64_t> bound_dims;
  for (size_t i = 0; i < inputs.size(); ++i)
    LOKA_RETURN_IF_ERROR(check_input(declared[i], inputs[i], engine.options(), bound_dims));
  return Status::ok();
}

Session::Session(const Engine& engine) : engine_(engine), pool_(std::make_unique<BufferPool>()) {
  if (engine.device_model() == nullptr) return;
  auto device = create_device_session(engine, *engine.device_model());
  if (device)
    device_ = std::move(device).value();
  else
    device_status_ = device.status();
}
Session::~Session() = default;

size_t Session::pooled_bytes() const { return pool_->held_bytes(); }
void* Session::cuda_stream() const { return device_ ? device_->stream() : nullptr; }
size_t Session::device_bytes() const { return device_ ? device_->device_bytes() : 0; }

Result<ArenaReport> Session::arena_report(int64_t batch) {
  if (engine_.device_model() == nullptr)
    return Status::error("arena_report needs an Engine loaded with device = Device::kCuda (the CPU runtime has no arena)");
  if (!device_) return device_status_;
  if (batch < 1) return Status::error("arena_report: the batch must be >= 1, got " + std::to_string(batch));
  return device_->arena_report(batch);
}

Result<std::vector<NodeTiming>> Session::profile_nodes(std::span<const Tensor> inputs, int runs) {
  if (runs < 1 || runs > kMaxProfileRuns)
    return Status::error("profile_nodes: runs must be 1 to " + std::to_string(kMaxProfileRuns) + ", got " +
                         std::to_string(runs));
  if (engine_.device_model() != nullptr && !device_) return one_line(device_status_);
  auto step_ms = device_ ? device_->profile_steps(inputs, runs) : profile_steps_on_cpu(engine_, pool_.get(), inputs, runs);
  if (!step_ms) return one_line(step_ms.status());
  return node_timings(engine_, *step_ms);
}

Result<std::vector<DeviceView>> Session::run_on_device(std::span<const DeviceView> inputs) {
  if (engine_.device_model() == nullptr)
    return Status::error("run_on_device needs an Engine loaded with device = Device::kCuda");
  if (!device_) return one_line(device_status_);
  return one_line(device_->run_on_device(inputs));
}

Result<std::vector<Tensor>> Session::run(const std::vector<std::pair<std::string, Tensor>>& named_inputs) {
  const ExecutionPlan& plan = engine_.plan();
  std::vector<Tensor> ordered(plan.inputs().size());
  for (const auto& [name, tensor] : named_inputs) {
    const int index = plan.input_index(name);
    if (index < 0) return one_line(Status::error("input '" + name + "' is not an input of the model"));
    ordered[static_cast<size_t>(index)] = tensor;
  }
  return run(ordered);
}

Result<std::vector<Tensor>> execute_on_cpu(const Engine& engine, Observer* observer, BufferPool* pool,
                                           std::span<const Tensor> inputs) {
  const ExecutionPlan& plan = engine.plan();
  std::vector<InputDescription> described;
  for (const Tensor& input : inputs) described.push_back({input.defined(), input.dtype(), &input.shape()});
  LOKA_RETURN_IF_ERROR(check_inputs(engine, described));

  const auto& value_table = plan.values();
  std::vector<Tensor> values(value_table.size());
  for (size_t i = 0; i < inputs.size(); ++i) values[static_cast<size_t>(plan.input_ids()[i])] = inputs[i];
  const auto value_of = [&](int id) -> const Tensor& {
    return value_table[static_cast<size_t>(id)].is_constant ? plan.constant(id) : values[static_cast<size_t>(id)];
  };

  KernelContext context(pool);
  std::vector<Tensor> step_inputs;
  std::vector<Tensor> step_outputs;
  const auto& steps = plan.steps();
  for (size_t index = 0; index < steps.size(); ++index) {
    const PlanStep& step = steps[index];
    step_inputs.clear();
    for (int id : step.inputs) step_inputs.push_back(id == kNoValue ? Tensor() : value_of(id));
    const NodeInfo info{index, step.name, step.op_type, step.domain};
    step_outputs.assign(step.outputs.size(), Tensor());
    if (!observer || !observer->replay_node(info, step_outputs)) {
      if (observer) observer->before_node(info, step_inputs);
      if (Status status = step.kernel->run(step_inputs, step_outputs, context); !status)
        return status.with_context("node '" + step.name + "' (" + step.op_type + "): ");
      if (observer) observer->after_node(info, step_outputs);
    }
    for (size_t j = 0; j < step.outputs.size(); ++j) {
      const int id = step.outputs[j];
      if (id == kNoValue) continue;
      if (!step_outputs[j].defined())
        return Status::error("node '" + step.name + "' (" + step.op_type + "): output " + std::to_string(j) +
                             " was not produced");
      const PlanValue& value = value_table[static_cast<size_t>(id)];
      if (value.last_reader >= 0 || value.is_graph_output) values[static_cast<size_t>(id)] = std::move(step_outputs[j]);
    }
    // Liveness: a value nobody reads after this step goes back to the pool.
    for (int id : step.inputs) {
      if (id == kNoValue) continue;
      const PlanValue& value = value_table[static_cast<size_t>(id)];
      if (value.last_reader == static_cast<int>(index) && !value.is_graph_output) values[static_cast<size_t>(id)] = Tensor();
    }
  }
  step_inputs.clear();
  step_outputs.clear();

  std::vector<Tensor> outputs;
  outputs.reserve(plan.output_ids().size());
  for (int id : plan.output_ids()) outputs.push_back(value_of(id));
  return outputs;
}

// Errors leave through one_line(): they quote node and tensor names, which may hold any byte.
Result<std::vector<Tensor>> Session::run(std::span<const Tensor> inputs) {
  if (engine_.device_model() != nullptr) {
    if (!device_) return one_line(device_status_);
    return one_line(device_->run(inputs));
  }
  return one_line(execute_on_cpu(engine_, observer_, pool_.get(), inputs));
}

Result<std::vector<Tensor>> Session::run_selected(std::span<const Tensor> inputs, std::span<const size_t> wanted) {
  if (engine_.device_model() != nullptr) {
    if (!device_) return one_line(device_status_);
    return one_line(device_->run_selected(inputs, wanted));
  }
  LOKA_ASSIGN_OR_RETURN(std::vector<Tensor> all, one_line(execute_on_cpu(engine_, observer_, pool_.get(), inputs)));
  std::vector<Tensor> selected;
  selected.reserve(wanted.size());
  for (size_t o : wanted) {
    if (o >= all.size())
      return Status::error("output " + std::to_string(o) + " does not exist (the model has " + std::to_string(all.size()) + ")");
    selected.push_back(std::move(all[o]));
  }
  return selected;
}

}  // namespace loka
