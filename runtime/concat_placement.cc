// ============================================================================
// runtime/concat_placement.cc — Concat inputs their producers can write in place.
// ============================================================================
#include "runtime/concat_placement.h"

#include <algorithm>
#include <climits>

#include "runtime/arena_plan.h"
#include "runtime/ops/op_helpers.h"
#include "runtime/view_ops.h"

namespace loka {
namespace {

/// cuBLASLt's aligned algorithms want 16-byte operands and leading dimensions.
constexpr int64_t kPlacementAlignmentBytes = 16;

int64_t product(const Shape& shape, size_t from) {
  int64_t count = 1;
  for (size_t d = from; d < shape.size(); ++d) count *= shape[d];
  return count;
}

/// Device buffers as a device session lays them out: each value in its root's buffer (views in
/// their input's, placed values in their Concat's output), alive from the first step writing
/// any of its values to the last reading one (inclusive; -1: a graph input; the end: an output).
class LiveBuffers {
 public:
  LiveBuffers(const ExecutionPlan& plan, const BucketShapes& shapes, const std::vector<int>& producer)
      : plan_(&plan),
        shapes_(&shapes),
        producer_(&producer),
        root_(plan.values().size()),
        ends_at_(plan.values().size(), -2),
        starts_by_(plan.values().size(), INT_MAX) {
    for (size_t v = 0; v < root_.size(); ++v) root_[v] = static_cast<int>(v);
    for (const PlanStep& step : plan.steps())
      if (is_view_op(step.domain, step.op_type) && !step.inputs.empty() && step.inputs[0] != kNoValue &&
          !step.outputs.empty() && step.outputs[0] != kNoValue)
        root_[static_cast<size_t>(step.outputs[0])] = root_[static_cast<size_t>(step.inputs[0])];
  }

  /// `value` and the views of it now live in `concat_output`'s buffer.
  void place(int value, int concat_output) {
    const int from = root_[static_cast<size_t>(value)];
    for (int& r : root_)
      if (r == from) r = concat_output;
  }

  /// `value`'s buffer is read for the last time at `step` (an early encode: its later reader, a
  /// ConcatQuant, finds the codes in its output instead).
  void end_at(int value, int step) { ends_at_[static_cast<size_t>(root_[static_cast<size_t>(value)])] = step; }

  /// `value`'s buffer is written from `step` on, at the latest (an early encode into it).
  void start_by(int value, int step) {
    int& start = starts_by_[static_cast<size_t>(root_[static_cast<size_t>(value)])];
    start = std::min(start, step);
  }

  /// The most bytes alive at once: what no arena can go below.
  size_t peak() const {
    const ExecutionPlan& plan = *plan_;
    const BucketShapes& shapes = *shapes_;
    const std::vector<int>& producer = *producer_;
    const auto& values = plan.values();
    const int steps = static_cast<int>(plan.steps().size());
    std::vector<int> first(values.size(), steps + 1), last(values.size(), -2);
    for (size_t v = 0; v < values.size(); ++v) {
      if (values[v].is_constant || shapes.host_resident[v] || shapes.dtypes[v] == DType::kUndefined) continue;
      const size_t r = static_cast<size_t>(root_[v]);
      if (values[r].is_constant || shapes.host_resident[r]) continue;  // a view of a constant or upload
      first[r] = std::min(first[r], producer[v]);
      last[r] = std::max({last[r], values[v].last_reader, values[v].is_graph_output ? steps : -1, producer[v]});
    }
    for (size_t r = 0; r < values.size(); ++r) {
      if (ends_at_[r] != -2) last[r] = ends_at_[r];
      first[r] = std::min(first[r], starts_by_[r]);
    }
    std::vector<ArenaRequest> buffers;
    for (size_t r = 0; r < values.size(); ++r) {
      if (last[r] < first[r]) continue;
      const size_t bytes = static_cast<size_t>(element_count(shapes.shapes[r])) * dtype_size(shapes.dtypes[r]);
      buffers.push_back({bytes, first[r], last[r]});
    }
    return arena_peak(buffers).live_bytes;
  }

