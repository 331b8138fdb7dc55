// ============================================================================
// bench/kernel_trace_none.cc — KernelTrace where the CUDA toolkit has no CUPTI.
//
// loka_model_bench must still build and time models without CUPTI (a trimmed
// toolkit); a requested kernel trace then reports why it is missing, and the
// benchmark report says so next to the figures instead of a breakdown.
// ============================================================================
#include <string>

#include "bench/kernel_trace.h"

namespace loka::bench {

std::string short_kernel_name(const char* name) { return name ? std::string(name) : std::string("?"); }

Status KernelTrace::start() {
  return Status::error("kernel trace unavailable: CUPTI was not found when loka_model_bench was built");
}

Status KernelTrace::discard() {
  return Status::error("kernel trace unavailable: CUPTI was not found when loka_model_bench was built");
}

Result<KernelTraceResult> KernelTrace::stop() {
  return Status::error("kernel trace unavailable: CUPTI was not found when loka_model_bench was built");
}

}  // namespace loka::bench
