// ============================================================================
// tests/runtime/file_io_test.cc — read-only file mappings (runtime/file_io.h):
// the same bytes read_file gives, empty files, and one-line errors naming the
// path for what cannot be mapped.
// ============================================================================
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "runtime/file_io.h"
#include "test_support.h"

namespace loka {
namespace {

TEST(FileIo, AMappingHoldsTheBytesReadFileReads) {
  const auto dir = testing::make_temp_dir("loka-file-io");
  std::string text(300000, '\0');
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>(i * 7 + 3);
  std::ofstream(dir / "data.bin", std::ios::binary) << text;
  auto mapped = map_file(dir / "data.bin");
  auto read = read_file(dir / "data.bin");
  ASSERT_TRUE(mapped && read);
  ASSERT_EQ(mapped->bytes().size(), read->size());
  EXPECT_TRUE(std::equal(mapped->bytes().begin(), mapped->bytes().end(), read->begin()));
  // Moving keeps one mapping alive.
  MappedFile moved = std::move(mapped).value();
  EXPECT_EQ(moved.bytes().size(), text.size());
  EXPECT_EQ(static_cast<char>(moved.bytes()[299999]), text[299999]);
}

TEST(FileIo, AnEmptyFileMapsToNoBytes) {
  const auto dir = testing::make_temp_dir("loka-file-io");
  std::ofstream(dir / "empty.bin").close();
  auto mapped = map_file(dir / "empty.bin");
  ASSERT_TRUE(mapped) << mapped.status().message();
  EXPECT_TRUE(mapped->bytes().empty());
}

TEST(FileIo, WhatCannotBeMappedIsAOneLineErrorNamingThePath) {
  const auto dir = testing::make_temp_dir("loka-file-io");
  testing::expect_one_line_error(map_file(dir / "missing.onnx").status(), {"missing.onnx"});
  testing::expect_one_line_error(map_file(dir).status(), {dir.string(), "directory"});
}

}  // namespace
}  // namespace loka
