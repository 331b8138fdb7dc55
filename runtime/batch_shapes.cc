// ============================================================================
// runtime/batch_shapes.cc — tracing shapes at batch 1..3 and extrapolating.
// ============================================================================
#include "runtime/batch_shapes.h"

#include <cmath>
#include <string>

#include "runtime/buffer_pool.h"
#include "runtime/cpu_executor.h"
#include "runtime/execution_plan.h"

namespace loka {
namespace {

bool reads_only_host_values(const PlanStep& step, const std::vector<bool>& host) {
  for (int id : step.inputs)
    if (id != kNoValue && !host[static_cast<size_t>(id)]) return false;
  return true;
}

/// Records every produced value's dtype, shape and (host-resident ones) contents.
class ShapeRecorder final : public Observer {
 public:
  ShapeRecorder(const ExecutionPlan& plan, BucketShapes& out) : plan_(plan), out_(out) {}
  void after_node(const NodeInfo& node, std::span<Tensor> outputs) override {
    const PlanStep& step = plan_.steps()[node.index];
    for (size_t j = 0; j < outputs.size() && j < step.outputs.size(); ++j) {
      const int id = step.outputs[j];
      if (id == kNoValue || !outputs[j].defined()) continue;
      const size_t v = static_cast<size_t>(id);
      out_.dtypes[v] = outputs[j].dtype();
      out_.shapes[v] = outputs[j].shape();
      // Every value is kept: traces run at batch 1..3, and which values stay
      // host-resident is only known once two traces can be compared.
      out_.host_values[v] = outputs[j].clone();
    }
  }

