// ============================================================================
// runtime/cuda/ops/data_movement.cc — Transpose, Concat, Slice, Expand, Tile,
// Gather (axis 0), ai.loka.QuantizedGather and ai.loka.EmbeddingBags on the
// GPU (kernels/cuda/copy.h, embedding_bag.h). Arguments the CPU reads at run time (Slice starts, Tile
// repeats) are known when a bucket is planned, so the plan resolves them once,
// with the CPU's own rules (runtime/ops/op_helpers.h).
//
// Ids out of range: the kernels read nothing outside the table, write a zero
// row and raise the step's error flag; the run then fails naming the node
// (IndexPolicy::kError), as the CPU runtime does.
// ============================================================================
#include "kernels/cuda/copy.h"
#include "kernels/cuda/embedding_bag.h"
#include "runtime/cuda/ops/op_args.h"

namespace loka::cuda {
namespace {

size_t element_size(const DeviceOpInit& init) { return dtype_size(init.inputs[0].dtype); }

Result<DevicePlan> plan_transpose(const DeviceOpInit& init) {
  const Shape shape = init.inputs[0].shape;
  std::vector<int64_t> reversed(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) reversed[d] = static_cast<int64_t>(shape.size() - 1 - d);
  LOKA_ASSIGN_OR_RETURN(const std::vector<int64_t> perm, init.attributes.get_ints("perm", reversed));
  const size_t bytes = element_size(init);
  return device_function([=](auto in, auto out, const DeviceRunContext& context, int) {
    return launch_transpose(in[0].data, shape, perm, bytes, out[0].data, context.stream);
  });
}

Result<DevicePlan> plan_concat(const DeviceOpInit& init) {
  LOKA_ASSIGN_OR_RETURN(const int64_t axis_attr, init.attributes.get_int("axis"));
  LOKA_ASSIGN_OR_RETURN(const int axis, ops::normalize_axis(axis_attr, static_cast<int>(init.outputs[0].shape.size())));
  std::vector<std::vector<int64_t>> shapes;
  std::vector<bool> in_place;
  for (const DeviceValueInfo& input : init.inputs) {
    shapes.push_back(input.shape);
    in_place.push_back(input.written_in_place);
  }
  const size_t bytes = element_size(init);
  return device_function([=](auto in, auto out, const DeviceRunContext& context, int) {
    std::vector<const void*> sources;
    for (const DeviceTensor& t : in) sources.push_back(t.data);
    return launch_concat(sources, shapes, axis, bytes, out[0].data, context.stream, in_place);
  });
}

Result<DevicePlan> plan_slice(const DeviceOpInit& init) {
  ops::SliceArgs args;
  if (init.opset < 10) {
    LOKA_ASSIGN_OR_RETURN(args.starts, init.attributes.get_ints("starts"));
    LOKA_ASSIGN_OR_RETURN(args.ends, init.attributes.get_ints("ends"));
    LOKA_ASSIGN_OR_RETURN(args.axes, init.attributes.get_ints("axes", std::vector<int64_t>{}));
  } else {
    LOKA_ASSIGN_OR_RETURN(args.starts, planned_ints(init, 1, "starts"));
    LOKA_ASSIGN_OR_RETURN(args.ends, planned_ints(init, 2, "ends"));
    if (has_input(init, 3)) {
      LOKA_ASSIGN_OR_RETURN(args.axes, planned_ints(init, 3, "axes"));
    }
    if (has_input(init, 4)) {
      LOKA_ASSIGN_OR_RETURN(args.steps, planned_ints(init, 4, "steps"));
    }
  }
  const Shape shape = init.inputs[0].shape;
  LOKA_ASSIGN_OR_RETURN(const std::vector<ops::SliceWindow> windows, ops::slice_windows(shape, std::move(args)));
  std::vector<int64_t> starts, steps, out_shape;
  for (const ops::SliceWindow& w : windows) {
    starts.push_back(w.start);
    steps.push_back(w.step);
    out_shape.push_back(w.count);
  }
  if (out_shape != init.outputs[0].shape) return Status::error("the planned output shape disagrees with the slice");
  const size_t bytes = element_size(init);
  return device_function([=](auto in, auto out, const DeviceRunContext& context, int) {
    return launch_slice(in[0].data, shape, starts, steps, out_shape, bytes, out[0].data, context.stream);
  });
}

Result<DevicePlan> plan_expand(const DeviceOpInit& init) {
  const Shape shape = init.inputs[0].shape, out_shape = init.outputs[0].shape;
  const size_t bytes = element_size(init);
  return device_function([=](auto in, auto out, const DeviceRunContext& context, int) {
    return launch_expand(in[0].data, shape, out_shape, bytes, out[0].data, context.stream);
  });
}

Result<DevicePlan> plan_tile(const DeviceOpInit& init) {
  LOKA_ASSIGN_OR_RETURN(const std::vector<int64_t> repeats, planned_ints(init, 1, "repeats"));
  const Shape shape = init.inputs[0].shape;
  const size_t bytes = element_size(init);
  return device_function([=](auto in, auto out, const DeviceRunContext& context, int) {
    return launch_tile(in[0].data, shape, repeats, bytes, out[0].data, context.stream);
  });
}

/// Reports the error flag the gathers raise.
class GatherOp final : public DeviceOp {
 public:
  using Enqueue = std::function<Status(std::span<const DeviceTensor>, std::span<const DeviceTensor>,
                                       const DeviceRunContext&, int*)>;
  explicit GatherOp(Enqueue enqueue) : enqueue_(std::move(enqueue)) {}
  Status enqueue(std::span<const DeviceTensor> in, std::span<const DeviceTensor> out, const DeviceRunContext& context,
                 int step) const override {
    return enqueue_(in, out, context, context.error_flags ? context.error_flags + step : nullptr);
  }
  std::string error_text(int) const override { return "indices out of range (rows read as zeros on the device)"; }

