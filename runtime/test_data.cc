// ============================================================================
// runtime/test_data.cc — data directories and .npz archives (see test_data.h).
//
// Data files come from users and from other tools, so they are parsed as
// hostile: every zip offset and size, every .npy header field and every
// element count is checked before it is used, deflate output is bounded by
// what the archive declares and verified by CRC-32, and each error is one
// line naming the file (names from the data are escaped onto that line by
// one_line()). Nothing here allocates more than the checked size of
// the tensor it is about to fill.
// ============================================================================
#include "loka/test_data.h"

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstring>
#include <fstream>
#include <map>
#include <new>
#include <string_view>

#include "runtime/error_text.h"
#include "runtime/file_io.h"
#include "runtime/tensor_proto.h"

namespace loka {
namespace fs = std::filesystem;

// ---------------------------------------------------------------------------
// Data directory layout
// ---------------------------------------------------------------------------
namespace {

constexpr std::string_view kDataSetPrefix = "test_data_set_";

/// The k of "<prefix><k><suffix>", or nothing when `name` has another form.
std::optional<int64_t> numbered_name(std::string_view name, std::string_view prefix, std::string_view suffix) {
  if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) || !name.ends_with(suffix))
    return std::nullopt;
  const std::string_view digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  int64_t k = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), k);
  if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return k;
}

/// Entries of `dir` named "<prefix><k><suffix>" (directories or regular files), by k.
Result<std::map<int64_t, fs::path>> numbered_entries(const fs::path& dir, std::string_view prefix,
                                                     std::string_view suffix, bool directories) {
  std::map<int64_t, fs::path> found;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    const auto k = numbered_name(name, prefix, suffix);
    if (!k) continue;
    std::error_code kind_error;
    if (directories ? !it->is_directory(kind_error) : !it->is_regular_file(kind_error)) continue;
    auto [slot, inserted] = found.emplace(*k, it->path());
    if (!inserted)
      return Status::error(dir.string() + ": both '" + slot->second.filename().string() + "' and '" + name +
                           "' are number " + std::to_string(*k));
  }
  if (error) return Status::error(dir.string() + ": cannot list: " + error.message());
  return found;
}

/// Numbered files that must run 0, 1, 2, ... without gaps.
Result<std::vector<fs::path>> contiguous_files(const fs::path& dir, std::string_view prefix) {
  LOKA_ASSIGN_OR_RETURN(const auto found, numbered_entries(dir, prefix, ".pb", false));
  std::vector<fs::path> files;
  for (const auto& [k, path] : found) {
    if (k != static_cast<int64_t>(files.size()))
      return Status::error(path.string() + " is present but " + std::string(prefix) + std::to_string(files.size()) +
                           ".pb is missing");
    files.push_back(path);
  }
  return files;
}

bool is_npz(const fs::path& path) { return path.extension() == ".npz"; }

Result<std::vector<NamedTensor>> read_tensor_files(const std::vector<fs::path>& files) {
  std::vector<NamedTensor> tensors;
  for (const fs::path& file : files) {
    LOKA_ASSIGN_OR_RETURN(auto named, read_tensor_file(file));
    tensors.push_back({std::move(named.first), std::move(named.second)});
  }
  return tensors;
}

/// Splits an archive's arrays: "labels", "output_<i>" (positional, ordered by i), the rest inputs.
Result<DataSet> data_set_from_npz(const fs::path& path) {
  LOKA_ASSIGN_OR_RETURN(std::vector<NamedTensor> arrays, read_npz(path));
  DataSet data;
  data.label = path.filename().string();
  data.location = path;
  std::map<int64_t, Tensor> outputs;
  for (NamedTensor& array : arrays) {
    if (array.name == "labels") {
      data.labels = std::move(array.tensor);
    } else if (const auto k = numbered_name(array.name, "output_", "")) {
      outputs[*k] = std::move(array.tensor);
    } else {
      data.inputs.push_back(std::move(array));
    }
  }
  for (auto& [k, tensor] : outputs) {
    if (k != static_cast<int64_t>(data.outputs.size()))
      return Status::error(path.string() + ": has 'output_" + std::to_string(k) + "' but no 'output_" +
                           std::to_string(data.outputs.size()) + "'");
    data.outputs.push_back({"", std::move(tensor)});
  }
  return data;
}