 private:
  const ExecutionPlan& plan_;
  BucketShapes& out_;
};

/// Zero inputs at `batch`: the batch dim is every symbolic first dim.
Result<std::vector<Tensor>> zero_inputs(const ExecutionPlan& plan, int64_t batch) {
  std::vector<Tensor> inputs;
  for (const TensorInfo& info : plan.inputs()) {
    if (!info.has_shape) return Status::error("input '" + info.name + "' declares no shape; a device plan needs one");
    Shape shape = info.shape;
    for (size_t axis = 0; axis < shape.size(); ++axis) {
      if (shape[axis] >= 0) continue;
      if (axis != 0)
        return Status::error("input '" + info.name + "': dim " + std::to_string(axis) + " ('" +
                             info.dim_names[axis] + "') is symbolic; a device plan needs every dim but the batch static");
      shape[axis] = batch;
    }
    inputs.push_back(Tensor::zeros(info.dtype, shape));
  }
  return inputs;
}

/// a + (b - a) * (t - 1): the line through batch 1 (a) and 2 (b) at batch t.
int64_t affine(int64_t a, int64_t b, int64_t t) { return a + (b - a) * (t - 1); }

Result<Tensor> extrapolate_values(const Tensor& one, const Tensor& two, const Shape& shape, int64_t batch,
                                  const std::string& name) {
  if (dtype_is_float(one.dtype())) {
    if (one.element_count() != two.element_count() || one.to_floats() != two.to_floats())
      return Status::error("value '" + name + "' is a host-computed float that changes with the batch size");
    return one.clone();
  }
  const std::vector<int64_t> a = one.to_int64s(), b = two.to_int64s();
  if (a.size() != b.size() || static_cast<int64_t>(a.size()) != element_count(shape))
    return Status::error("value '" + name + "': its element count is not affine in the batch size");
  std::vector<int64_t> values(a.size());
  for (size_t i = 0; i < a.size(); ++i) values[i] = affine(a[i], b[i], batch);
  Tensor out = Tensor::zeros(one.dtype(), shape);
  Tensor as_int64 = Tensor::from_int64s(shape, values);
  if (one.dtype() == DType::kInt64) return as_int64;
  // Narrower integer or bool: convert element by element.
  for (size_t i = 0; i < values.size(); ++i) {
    switch (one.dtype()) {
      case DType::kInt32: out.data<int32_t>()[i] = static_cast<int32_t>(values[i]); break;
      case DType::kBool: out.data<bool>()[i] = values[i] != 0; break;
      default: return Status::error("value '" + name + "': unsupported host dtype " + std::string(dtype_name(one.dtype())));
    }
  }
  return out;
}

}  // namespace

std::vector<bool> host_resident_values(const ExecutionPlan& plan, const std::vector<bool>& on_device) {
  std::vector<bool> host(plan.values().size(), false);
  for (size_t v = 0; v < plan.values().size(); ++v) host[v] = plan.values()[v].is_constant;
  for (const PlanStep& step : plan.steps()) {
    const bool shape_only = step.domain.empty() && (step.op_type == "Shape" || step.op_type == "Size");
    if (!shape_only && !reads_only_host_values(step, host)) continue;
    for (int id : step.outputs)
      if (id != kNoValue && (on_device.empty() || !on_device[static_cast<size_t>(id)])) host[static_cast<size_t>(id)] = true;
  }
  return host;
}

Result<BatchShapeModel> BatchShapeModel::trace(const Engine& engine) {
  const ExecutionPlan& plan = engine.plan();
  const size_t count = plan.values().size();
  BatchShapeModel model;
  for (int64_t batch = 1; batch <= 3; ++batch) {
    BucketShapes trace;
    trace.batch = batch;
    trace.dtypes.assign(count, DType::kUndefined);
    trace.shapes.assign(count, Shape{});
    trace.host_values.assign(count, Tensor());
    LOKA_ASSIGN_OR_RETURN(std::vector<Tensor> inputs, zero_inputs(plan, batch));
    for (size_t i = 0; i < inputs.size(); ++i) {
      const size_t v = static_cast<size_t>(plan.input_ids()[i]);
      trace.dtypes[v] = inputs[i].dtype();
      trace.shapes[v] = inputs[i].shape();
    }
    for (size_t v = 0; v < count; ++v)
      if (plan.values()[v].is_constant) {
        trace.dtypes[v] = plan.constant(static_cast<int>(v)).dtype();
        trace.shapes[v] = plan.constant(static_cast<int>(v)).shape();
      }
    ShapeRecorder recorder(plan, trace);
    BufferPool pool;
    auto outputs = execute_on_cpu(engine, &recorder, &pool, inputs);
    if (!outputs) return outputs.status().with_context("tracing shapes at batch " + std::to_string(batch) + ": ");
    model.traces_.push_back(std::move(trace));
  }
  // Host-computed floats that grow with the batch (an Expand of a constant
  // token, say) are data, not shapes: they run on the device.
  std::vector<bool> on_device(count, false);
  for (size_t v = 0; v < count; ++v)
    on_device[v] = !plan.values()[v].is_constant && dtype_is_float(model.traces_[0].dtypes[v]) &&
                   model.traces_[0].shapes[v] != model.traces_[1].shapes[v];
  const std::vector<bool> host = host_resident_values(plan, on_device);
  for (BucketShapes& trace : model.traces_) {
    trace.host_resident = host;
    for (size_t v = 0; v < count; ++v)
      if (!host[v] || plan.values()[v].is_constant) trace.host_values[v] = Tensor();
  }
  // Batch 3 must lie on the line through batch 1 and 2.
  LOKA_ASSIGN_OR_RETURN(BucketShapes predicted, model.at(3));
  const BucketShapes& actual = model.traces_[2];
  for (size_t v = 0; v < count; ++v) {
    const std::string& name = plan.values()[v].name;
    if (predicted.shapes[v] != actual.shapes[v])
      return Status::error("value '" + name + "': its shape " + shape_to_string(actual.shapes[v]) +
                           " at batch 3 is not affine in the batch size");
    if (actual.host_values[v].defined() && actual.host_values[v].to_floats() != predicted.host_values[v].to_floats())
      return Status::error("value '" + name + "': its host-computed contents are not affine in the batch size");
  }
  return model;
}

Result<BucketShapes> BatchShapeModel::at(int64_t batch) const {
  if (batch < 1) return Status::error("batch size must be >= 1, got " + std::to_string(batch));
  const BucketShapes& one = traces_[0];
  const BucketShapes& two = traces_[1];
  BucketShapes out;
  out.batch = batch;
  out.dtypes = one.dtypes;
  out.host_resident = one.host_resident;
  out.shapes.resize(one.shapes.size());
  out.host_values.resize(one.shapes.size());
  for (size_t v = 0; v < one.shapes.size(); ++v) {
    if (one.shapes[v].size() != two.shapes[v].size())
      return Status::error("value #" + std::to_string(v) + ": its rank changes with the batch size");
    if (one.dtypes[v] == DType::kUndefined) continue;  // never produced (an unused optional output)
    Shape shape(one.shapes[v].size());
    for (size_t d = 0; d < shape.size(); ++d) shape[d] = affine(one.shapes[v][d], two.shapes[v][d], batch);
    LOKA_RETURN_IF_ERROR(checked_element_count(shape).status());
    out.shapes[v] = shape;
    if (one.host_values[v].defined() && two.host_values[v].defined()) {
      LOKA_ASSIGN_OR_RETURN(out.host_values[v],
                            extrapolate_values(one.host_values[v], two.host_values[v], shape, batch,
                                               "#" + std::to_string(v)));
    }
  }
  return out;
}

}  // namespace loka
