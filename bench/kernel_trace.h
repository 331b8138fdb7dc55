// ============================================================================
// bench/kernel_trace.h — per-kernel device time of a stretch of GPU work,
// recorded with CUPTI's activity API.
//
// The benchmark runs LoKA's models as one CUDA graph per batch, so device
// events can only time the whole graph. To show where the time goes (which
// GEMMs, which gathers, how much is idle gap between kernels) a KernelTrace
// records every kernel that runs between start() and stop(), including the
// kernels inside graph launches, with start/end timestamps from the device.
// Tracing kernels needs no profiling privileges (unlike hardware counters)
// and leaves kernel concurrency alone (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).
// It adds a little launch overhead, so traced runs are never the timed ones;
// and since graphs instantiated before tracing began may not report their
// kernels, the caller traces a fresh Session planned while tracing is on.
// ============================================================================
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loka/status.h"

namespace loka::bench {

/// Device time of one kernel name over all traced runs.
struct KernelTime {
  std::string name;        ///< demangled, template arguments and parameters dropped
  int64_t launches = 0;    ///< over all traced runs
  double total_ms = 0;     ///< summed device time over all traced runs
};

/// What a trace saw: kernels by total time, largest first.
struct KernelTraceResult {
  std::vector<KernelTime> kernels;
  double busy_ms = 0;  ///< sum of kernel durations (overlapping kernels count twice)
  int64_t dropped_records = 0;
};

/// Records kernel activity between start() and stop(); one trace at a time per process.
class KernelTrace {
 public:
  /// Enables kernel activity recording (after the CUDA context exists). CUDA graphs
  /// instantiated from here on are traced node by node.
  static Status start();
  /// Waits for the device and forgets what was recorded so far (set-up runs), still recording.
  static Status discard();
  /// Waits for the device, flushes and disables recording, and returns what was seen.
  static Result<KernelTraceResult> stop();
};

/// `name` demangled (when it is a mangled C++ name) and cut to its base name:
/// "void loka::k<float, 4>(float const*, int)" -> "loka::k" (anonymous namespaces as
/// "{anon}"), so the instances of one template add up. Exposed for tests.
std::string short_kernel_name(const char* name);

}  // namespace loka::bench