/// Places `tensors` in the order of `names`: by name, else by position ("<kind>_<i>" names
/// and empty names are positional).
Result<std::vector<Tensor>> order_tensors(const std::vector<NamedTensor>& tensors, const std::vector<std::string>& names,
                                          const std::string& kind, const std::string& where) {
  std::vector<Tensor> ordered(names.size());
  for (size_t position = 0; position < tensors.size(); ++position) {
    const NamedTensor& tensor = tensors[position];
    std::optional<size_t> slot;
    if (tensor.name.empty()) {
      slot = position;
    } else if (auto it = std::find(names.begin(), names.end(), tensor.name); it != names.end()) {
      slot = static_cast<size_t>(it - names.begin());
    } else if (const auto k = numbered_name(tensor.name, kind + "_", "")) {
      slot = static_cast<size_t>(*k);
    } else {
      std::string known;
      for (const std::string& name : names) known += (known.empty() ? "" : ", ") + name;
      return Status::error(where + ": '" + tensor.name + "' is not an " + kind + " of the model (its " + kind +
                           "s: " + known + ")");
    }
    if (*slot >= names.size())
      return Status::error(where + ": holds " + std::to_string(tensors.size()) + " " + kind + "s but the model has " +
                           std::to_string(names.size()));
    if (ordered[*slot].defined()) return Status::error(where + ": " + kind + " '" + names[*slot] + "' is given twice");
    ordered[*slot] = tensor.tensor;
  }
  for (size_t i = 0; i < names.size(); ++i)
    if (!ordered[i].defined()) return Status::error(where + ": no tensor for " + kind + " '" + names[i] + "'");
  return ordered;
}

}  // namespace

Result<DataSetReader> DataSetReader::open(const fs::path& where) {
  return one_line([&]() -> Result<DataSetReader> {
    std::error_code error;
    const fs::file_status status = fs::status(where, error);
    if (error || !fs::exists(status)) return Status::error(where.string() + ": no such file or directory");
    DataSetReader reader;
    reader.root_ = where;
    if (fs::is_regular_file(status)) {
      if (!is_npz(where)) return Status::error(where.string() + ": expected a data directory or a .npz file");
      reader.sources_.push_back(where);
      return reader;
    }
    if (!fs::is_directory(status)) return Status::error(where.string() + ": expected a data directory or a .npz file");

    LOKA_ASSIGN_OR_RETURN(const auto sets, numbered_entries(where, kDataSetPrefix, "", true));
    for (const auto& [k, path] : sets) reader.sources_.push_back(path);
    if (!reader.sources_.empty()) return reader;

    LOKA_ASSIGN_OR_RETURN(const auto inputs, numbered_entries(where, "input_", ".pb", false));
    LOKA_ASSIGN_OR_RETURN(const auto outputs, numbered_entries(where, "output_", ".pb", false));
    if (!inputs.empty() || !outputs.empty()) {
      reader.sources_.push_back(where);
      return reader;
    }
    for (fs::directory_iterator it(where, error), end; !error && it != end; it.increment(error)) {
      std::error_code kind_error;
      if (is_npz(it->path()) && it->is_regular_file(kind_error)) reader.sources_.push_back(it->path());
    }
    if (error) return Status::error(where.string() + ": cannot list: " + error.message());
    std::sort(reader.sources_.begin(), reader.sources_.end());
    if (reader.sources_.empty())
      return Status::error(where.string() + ": holds no input_<i>.pb/output_<i>.pb files, test_data_set_<k>/ folders or .npz files");
    return reader;
  }());
}

fs::path DataSetReader::subfolder(size_t index) const {
  const fs::path& source = sources_[index];
  if (source == root_) return {};
  return is_npz(source) ? source.stem() : source.filename();
}

Result<DataSet> DataSetReader::read(size_t index) const {
  return one_line([&]() -> Result<DataSet> {
    if (index >= sources_.size())
      return Status::error(root_.string() + ": data set " + std::to_string(index) + " requested but there are " +
                           std::to_string(sources_.size()));
    const fs::path& source = sources_[index];
    if (is_npz(source)) return data_set_from_npz(source);

    DataSet data;
    data.location = source;
    data.label = source.filename().empty() ? source.string() : source.filename().string();
    LOKA_ASSIGN_OR_RETURN(const auto input_files, contiguous_files(source, "input_"));
    LOKA_ASSIGN_OR_RETURN(const auto output_files, contiguous_files(source, "output_"));
    LOKA_ASSIGN_OR_RETURN(data.inputs, read_tensor_files(input_files));
    LOKA_ASSIGN_OR_RETURN(data.outputs, read_tensor_files(output_files));
    const fs::path labels = source / "labels.pb";
    std::error_code error;
    if (fs::exists(labels, error)) {
      LOKA_ASSIGN_OR_RETURN(auto named, read_tensor_file(labels));
      data.labels = std::move(named.second);
    }
    return data;
  }());
}

Result<std::vector<Tensor>> order_inputs(const DataSet& data, const std::vector<std::string>& input_names) {
  return one_line(order_tensors(data.inputs, input_names, "input", data.location.string()));
}

