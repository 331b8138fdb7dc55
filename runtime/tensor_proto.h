// ============================================================================
// runtime/tensor_proto.h — ONNX TensorProto <-> Tensor, with every size checked.
//
// Reads raw_data and the typed fields (float_data, int32_data holding 16- and
// 8-bit codes, int64_data, double_data, uint64_data) and external data files.
// Hostile input is refused with a message naming the tensor: dims that are
// negative or overflow, data shorter or longer than the dims, external paths
// that are absolute or leave the model's folder, offsets past the file's end.
// ============================================================================
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "loka/status.h"
#include "loka/tensor.h"

namespace onnx {
class TensorProto;
}

namespace loka {

/// Decodes `proto`. External data is read relative to `external_data_dir`;
/// an empty dir refuses external data. `raw_data`, when given, stands for a raw_data field the
/// proto was parsed without (runtime/initializer_payloads.h): decoded as if the proto had it.
Result<Tensor> tensor_from_proto(const onnx::TensorProto& proto,
                                 const std::filesystem::path& external_data_dir = {},
                                 std::optional<std::span<const std::byte>> raw_data = std::nullopt);

/// Encodes `tensor` as raw_data with the given name.
void tensor_to_proto(const Tensor& tensor, const std::string& name, onnx::TensorProto* proto);
/// Everything tensor_to_proto writes but raw_data (for a writer that streams the data itself,
/// runtime/initializer_payloads.h).
void tensor_header_to_proto(const Tensor& tensor, const std::string& name, onnx::TensorProto* proto);

/// Reads a serialized TensorProto file (an `input_<i>.pb`), naming the file in errors.
Result<std::pair<std::string, Tensor>> read_tensor_file(const std::filesystem::path& path);
/// As read_tensor_file, from bytes already in memory; `source` names them in errors and
/// external data is read relative to `external_data_dir` (empty: refused).
Result<std::pair<std::string, Tensor>> parse_tensor_bytes(std::span<const std::byte> bytes, const std::string& source,
                                                          const std::filesystem::path& external_data_dir = {});
/// Writes a serialized TensorProto file.
Status write_tensor_file(const std::filesystem::path& path, const std::string& name, const Tensor& tensor);

}  // namespace loka
