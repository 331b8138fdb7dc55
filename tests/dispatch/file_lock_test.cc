// ============================================================================
// tests/dispatch/file_lock_test.cc — FileLock excludes a second holder until
// the first lets go (flock locks belong to open file descriptions, so two
// locks in one process exclude each other as two processes' would), reports
// whether it waited, and degrades to a no-op where the file cannot be made.
// ============================================================================
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include "passes/dispatch/file_lock.h"
#include "test_support.h"

namespace loka::dispatch {
namespace {

TEST(FileLock, ASecondHolderWaitsUntilTheFirstReleases) {
  const std::filesystem::path path = loka::testing::make_temp_dir("file_lock") / "a.lock";
  std::optional<FileLock> first(std::in_place, path);
  ASSERT_TRUE(first->held());
  EXPECT_FALSE(first->waited());
  std::atomic<bool> acquired{false};
  bool second_waited = false;
  std::thread second([&] {
    const FileLock lock(path);
    acquired = true;
    second_waited = lock.waited();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(acquired.load()) << "the second lock was taken while the first was held";
  first.reset();
  second.join();
  EXPECT_TRUE(acquired.load());
  EXPECT_TRUE(second_waited);
}

TEST(FileLock, AFreeLockIsTakenWithoutWaiting) {  // negative twin of the above
  const std::filesystem::path path = loka::testing::make_temp_dir("file_lock_free") / "a.lock";
  { const FileLock earlier(path); }
  const FileLock lock(path);
  EXPECT_TRUE(lock.held());
  EXPECT_FALSE(lock.waited());
}

TEST(FileLock, AnUncreatableFileGivesANoOpLock) {
  const FileLock lock(loka::testing::make_temp_dir("file_lock_none") / "no_such_folder" / "x.lock");
  EXPECT_FALSE(lock.held());
  EXPECT_FALSE(lock.waited());
}

}  // namespace
}  // namespace loka::dispatch