 private:
  const ExecutionPlan* plan_;
  const BucketShapes* shapes_;
  const std::vector<int>* producer_;
  std::vector<int> root_;
  std::vector<int> ends_at_;    ///< per root: its last step when an early encode moved it (-2: none)
  std::vector<int> starts_by_;  ///< per root: the step it is written by at the latest (INT_MAX: its producer's)
};

/// Who makes and reads each value of a plan at one bucket, and which values may give their bytes
/// to another buffer.
struct PlanFacts {
  PlanFacts(const ExecutionPlan& plan, const BucketShapes& shapes)
      : plan(plan),
        shapes(shapes),
        reads(plan.values().size(), 0),
        producer(plan.values().size(), -1),
        output_slot(plan.values().size(), -1) {
    // Reads per value (once per input slot: a Concat reading a value twice reads it twice), and
    // which step and output slot produce it.
    const auto& steps = plan.steps();
    for (size_t s = 0; s < steps.size(); ++s) {
      for (int id : steps[s].inputs)
        if (id != kNoValue) ++reads[static_cast<size_t>(id)];
      for (size_t j = 0; j < steps[s].outputs.size(); ++j)
        if (const int id = steps[s].outputs[j]; id != kNoValue) {
          producer[static_cast<size_t>(id)] = static_cast<int>(s);
          output_slot[static_cast<size_t>(id)] = static_cast<int>(j);
        }
    }
  }

  /// Made on the device by a step, read once, and nobody else's to keep.
  bool movable(int id) const {
    const size_t v = static_cast<size_t>(id);
    const auto& values = plan.values();
    return id != kNoValue && producer[v] >= 0 && reads[v] == 1 && !values[v].is_graph_output &&
           !values[v].is_constant && !shapes.host_resident[v] && shapes.dtypes[v] != DType::kUndefined;
  }

  /// Back through views from `id` to the value whose bytes a step makes, when every value on the
  /// way is movable; kNoValue otherwise.
  int movable_source(int id) const {
    const auto& steps = plan.steps();
    int source = id;
    bool ok = movable(source);
    while (ok) {
      const PlanStep& step = steps[static_cast<size_t>(producer[static_cast<size_t>(source)])];
      if (!is_view_op(step.domain, step.op_type)) break;
      source = step.inputs.empty() ? kNoValue : step.inputs[0];
      ok = movable(source);
    }
    return ok ? source : kNoValue;
  }

