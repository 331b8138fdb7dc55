// ============================================================================
// tests/cuda/device_memory_test.cc — the ledger of LoKA's own device
// allocations (kernels/cuda/device_memory.h): what the benchmark reports as
// LoKA's peak memory. Allocations and frees move the live count by their
// exact sizes, the peak holds the most at once until reset, and a Session
// serving a zoo model allocates through it (arenas, weights), then returns
// its share when destroyed.
// Skips with the reason printed when no CUDA device is present (CI).
// ============================================================================
#include <gtest/gtest.h>

#include <string>

#include "kernels/cuda/device.h"
#include "kernels/cuda/device_memory.h"
#include "loka/engine.h"
#include "loka/session.h"
#include "runtime/cuda/device_buffer.h"
#include "runtime/test_data.h"
#include "test_support.h"

namespace loka {
namespace {

class DeviceMemoryLedger : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = cuda::device_unavailable_reason();
    if (!reason.empty()) GTEST_SKIP() << "GPU test skipped: " << reason;
  }
};

TEST_F(DeviceMemoryLedger, CountsEachAllocationUntilItIsFreed) {
  const size_t before = cuda::device_memory_use().live_bytes;
  cuda::reset_device_memory_peak();
  {
    auto a = cuda::DeviceBuffer::allocate(3 << 20);
    ASSERT_TRUE(a) << a.status().message();
    auto b = cuda::DeviceBuffer::allocate(1000);
    ASSERT_TRUE(b) << b.status().message();
    EXPECT_EQ(cuda::device_memory_use().live_bytes, before + (3 << 20) + 1000);
    cuda::DeviceBuffer moved = std::move(*a);  // a move neither allocates nor frees
    EXPECT_EQ(cuda::device_memory_use().live_bytes, before + (3 << 20) + 1000);
  }
  EXPECT_EQ(cuda::device_memory_use().live_bytes, before);
  EXPECT_EQ(cuda::device_memory_use().peak_bytes, before + (3 << 20) + 1000);
  cuda::reset_device_memory_peak();
  EXPECT_EQ(cuda::device_memory_use().peak_bytes, before);
}

TEST_F(DeviceMemoryLedger, FreeingAnUnknownOrNullPointerLeavesTheCountAlone) {  // negative twin
  const size_t before = cuda::device_memory_use().live_bytes;
  cuda::device_free(nullptr);
  void* foreign = nullptr;
  ASSERT_EQ(cudaMalloc(&foreign, 4096), cudaSuccess);  // not LoKA's: never counted
  cuda::device_free(foreign);
  EXPECT_EQ(cuda::device_memory_use().live_bytes, before);
}

TEST_F(DeviceMemoryLedger, ASessionsArenasAreCountedAndReturned) {
  const auto folder = testing::source_dir() / "models" / "zoo" / "dlrm_dcnv2";
  EngineOptions options;
  options.device = Device::kCuda;
  auto engine = Engine::load_file(folder / "model.onnx", options);
  ASSERT_TRUE(engine) << engine.status().message();
  auto reader = DataSetReader::open(folder / "eval");
  ASSERT_TRUE(reader) << reader.status().message();
  auto data = reader->read(0);
  ASSERT_TRUE(data) << data.status().message();
  std::vector<std::string> names;
  for (const TensorInfo& info : (*engine)->inputs()) names.push_back(info.name);
  auto inputs = order_inputs(*data, names);
  ASSERT_TRUE(inputs) << inputs.status().message();

  const size_t loaded = cuda::device_memory_use().live_bytes;
  {
    auto session = (*engine)->new_session();
    auto outputs = session->run(*inputs);
    ASSERT_TRUE(outputs) << outputs.status().message();
    EXPECT_GT(cuda::device_memory_use().live_bytes, loaded) << "a planned Session holds arenas";
  }
  EXPECT_EQ(cuda::device_memory_use().live_bytes, loaded) << "a destroyed Session returns what it allocated";
}

}  // namespace
}  // namespace loka
