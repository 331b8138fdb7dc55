// ============================================================================
// kernels/cuda/autotune_timing.cc — buffers, errors and graph-replay timing
// shared by the autotuners.
// ============================================================================
#include "kernels/cuda/autotune_timing.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace loka::cuda {
namespace {

std::shared_ptr<void> hold_for_timing(const TimingHold& hold) { return hold ? hold() : nullptr; }

}  // namespace

Status autotune_check(cudaError_t error, const char* what) {
  return error == cudaSuccess ? Status::ok()
                              : Status::error(std::string("autotune: ") + what + ": " + cudaGetErrorString(error));
}

DeviceBytes::~DeviceBytes() {
  if (data) cudaFree(data);
}

Status DeviceBytes::upload(const void* host, size_t bytes) {
  LOKA_RETURN_IF_ERROR(autotune_check(cudaMalloc(&data, std::max<size_t>(bytes, 256)), "cudaMalloc"));
  if (host && bytes) return autotune_check(cudaMemcpy(data, host, bytes, cudaMemcpyHostToDevice), "upload");
  return Status::ok();
}

AutotuneStream::~AutotuneStream() {
  if (stream) cudaStreamDestroy(stream);
}

Status AutotuneStream::create() {
  return autotune_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
}

double rel_l2(const std::vector<float>& y, const std::vector<float>& reference) {
  double error = 0, norm = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double d = static_cast<double>(y[i]) - reference[i];
    error += d * d;
    norm += static_cast<double>(reference[i]) * reference[i];
  }
  if (!std::isfinite(error)) return std::numeric_limits<double>::infinity();
  return norm > 0 ? std::sqrt(error / norm) : std::sqrt(error);
}

size_t rotating_set_count(size_t set_bytes, size_t rotate_bytes) {
  return std::clamp<size_t>((rotate_bytes + set_bytes - 1) / std::max<size_t>(set_bytes, 1), 1, 64);
}

Result<CapturedCandidate> CapturedCandidate::capture(size_t set_count,
                                                     const std::function<Status(size_t, cudaStream_t)>& enqueue,
                                                     cudaStream_t stream) {
  CapturedCandidate captured;
  for (size_t set = 0; set < set_count; ++set) {
    LOKA_RETURN_IF_ERROR(autotune_check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "capture"));
    const Status status = enqueue(set, stream);
    cudaGraph_t graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(stream, &graph);
    cudaGraphExec_t exec = nullptr;
    const cudaError_t instantiated =
        status && end == cudaSuccess ? cudaGraphInstantiate(&exec, graph, 0) : cudaErrorStreamCaptureInvalidated;
    if (graph) cudaGraphDestroy(graph);
    if (!status || end != cudaSuccess || instantiated != cudaSuccess) {
      cudaGetLastError();  // clear the (non-sticky) error a failed capture leaves behind
      return status ? autotune_check(end != cudaSuccess ? end : instantiated, "graph capture") : status;
    }
    captured.graphs_.push_back(exec);
  }
  return captured;
}

CapturedCandidate::~CapturedCandidate() {
  for (cudaGraphExec_t exec : graphs_) cudaGraphExecDestroy(exec);
}

Result<std::vector<float>> CapturedCandidate::time(int warmup, int repeats, cudaStream_t stream,
                                                   const TimingHold& hold) const {
  // One event pair per timed launch, all enqueued before waiting: the GPU never idles between
  // launches waiting for the host, so host launch cost stays out.
  const size_t count = static_cast<size_t>(std::max(repeats, 1));
  std::vector<cudaEvent_t> events(2 * count, nullptr);
  struct EventGuard {
    std::vector<cudaEvent_t>& events;
    ~EventGuard() {
      for (cudaEvent_t event : events)
        if (event) cudaEventDestroy(event);
    }
  } guard{events};
  for (cudaEvent_t& event : events) LOKA_RETURN_IF_ERROR(autotune_check(cudaEventCreate(&event), "cudaEventCreate"));
  const size_t sets = graphs_.size();
  const std::shared_ptr<void> held = hold_for_timing(hold);
  for (int i = 0; i < warmup; ++i) cudaGraphLaunch(graphs_[static_cast<size_t>(i) % sets], stream);
  for (size_t i = 0; i < count; ++i) {
    cudaEventRecord(events[2 * i], stream);
    cudaGraphLaunch(graphs_[(i + static_cast<size_t>(std::max(warmup, 0))) % sets], stream);
    cudaEventRecord(events[2 * i + 1], stream);
  }
  LOKA_RETURN_IF_ERROR(autotune_check(cudaStreamSynchronize(stream), "timed replays"));
  std::vector<float> times;
  for (size_t i = 0; i < count; ++i) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]) == cudaSuccess) times.push_back(ms * 1000.0f);
  }
  if (times.empty()) return Status::error("autotune: no timed replay could be read");
  return times;
}