Result<std::vector<Tensor>> order_outputs(const DataSet& data, const std::vector<std::string>& output_names) {
  return one_line(order_tensors(data.outputs, output_names, "output", data.location.string()));
}

Status write_outputs(const fs::path& directory, const std::vector<std::string>& names,
                     const std::vector<Tensor>& tensors) {
  if (names.size() != tensors.size())
    return Status::error(directory.string() + ": " + std::to_string(tensors.size()) + " outputs but " +
                         std::to_string(names.size()) + " names");
  std::error_code error;
  fs::create_directories(directory, error);
  if (error) return Status::error(directory.string() + ": cannot create: " + error.message());
  for (size_t i = 0; i < tensors.size(); ++i)
    LOKA_RETURN_IF_ERROR(write_tensor_file(directory / ("output_" + std::to_string(i) + ".pb"), names[i], tensors[i]));
  return Status::ok();
}

// ---------------------------------------------------------------------------
// .npy: header and dtypes
// ---------------------------------------------------------------------------
namespace {

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyMagicSize = 6;
constexpr size_t kMaxNpyHeader = size_t{1} << 20;  // numpy writes < 64 KiB; anything huger is hostile
constexpr size_t kMaxNpyRank = 64;                   // numpy's own limit

struct NpyType {
  const char* code;  ///< descr without the byte-order character
  DType dtype;
};
constexpr NpyType kNpyTypes[] = {
    {"b1", DType::kBool},    {"i1", DType::kInt8},   {"u1", DType::kUInt8},   {"i2", DType::kInt16},
    {"u2", DType::kUInt16},  {"i4", DType::kInt32},  {"u4", DType::kUInt32},  {"i8", DType::kInt64},
    {"u8", DType::kUInt64},  {"f2", DType::kFloat16}, {"f4", DType::kFloat32}, {"f8", DType::kFloat64},
};

Result<DType> dtype_from_descr(const std::string& descr) {
  if (descr.size() < 2) return Status::error("unknown dtype '" + descr + "'");
  const char order = descr[0];
  const std::string code = descr.substr(1);
  for (const NpyType& type : kNpyTypes) {
    if (code != type.code) continue;
    if (order == '>' && dtype_size(type.dtype) > 1)
      return Status::error("big-endian dtype '" + descr + "' is not supported; save little-endian arrays");
    if (order != '<' && order != '|' && order != '=' && order != '>') break;
    return type.dtype;
  }
  return Status::error("unsupported dtype '" + descr + "' (bool, int8-64, uint8-64, float16/32/64 are supported)");
}

std::string descr_of(DType dtype) {
  for (const NpyType& type : kNpyTypes)
    if (type.dtype == dtype) return std::string(dtype_size(dtype) == 1 ? "|" : "<") + type.code;
  return {};
}

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  Shape shape;
};

/// Parses the Python dict literal numpy writes, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }.
class NpyHeaderParser {
 public:
  explicit NpyHeaderParser(std::string_view text) : text_(text) {}

  Result<NpyHeader> parse() {
    NpyHeader header;
    bool seen_descr = false, seen_order = false, seen_shape = false;
    LOKA_RETURN_IF_ERROR(expect('{'));
    while (true) {
      skip_space();
      if (peek() == '}') break;
      LOKA_ASSIGN_OR_RETURN(const std::string key, string_literal());
      LOKA_RETURN_IF_ERROR(expect(':'));
      skip_space();
      if (key == "descr") {
        LOKA_ASSIGN_OR_RETURN(header.descr, string_literal());
        seen_descr = true;
      } else if (key == "fortran_order") {
        LOKA_ASSIGN_OR_RETURN(header.fortran_order, boolean());
        seen_order = true;
      } else if (key == "shape") {
        LOKA_ASSIGN_OR_RETURN(header.shape, tuple());
        seen_shape = true;
      } else {
        return Status::error("header has unexpected key '" + key + "'");
      }
      skip_space();
      if (peek() == ',') ++position_;
      else if (peek() != '}') return error("',' or '}'");
    }
    ++position_;
    skip_space();
    if (position_ != text_.size()) return error("the end of the header");
    if (!seen_descr || !seen_order || !seen_shape)
      return Status::error("header lacks one of 'descr', 'fortran_order', 'shape'");
    return header;
  }

