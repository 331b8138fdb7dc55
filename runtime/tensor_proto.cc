// ============================================================================
// runtime/tensor_proto.cc — checked decoding and encoding of ONNX tensors.
// ============================================================================
#include "runtime/tensor_proto.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fstream>
#include <memory>

#include "kernels/cpu/parallel_rows.h"
#include "runtime/error_text.h"
#include "runtime/file_io.h"

namespace loka {
namespace {

std::string tensor_label(const onnx::TensorProto& proto) {
  return "tensor '" + proto.name() + "': ";
}

/// Resolves an external-data location inside `dir`, refusing anything that escapes it.
Result<std::filesystem::path> resolve_external_path(const std::string& location,
                                                    const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  if (dir.empty()) return Status::error("external data '" + location + "' but no model folder to read it from");
  const fs::path relative(location);
  if (location.empty() || relative.is_absolute() || relative.has_root_name() || relative.has_root_directory())
    return Status::error("external data path '" + location + "' is absolute; it must be relative to the model's folder");
  const fs::path normal = relative.lexically_normal();
  if (!normal.empty() && *normal.begin() == "..")
    return Status::error("external data path '" + location + "' leaves the model's folder");
  std::error_code error;
  const fs::path root = fs::weakly_canonical(dir, error);
  const fs::path full = fs::weakly_canonical(dir / normal, error);
  if (error) return Status::error("external data path '" + location + "': " + error.message());
  const auto [root_end, unused] = std::mismatch(root.begin(), root.end(), full.begin(), full.end());
  if (root_end != root.end())
    return Status::error("external data path '" + location + "' resolves outside the model's folder");
  return full;
}

Result<std::vector<std::byte>> read_external(const onnx::TensorProto& proto,
                                             const std::filesystem::path& dir, size_t expected_bytes) {
  std::string location;
  int64_t offset = 0;
  int64_t length = -1;
  for (const auto& entry : proto.external_data()) {
    int64_t* number = entry.key() == "offset" ? &offset : entry.key() == "length" ? &length : nullptr;
    if (entry.key() == "location") location = entry.value();
    if (number == nullptr) continue;
    // The whole value must be a number: "12abc" is as corrupt as "abc".
    const std::string& text = entry.value();
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *number);
    if (text.empty() || error != std::errc() || end != text.data() + text.size())
      return Status::error("external data " + entry.key() + " '" + text + "' is not a number");
  }
  if (location.empty()) return Status::error("external data without a location");
  if (offset < 0 || length < -1) return Status::error("external data has a negative offset or length");
  LOKA_ASSIGN_OR_RETURN(const std::filesystem::path path, resolve_external_path(location, dir));
  std::error_code error;
  const uintmax_t file_size = std::filesystem::file_size(path, error);
  if (error) return Status::error("cannot read external data file '" + path.string() + "': " + error.message());
  const uint64_t bytes = length < 0 ? expected_bytes : static_cast<uint64_t>(length);
  if (bytes != expected_bytes)
    return Status::error("external data length " + std::to_string(bytes) + " does not match the " +
                         std::to_string(expected_bytes) + " bytes its dims need");
  if (static_cast<uint64_t>(offset) > file_size || bytes > file_size - static_cast<uint64_t>(offset))
    return Status::error("external data range [" + std::to_string(offset) + ", +" + std::to_string(bytes) +
                         ") lies past the end of '" + path.string() + "' (" + std::to_string(file_size) + " bytes)");
  return read_file_range(path, static_cast<uint64_t>(offset), bytes);
}

/// Copies a typed repeated field into the tensor, converting each element with `store`.
template <typename Field, typename Store>
Status copy_typed(const Field& field, Tensor& tensor, const onnx::TensorProto& proto, Store store) {
  if (static_cast<int64_t>(field.size()) != tensor.element_count())
    return Status::error(tensor_label(proto) + "holds " + std::to_string(field.size()) + " values but its dims " +
                         shape_to_string(tensor.shape()) + " need " + std::to_string(tensor.element_count()));
  for (int i = 0; i < field.size(); ++i) store(i, field.Get(i));
  return Status::ok();
}

/// A tensor holding a copy of `bytes` bytes at `data`: written once, not zeroed first (a second
/// pass over 1.3 GB of tables), and a large one on every usable core: most of the copy is the
/// kernel providing fresh pages, which it does for several threads at once.
Tensor copied_tensor(DType dtype, Shape shape, const void* data, size_t bytes) {
  if (bytes == 0) return Tensor::zeros(dtype, std::move(shape));
  Tensor tensor = Tensor::on_storage(dtype, std::move(shape), std::make_shared<Storage>(bytes));
  constexpr size_t kBlock = size_t{1} << 20;
  const auto* from = static_cast<const std::byte*>(data);
  auto* to = static_cast<std::byte*>(tensor.raw());
  cpu::parallel_rows(static_cast<int64_t>((bytes + kBlock - 1) / kBlock), 8, [&](int64_t begin, int64_t end) {
    const size_t first = static_cast<size_t>(begin) * kBlock;
    std::memcpy(to + first, from + first, std::min(bytes, static_cast<size_t>(end) * kBlock) - first);
  });
  return tensor;
}

}  // namespace

