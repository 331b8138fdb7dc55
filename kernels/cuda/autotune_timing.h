// ============================================================================
// kernels/cuda/autotune_timing.h — what the GEMM and norm autotuners share:
// device buffers, the relative L2 error, synthetic values, and timing a
// candidate as the runtime runs it (CUDA graphs replayed, device events).
//
// A candidate is captured into one CUDA graph per input set (the runtime
// replays whole-model graphs, so host launch cost is not part of a kernel's
// time), then replayed: warm-up launches, then timed ones rotating through
// the sets (more memory than the 50 MB L2, so each launch reads from HBM as
// a model's does), each between two events, all enqueued before waiting.
//
// Close winners are timed again (`refine_close_winners`): one round of 15
// launches per candidate has ranked a BF16 algorithm of an 8 µs GEMM first
// that later re-timed at twice the runner-up's time (DHEN at batch 512, H100,
// 2026-11-26). Per family (a precision Dispatch may be held to), the fastest
// few within kCloseFactor (or kCloseMarginUs) of the family's fastest, when that is a short
// kernel, run further rounds, interleaved so that clock and thermal drift
// reach them alike, and each keeps the median of all its samples. So do the
// families' fastest when that close to each other: Dispatch picks
// between families where both are free (BF16 for an FP8 node), and one round
// each ranked an FP8 kernel of Wukong first that the issue-7 check re-timed at
// 1.057x the BF16 one (7 µs, H200, 2026-11-26).
// ============================================================================
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "loka/status.h"

namespace loka::cuda {

/// "autotune: WHAT: cudaGetErrorString" unless `error` is cudaSuccess.
Status autotune_check(cudaError_t error, const char* what);

/// A device allocation freed on scope exit.
struct DeviceBytes {
  void* data = nullptr;
  DeviceBytes() = default;
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  DeviceBytes(DeviceBytes&& other) noexcept : data(std::exchange(other.data, nullptr)) {}
  ~DeviceBytes();
  /// Allocates `bytes` (at least 256) and copies `host` into it when given.
  Status upload(const void* host, size_t bytes);
};

/// A non-blocking stream destroyed on scope exit.
struct AutotuneStream {
  cudaStream_t stream = nullptr;
  AutotuneStream() = default;
  AutotuneStream(const AutotuneStream&) = delete;
  AutotuneStream& operator=(const AutotuneStream&) = delete;
  ~AutotuneStream();
  Status create();
};

/// sqrt(Σ (y - r)² / Σ r²) in double; infinity when y holds a non-finite value.
double rel_l2(const std::vector<float>& y, const std::vector<float>& reference);

/// Values drawn for the first this many elements of a synthetic operand, then repeated: drawing
/// every value of a batch-16384 problem cost about a second, and a kernel's speed does not depend
/// on them.
inline constexpr size_t kDrawnValues = size_t{1} << 22;

/// values[i] = draw() for the first kDrawnValues, then those values again, cyclically.
template <typename Draw>
void fill_repeating(std::vector<float>& values, Draw draw) {
  const size_t drawn = std::min(values.size(), kDrawnValues);
  for (size_t i = 0; i < drawn; ++i) values[i] = draw();
  for (size_t i = drawn; i < values.size(); i += drawn)
    std::copy_n(values.begin(), std::min(drawn, values.size() - i), values.begin() + static_cast<long>(i));
}

/// How many input sets of `set_bytes` rotate through `rotate_bytes` (1 to 64).
size_t rotating_set_count(size_t set_bytes, size_t rotate_bytes);

/// Called around every timing an autotuner does (a candidate's timed replays, the re-timing of
/// close winners); what it returns is held while timing. Dispatch passes one that takes the GPU's
/// lock shared between processes (passes/dispatch/gpu_timer.cc), so another loka-opt's kernels
/// never run inside a timing, while the work around timings (plans, captures, reference GEMMs,
/// error runs) proceeds in every process at once. Empty: nothing is held.
using TimingHold = std::function<std::shared_ptr<void>()>;

/// One candidate captured as a CUDA graph per input set.
class CapturedCandidate {
 public:
  /// Captures `enqueue(set, stream)` for set = 0..set_count-1; an error when a capture or the
  /// enqueue fails (the caller leaves the candidate out).
  static Result<CapturedCandidate> capture(size_t set_count, const std::function<Status(size_t, cudaStream_t)>& enqueue,
                                           cudaStream_t stream);
  CapturedCandidate(CapturedCandidate&& other) noexcept : graphs_(std::exchange(other.graphs_, {})) {}
  CapturedCandidate& operator=(CapturedCandidate&&) = delete;
  CapturedCandidate(const CapturedCandidate&) = delete;
  ~CapturedCandidate();
  /// `warmup` replays, then `repeats` timed ones rotating through the sets; their times in µs.
  /// `hold` is held from the first replay until the times are read.
  Result<std::vector<float>> time(int warmup, int repeats, cudaStream_t stream, const TimingHold& hold = {}) const;

