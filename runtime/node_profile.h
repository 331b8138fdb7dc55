// ============================================================================
// runtime/node_profile.h — Session::profile_nodes: where a run's time goes,
// node by node.
//
// Whole-model latency says how fast; a profile says where to look. The CUDA
// backend times steps with device events (runtime/cuda/device_session.cc); the
// CPU runtime times each kernel with a steady clock through an Observer, so
// the executor stays the one Session::run uses. Both take the median of each
// step over the timed runs: one slow run (a page fault, a clock change) moves
// no node's figure.
// ============================================================================
#pragma once

#include <span>
#include <vector>

#include "loka/engine.h"
#include "loka/session.h"
#include "loka/status.h"
#include "loka/tensor.h"

namespace loka {

class BufferPool;

/// The median of each step's samples: samples[run][step] in milliseconds, every run with one
/// sample per step. The upper median of an even count (a real sample, not an average).
std::vector<double> median_per_step(const std::vector<std::vector<double>>& samples);

/// The CPU runtime's profile: one untimed run of `inputs`, then `runs` timed ones, each step's
/// kernel timed with a steady clock. Median milliseconds per step of the engine's plan.
Result<std::vector<double>> profile_steps_on_cpu(const Engine& engine, BufferPool* pool, std::span<const Tensor> inputs,
                                                 int runs);

/// The plan's steps with their times (`step_ms`, one per step), in execution order.
std::vector<NodeTiming> node_timings(const Engine& engine, const std::vector<double>& step_ms);

/// A profile as its readers list it (loka-run --profile, the benchmark's node table): the nodes
/// slowest first (ties in execution order) and the sum of every node's median.
struct SlowestNodes {
  std::vector<NodeTiming> nodes;
  double total_ms = 0;
};
SlowestNodes slowest_first(std::vector<NodeTiming> nodes);

}  // namespace loka
