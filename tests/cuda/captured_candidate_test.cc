// ============================================================================
// tests/cuda/captured_candidate_test.cc — how the autotuners time a candidate
// (kernels/cuda/autotune_timing.h): one graph holding a launch per input set,
// each sample its replay's time over its launches. A graph of eight copies
// reports per launch about what a graph of one reports for its copy, while
// its replays take eight times as long; every launch of the graph runs (each
// set's buffer is written); a failing enqueue is an error that leaves the
// stream usable (negative twin).
// Skips with the reason printed when no CUDA device is present (CI).
// ============================================================================
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/cuda/autotune_timing.h"
#include "kernels/cuda/device.h"

namespace loka::cuda {
namespace {

class CapturedCandidateTiming : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = device_unavailable_reason();
    if (!reason.empty()) GTEST_SKIP() << "GPU test skipped: " << reason;
    ASSERT_TRUE(stream_.create());
  }
  AutotuneStream stream_;
};

constexpr size_t kCopyBytes = size_t{16} << 20;  // 16 MiB: tens of µs a copy, well above launch latency

TEST_F(CapturedCandidateTiming, SamplesArePerLaunchWhateverTheSetCount) {
  std::vector<DeviceBytes> sources(8), targets(8);
  for (size_t s = 0; s < 8; ++s) {
    ASSERT_TRUE(sources[s].upload(nullptr, kCopyBytes));
    ASSERT_TRUE(targets[s].upload(nullptr, kCopyBytes));
    ASSERT_EQ(cudaMemset(sources[s].data, static_cast<int>(s + 1), kCopyBytes), cudaSuccess);
  }
  const auto copy = [&](size_t set, cudaStream_t stream) {
    return autotune_check(
        cudaMemcpyAsync(targets[set].data, sources[set].data, kCopyBytes, cudaMemcpyDeviceToDevice, stream), "copy");
  };
  auto one = CapturedCandidate::capture(1, copy, stream_.stream);
  ASSERT_TRUE(one) << one.status().message();
  auto eight = CapturedCandidate::capture(8, copy, stream_.stream);
  ASSERT_TRUE(eight) << eight.status().message();
  EXPECT_EQ(one->launches(), 1u);
  EXPECT_EQ(eight->launches(), 8u);
  auto one_times = one->time(3, 15, stream_.stream);
  ASSERT_TRUE(one_times) << one_times.status().message();
  auto eight_times = eight->time(3, 15, stream_.stream);
  ASSERT_TRUE(eight_times) << eight_times.status().message();
  EXPECT_EQ(one_times->size(), 15u);
  EXPECT_EQ(eight_times->size(), 15u);
  const double per_launch_one = median_of(*one_times), per_launch_eight = median_of(*eight_times);
  std::printf("[ 16 MiB copy ] per launch: %.2f us alone, %.2f us in a graph of eight\n", per_launch_one,
              per_launch_eight);
  EXPECT_GT(per_launch_one, 0.0);
  EXPECT_GT(per_launch_eight, 0.5 * per_launch_one);  // a sample is per launch, not per replay of eight
  EXPECT_LT(per_launch_eight, 2.0 * per_launch_one);

  // Every launch ran: each target holds its own source's bytes.
  for (size_t s = 0; s < 8; ++s) {
    unsigned char first = 0;
    ASSERT_EQ(cudaMemcpy(&first, targets[s].data, 1, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(first, static_cast<unsigned char>(s + 1)) << "set " << s;
  }
}

TEST_F(CapturedCandidateTiming, AFailingEnqueueIsAnErrorAndTheStreamStaysUsable) {  // negative twin
  auto failed = CapturedCandidate::capture(
      4, [](size_t set, cudaStream_t) { return set == 2 ? Status::error("no kernel for set 2") : Status::ok(); },
      stream_.stream);
  ASSERT_FALSE(failed);
  EXPECT_NE(failed.status().message().find("no kernel for set 2"), std::string::npos) << failed.status().message();
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusActive;
  ASSERT_EQ(cudaStreamIsCapturing(stream_.stream, &capturing), cudaSuccess);
  EXPECT_EQ(capturing, cudaStreamCaptureStatusNone);
  DeviceBytes buffer;
  ASSERT_TRUE(buffer.upload(nullptr, 256));
  EXPECT_EQ(cudaMemsetAsync(buffer.data, 0, 256, stream_.stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream_.stream), cudaSuccess);
}

}  // namespace
}  // namespace loka::cuda
