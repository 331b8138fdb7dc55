// ============================================================================
// tests/runtime/test_data_test.cc — data directories and .npz archives: the
// layouts, input ordering, numpy interoperability (archives written by numpy
// itself, embedded below) and hostile archives that must fail with one line
// naming the file instead of crashing.
// ============================================================================
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <fstream>

#include "runtime/tensor_proto.h"
#include "runtime/test_data.h"
#include "test_support.h"

namespace loka {
namespace {

namespace fs = std::filesystem;
using testing::expect_one_line_error;

// Written by numpy 2.4 (the bytes below, verbatim):
//   np.savez(f, x=np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5,
//            ids=np.array([[1, -2], [3, 4]], dtype=np.int64), flags=np.array([True, False, True]))
//   np.savez_compressed(f, x=..., ids=...)   (same x and ids)
// numpy writes zip64 local headers (sizes 0xFFFFFFFF plus a zip64 extra field), which the
// reader must take from the central directory.
constexpr unsigned char kNumpySavez[] = {
    0x50, 0x4b, 0x03, 0x04, 0x2d, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x21, 0x00, 0x0b, 0xc0,
    0xb0, 0x76, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x05, 0x00, 0x14, 0x00, 0x78, 0x2e,
    0x6e, 0x70, 0x79, 0x01, 0x00, 0x10, 0x00, 0x98, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x98,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 0x01, 0x00, 0x76,
    0x00, 0x7b, 0x27, 0x64, 0x65, 0x73, 0x63, 0x72, 0x27, 0x3a, 0x20, 0x27, 0x3c, 0x66, 0x34, 0x27,
    0x2c, 0x20, 0x27, 0x66, 0x6f, 0x72, 0x74, 0x72, 0x61, 0x6e, 0x5f, 0x6f, 0x72, 0x64, 0x65, 0x72,
    0x27, 0x3a, 0x20, 0x46, 0x61, 0x6c, 0x73, 0x65, 0x2c, 0x20, 0x27, 0x73, 0x68, 0x61, 0x70, 0x65,
    0x27, 0x3a, 0x20, 0x28, 0x32, 0x2c, 0x20, 0x33, 0x29, 0x2c, 0x20, 0x7d, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x3f, 0x00,
    0x00, 0x80, 0x3f, 0x00, 0x00, 0xc0, 0x3f, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x20, 0x40, 0x50,
    0x4b, 0x03, 0x04, 0x2d, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x21, 0x00, 0x25, 0xbc, 0x41,
    0xaf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x07, 0x00, 0x14, 0x00, 0x69, 0x64, 0x73,
    0x2e, 0x6e, 0x70, 0x79, 0x01, 0x00, 0x10, 0x00, 0xa0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xa0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 0x01, 0x00,
    0x76, 0x00, 0x7b, 0x27, 0x64, 0x65, 0x73, 0x63, 0x72, 0x27, 0x3a, 0x20, 0x27, 0x3c, 0x69, 0x38,
    0x27, 0x2c, 0x20, 0x27, 0x66, 0x6f, 0x72, 0x74, 0x72, 0x61, 0x6e, 0x5f, 0x6f, 0x72, 0x64, 0x65,
    0x72, 0x27, 0x3a, 0x20, 0x46, 0x61, 0x6c, 0x73, 0x65, 0x2c, 0x20, 0x27, 0x73, 0x68, 0x61, 0x70,
    0x65, 0x27, 0x3a, 0x20, 0x28, 0x32, 0x2c, 0x20, 0x32, 0x29, 0x2c, 0x20, 0x7d, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x0a, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x50, 0x4b, 0x03, 0x04, 0x2d, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x21, 0x00, 0x16, 0x93, 0x8c, 0xbb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0x09, 0x00, 0x14, 0x00, 0x66, 0x6c, 0x61, 0x67, 0x73, 0x2e, 0x6e, 0x70, 0x79, 0x01,
    0x00, 0x10, 0x00, 0x83, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x83, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 0x01, 0x00, 0x76, 0x00, 0x7b, 0x27, 0x64,
    0x65, 0x73, 0x63, 0x72, 0x27, 0x3a, 0x20, 0x27, 0x7c, 0x62, 0x31, 0x27, 0x2c, 0x20, 0x27, 0x66,
    0x6f, 0x72, 0x74, 0x72, 0x61, 0x6e, 0x5f, 0x6f, 0x72, 0x64, 0x65, 0x72, 0x27, 0x3a, 0x20, 0x46,
    0x61, 0x6c, 0x73, 0x65, 0x2c, 0x20, 0x27, 0x73, 0x68, 0x61, 0x70, 0x65, 0x27, 0x3a, 0x20, 0x28,
    0x33, 0x2c, 0x29, 0x2c, 0x20, 0x7d, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x0a, 0x01, 0x00, 0x01, 0x50, 0x4b, 0x01, 0x02, 0x2d, 0x03, 0x2d, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x21, 0x00, 0x0b, 0xc0, 0xb0, 0x76, 0x98, 0x00, 0x00, 0x00, 0x98, 0x00,
    0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x01,
    0x00, 0x00, 0x00, 0x00, 0x78, 0x2e, 0x6e, 0x70, 0x79, 0x50, 0x4b, 0x01, 0x02, 0x2d, 0x03, 0x2d,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x21, 0x00, 0x25, 0xbc, 0x41, 0xaf, 0xa0, 0x00, 0x00,
    0x00, 0xa0, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x80, 0x01, 0xcf, 0x00, 0x00, 0x00, 0x69, 0x64, 0x73, 0x2e, 0x6e, 0x70, 0x79, 0x50, 0x4b,
    0x01, 0x02, 0x2d, 0x03, 0x2d, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x21, 0x00, 0x16, 0x93,
    0x8c, 0xbb, 0x83, 0x00, 0x00, 0x00, 0x83, 0x00, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x01, 0xa8, 0x01, 0x00, 0x00, 0x66, 0x6c, 0x61, 0x67,
    0x73, 0x2e, 0x6e, 0x70, 0x79, 0x50, 0x4b, 0x05, 0x06, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x03,
    0x00, 0x9f, 0x00, 0x00, 0x00, 0x66, 0x02, 0x00, 0x00, 0x00, 0x00,
};
constexpr unsigned char kNumpySavezCompressed[] = {
    0x50, 0x4b, 0x03, 0x04, 0x2d, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x21, 0x00, 0x0b, 0xc0,
    0xb0, 0x76, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x05, 0x00, 0x14, 0x00, 0x78, 0x2e,
    0x6e, 0x70, 0x79, 0x01, 0x00, 0x10, 0x00, 0x98, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x57,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x9b, 0xec, 0x17, 0xea, 0x1b, 0x10, 0xc9, 0xc8, 0x50,
    0xc6, 0x50, 0xad, 0x9e, 0x92, 0x5a, 0x9c, 0x5c, 0xa4, 0x6e, 0xa5, 0xa0, 0x6e, 0x93, 0x66, 0xa2,
    0xae, 0xa3, 0xa0, 0x9e, 0x96, 0x5f, 0x54, 0x52, 0x94, 0x98, 0x17, 0x9f, 0x5f, 0x94, 0x92, 0x0a,
    0x12, 0x77, 0x4b, 0xcc, 0x29, 0x4e, 0x05, 0x8a, 0x17, 0x67, 0x24, 0x16, 0xa4, 0x02, 0xf9, 0x1a,
    0x46, 0x3a, 0x0a, 0xc6, 0x9a, 0x3a, 0x0a, 0xb5, 0x0a, 0x64, 0x03, 0x2e, 0x06, 0x08, 0xb0, 0x67,
    0x60, 0x68, 0x00, 0xe2, 0x03, 0x40, 0xcc, 0xe0, 0xc0, 0xc0, 0xa0, 0xe0, 0x00, 0x00, 0x50, 0x4b,
    0x03, 0x04, 0x2d, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x21, 0x00, 0x25, 0xbc, 0x41, 0xaf,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x07, 0x00, 0x14, 0x00, 0x69, 0x64, 0x73, 0x2e,
    0x6e, 0x70, 0x79, 0x01, 0x00, 0x10, 0x00, 0xa0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x53,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x9b, 0xec, 0x17, 0xea, 0x1b, 0x10, 0xc9, 0xc8, 0x50,
    0xc6, 0x50, 0xad, 0x9e, 0x92, 0x5a, 0x9c, 0x5c, 0xa4, 0x6e, 0xa5, 0xa0, 0x6e, 0x93, 0x69, 0xa1,
    0xae, 0xa3, 0xa0, 0x9e, 0x96, 0x5f, 0x54, 0x52, 0x94, 0x98, 0x17, 0x9f, 0x5f, 0x94, 0x92, 0x0a,
    0x12, 0x77, 0x4b, 0xcc, 0x29, 0x4e, 0x05, 0x8a, 0x17, 0x67, 0x24, 0x16, 0xa4, 0x02, 0xf9, 0x1a,
    0x46, 0x3a, 0x0a, 0x46, 0x9a, 0x3a, 0x0a, 0xb5, 0x0a, 0x64, 0x03, 0x2e, 0x46, 0x06, 0x08, 0xf8,
    0xf7, 0x1f, 0x02, 0x98, 0xa1, 0x7c, 0x16, 0x28, 0x0d, 0x00, 0x50, 0x4b, 0x01, 0x02, 0x2d, 0x03,
    0x2d, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x21, 0x00, 0x0b, 0xc0, 0xb0, 0x76, 0x57, 0x00,
    0x00, 0x00, 0x98, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x78, 0x2e, 0x6e, 0x70, 0x79, 0x50, 0x4b, 0x01,
    0x02, 0x2d, 0x03, 0x2d, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x21, 0x00, 0x25, 0xbc, 0x41,
    0xaf, 0x53, 0x00, 0x00, 0x00, 0xa0, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x01, 0x8e, 0x00, 0x00, 0x00, 0x69, 0x64, 0x73, 0x2e, 0x6e,
    0x70, 0x79, 0x50, 0x4b, 0x05, 0x06, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x02, 0x00, 0x68, 0x00,
    0x00, 0x00, 0x1a, 0x01, 0x00, 0x00, 0x00, 0x00,
};

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void put16(std::string& out, uint32_t v) { out += static_cast<char>(v & 0xFF), out += static_cast<char>(v >> 8 & 0xFF); }
void put32(std::string& out, uint32_t v) { put16(out, v & 0xFFFF), put16(out, v >> 16); }

/// A minimal stored-only zip writer, independent of the library's, for crafting members.
std::string make_zip(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string zip, directory;
  for (const auto& [name, data] : members) {
    const uint32_t crc = static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
    const uint32_t offset = static_cast<uint32_t>(zip.size());
    put32(zip, 0x04034b50), put16(zip, 20), put16(zip, 0), put16(zip, 0), put32(zip, 0), put32(zip, crc);
    put32(zip, static_cast<uint32_t>(data.size())), put32(zip, static_cast<uint32_t>(data.size()));
    put16(zip, static_cast<uint32_t>(name.size())), put16(zip, 0);
    zip += name + data;
    put32(directory, 0x02014b50), put16(directory, 20), put16(directory, 20), put16(directory, 0), put16(directory, 0);
    put32(directory, 0), put32(directory, crc), put32(directory, static_cast<uint32_t>(data.size()));
    put32(directory, static_cast<uint32_t>(data.size())), put16(directory, static_cast<uint32_t>(name.size()));
    put16(directory, 0), put16(directory, 0), put16(directory, 0), put16(directory, 0), put32(directory, 0);
    put32(directory, offset);
    directory += name;
  }
  const uint32_t directory_offset = static_cast<uint32_t>(zip.size());
  zip += directory;
  put32(zip, 0x06054b50), put16(zip, 0), put16(zip, 0), put16(zip, static_cast<uint32_t>(members.size()));
  put16(zip, static_cast<uint32_t>(members.size())), put32(zip, static_cast<uint32_t>(directory.size()));
  put32(zip, directory_offset), put16(zip, 0);
  return zip;
}

/// A version-1 .npy with the given header dict text and payload.
std::string make_npy(const std::string& dict, const std::string& payload, char major = 1) {
  std::string out("\x93NUMPY", 6);
  out += major;
  out += '\0';
  put16(out, static_cast<uint32_t>(dict.size()));
  return out + dict + payload;
}

std::string float_bytes(std::initializer_list<float> values) {
  std::vector<float> v(values);
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

Tensor random_of(std::mt19937& rng, DType dtype, const Shape& shape) {
  Tensor tensor = Tensor::zeros(dtype, shape);
  auto* bytes = static_cast<unsigned char*>(tensor.raw());
  for (size_t i = 0; i < tensor.byte_size(); ++i) bytes[i] = static_cast<unsigned char>(rng());
  if (dtype == DType::kBool)
    for (size_t i = 0; i < tensor.byte_size(); ++i) bytes[i] &= 1;
  return tensor;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.byte_size()) == 0;
}

// --- layouts ---------------------------------------------------------------------

TEST(DataSetReader, FlatDirectoryWithOutputsAndLabels) {
  const fs::path dir = testing::make_temp_dir("loka-data-flat");
  const Tensor a = Tensor::from_floats({2, 2}, std::vector<float>{1, 2, 3, 4});
  const Tensor b = Tensor::from_int64s({3}, std::vector<int64_t>{7, 8, 9});
  ASSERT_TRUE(write_tensor_file(dir / "input_0.pb", "dense", a));
  ASSERT_TRUE(write_tensor_file(dir / "input_1.pb", "ids", b));
  ASSERT_TRUE(write_outputs(dir, {"prob"}, {Tensor::from_floats({2}, std::vector<float>{0.25f, 0.75f})}));
  ASSERT_TRUE(write_tensor_file(dir / "labels.pb", "", Tensor::from_floats({2}, std::vector<float>{0, 1})));
  write_bytes(dir / "README.txt", "not data");

  auto reader = DataSetReader::open(dir);
  ASSERT_TRUE(reader) << reader.status().message();
  ASSERT_EQ(reader->size(), 1u);
  EXPECT_EQ(reader->subfolder(0), fs::path());
  auto data = reader->read(0);
  ASSERT_TRUE(data) << data.status().message();
  ASSERT_EQ(data->inputs.size(), 2u);
  EXPECT_EQ(data->inputs[0].name, "dense");
  EXPECT_TRUE(same_bytes(data->inputs[0].tensor, a));
  EXPECT_EQ(data->inputs[1].name, "ids");
  EXPECT_TRUE(same_bytes(data->inputs[1].tensor, b));
  ASSERT_EQ(data->outputs.size(), 1u);
  EXPECT_EQ(data->outputs[0].name, "prob");
  EXPECT_EQ(data->outputs[0].tensor.to_floats(), (std::vector<float>{0.25f, 0.75f}));
  ASSERT_TRUE(data->labels.has_value());
  EXPECT_EQ(data->labels->to_floats(), (std::vector<float>{0, 1}));
  expect_one_line_error(reader->read(1).status(), {dir.string()});
}

TEST(DataSetReader, NumberedSetsSortNumericallyAndIgnoreLookalikes) {
  const fs::path dir = testing::make_temp_dir("loka-data-sets");
  for (int k : {10, 2, 0, 1}) {
    fs::create_directories(dir / ("test_data_set_" + std::to_string(k)));
    ASSERT_TRUE(write_tensor_file(dir / ("test_data_set_" + std::to_string(k)) / "input_0.pb", "x",
                                  Tensor::from_floats({1}, std::vector<float>{static_cast<float>(k)})));
  }
  fs::create_directories(dir / "test_data_set_x");
  write_bytes(dir / "test_data_set_3", "a file, not a folder");
  write_bytes(dir / "model.onnx", "");

  auto reader = DataSetReader::open(dir);
  ASSERT_TRUE(reader) << reader.status().message();
  ASSERT_EQ(reader->size(), 4u);
  const std::vector<int> order = {0, 1, 2, 10};
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(reader->subfolder(i), fs::path("test_data_set_" + std::to_string(order[i])));
    auto data = reader->read(i);
    ASSERT_TRUE(data) << data.status().message();
    EXPECT_EQ(data->label, "test_data_set_" + std::to_string(order[i]));
    EXPECT_EQ(data->inputs.at(0).tensor.to_floats(), (std::vector<float>{static_cast<float>(order[i])}));
  }
}

TEST(DataSetReader, GapsMissingAndEmptyLocationsAreErrors) {
  const fs::path dir = testing::make_temp_dir("loka-data-gap");
  ASSERT_TRUE(write_tensor_file(dir / "input_0.pb", "a", Tensor::scalar_float(1)));
  ASSERT_TRUE(write_tensor_file(dir / "input_2.pb", "c", Tensor::scalar_float(3)));
  auto reader = DataSetReader::open(dir);
  ASSERT_TRUE(reader) << reader.status().message();
  expect_one_line_error(reader->read(0).status(), {"input_2.pb", "input_1.pb"});

  const fs::path empty = testing::make_temp_dir("loka-data-empty");
  expect_one_line_error(DataSetReader::open(empty).status(), {empty.string()});
  expect_one_line_error(DataSetReader::open(empty / "absent").status(), {"absent"});
  write_bytes(empty / "data.csv", "1,2,3");
  expect_one_line_error(DataSetReader::open(empty / "data.csv").status(), {"data.csv"});

  const fs::path corrupt = testing::make_temp_dir("loka-data-corrupt");
  fs::create_directories(corrupt / "test_data_set_0");
  write_bytes(corrupt / "test_data_set_0" / "input_0.pb", "\xff\xff\xff garbage");
  auto corrupt_reader = DataSetReader::open(corrupt);
  ASSERT_TRUE(corrupt_reader) << corrupt_reader.status().message();
  expect_one_line_error(corrupt_reader->read(0).status(), {"test_data_set_0", "input_0.pb"});
}

TEST(DataSetReader, NpzFileAndDirectoryOfNpz) {
  const fs::path dir = testing::make_temp_dir("loka-data-npz");
  const Tensor x = Tensor::from_floats({2}, std::vector<float>{1, 2});
  const Tensor y = Tensor::from_floats({2}, std::vector<float>{3, 4});
  const Tensor labels = Tensor::from_floats({2}, std::vector<float>{0, 1});
  ASSERT_TRUE(write_npz(dir / "b.npz", {{"x", x}, {"output_1", y}, {"labels", labels}, {"output_0", x}}, false));
  ASSERT_TRUE(write_npz(dir / "a.npz", {{"x", y}}, true));

  auto single = DataSetReader::open(dir / "b.npz");
  ASSERT_TRUE(single) << single.status().message();
  ASSERT_EQ(single->size(), 1u);
  EXPECT_EQ(single->subfolder(0), fs::path());
  auto data = single->read(0);
  ASSERT_TRUE(data) << data.status().message();
  ASSERT_EQ(data->inputs.size(), 1u);
  EXPECT_EQ(data->inputs[0].name, "x");
  ASSERT_EQ(data->outputs.size(), 2u);  // "output_<i>" keys, ordered by i
  EXPECT_EQ(data->outputs[0].tensor.to_floats(), x.to_floats());
  EXPECT_EQ(data->outputs[1].tensor.to_floats(), y.to_floats());
  ASSERT_TRUE(data->labels.has_value());
  EXPECT_EQ(data->labels->to_floats(), labels.to_floats());

  auto many = DataSetReader::open(dir);
  ASSERT_TRUE(many) << many.status().message();
  ASSERT_EQ(many->size(), 2u);
  EXPECT_EQ(many->subfolder(0), fs::path("a"));
  EXPECT_EQ(many->subfolder(1), fs::path("b"));
  auto first = many->read(0);
  ASSERT_TRUE(first) << first.status().message();
  EXPECT_EQ(first->inputs.at(0).tensor.to_floats(), y.to_floats());

  ASSERT_TRUE(write_npz(dir / "gap.npz", {{"output_1", y}}, false));
  expect_one_line_error(DataSetReader::open(dir / "gap.npz")->read(0).status(), {"gap.npz", "output_0"});
}

TEST(OrderInputs, ByNameByPositionAndErrors) {
  const Tensor a = Tensor::scalar_float(1), b = Tensor::scalar_float(2);
  DataSet data;
  data.location = "somewhere/test_data_set_0";
  data.inputs = {{"b", b}, {"a", a}};
  auto ordered = order_inputs(data, {"a", "b"});
  ASSERT_TRUE(ordered) << ordered.status().message();
  EXPECT_EQ((*ordered)[0].to_floats()[0], 1.0f);
  EXPECT_EQ((*ordered)[1].to_floats()[0], 2.0f);

  data.inputs = {{"", a}, {"", b}};
  ordered = order_inputs(data, {"p", "q"});
  ASSERT_TRUE(ordered) << ordered.status().message();
  EXPECT_EQ((*ordered)[1].to_floats()[0], 2.0f);

  data.inputs = {{"input_1", b}, {"input_0", a}};  // positional names from other tools
  ordered = order_inputs(data, {"p", "q"});
  ASSERT_TRUE(ordered) << ordered.status().message();
  EXPECT_EQ((*ordered)[0].to_floats()[0], 1.0f);

  data.inputs = {{"a", a}, {"zzz", b}};
  expect_one_line_error(order_inputs(data, {"a", "b"}).status(), {"test_data_set_0", "'zzz'", "a, b"});
  data.inputs = {{"a", a}};
  expect_one_line_error(order_inputs(data, {"a", "b"}).status(), {"test_data_set_0", "'b'"});
  data.inputs = {{"a", a}, {"", b}, {"a", b}};
  expect_one_line_error(order_inputs(data, {"a", "b", "c"}).status(), {"'a'", "twice"});
  data.inputs = {{"", a}, {"", b}, {"", b}};
  expect_one_line_error(order_inputs(data, {"a", "b"}).status(), {"3 inputs", "has 2"});

  data.outputs = {{"", a}};
  ordered = order_outputs(data, {"y"});
  ASSERT_TRUE(ordered) << ordered.status().message();
  expect_one_line_error(order_outputs(data, {"y", "z"}).status(), {"'z'"});
}

TEST(DataSetReader, WriteOutputsNamesFilesAndTensors) {
  const fs::path dir = testing::make_temp_dir("loka-data-write") / "nested" / "test_data_set_0";
  std::mt19937 rng(1);
  const Tensor y0 = testing::random_tensor(rng, {3, 2});
  const Tensor y1 = Tensor::from_int64s({2}, std::vector<int64_t>{4, 5});
  ASSERT_TRUE(write_outputs(dir, {"scores", "ids"}, {y0, y1}));
  auto first = read_tensor_file(dir / "output_0.pb");
  ASSERT_TRUE(first) << first.status().message();
  EXPECT_EQ(first->first, "scores");
  EXPECT_TRUE(same_bytes(first->second, y0));
  auto second = read_tensor_file(dir / "output_1.pb");
  ASSERT_TRUE(second) << second.status().message();
  EXPECT_EQ(second->first, "ids");
  EXPECT_TRUE(same_bytes(second->second, y1));
  expect_one_line_error(write_outputs(dir, {"only_one"}, {y0, y1}), {dir.string()});
}

// --- npz ----------------------------------------------------------------------------

TEST(Npz, RoundTripsEveryNumpyDtypeStoredAndDeflated) {
  const fs::path dir = testing::make_temp_dir("loka-npz-roundtrip");
  std::mt19937 rng(42);
  const std::vector<DType> dtypes = {DType::kBool,  DType::kInt8,   DType::kUInt8,   DType::kInt16,
                                     DType::kUInt16, DType::kInt32,  DType::kUInt32,  DType::kInt64,
                                     DType::kUInt64, DType::kFloat16, DType::kFloat32, DType::kFloat64};
  const std::vector<Shape> shapes = {{}, {1}, {7}, {0, 3}, {3, 5, 2}, {2, 1, 1, 17}, {1000}};
  std::vector<NamedTensor> arrays;
  for (size_t i = 0; i < dtypes.size(); ++i)
    for (size_t s = 0; s < shapes.size(); ++s) {
      std::string name = "a";  // built with += : GCC 12 warns falsely (-Wrestrict) on "a" + to_string(i)
      name += std::to_string(i) + "_" + std::to_string(s);
      arrays.push_back({name, random_of(rng, dtypes[i], shapes[s])});
    }
  for (const bool compress : {false, true}) {
    const fs::path path = dir / (compress ? "deflated.npz" : "stored.npz");
    ASSERT_TRUE(write_npz(path, arrays, compress));
    auto back = read_npz(path);
    ASSERT_TRUE(back) << back.status().message();
    ASSERT_EQ(back->size(), arrays.size());
    for (size_t i = 0; i < arrays.size(); ++i) {
      EXPECT_EQ((*back)[i].name, arrays[i].name);
      EXPECT_TRUE(same_bytes((*back)[i].tensor, arrays[i].tensor)) << arrays[i].name;
    }
  }
  expect_one_line_error(write_npz(dir / "bf16.npz", {{"w", Tensor::zeros(DType::kBFloat16, {2})}}, false),
                        {"bf16.npz", "'w'", "BFLOAT16"});
}

TEST(Npz, ReadsArchivesWrittenByNumpy) {
  const fs::path dir = testing::make_temp_dir("loka-npz-numpy");
  write_bytes(dir / "savez.npz", std::string(reinterpret_cast<const char*>(kNumpySavez), sizeof(kNumpySavez)));
  write_bytes(dir / "compressed.npz",
              std::string(reinterpret_cast<const char*>(kNumpySavezCompressed), sizeof(kNumpySavezCompressed)));
  for (const char* file : {"savez.npz", "compressed.npz"}) {
    auto arrays = read_npz(dir / file);
    ASSERT_TRUE(arrays) << arrays.status().message();
    ASSERT_GE(arrays->size(), 2u) << file;
    EXPECT_EQ((*arrays)[0].name, "x");
    EXPECT_EQ((*arrays)[0].tensor.dtype(), DType::kFloat32);
    EXPECT_EQ((*arrays)[0].tensor.shape(), (Shape{2, 3}));
    EXPECT_EQ((*arrays)[0].tensor.to_floats(), (std::vector<float>{0, 0.5f, 1, 1.5f, 2, 2.5f}));
    EXPECT_EQ((*arrays)[1].name, "ids");
    EXPECT_EQ((*arrays)[1].tensor.dtype(), DType::kInt64);
    EXPECT_EQ((*arrays)[1].tensor.to_int64s(), (std::vector<int64_t>{1, -2, 3, 4}));
  }
  auto stored = read_npz(dir / "savez.npz");
  ASSERT_EQ(stored->size(), 3u);
  EXPECT_EQ((*stored)[2].name, "flags");
  EXPECT_EQ((*stored)[2].tensor.dtype(), DType::kBool);
  EXPECT_EQ((*stored)[2].tensor.to_int64s(), (std::vector<int64_t>{1, 0, 1}));
}

Result<std::vector<NamedTensor>> read_from_memory(const std::string& bytes, const std::string& source) {
  return read_npz_bytes(std::as_bytes(std::span(bytes.data(), bytes.size())), source);
}

/// Reads every damaged variant of `bytes` (in memory: thousands of variants): each must
/// load or fail with one line naming the source. A few go through real files too.
void expect_damage_is_handled(const std::string& bytes, const fs::path& dir, const std::string& stem) {
  const std::string source = stem + ".npz";
  for (size_t length = 0; length < bytes.size(); ++length)
    expect_one_line_error(read_from_memory(bytes.substr(0, length), source).status(), {source});
  int failures = 0;
  for (size_t at = 0; at < bytes.size(); ++at) {
    for (const unsigned char mask : {0x01, 0x80, 0xFF}) {
      std::string damaged = bytes;
      damaged[at] = static_cast<char>(damaged[at] ^ mask);
      auto result = read_from_memory(damaged, source);
      if (result) continue;  // e.g. a timestamp: harmless
      ++failures;
      expect_one_line_error(result.status(), {source});
    }
  }
  EXPECT_GT(failures, static_cast<int>(bytes.size()));  // most bytes matter (CRC covers the data)
  for (const size_t length : {size_t{0}, size_t{1}, bytes.size() / 2, bytes.size() - 1}) {
    write_bytes(dir / source, bytes.substr(0, length));
    expect_one_line_error(read_npz(dir / source).status(), {(dir / source).string()});
  }
}

TEST(Npz, EveryTruncationAndByteFlipIsHandled) {
  const fs::path dir = testing::make_temp_dir("loka-npz-damage");
  std::mt19937 rng(9);
  ASSERT_TRUE(write_npz(dir / "ours.npz", {{"x", testing::random_tensor(rng, {3, 4})}, {"n", random_of(rng, DType::kInt32, {5})}}, true));
  expect_damage_is_handled(read_bytes(dir / "ours.npz"), dir, "ours_deflated");
  ASSERT_TRUE(write_npz(dir / "ours.npz", {{"x", testing::random_tensor(rng, {3, 4})}}, false));
  expect_damage_is_handled(read_bytes(dir / "ours.npz"), dir, "ours_stored");
  expect_damage_is_handled(std::string(reinterpret_cast<const char*>(kNumpySavezCompressed), sizeof(kNumpySavezCompressed)),
                           dir, "numpy_deflated");
  expect_damage_is_handled(std::string(reinterpret_cast<const char*>(kNumpySavez), sizeof(kNumpySavez)), dir, "numpy_stored");
}

TEST(Npz, GarbageEmptyAndMissingFiles) {
  const fs::path dir = testing::make_temp_dir("loka-npz-garbage");
  expect_one_line_error(read_npz(dir / "absent.npz").status(), {"absent.npz"});
  write_bytes(dir / "empty.npz", "");
  expect_one_line_error(read_npz(dir / "empty.npz").status(), {"empty.npz"});
  std::mt19937 rng(4);
  std::string garbage(5000, '\0');
  for (char& c : garbage) c = static_cast<char>(rng());
  write_bytes(dir / "garbage.npz", garbage);
  expect_one_line_error(read_npz(dir / "garbage.npz").status(), {"garbage.npz"});
  // Garbage that happens to end like a zip archive.
  std::string fake_end;
  put32(fake_end, 0x06054b50), put16(fake_end, 0), put16(fake_end, 0), put16(fake_end, 500), put16(fake_end, 500);
  put32(fake_end, 0xFFFFFFF0), put32(fake_end, 0xFFFFFF00), put16(fake_end, 0);
  write_bytes(dir / "fake.npz", garbage + fake_end);
  expect_one_line_error(read_npz(dir / "fake.npz").status(), {"fake.npz"});
}

TEST(Npz, HostileNpyHeaders) {
  const fs::path dir = testing::make_temp_dir("loka-npz-headers");
  const std::string good_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  const std::string two = float_bytes({1, 2});
  struct Case {
    std::string name;
    std::string member;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"magic", "\x92NUMPY\x01" + std::string(1, '\0') + "\x04" + std::string(1, '\0') + "{}  ", "magic"},
      {"version", make_npy(good_dict, two, 4), "version 4"},
      {"short", std::string("\x93NUM", 4), "too short"},
      {"header_length", make_npy(good_dict, two).substr(0, 8) + "\xff\xff" + good_dict, "header length"},
      {"big_endian", make_npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", two), "big-endian"},
      {"complex", make_npy("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", two), "'<c8'"},
      {"object", make_npy("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", two), "'|O'"},
      {"structured", make_npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", two), "malformed"},
      {"fortran", make_npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", two), "Fortran"},
      {"negative", make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", two), "negative"},
      {"huge_dim", make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", two), "too large"},
      {"overflow", make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2147483648, 2147483648, 2147483648), }", two), "2^40"},
      {"too_little_data", make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", two), "needs 12 bytes"},
      {"too_much_data", make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", two), "needs 4 bytes"},
      {"missing_key", make_npy("{'descr': '<f4', 'shape': (2,), }", two), "lacks"},
      {"unknown_key", make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", two), "'x'"},
      {"not_a_dict", make_npy("['descr', '<f4']", two), "malformed"},
      {"unterminated", make_npy("{'descr': '<f4", two), "malformed"},
      {"trailing", make_npy(good_dict + " junk", two), "malformed"},
      {"bad_bool", make_npy("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", two), "True or False"},
  };
  for (const Case& c : cases) {
    const fs::path path = dir / (c.name + ".npz");
    write_bytes(path, make_zip({{"arr.npy", c.member}}));
    expect_one_line_error(read_npz(path).status(), {path.string(), "'arr.npy'", c.needle});
  }
  // The positive twin of the crafted archives (also: Python 2 "L" suffixes, v2 header, 1-byte '|' order).
  write_bytes(dir / "good.npz",
              make_zip({{"a.npy", make_npy(good_dict, two)},
                        {"b.npy", make_npy("{'descr': '|u1', 'fortran_order': False, 'shape': (2L, 1L), }", "\x05\x06")},
                        {"c.npy", [&] {
                           std::string v2("\x93NUMPY\x02", 7);
                           v2 += '\0';
                           put32(v2, static_cast<uint32_t>(good_dict.size()));
                           return v2 + good_dict + two;
                         }()}}));
  auto good = read_npz(dir / "good.npz");
  ASSERT_TRUE(good) << good.status().message();
  ASSERT_EQ(good->size(), 3u);
  EXPECT_EQ((*good)[0].tensor.to_floats(), (std::vector<float>{1, 2}));
  EXPECT_EQ((*good)[1].tensor.shape(), (Shape{2, 1}));
  EXPECT_EQ((*good)[1].tensor.to_int64s(), (std::vector<int64_t>{5, 6}));
  EXPECT_EQ((*good)[2].tensor.to_floats(), (std::vector<float>{1, 2}));

  write_bytes(dir / "newline.npz", make_zip({{"line\nbreak.npy", make_npy(good_dict, float_bytes({1}))}}));
  expect_one_line_error(read_npz(dir / "newline.npz").status(), {"newline.npz", "line\\nbreak.npy"});
  write_bytes(dir / "notes.npz", make_zip({{"notes.txt", "hello"}}));
  expect_one_line_error(read_npz(dir / "notes.npz").status(), {"notes.npz", "notes.txt"});
}

TEST(Npz, HostileZipStructure) {
  const fs::path dir = testing::make_temp_dir("loka-npz-zip");
  const std::string good = make_zip({{"x.npy", make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", float_bytes({1, 2}))}});
  const size_t end = good.size() - 22;
  const size_t directory = (good[end + 16] & 0xFF) | (good[end + 17] & 0xFF) << 8;
  const auto patched = [&](size_t at, std::initializer_list<unsigned char> values) {
    std::string bytes = good;
    for (unsigned char v : values) bytes[at++] = static_cast<char>(v);
    return bytes;
  };
  struct Case {
    std::string name;
    std::string bytes;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"directory_offset", patched(end + 16, {0xF0, 0xFF, 0xFF, 0x7F}), "outside the file"},
      {"directory_size", patched(end + 12, {0xF0, 0xFF, 0xFF, 0x00}), "outside the file"},
      {"entry_count", patched(end + 10, {0xFF, 0x7F}), "more entries"},
      {"multi_disk", patched(end + 4, {0x01}), "multi-disk"},
      {"zip64_missing", patched(end + 10, {0xFF, 0xFF}), "zip64"},
      {"method", patched(directory + 10, {12}), "compression method 12"},
      {"encrypted", patched(directory + 8, {0x01}), "encrypted"},
      {"sizes_differ", patched(directory + 24, {0xFF}), "stored member"},
      {"local_offset", patched(directory + 42, {0x00, 0x10}), "local header"},
      {"member_size", patched(directory + 20, {0xFF, 0xFF, 0x00, 0x00}), ""},
      {"crc", patched(directory + 16, {0x00, 0x00, 0x00, 0x00}), "CRC"},
      {"name_length", patched(directory + 28, {0xFF, 0xFF}), "overruns"},
  };
  for (const Case& c : cases) {
    const fs::path path = dir / (c.name + ".npz");
    write_bytes(path, c.bytes);
    expect_one_line_error(read_npz(path).status(), {path.string(), c.needle});
  }
  // A deflated member declaring far more output than deflate can produce is refused before inflating.
  ASSERT_TRUE(write_npz(dir / "bomb.npz", {{"x", Tensor::zeros(DType::kFloat32, {4})}}, true));
  std::string bomb = read_bytes(dir / "bomb.npz");
  const size_t bomb_end = bomb.size() - 22;
  const size_t bomb_directory = (bomb[bomb_end + 16] & 0xFF) | (bomb[bomb_end + 17] & 0xFF) << 8;
  for (size_t i = 0; i < 4; ++i) bomb[bomb_directory + 24 + i] = static_cast<char>(i == 3 ? 0x7F : 0xFF);
  write_bytes(dir / "bomb.npz", bomb);
  expect_one_line_error(read_npz(dir / "bomb.npz").status(), {"bomb.npz", "more than deflate can produce"});
}

}  // namespace
}  // namespace loka