  const ExecutionPlan& plan;
  const BucketShapes& shapes;
  std::vector<int> reads, producer, output_slot;
};

}  // namespace

std::vector<std::optional<ConcatPlacement>> plan_concat_placements(const ExecutionPlan& plan,
                                                                   const BucketShapes& shapes,
                                                                   const PitchedRowWidths& pitched_row_widths) {
  const auto& steps = plan.steps();
  const auto& values = plan.values();
  std::vector<std::optional<ConcatPlacement>> placements(values.size());
  const PlanFacts facts(plan, shapes);
  const std::vector<int>& producer = facts.producer;

  for (size_t s = 0; s < steps.size(); ++s) {
    const PlanStep& step = steps[s];
    if (step.op_type != "Concat" || !(step.domain.empty() || step.domain == "ai.onnx")) continue;
    if (step.outputs.empty() || step.outputs[0] == kNoValue) continue;
    const int out = step.outputs[0];
    const size_t o = static_cast<size_t>(out);
    if (shapes.host_resident[o] || shapes.dtypes[o] == DType::kUndefined) continue;
    const Shape& out_shape = shapes.shapes[o];
    const Result<int64_t> axis_attribute = step.attributes.get_int("axis");
    if (!axis_attribute) continue;
    const Result<int> normalized = ops::normalize_axis(*axis_attribute, static_cast<int>(out_shape.size()));
    if (!normalized) continue;
    const size_t axis = static_cast<size_t>(*normalized);
    const int64_t inner = product(out_shape, axis + 1);
    const int64_t row_pitch = out_shape[axis] * inner;
    const int64_t element_bytes = static_cast<int64_t>(dtype_size(shapes.dtypes[o]));
    int64_t along = 0;  // where this input starts along the axis
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      const int id = step.inputs[i];
      if (id == kNoValue) continue;
      const Shape& in_shape = shapes.shapes[static_cast<size_t>(id)];
      if (in_shape.size() != out_shape.size()) break;  // malformed: the Concat's own planning says so
      const int64_t offset = along * inner;
      const int64_t columns = in_shape[axis] * inner;
      along += in_shape[axis];
      // Back through views to the node that makes the bytes.
      const int source = facts.movable_source(id);
      if (source == kNoValue) continue;
      const size_t v = static_cast<size_t>(source);
      const Shape& produced = shapes.shapes[v];
      if (facts.output_slot[v] != 0 || shapes.dtypes[v] != shapes.dtypes[o] || produced.empty() || columns == 0)
        continue;
      const std::vector<int64_t> widths = pitched_row_widths(steps[static_cast<size_t>(producer[v])], shapes);
      if (std::find(widths.begin(), widths.end(), columns) == widths.end()) continue;
      if ((offset * element_bytes) % kPlacementAlignmentBytes != 0 ||
          (row_pitch * element_bytes) % kPlacementAlignmentBytes != 0)
        continue;
      placements[v] = ConcatPlacement{out, static_cast<int>(i), offset, row_pitch, columns};
    }
  }
  // A placed value's bytes are the Concat's from the producer's step on: when other large values
  // are alive in between, that can raise the peak. In DHEN an FP8 GEMM's [B,34,128] output placed
  // into its [B,34,640] Concat ahead of an attention block grew the arena by 18% at batch 4096
  // (H100, 2026-11-27). A placement is kept only where the peak of live bytes does not grow.
  LiveBuffers buffers(plan, shapes, producer);
  size_t peak = buffers.peak();
  for (size_t v = 0; v < placements.size(); ++v) {
    if (!placements[v]) continue;
    LiveBuffers trial = buffers;
    trial.place(static_cast<int>(v), placements[v]->concat_output);
    const size_t placed_peak = trial.peak();
    if (placed_peak > peak) {
      placements[v].reset();
      continue;
    }
    buffers = std::move(trial);
    peak = placed_peak;
  }
  return placements;
}

std::vector<EarlyEncode> plan_early_encodes(const ExecutionPlan& plan, const BucketShapes& shapes,
                                            const std::vector<std::optional<ConcatPlacement>>& placements) {
  const PlanFacts facts(plan, shapes);
  LiveBuffers buffers(plan, shapes, facts.producer);
  for (size_t v = 0; v < placements.size(); ++v)
    if (placements[v]) buffers.place(static_cast<int>(v), placements[v]->concat_output);
  size_t peak = buffers.peak();
  std::vector<EarlyEncode> encodes;
  const auto& steps = plan.steps();
  for (size_t s = 0; s < steps.size(); ++s) {
    const PlanStep& step = steps[s];
    if (step.op_type != "ConcatQuant" || step.domain != "ai.loka" || step.outputs.empty()) continue;
    const int out = step.outputs[0];
    if (out == kNoValue || shapes.host_resident[static_cast<size_t>(out)] ||
        shapes.dtypes[static_cast<size_t>(out)] == DType::kUndefined)
      continue;
    for (size_t i = 1; i < step.inputs.size(); ++i) {
      const int id = step.inputs[i];
      if (id == kNoValue || facts.movable_source(id) == kNoValue) continue;
      const int after = facts.producer[static_cast<size_t>(id)];
      // Encoded after its maker, the input's buffer is free from then on, but the codes are alive
      // from then: with other large values made in between, the peak can grow.
      LiveBuffers trial = buffers;
      trial.end_at(id, after);
      trial.start_by(out, after);
      const size_t encoded_peak = trial.peak();
      if (encoded_peak > peak) continue;
      buffers = std::move(trial);
      peak = encoded_peak;
      encodes.push_back(EarlyEncode{static_cast<int>(s), static_cast<int>(i), after});
    }
  }
  return encodes;
}

}  // namespace loka
