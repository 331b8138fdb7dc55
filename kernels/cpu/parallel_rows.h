// ============================================================================
// kernels/cpu/parallel_rows.h — split independent rows over the cores this
// process may use.
//
// Compile-time work over weights (FP8-quantizing gigabytes of embedding rows
// in insert-scales, the Probe's per-site runs) is row-independent; on the
// 16-core GPU machine one thread left it the slowest part of a warm
// `loka-opt`. Each chunk writes only its own rows, so results do not depend
// on the thread count. parallel_for_each_index hands out whole jobs of very
// unequal size (the Probe's per-site statistics) one at a time instead.
// ============================================================================
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#ifdef __linux__
#include <sched.h>
#endif

namespace loka::cpu {

/// Cores this process may run on: its CPU affinity (taskset, cgroups' cpusets), which
/// std::thread::hardware_concurrency ignores; at least 1.
inline size_t usable_cores() {
#ifdef __linux__
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return static_cast<size_t>(std::max(1, CPU_COUNT(&set)));
#endif
  return std::max(1u, std::thread::hardware_concurrency());
}

/// Calls `body(begin, end)` on disjoint row ranges covering [0, rows), on up to usable_cores()
/// threads with at least `min_rows` rows each (small jobs stay on the calling thread).
template <typename Body>
void parallel_rows(int64_t rows, int64_t min_rows, Body body) {
  const int64_t chunks = std::clamp<int64_t>(rows / std::max<int64_t>(1, min_rows), 1,
                                             static_cast<int64_t>(usable_cores()));
  if (chunks <= 1) {
    body(int64_t{0}, rows);
    return;
  }
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(chunks - 1));
  const int64_t step = (rows + chunks - 1) / chunks;
  for (int64_t begin = step; begin < rows; begin += step)
    threads.emplace_back([&body, begin, end = std::min(rows, begin + step)] { body(begin, end); });
  body(int64_t{0}, std::min(rows, step));
  for (std::thread& thread : threads) thread.join();
}

/// Calls `body(i)` for every i in [0, count) on up to usable_cores() threads, each taking the next
/// index when it is done with one: for jobs of very unequal size, where fixed chunks as in
/// parallel_rows would leave most threads idle. Each index runs on one thread, once.
template <typename Body>
void parallel_for_each_index(size_t count, Body body) {
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t i = next++; i < count; i = next++) body(i);
  };
  std::vector<std::thread> threads;
  for (size_t t = 1; t < std::min(count, usable_cores()); ++t) threads.emplace_back(work);
  work();
  for (std::thread& thread : threads) thread.join();
}

}  // namespace loka::cpu
