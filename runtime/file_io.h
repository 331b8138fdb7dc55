// ============================================================================
// runtime/file_io.h — whole-file and ranged reads with one-line errors, and
// read-only mappings for the model files too large to copy twice.
// ============================================================================
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "loka/status.h"

namespace loka {

/// The whole file; an error names the path (missing, a directory, unreadable).
Result<std::vector<std::byte>> read_file(const std::filesystem::path& path);
/// `length` bytes from `offset`; the range must lie inside the file.
Result<std::vector<std::byte>> read_file_range(const std::filesystem::path& path, uint64_t offset, uint64_t length);

/// A regular file's bytes, mapped read-only: the page cache's own pages, where read_file makes a
/// zeroed buffer and copies into it (1.3 GB of model took a second that way). The file must not
/// shrink while mapped (a read past its new end faults), so hold a mapping only as long as it
/// takes to copy out what is needed.
class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(data_), size_}; }

 private:
  friend Result<MappedFile> map_file(const std::filesystem::path& path);
  void* data_ = nullptr;
  size_t size_ = 0;
};

/// Maps `path` (an empty file maps to no bytes); an error names the path, as read_file's do.
Result<MappedFile> map_file(const std::filesystem::path& path);

}  // namespace loka