 private:
  char peek() const { return position_ < text_.size() ? text_[position_] : '\0'; }
  void skip_space() {
    while (position_ < text_.size() && (text_[position_] == ' ' || text_[position_] == '\n' || text_[position_] == '\t'))
      ++position_;
  }
  Status error(const std::string& wanted) const {
    return Status::error("malformed header: expected " + wanted + " at byte " + std::to_string(position_));
  }
  Status expect(char c) {
    skip_space();
    if (peek() != c) return error(std::string("'") + c + "'");
    ++position_;
    return Status::ok();
  }
  Result<std::string> string_literal() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') return error("a string");
    const size_t end = text_.find(quote, position_ + 1);
    if (end == std::string_view::npos) return error("a closing quote");
    std::string value(text_.substr(position_ + 1, end - position_ - 1));
    position_ = end + 1;
    return value;
  }
  Result<bool> boolean() {
    for (const auto& [word, value] : {std::pair{std::string_view("True"), true}, std::pair{std::string_view("False"), false}})
      if (text_.substr(position_).starts_with(word)) {
        position_ += word.size();
        return value;
      }
    return error("True or False");
  }
  Result<Shape> tuple() {
    LOKA_RETURN_IF_ERROR(expect('('));
    Shape shape;
    while (true) {
      skip_space();
      if (peek() == ')') break;
      if (peek() == '-') return Status::error("header shape has a negative dim");
      int64_t dim = 0;
      const char* begin = text_.data() + position_;
      const auto [end, parse_error] = std::from_chars(begin, text_.data() + text_.size(), dim);
      if (parse_error == std::errc::result_out_of_range) return Status::error("header shape has a dim too large to hold");
      if (parse_error != std::errc()) return error("a dim");
      position_ += static_cast<size_t>(end - begin);
      if (peek() == 'L') ++position_;  // Python 2 longs: "(3L, 4L)"
      if (shape.size() == kMaxNpyRank) return Status::error("header shape has more than 64 dims");
      shape.push_back(dim);
      skip_space();
      if (peek() == ',') ++position_;
      else if (peek() != ')') return error("',' or ')'");
    }
    ++position_;
    return shape;
  }

  std::string_view text_;
  size_t position_ = 0;
};

// ---------------------------------------------------------------------------
// Zip archives
// ---------------------------------------------------------------------------

constexpr uint32_t kLocalHeaderSignature = 0x04034b50;
constexpr uint32_t kCentralHeaderSignature = 0x02014b50;
constexpr uint32_t kEndSignature = 0x06054b50;
constexpr uint32_t kZip64EndSignature = 0x06064b50;
constexpr uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr size_t kEndSize = 22;
constexpr size_t kCentralHeaderSize = 46;
constexpr size_t kLocalHeaderSize = 30;
constexpr size_t kZip64EndSize = 56;
constexpr size_t kZip64LocatorSize = 20;
constexpr uint16_t kStored = 0;
constexpr uint16_t kDeflated = 8;
/// Deflate cannot expand data by more than about 1032:1; a larger declared size is a lie.
constexpr uint64_t kMaxDeflateRatio = 1032;

/// Little-endian reads; callers check ranges with `has` first.
class ByteView {
 public:
  explicit ByteView(std::span<const std::byte> bytes) : bytes_(bytes) {}
  uint64_t size() const { return bytes_.size(); }
  bool has(uint64_t offset, uint64_t length) const { return offset <= size() && length <= size() - offset; }
  uint16_t u16(uint64_t at) const { return static_cast<uint16_t>(byte(at) | byte(at + 1) << 8); }
  uint32_t u32(uint64_t at) const { return u16(at) | static_cast<uint32_t>(u16(at + 2)) << 16; }
  uint64_t u64(uint64_t at) const { return u32(at) | static_cast<uint64_t>(u32(at + 4)) << 32; }
  std::span<const std::byte> slice(uint64_t offset, uint64_t length) const {
    return bytes_.subspan(static_cast<size_t>(offset), static_cast<size_t>(length));
  }

 private:
  uint32_t byte(uint64_t at) const { return static_cast<uint32_t>(bytes_[static_cast<size_t>(at)]); }
  std::span<const std::byte> bytes_;
};

struct ZipMember {
  std::string name;
  uint16_t method = 0;
  uint32_t crc = 0;
  uint64_t compressed_size = 0;
  uint64_t uncompressed_size = 0;
  uint64_t local_offset = 0;
  uint64_t data_offset = 0;  ///< filled from the local header
};

struct ZipDirectory {
  uint64_t entries = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
};