 private:
  CapturedCandidate() = default;
  std::vector<cudaGraphExec_t> graphs_;
};

/// The median of `samples` (the upper one of an even count); NaN when empty.
double median_of(std::vector<float> samples);

/// A candidate's timing as the autotuners accumulate it.
struct TimedCandidate {
  std::shared_ptr<const CapturedCandidate> runs;  ///< kept only while it may be re-timed
  std::vector<float> samples;  ///< every timed launch, µs
  /// Candidates compete within a family (Dispatch's choice between families turns on their
  /// error, within one on time alone): the GEMM autotuner's precision and accumulation.
  int family = 0;
  double median_us() const { return median_of(samples); }
};

/// Per family, candidates within this factor of the family's fastest median, or within
/// kCloseMarginUs of it, are re-timed: at most kMostRetimed of them, the fastest, and only when
/// that one is under kRetimeBelowUs. Noise between two runs of one kernel is a few µs of launch and
/// clock ramp, a large share of a short kernel and a small one of a long one, and re-timing the
/// long ones was seconds of a cold loka-opt's budget. The margin: a DHEN GEMM of 8 µs (batch 512,
/// H200, 2026-11-27) kept a BF16 tile configuration that the issue-7 check re-timed at 1.14x
/// another BF16 algorithm, which one round had put beyond 1.2x.
inline constexpr double kCloseFactor = 1.2;
inline constexpr double kCloseMarginUs = 3.0;
inline constexpr size_t kMostRetimed = 3;
inline constexpr double kRetimeBelowUs = 100.0;

/// Whether `median_us` is close enough to `best_us` to be re-timed beside it.
inline bool close_to(double median_us, double best_us) {
  return median_us <= std::max(best_us * kCloseFactor, best_us + kCloseMarginUs);
}

/// Whether a candidate timed at `median_us` could be among the close winners: only those keep
/// their captured runs (and kernels) until refinement, so memory stays that of a few candidates.
inline bool may_be_retimed(double median_us) {
  return median_us < std::max(kRetimeBelowUs * kCloseFactor, kRetimeBelowUs + kCloseMarginUs);
}

/// The indices refine_close_winners re-times, given each candidate's median and family (the rule
/// above: per family, when two or more are close; across families, each family's fastest when two
/// or more of those are close to the fastest of all), ascending, each once.
std::vector<size_t> close_winners(const std::vector<double>& medians, const std::vector<int>& families);

/// Re-times the close winners (see the banner): `rounds` rounds of `repeats` launches each,
/// interleaved across them, appended to their samples. `hold` is held once across all rounds
/// (the interleaving compares them on one GPU state), and not at all when none is close.
Status refine_close_winners(std::vector<TimedCandidate>& candidates, int rounds, int repeats, cudaStream_t stream,
                            const TimingHold& hold = {});

}  // namespace loka::cuda
