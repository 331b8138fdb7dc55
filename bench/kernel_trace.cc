// ============================================================================
// bench/kernel_trace.cc — CUPTI activity buffers in, per-kernel totals out.
//
// CUPTI hands the records over in buffers it asks us for and returns when full
// or flushed; the callbacks run on CUPTI's thread, so the totals live behind a
// mutex. Records are folded into per-name totals as they arrive, which keeps
// memory flat however many runs are traced.
// ============================================================================
#include "bench/kernel_trace.h"

#include <cuda_runtime_api.h>
#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace loka::bench {
namespace {

constexpr size_t kBufferBytes = 8 << 20;
constexpr size_t kBufferAlign = 8;  // CUPTI requires 8-byte aligned activity buffers

struct Totals {
  std::mutex mutex;
  std::map<std::string, KernelTime> by_name;
  std::map<const char*, std::string> short_names;  // CUPTI keeps each name string alive: cache by pointer
  double busy_ns = 0;
  int64_t dropped = 0;
};

Totals& totals() {
  static Totals instance;
  return instance;
}

std::string cupti_error(const char* what, CUptiResult result) {
  const char* text = nullptr;
  cuptiGetResultString(result, &text);
  return std::string("CUPTI ") + what + ": " + (text ? text : "unknown error");
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t stream_id, uint8_t* buffer, size_t, size_t valid) {
  Totals& t = totals();
  std::lock_guard<std::mutex> lock(t.mutex);
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    auto cached = t.short_names.find(kernel->name);
    if (cached == t.short_names.end()) cached = t.short_names.emplace(kernel->name, short_kernel_name(kernel->name)).first;
    KernelTime& entry = t.by_name[cached->second];
    entry.name = cached->second;
    const double ns = static_cast<double>(kernel->end - kernel->start);
    entry.launches += 1;
    entry.total_ms += ns / 1e6;
    t.busy_ns += ns;
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(nullptr, stream_id, &dropped) == CUPTI_SUCCESS)
    t.dropped += static_cast<int64_t>(dropped);
  std::free(buffer);
}

void clear_totals() {
  Totals& t = totals();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.by_name.clear();
  t.busy_ns = 0;
  t.dropped = 0;
}

}  // namespace

std::string short_kernel_name(const char* name) {
  if (name == nullptr) return "?";
  std::string text = name;
  int status = -1;
  char* demangled = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status == 0 && demangled != nullptr) text = demangled;
  std::free(demangled);
  // "(anonymous namespace)" would read as a parameter list: name it without parentheses.
  for (size_t at; (at = text.find("(anonymous namespace)")) != std::string::npos;)
    text.replace(at, std::strlen("(anonymous namespace)"), "{anon}");
  // Drop template arguments and the parameter list (whichever starts first), then a return type.
  if (const size_t cut = text.find_first_of("<("); cut != std::string::npos) text.resize(cut);
  if (const size_t space = text.rfind(' '); space != std::string::npos) text = text.substr(space + 1);
  return text.empty() ? std::string(name) : text;
}

Status KernelTrace::start() {
  clear_totals();
  if (CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed); r != CUPTI_SUCCESS)
    return Status::error(cupti_error("register callbacks", r));
  if (CUptiResult r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); r != CUPTI_SUCCESS)
    return Status::error(cupti_error("enable kernel activity", r));
  return Status::ok();
}

Status KernelTrace::discard() {
  cudaDeviceSynchronize();
  if (CUptiResult r = cuptiActivityFlushAll(1); r != CUPTI_SUCCESS) return Status::error(cupti_error("flush", r));
  clear_totals();
  return Status::ok();
}

Result<KernelTraceResult> KernelTrace::stop() {
  cudaDeviceSynchronize();
  const CUptiResult flushed = cuptiActivityFlushAll(1);  // 1: CUPTI_ACTIVITY_FLAG_FLUSH_FORCED
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (flushed != CUPTI_SUCCESS) return Status::error(cupti_error("flush", flushed));
  Totals& t = totals();
  std::lock_guard<std::mutex> lock(t.mutex);
  KernelTraceResult result;
  for (const auto& [name, entry] : t.by_name) result.kernels.push_back(entry);
  std::sort(result.kernels.begin(), result.kernels.end(),
            [](const KernelTime& a, const KernelTime& b) { return a.total_ms > b.total_ms; });
  result.busy_ms = t.busy_ns / 1e6;
  result.dropped_records = t.dropped;
  return result;
}

}  // namespace loka::bench