Result<ZipDirectory> find_central_directory(const ByteView& zip) {
  if (zip.size() < kEndSize) return Status::error("not a zip archive (too short)");
  // The end record sits at the end, followed only by a comment of up to 64 KiB.
  const uint64_t lowest = zip.size() - kEndSize > 0xFFFF ? zip.size() - kEndSize - 0xFFFF : 0;
  std::optional<uint64_t> end;
  for (uint64_t at = zip.size() - kEndSize + 1; at-- > lowest;) {
    if (zip.u32(at) == kEndSignature && at + kEndSize + zip.u16(at + 20) <= zip.size()) {
      end = at;
      break;
    }
  }
  if (!end) return Status::error("not a zip archive (no end-of-central-directory record)");
  if (zip.u16(*end + 4) != 0 || zip.u16(*end + 6) != 0) return Status::error("multi-disk zip archives are not supported");
  ZipDirectory directory{zip.u16(*end + 10), zip.u32(*end + 16), zip.u32(*end + 12)};
  if (*end >= kZip64LocatorSize && zip.u32(*end - kZip64LocatorSize) == kZip64LocatorSignature) {
    const uint64_t record = zip.u64(*end - kZip64LocatorSize + 8);
    if (!zip.has(record, kZip64EndSize) || zip.u32(record) != kZip64EndSignature)
      return Status::error("corrupt zip64 end-of-central-directory record");
    directory = {zip.u64(record + 32), zip.u64(record + 48), zip.u64(record + 40)};
  } else if (directory.entries == 0xFFFF || directory.offset == 0xFFFFFFFF || directory.size == 0xFFFFFFFF) {
    return Status::error("zip64 archive without its zip64 end record");
  }
  if (!zip.has(directory.offset, directory.size)) return Status::error("central directory lies outside the file");
  if (directory.entries > directory.size / kCentralHeaderSize)
    return Status::error("central directory claims more entries than it can hold");
  return directory;
}

/// Applies a zip64 extra field (id 1) to the sizes and offset that overflowed 32 bits.
Status apply_zip64_extra(const ByteView& zip, uint64_t extra, uint64_t extra_end, ZipMember& member,
                         uint32_t raw_uncompressed, uint32_t raw_compressed, uint32_t raw_offset) {
  while (extra + 4 <= extra_end) {
    const uint16_t id = zip.u16(extra);
    const uint64_t field_end = extra + 4 + zip.u16(extra + 2);
    if (field_end > extra_end) return Status::error("member '" + member.name + "': corrupt extra field");
    if (id == 0x0001) {
      uint64_t at = extra + 4;
      for (auto [raw, target] : {std::pair{raw_uncompressed, &member.uncompressed_size},
                                 std::pair{raw_compressed, &member.compressed_size},
                                 std::pair{raw_offset, &member.local_offset}}) {
        if (raw != 0xFFFFFFFF) continue;
        if (at + 8 > field_end) return Status::error("member '" + member.name + "': truncated zip64 extra field");
        *target = zip.u64(at);
        at += 8;
      }
    }
    extra = field_end;
  }
  return Status::ok();
}

Result<std::vector<ZipMember>> read_members(const ByteView& zip) {
  LOKA_ASSIGN_OR_RETURN(const ZipDirectory directory, find_central_directory(zip));
  std::vector<ZipMember> members;
  uint64_t at = directory.offset;
  const uint64_t end = directory.offset + directory.size;
  for (uint64_t i = 0; i < directory.entries; ++i) {
    if (at + kCentralHeaderSize > end || zip.u32(at) != kCentralHeaderSignature)
      return Status::error("corrupt central directory entry " + std::to_string(i));
    const uint16_t flags = zip.u16(at + 8);
    const uint64_t name_length = zip.u16(at + 28);
    const uint64_t extra_length = zip.u16(at + 30);
    const uint64_t comment_length = zip.u16(at + 32);
    const uint64_t next = at + kCentralHeaderSize + name_length + extra_length + comment_length;
    if (next > end) return Status::error("central directory entry " + std::to_string(i) + " overruns the directory");
    ZipMember member;
    const auto name = zip.slice(at + kCentralHeaderSize, name_length);
    member.name.assign(reinterpret_cast<const char*>(name.data()), name.size());
    member.method = zip.u16(at + 10);
    member.crc = zip.u32(at + 16);
    member.compressed_size = zip.u32(at + 20);
    member.uncompressed_size = zip.u32(at + 24);
    member.local_offset = zip.u32(at + 42);
    const uint64_t extra = at + kCentralHeaderSize + name_length;
    LOKA_RETURN_IF_ERROR(apply_zip64_extra(zip, extra, extra + extra_length, member, zip.u32(at + 24),
                                           zip.u32(at + 20), zip.u32(at + 42)));
    at = next;
    if (!member.name.empty() && member.name.back() == '/') continue;  // a directory entry
    const std::string where = "member '" + member.name + "': ";
    if (flags & 0x1) return Status::error(where + "encrypted members are not supported");
    if (member.method != kStored && member.method != kDeflated)
      return Status::error(where + "compression method " + std::to_string(member.method) + " is not supported (stored or deflate)");
    if (member.method == kStored && member.compressed_size != member.uncompressed_size)
      return Status::error(where + "stored member with different compressed and uncompressed sizes");
    if (member.method == kDeflated && member.uncompressed_size / kMaxDeflateRatio > member.compressed_size + 1)
      return Status::error(where + "declares " + std::to_string(member.uncompressed_size) + " bytes from " +
                           std::to_string(member.compressed_size) + " compressed bytes, more than deflate can produce");
    if (!zip.has(member.local_offset, kLocalHeaderSize) || zip.u32(member.local_offset) != kLocalHeaderSignature)
      return Status::error(where + "local header missing or outside the file");
    member.data_offset = member.local_offset + kLocalHeaderSize + zip.u16(member.local_offset + 26) +
                         zip.u16(member.local_offset + 28);
    if (!zip.has(member.data_offset, member.compressed_size)) return Status::error(where + "data lies past the end of the file");
    members.push_back(std::move(member));
  }
  return members;
}