Result<Tensor> tensor_from_proto(const onnx::TensorProto& proto, const std::filesystem::path& external_data_dir,
                                 std::optional<std::span<const std::byte>> raw_data) {
  if (!dtype_is_supported(proto.data_type()))
    return Status::error(tensor_label(proto) + "unsupported data type " +
                         std::string(dtype_name(static_cast<DType>(proto.data_type()))));
  const DType dtype = static_cast<DType>(proto.data_type());
  Shape shape(proto.dims().begin(), proto.dims().end());
  auto count = checked_element_count(shape);
  if (!count) return count.status().with_context(tensor_label(proto));
  const size_t bytes = static_cast<size_t>(*count) * dtype_size(dtype);

  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    auto data = read_external(proto, external_data_dir, bytes);
    if (!data) return data.status().with_context(tensor_label(proto));
    return copied_tensor(dtype, std::move(shape), data->data(), bytes);
  }
  if (!raw_data && proto.has_raw_data())
    raw_data = std::span<const std::byte>(reinterpret_cast<const std::byte*>(proto.raw_data().data()),
                                          proto.raw_data().size());
  if (raw_data) {
    if (raw_data->size() != bytes)
      return Status::error(tensor_label(proto) + "raw_data has " + std::to_string(raw_data->size()) +
                           " bytes but its dims " + shape_to_string(shape) + " of " +
                           std::string(dtype_name(dtype)) + " need " + std::to_string(bytes));
    return copied_tensor(dtype, std::move(shape), raw_data->data(), bytes);
  }
  // Typed fields: refuse shapes far larger than the data before allocating.
  const int64_t typed_count = proto.float_data_size() + proto.int32_data_size() + proto.int64_data_size() +
                              proto.double_data_size() + proto.uint64_data_size();
  if (*count > typed_count)
    return Status::error(tensor_label(proto) + "holds " + std::to_string(typed_count) + " values but its dims " +
                         shape_to_string(shape) + " need " + std::to_string(*count));
  Tensor tensor = Tensor::zeros(dtype, shape);
  std::byte* out = static_cast<std::byte*>(tensor.raw());
  auto store_as = [out]<typename T>(int i, auto value) {
    const T narrowed = static_cast<T>(value);
    std::memcpy(out + static_cast<size_t>(i) * sizeof(T), &narrowed, sizeof(T));
  };
  Status status;
  switch (dtype) {
    case DType::kFloat32:
      status = copy_typed(proto.float_data(), tensor, proto, [&](int i, float v) { store_as.operator()<float>(i, v); });
      break;
    case DType::kFloat64:
      status = copy_typed(proto.double_data(), tensor, proto, [&](int i, double v) { store_as.operator()<double>(i, v); });
      break;
    case DType::kInt64:
      status = copy_typed(proto.int64_data(), tensor, proto, [&](int i, int64_t v) { store_as.operator()<int64_t>(i, v); });
      break;
    case DType::kUInt32:
      status = copy_typed(proto.uint64_data(), tensor, proto, [&](int i, uint64_t v) { store_as.operator()<uint32_t>(i, v); });
      break;
    case DType::kUInt64:
      status = copy_typed(proto.uint64_data(), tensor, proto, [&](int i, uint64_t v) { store_as.operator()<uint64_t>(i, v); });
      break;
    case DType::kInt32:
      status = copy_typed(proto.int32_data(), tensor, proto, [&](int i, int32_t v) { store_as.operator()<int32_t>(i, v); });
      break;
    case DType::kInt16: case DType::kUInt16: case DType::kFloat16: case DType::kBFloat16:
      // 16-bit types travel as their bit patterns in int32_data.
      status = copy_typed(proto.int32_data(), tensor, proto, [&](int i, int32_t v) { store_as.operator()<uint16_t>(i, v); });
      break;
    default:  // int8, uint8, bool and FP8 codes
      status = copy_typed(proto.int32_data(), tensor, proto, [&](int i, int32_t v) { store_as.operator()<uint8_t>(i, v); });
      break;
  }
  if (!status) return status;
  return tensor;
}

void tensor_header_to_proto(const Tensor& tensor, const std::string& name, onnx::TensorProto* proto) {
  proto->Clear();
  proto->set_name(name);
  proto->set_data_type(static_cast<int32_t>(tensor.dtype()));
  for (int64_t dim : tensor.shape()) proto->add_dims(dim);
}

void tensor_to_proto(const Tensor& tensor, const std::string& name, onnx::TensorProto* proto) {
  tensor_header_to_proto(tensor, name, proto);
  proto->set_raw_data(tensor.raw(), tensor.byte_size());
}

Result<std::pair<std::string, Tensor>> read_tensor_file(const std::filesystem::path& path) {
  auto bytes = read_file(path);
  if (!bytes) return one_line(bytes.status());
  return parse_tensor_bytes(*bytes, path.string(), path.parent_path());
}

Result<std::pair<std::string, Tensor>> parse_tensor_bytes(std::span<const std::byte> bytes, const std::string& source,
                                                          const std::filesystem::path& external_data_dir) {
  onnx::TensorProto proto;
  if (bytes.size() > static_cast<size_t>(INT32_MAX) ||
      !proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return one_line(Status::error(source + ": not a valid serialized TensorProto"));
  auto tensor = tensor_from_proto(proto, external_data_dir);
  if (!tensor) return one_line(tensor.status().with_context(source + ": "));  // the name may hold any byte
  return std::make_pair(proto.name(), std::move(tensor).value());
}

Status write_tensor_file(const std::filesystem::path& path, const std::string& name, const Tensor& tensor) {
  onnx::TensorProto proto;
  tensor_to_proto(tensor, name, &proto);
  std::ofstream out(path, std::ios::binary);
  if (!out || !proto.SerializeToOstream(&out) || !out.flush())
    return Status::error("cannot write '" + path.string() + "'");
  return Status::ok();
}

}  // namespace loka