 private:
  Enqueue enqueue_;
};

Status require_ids(const DeviceOpInit& init, size_t index) {
  const DType dtype = init.inputs[index].dtype;
  if (dtype == DType::kInt64 || dtype == DType::kInt32) return Status::ok();
  return Status::error("indices must be INT32 or INT64, got " + std::string(dtype_name(dtype)));
}

Result<DevicePlan> plan_gather(const DeviceOpInit& init) {
  LOKA_ASSIGN_OR_RETURN(const int64_t axis_attr, init.attributes.get_int("axis", 0));
  const Shape shape = init.inputs[0].shape;
  LOKA_ASSIGN_OR_RETURN(const int axis, ops::normalize_axis(axis_attr, static_cast<int>(shape.size())));
  LOKA_RETURN_IF_ERROR(require_ids(init, 1));
  // data = [outer, rows, inner...]: each of the `outer` slabs gathers its own rows.
  const int64_t rows = shape.empty() ? 0 : shape[static_cast<size_t>(axis)];
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  const size_t row_bytes = static_cast<size_t>(inner) * element_size(init);
  const bool ids_int64 = init.inputs[1].dtype == DType::kInt64;
  const int64_t count = element_count(init.inputs[1].shape);
  return DevicePlan{std::make_unique<GatherOp>([=](auto in, auto out, const DeviceRunContext& context, int* flag) {
                      return launch_gather_rows(in[0].data, rows, row_bytes, in[1].data, ids_int64, count,
                                                out[0].data, IndexPolicy::kError, flag, context.stream, outer);
                    }),
                    -1};
}

/// ai.loka.QuantizedGather: FP8 rows with per-row (or one) scale, FP32 out.
Result<DevicePlan> plan_quantized_gather(const DeviceOpInit& init) {
  if (init.inputs.size() < 3 || init.inputs[0].dtype != DType::kFloat8E4M3FN || init.inputs[0].shape.size() != 2)
    return Status::error("expects an FP8 E4M3FN table [V, D], row scales and indices");
  LOKA_RETURN_IF_ERROR(require_ids(init, 2));
  const int64_t rows = init.inputs[0].shape[0], dim = init.inputs[0].shape[1];
  const int64_t scales = element_count(init.inputs[1].shape);
  if (scales != rows && scales != 1) return Status::error("Row_scale must have V or 1 entries");
  const bool ids_int64 = init.inputs[2].dtype == DType::kInt64;
  const int64_t count = element_count(init.inputs[2].shape);
  return DevicePlan{std::make_unique<GatherOp>([=](auto in, auto out, const DeviceRunContext& context, int* flag) {
                      EmbeddingBagArgs args;
                      args.table = in[0].data;
                      args.format = EmbeddingFormat::kFp8E4M3;
                      args.row_scales = static_cast<const float*>(in[1].data);
                      args.per_row_scales = scales == rows;
                      args.rows = rows;
                      args.dim = dim;
                      args.ids = in[2].data;
                      args.ids_int64 = ids_int64;
                      args.bag = 1;
                      args.out = out[0].data;
                      args.out_dtype = DType::kFloat32;
                      args.policy = IndexPolicy::kError;
                      args.error_flag = flag;
                      return launch_embedding_bag(args, count, context.stream);
                    }),
                    -1};
}

/// ai.loka.EmbeddingBags: every table pools its column range of Indices straight
/// into token t of the [B, T, D] output (FP32 or BF16), as few launches as formats allow.
Result<DevicePlan> plan_embedding_bags(const DeviceOpInit& init) {
  if (init.inputs.size() < 2 || init.outputs.size() != 1 || init.outputs[0].shape.size() != 3)
    return Status::error("expects Indices, at least one table and a [B, T, D] output");
  LOKA_RETURN_IF_ERROR(require_ids(init, 0));
  const Shape ids_shape = init.inputs[0].shape;
  if (ids_shape.size() != 2) return Status::error("Indices must be 2-D [B, H]");
  const size_t tables = init.inputs.size() / 2;
  LOKA_ASSIGN_OR_RETURN(const std::vector<int64_t> offsets, init.attributes.get_ints("offsets"));
  LOKA_ASSIGN_OR_RETURN(const DType out_dtype, output_dtype_attribute(init));
  if (offsets.size() != tables + 1 || offsets.back() > ids_shape[1])
    return Status::error("attribute 'offsets' does not match " + std::to_string(tables) + " tables over " +
                         std::to_string(ids_shape[1]) + " id columns");
  const int64_t dim = init.outputs[0].shape[2];
  // Asked to write into a Concat's output (runtime/concat_placement.h): each sample's [T, D] is a
  // row of that output, `row_pitch` elements from the next (of the output's dtype: strides and
  // the column offset count elements, which the kernel sizes by out_dtype).
  const int64_t sample_elements = static_cast<int64_t>(tables) * dim;
  const int64_t row_pitch = init.outputs[0].row_pitch;
  if (row_pitch != 0 && row_pitch < sample_elements)
    return Status::error("output row pitch " + std::to_string(row_pitch) + " is below a sample's " +
                         std::to_string(sample_elements) + " elements");
  std::vector<EmbeddingBagArgs> plan(tables);
  for (size_t t = 0; t < tables; ++t) {
    const DeviceValueInfo& table = init.inputs[1 + 2 * t];
    if (!table.present || table.shape.size() != 2 || table.shape[1] != dim)
      return Status::error("Table_" + std::to_string(t) + " must be [V, " + std::to_string(dim) + "]");
    if (offsets[t] < 0 || offsets[t + 1] <= offsets[t])
      return Status::error("attribute 'offsets' must be strictly increasing from >= 0");
    EmbeddingBagArgs& args = plan[t];
    args.rows = table.shape[0];
    args.dim = dim;
    args.ids_int64 = init.inputs[0].dtype == DType::kInt64;
    args.bag = offsets[t + 1] - offsets[t];
    args.ids_row_stride = ids_shape[1];
    args.out_dtype = out_dtype;
    args.out_row_stride = row_pitch != 0 ? row_pitch : sample_elements;
    args.out_column_offset = static_cast<int64_t>(t) * dim;
    args.policy = IndexPolicy::kError;
    if (table.dtype == DType::kFloat32) {
      args.format = EmbeddingFormat::kFloat32;
    } else if (table.dtype == DType::kBFloat16) {
      // Rows widen exactly (bits << 16) and pool in FP32 as a float32 table's: half the bytes per row.
      args.format = EmbeddingFormat::kBFloat16;
    } else if (table.dtype == DType::kFloat8E4M3FN && has_input(init, 2 + 2 * t)) {
      const int64_t scales = element_count(init.inputs[2 + 2 * t].shape);
      if (scales != args.rows && scales != 1)
        return Status::error("Row_scale_" + std::to_string(t) + " must have V or 1 entries");
      args.format = EmbeddingFormat::kFp8E4M3;
      args.per_row_scales = scales == args.rows;
    } else {
      return Status::error("Table_" + std::to_string(t) + " must be FLOAT, BFLOAT16, or FLOAT8E4M3FN with a Row_scale");
    }
  }
  const int64_t batch = ids_shape[0];
  // The pointers are bound per enqueue (a copy: the plan stays immutable and shareable); enqueue
  // runs when a bucket's graph is captured, not on every replay.
  return DevicePlan{std::make_unique<GatherOp>([=](auto in, auto out, const DeviceRunContext& context, int* flag) {
                      std::vector<EmbeddingBagArgs> bound = plan;
                      const size_t id_bytes = bound[0].ids_int64 ? 8 : 4;
                      for (size_t t = 0; t < bound.size(); ++t) {
                        bound[t].table = in[1 + 2 * t].data;
                        if (bound[t].format == EmbeddingFormat::kFp8E4M3)
                          bound[t].row_scales = static_cast<const float*>(in[2 + 2 * t].data);
                        bound[t].ids = static_cast<const char*>(in[0].data) + offsets[t] * id_bytes;
                        bound[t].out = out[0].data;
                        bound[t].error_flag = flag;
                      }
                      return launch_embedding_bags(bound.data(), static_cast<int>(bound.size()), batch, context.stream);
                    }),
                    -1, /*output_pitched=*/row_pitch != 0};
}

/// EmbeddingBags writes each sample's [T, D] as one row, with the row stride it is given.
std::vector<int64_t> embedding_bags_pitched_rows(const PlanStep& step, const BucketShapes& shapes) {
  const Shape& out = shapes.shapes[static_cast<size_t>(step.outputs[0])];
  if (out.size() != 3) return {};
  return {out[1] * out[2]};
}

}  // namespace

void register_data_movement_device_ops(DeviceOpRegistry& registry) {
  registry.add("", "Transpose", plan_transpose);
  registry.add("", "Concat", plan_concat);
  registry.add("", "Slice", plan_slice);
  registry.add("", "Expand", plan_expand);
  registry.add("", "Tile", plan_tile);
  registry.add("", "Gather", plan_gather);
  registry.add("ai.loka", "QuantizedGather", plan_quantized_gather);
  registry.add("ai.loka", "EmbeddingBags", plan_embedding_bags, embedding_bags_pitched_rows);
}

}  // namespace loka::cuda