/// Reads a member's uncompressed bytes sequentially, inflating on the fly and
/// checking the total size and CRC-32 at the end. Not movable: zlib keeps a
/// pointer to its z_stream.
class MemberReader {
 public:
  MemberReader(const ByteView& zip, const ZipMember& member) : member_(member), data_(zip.slice(member.data_offset, member.compressed_size)) {}
  MemberReader(const MemberReader&) = delete;
  MemberReader& operator=(const MemberReader&) = delete;
  ~MemberReader() {
    if (inflating_) inflateEnd(&stream_);
  }

  Status start() {
    if (member_.method != kDeflated) return Status::ok();
    if (inflateInit2(&stream_, -MAX_WBITS) != Z_OK) return Status::error("cannot start inflating");
    inflating_ = true;
    stream_.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(data_.data()));
    return Status::ok();
  }
  uint64_t remaining() const { return member_.uncompressed_size - produced_; }

  /// Exactly `length` more bytes into `out`; fewer is an error.
  Status read(void* out, uint64_t length) {
    if (length > remaining())
      return Status::error("needs " + std::to_string(length) + " more bytes but only " + std::to_string(remaining()) + " remain");
    if (length == 0) return Status::ok();
    auto* target = static_cast<Bytef*>(out);
    if (member_.method == kStored) std::memcpy(target, data_.data() + produced_, static_cast<size_t>(length));
    else LOKA_RETURN_IF_ERROR(inflate_into(target, length));
    for (uint64_t done = 0; done < length;) {  // crc32 takes a uInt length
      const uInt chunk = static_cast<uInt>(std::min<uint64_t>(length - done, UINT_MAX));
      crc_ = crc32(crc_, target + done, chunk);
      done += chunk;
    }
    produced_ += length;
    return Status::ok();
  }

  /// Checks that everything was consumed, that a deflate stream ends right there and that the CRC matches.
  Status finish() {
    if (remaining() != 0) return Status::error(std::to_string(remaining()) + " bytes left after the array data");
    if (member_.method == kDeflated) LOKA_RETURN_IF_ERROR(inflate_into(nullptr, 0));
    if (crc_ != member_.crc) return Status::error("CRC-32 mismatch (corrupt data)");
    return Status::ok();
  }

 private:
  /// Inflates exactly `length` bytes; with length 0, checks that the stream ends without more output.
  Status inflate_into(Bytef* target, uint64_t length) {
    uint64_t filled = 0;
    do {
      const uint64_t want = length - filled;
      if (ended_) return want ? Status::error("deflate stream ends before the declared size") : Status::ok();
      const uint64_t used = static_cast<uint64_t>(reinterpret_cast<const std::byte*>(stream_.next_in) - data_.data());
      stream_.avail_in = static_cast<uInt>(std::min<uint64_t>(data_.size() - used, UINT_MAX));
      Bytef spare = 0;  // a probe offers one byte that must stay unused
      stream_.next_out = want ? target + filled : &spare;
      stream_.avail_out = want ? static_cast<uInt>(std::min<uint64_t>(want, UINT_MAX)) : 1;
      const uInt before = stream_.avail_out;
      const int code = inflate(&stream_, Z_NO_FLUSH);
      const uint64_t produced = before - stream_.avail_out;
      if (code == Z_STREAM_END) ended_ = true;
      else if (code == Z_BUF_ERROR) return Status::error("deflate data ends early");
      else if (code != Z_OK)
        return Status::error(std::string("corrupt deflate data (") + (stream_.msg ? stream_.msg : "zlib error") + ")");
      if (want == 0) {
        if (produced) return Status::error("deflate stream continues past the declared size");
        if (!ended_) return Status::error("deflate stream does not end at the declared size");
        return Status::ok();
      }
      filled += produced;
    } while (filled < length);
    return Status::ok();
  }

  const ZipMember& member_;
  std::span<const std::byte> data_;
  z_stream stream_{};
  bool inflating_ = false;
  bool ended_ = false;
  uint64_t produced_ = 0;
  uLong crc_ = crc32(0, Z_NULL, 0);
};

