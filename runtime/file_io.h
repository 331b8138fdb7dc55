// ============================================================================
// runtime/file_io.h — whole-file and ranged reads with one-line errors.
// ============================================================================
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <vector>

#include "loka/status.h"

namespace loka {

/// The whole file; an error names the path (missing, a directory, unreadable).
Result<std::vector<std::byte>> read_file(const std::filesystem::path& path);
/// `length` bytes from `offset`; the range must lie inside the file.
Result<std::vector<std::byte>> read_file_range(const std::filesystem::path& path, uint64_t offset, uint64_t length);

}  // namespace loka
