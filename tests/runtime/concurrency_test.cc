// ============================================================================
// tests/runtime/concurrency_test.cc — one Engine, many Sessions on many threads.
//
// The serving contract: an Engine is immutable and shared; each thread runs its
// own Session. Eight threads running a zoo model must give exactly the outputs
// of a single thread, and each Session's memory must stay flat run after run.
// (Also the workload the ThreadSanitizer build runs.)
// ============================================================================
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "loka/engine.h"
#include "loka/session.h"
#include "runtime/test_data.h"
#include "test_support.h"

namespace loka {
namespace {

TEST(Concurrency, EightSessionsMatchOneAndStayFlat) {
  const auto model = testing::source_dir() / "models" / "zoo" / "dlrm_dot";
  auto engine = Engine::load_file(model / "model.onnx");
  ASSERT_TRUE(engine) << engine.status().message();
  auto reader = DataSetReader::open(model / "calib");
  ASSERT_TRUE(reader);
  std::vector<std::string> names;
  for (const auto& info : (*engine)->inputs()) names.push_back(info.name);
  std::vector<std::vector<Tensor>> batches;
  std::vector<std::vector<float>> expected;
  for (size_t k = 0; k < reader->size(); ++k) {
    auto data = reader->read(k);
    ASSERT_TRUE(data);
    auto inputs = order_inputs(*data, names);
    ASSERT_TRUE(inputs);
    auto outputs = (*engine)->new_session()->run(*inputs);
    ASSERT_TRUE(outputs);
    batches.push_back(*inputs);
    expected.push_back((*outputs)[0].to_floats());
  }

  constexpr int kThreads = 8;
  constexpr int kRunsPerThread = 40;
  std::atomic<int> mismatches{0}, failures{0}, growth{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto session = (*engine)->new_session();
      size_t settled_bytes = 0;
      for (int run = 0; run < kRunsPerThread; ++run) {
        const size_t k = static_cast<size_t>(t + run) % batches.size();
        auto outputs = session->run(batches[k]);
        if (!outputs) {
          ++failures;
          continue;
        }
        if ((*outputs)[0].to_floats() != expected[k]) ++mismatches;
        // After one pass over every batch shape the pool must not grow.
        if (run == static_cast<int>(batches.size())) settled_bytes = session->pooled_bytes();
        if (run > static_cast<int>(batches.size()) && session->pooled_bytes() != settled_bytes) ++growth;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0) << "multi-threaded outputs differ from single-threaded ones";
  EXPECT_EQ(growth.load(), 0) << "a Session's buffer pool grew in steady state";
}

}  // namespace
}  // namespace loka