Result<Tensor> read_npy_member(const ByteView& zip, const ZipMember& member) {
  MemberReader reader(zip, member);
  LOKA_RETURN_IF_ERROR(reader.start());
  unsigned char preamble[kNpyMagicSize + 2] = {};
  if (reader.remaining() < sizeof(preamble)) return Status::error("too short for a .npy header");
  LOKA_RETURN_IF_ERROR(reader.read(preamble, sizeof(preamble)));
  if (std::memcmp(preamble, kNpyMagic, kNpyMagicSize) != 0) return Status::error("not a .npy array (bad magic)");
  const int major = preamble[kNpyMagicSize];
  if (major < 1 || major > 3) return Status::error(".npy format version " + std::to_string(major) + " is not supported");
  unsigned char length_bytes[4] = {};
  const size_t length_size = major == 1 ? 2 : 4;
  LOKA_RETURN_IF_ERROR(reader.read(length_bytes, length_size));
  uint64_t header_length = length_bytes[0] | uint64_t{length_bytes[1]} << 8;
  if (major > 1) header_length |= uint64_t{length_bytes[2]} << 16 | uint64_t{length_bytes[3]} << 24;
  if (header_length > kMaxNpyHeader || header_length > reader.remaining())
    return Status::error(".npy header length " + std::to_string(header_length) + " exceeds the member");
  std::string header_text(static_cast<size_t>(header_length), '\0');
  LOKA_RETURN_IF_ERROR(reader.read(header_text.data(), header_length));
  LOKA_ASSIGN_OR_RETURN(const NpyHeader header, NpyHeaderParser(header_text).parse());
  LOKA_ASSIGN_OR_RETURN(const DType dtype, dtype_from_descr(header.descr));
  if (header.fortran_order) return Status::error("Fortran-order arrays are not supported; save C-order arrays");
  LOKA_ASSIGN_OR_RETURN(const int64_t count, checked_element_count(header.shape));
  const uint64_t bytes = static_cast<uint64_t>(count) * dtype_size(dtype);
  if (bytes != reader.remaining())
    return Status::error("shape " + shape_to_string(header.shape) + " of " + header.descr + " needs " +
                         std::to_string(bytes) + " bytes but the array holds " + std::to_string(reader.remaining()));
  // Uninitialized storage: inflating fills it page by page, so a member that lies about
  // its size fails before touching memory it never fills.
  std::shared_ptr<Storage> storage;
  try {
    storage = std::make_shared<Storage>(static_cast<size_t>(bytes));
  } catch (const std::bad_alloc&) {
    return Status::error("cannot allocate " + std::to_string(bytes) + " bytes for shape " + shape_to_string(header.shape));
  }
  Tensor tensor = Tensor::on_storage(dtype, header.shape, std::move(storage));
  LOKA_RETURN_IF_ERROR(reader.read(tensor.raw(), bytes));
  LOKA_RETURN_IF_ERROR(reader.finish());
  return tensor;
}

// --- writing -----------------------------------------------------------------

void put16(std::string& out, uint32_t value) {
  out += static_cast<char>(value & 0xFF);
  out += static_cast<char>((value >> 8) & 0xFF);
}
void put32(std::string& out, uint32_t value) {
  put16(out, value & 0xFFFF);
  put16(out, value >> 16);
}

Result<std::string> npy_bytes(const Tensor& tensor) {
  const std::string descr = descr_of(tensor.dtype());
  if (descr.empty()) return Status::error("dtype " + std::string(dtype_name(tensor.dtype())) + " has no numpy equivalent");
  std::string shape = "(";
  for (int axis = 0; axis < tensor.rank(); ++axis) shape += (axis ? ", " : "") + std::to_string(tensor.dim(axis));
  shape += tensor.rank() == 1 ? ",)" : ")";  // Python's one-tuple: "(3,)"
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad so the array data starts on a 64-byte boundary, as numpy does.
  const bool version2 = header.size() + 1 + 10 > 0xFFFF;
  const size_t preamble = version2 ? 12 : 10;
  header.append(63 - (preamble + header.size()) % 64, ' ');
  header += '\n';
  std::string out(kNpyMagic, kNpyMagicSize);
  out += static_cast<char>(version2 ? 2 : 1);
  out += '\0';
  if (version2) put32(out, static_cast<uint32_t>(header.size()));
  else put16(out, static_cast<uint32_t>(header.size()));
  out += header;
  out.append(static_cast<const char*>(tensor.raw()), tensor.byte_size());
  return out;
}