double median_of(std::vector<float> samples) {
  if (samples.empty()) return std::nan("");
  std::nth_element(samples.begin(), samples.begin() + static_cast<long>(samples.size() / 2), samples.end());
  return samples[samples.size() / 2];
}

std::vector<size_t> close_winners(const std::vector<double>& medians, const std::vector<int>& families) {
  std::vector<size_t> chosen;
  std::vector<int> seen;
  std::vector<size_t> family_best;  // each family's fastest
  for (size_t i = 0; i < families.size(); ++i) {
    const int family = families[i];
    if (std::find(seen.begin(), seen.end(), family) != seen.end()) continue;
    seen.push_back(family);
    std::vector<size_t> members;
    for (size_t j = i; j < families.size(); ++j)
      if (families[j] == family && std::isfinite(medians[j])) members.push_back(j);
    if (members.empty()) continue;
    std::stable_sort(members.begin(), members.end(), [&](size_t a, size_t b) { return medians[a] < medians[b]; });
    const double best = medians[members.front()];
    if (!(best < kRetimeBelowUs)) continue;
    std::vector<size_t> close;
    for (size_t j : members)
      if (close_to(medians[j], best) && close.size() < kMostRetimed) close.push_back(j);
    if (close.size() >= 2) chosen.insert(chosen.end(), close.begin(), close.end());
    family_best.push_back(members.front());
  }
  // Across families: Dispatch picks between them too where both are free (BF16 for an FP8 node),
  // so the families' fastest, when close to the fastest of all, are re-timed side by side.
  std::vector<size_t> close_families;
  if (!family_best.empty()) {
    const double best = medians[*std::min_element(family_best.begin(), family_best.end(),
                                                  [&](size_t a, size_t b) { return medians[a] < medians[b]; })];
    if (best < kRetimeBelowUs)
      for (size_t j : family_best)
        if (close_to(medians[j], best)) close_families.push_back(j);
  }
  if (close_families.size() >= 2) chosen.insert(chosen.end(), close_families.begin(), close_families.end());
  std::sort(chosen.begin(), chosen.end());
  chosen.erase(std::unique(chosen.begin(), chosen.end()), chosen.end());
  return chosen;
}

Status refine_close_winners(std::vector<TimedCandidate>& candidates, int rounds, int repeats, cudaStream_t stream,
                            const TimingHold& hold) {
  std::vector<double> medians;
  std::vector<int> families;
  for (const TimedCandidate& c : candidates) {
    medians.push_back(c.runs ? c.median_us() : std::numeric_limits<double>::infinity());
    families.push_back(c.family);
  }
  const std::vector<size_t> close = close_winners(medians, families);
  if (close.empty()) return Status::ok();
  const std::shared_ptr<void> held = hold_for_timing(hold);
  for (int round = 0; round < rounds; ++round)
    for (size_t i : close) {
      TimedCandidate& c = candidates[i];
      LOKA_ASSIGN_OR_RETURN(const std::vector<float> times, c.runs->time(/*warmup=*/1, repeats, stream));
      c.samples.insert(c.samples.end(), times.begin(), times.end());
    }
  return Status::ok();
}

}  // namespace loka::cuda
