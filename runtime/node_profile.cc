// ============================================================================
// runtime/node_profile.cc — median step times and the CPU runtime's profile.
// ============================================================================
#include "runtime/node_profile.h"

#include <algorithm>
#include <chrono>

#include "runtime/cpu_executor.h"
#include "runtime/execution_plan.h"

namespace loka {
namespace {

/// Times each node's kernel: before_node starts the clock, after_node stops it. A replayed node
/// (no hooks) keeps 0; the CPU runtime replays none unless an observer asks.
class StepClock final : public Observer {
 public:
  explicit StepClock(size_t steps) : elapsed_ms_(steps, 0.0) {}
  void before_node(const NodeInfo& /*node*/, std::span<Tensor> /*inputs*/) override { started_ = Clock::now(); }
  void after_node(const NodeInfo& node, std::span<Tensor> /*outputs*/) override {
    elapsed_ms_[node.index] = std::chrono::duration<double, std::milli>(Clock::now() - started_).count();
  }
  const std::vector<double>& elapsed_ms() const { return elapsed_ms_; }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point started_;
  std::vector<double> elapsed_ms_;
};

}  // namespace

std::vector<double> median_per_step(const std::vector<std::vector<double>>& samples) {
  if (samples.empty()) return {};
  std::vector<double> medians(samples.front().size(), 0.0);
  std::vector<double> column(samples.size());
  for (size_t step = 0; step < medians.size(); ++step) {
    for (size_t run = 0; run < samples.size(); ++run) column[run] = samples[run][step];
    std::nth_element(column.begin(), column.begin() + static_cast<std::ptrdiff_t>(column.size() / 2), column.end());
    medians[step] = column[column.size() / 2];
  }
  return medians;
}

Result<std::vector<double>> profile_steps_on_cpu(const Engine& engine, BufferPool* pool, std::span<const Tensor> inputs,
                                                 int runs) {
  const size_t steps = engine.plan().steps().size();
  LOKA_RETURN_IF_ERROR(execute_on_cpu(engine, nullptr, pool, inputs).status());  // warm-up: the pool fills
  std::vector<std::vector<double>> samples;
  samples.reserve(static_cast<size_t>(runs));
  for (int run = 0; run < runs; ++run) {
    StepClock clock(steps);
    LOKA_RETURN_IF_ERROR(execute_on_cpu(engine, &clock, pool, inputs).status());
    samples.push_back(clock.elapsed_ms());
  }
  return median_per_step(samples);
}

std::vector<NodeTiming> node_timings(const Engine& engine, const std::vector<double>& step_ms) {
  const auto& steps = engine.plan().steps();
  std::vector<NodeTiming> timings;
  timings.reserve(steps.size());
  for (size_t s = 0; s < steps.size(); ++s)
    timings.push_back({steps[s].name, steps[s].op_type, steps[s].domain, s < step_ms.size() ? step_ms[s] : 0.0});
  return timings;
}

SlowestNodes slowest_first(std::vector<NodeTiming> nodes) {
  SlowestNodes out;
  for (const NodeTiming& node : nodes) out.total_ms += node.median_ms;
  std::stable_sort(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) { return a.median_ms > b.median_ms; });
  out.nodes = std::move(nodes);
  return out;
}

}  // namespace loka
