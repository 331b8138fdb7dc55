// ============================================================================
// passes/dispatch/file_lock.h — an exclusive lock shared between processes.
//
// Two things in dispatch are shared by every loka-opt on a machine: the perf
// DB file, and the GPU while it is being timed (another process's kernels on
// the same GPU stretch a timing by whole scheduler time slices, and the perf
// DB would keep that figure for every later run). Both are guarded by an
// flock on a file next to what it guards.
// ============================================================================
#pragma once

#include <filesystem>

namespace loka::dispatch {

/// An exclusive flock on `path` (created when missing), held until destruction. Opening the file
/// can fail (a read-only folder); the lock is then a no-op: the guarded work still runs, only
/// without protection against another process.
class FileLock {
 public:
  explicit FileLock(const std::filesystem::path& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  /// True when another process held the lock and this one waited for it.
  bool waited() const { return waited_; }
  /// True when the lock is held (false only when the file could not be opened).
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
  bool waited_ = false;
};

}  // namespace loka::dispatch