Result<std::string> deflate_bytes(const std::string& input) {
  z_stream stream{};
  if (deflateInit2(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return Status::error("cannot start deflating");
  std::string output(deflateBound(&stream, static_cast<uLong>(input.size())), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data()));
  stream.avail_in = static_cast<uInt>(input.size());
  stream.next_out = reinterpret_cast<Bytef*>(output.data());
  stream.avail_out = static_cast<uInt>(output.size());
  const int code = deflate(&stream, Z_FINISH);
  output.resize(stream.total_out);
  deflateEnd(&stream);
  if (code != Z_STREAM_END) return Status::error("deflate failed");
  return output;
}

}  // namespace

Result<std::vector<NamedTensor>> read_npz(const fs::path& path) {
  auto bytes = read_file(path);
  if (!bytes) return one_line(bytes.status());
  return read_npz_bytes(*bytes, path.string());
}

Result<std::vector<NamedTensor>> read_npz_bytes(std::span<const std::byte> bytes, const std::string& source) {
  return one_line([&]() -> Result<std::vector<NamedTensor>> {
    const ByteView zip(bytes);
    auto members = read_members(zip);
    if (!members) return members.status().with_context(source + ": ");
    std::vector<NamedTensor> arrays;
    for (const ZipMember& member : *members) {
      const std::string_view name = member.name;
      if (!name.ends_with(".npy")) return Status::error(source + ": member '" + member.name + "' is not a .npy array");
      auto tensor = read_npy_member(zip, member);
      if (!tensor) return tensor.status().with_context(source + ": member '" + member.name + "': ");
      arrays.push_back({std::string(name.substr(0, name.size() - 4)), std::move(tensor).value()});
    }
    return arrays;
  }());
}

Status write_npz(const fs::path& path, const std::vector<NamedTensor>& tensors, bool compress) {
  constexpr uint32_t kDosDate = (0 << 9) | (1 << 5) | 1;  // 1980-01-01, the zip epoch
  if (tensors.size() >= 0xFFFF) return Status::error(path.string() + ": too many arrays for a plain zip archive");
  std::string archive;
  std::string directory;
  for (const NamedTensor& named : tensors) {
    auto npy = npy_bytes(named.tensor);
    if (!npy) return npy.status().with_context(path.string() + ": array '" + named.name + "': ");
    const uint64_t offset = archive.size();
    const auto too_large = [&] { return Status::error(path.string() + ": archives over 4 GiB need zip64, which write_npz does not write"); };
    if (offset + npy->size() >= 0xFFFFFFFF) return too_large();
    std::string payload = *npy;
    if (compress) {
      LOKA_ASSIGN_OR_RETURN(payload, deflate_bytes(*npy));
    }
    if (offset + payload.size() >= 0xFFFFFFFF) return too_large();
    const std::string name = named.name + ".npy";
    const uint32_t crc = static_cast<uint32_t>(
        crc32(crc32(0, Z_NULL, 0), reinterpret_cast<const Bytef*>(npy->data()), static_cast<uInt>(npy->size())));
    const uint16_t method = compress ? kDeflated : kStored;
    // Local header, then the central-directory twin that points at it.
    put32(archive, kLocalHeaderSignature);
    put16(archive, 20), put16(archive, 0), put16(archive, method), put16(archive, 0), put16(archive, kDosDate);
    put32(archive, crc), put32(archive, static_cast<uint32_t>(payload.size())), put32(archive, static_cast<uint32_t>(npy->size()));
    put16(archive, static_cast<uint32_t>(name.size())), put16(archive, 0);
    archive += name;
    archive += payload;
    put32(directory, kCentralHeaderSignature);
    put16(directory, 20), put16(directory, 20), put16(directory, 0), put16(directory, method), put16(directory, 0);
    put16(directory, kDosDate), put32(directory, crc), put32(directory, static_cast<uint32_t>(payload.size()));
    put32(directory, static_cast<uint32_t>(npy->size())), put16(directory, static_cast<uint32_t>(name.size()));
    put16(directory, 0), put16(directory, 0), put16(directory, 0), put16(directory, 0), put32(directory, 0);
    put32(directory, static_cast<uint32_t>(offset));
    directory += name;
  }
  const uint64_t directory_offset = archive.size();
  archive += directory;
  put32(archive, kEndSignature);
  put16(archive, 0), put16(archive, 0);
  put16(archive, static_cast<uint32_t>(tensors.size())), put16(archive, static_cast<uint32_t>(tensors.size()));
  put32(archive, static_cast<uint32_t>(directory.size())), put32(archive, static_cast<uint32_t>(directory_offset));
  put16(archive, 0);
  std::ofstream out(path, std::ios::binary);
  if (!out || !out.write(archive.data(), static_cast<std::streamsize>(archive.size())) || !out.flush())
    return Status::error("cannot write '" + path.string() + "'");
  return Status::ok();
}

}  // namespace loka
