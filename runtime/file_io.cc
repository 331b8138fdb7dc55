// ============================================================================
// runtime/file_io.cc — checked file reads.
// ============================================================================
#include "runtime/file_io.h"

#include <exception>
#include <fstream>

namespace loka {

Result<std::vector<std::byte>> read_file(const std::filesystem::path& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) return Status::error(path.string() + ": is a directory, not a file");
  const uintmax_t size = std::filesystem::file_size(path, error);
  if (error) return Status::error(path.string() + ": " + error.message());
  return read_file_range(path, 0, size);
}

Result<std::vector<std::byte>> read_file_range(const std::filesystem::path& path, uint64_t offset, uint64_t length) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error(path.string() + ": cannot open for reading");
  std::vector<std::byte> bytes;
  try {
    bytes.resize(length);
  } catch (const std::exception&) {  // bad_alloc or length_error: report, never abort
    return Status::error(path.string() + ": cannot allocate " + std::to_string(length) + " bytes to read it");
  }
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(length));
  if (static_cast<uint64_t>(in.gcount()) != length)
    return Status::error(path.string() + ": file ends before the " + std::to_string(length) + " bytes expected");
  return bytes;
}

}  // namespace loka
