// ============================================================================
// runtime/file_io.cc — checked file reads and read-only mappings.
// ============================================================================
#include "runtime/file_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <utility>

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

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

Result<MappedFile> map_file(const std::filesystem::path& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) return Status::error(path.string() + ": is a directory, not a file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::error(path.string() + ": cannot open for reading");
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return Status::error(path.string() + ": not a regular file, cannot be mapped");
  }
  MappedFile file;
  if (info.st_size > 0) {
    void* data = ::mmap(nullptr, static_cast<size_t>(info.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      const std::string reason = std::strerror(errno);
      ::close(fd);
      return Status::error(path.string() + ": cannot map for reading: " + reason);
    }
    file.data_ = data;
    file.size_ = static_cast<size_t>(info.st_size);
    // Importing reads the model front to back, once.
    ::madvise(data, file.size_, MADV_SEQUENTIAL);
  }
  ::close(fd);  // the mapping keeps the file open
  return file;
}

}  // namespace loka
