// ============================================================================
// runtime/initializer_payloads.h — a serialized ModelProto's large initializer
// bytes kept out of protobuf, on the way in and on the way out.
//
// Why: protobuf holds `raw_data` as its own std::string. Loading a model with
// 1.3 GB of embedding tables copied every byte from the file buffer into the
// ModelProto and again into the Tensors; writing one copied the tensors into
// the ModelProto and again into the serialized string before the file got
// them. Most of a warm loka-opt of full-size DLRM-DCNv2 went there.
//
// So both directions work on the wire format of the few fields in the way,
// ModelProto.graph (7) -> GraphProto.initializer (5) -> TensorProto.raw_data
// (9), and leave everything else to protobuf:
//  - split: the model's bytes become a skeleton (the same bytes less each
//    large raw_data field, enclosing lengths rewritten) that protobuf parses
//    in no time, plus where each removed raw_data lies in the original bytes,
//    by initializer position; the importer copies it straight into the
//    Tensor. Parsing the skeleton and taking those bytes as raw_data gives
//    exactly what parsing the whole model gives (protobuf's rules: a repeated
//    `graph` field merges, so initializers are counted across all of them; a
//    TensorProto with more than one raw_data field is left whole).
//  - join: a skeleton serialized without those raw_data fields is written
//    with each inserted where protobuf puts it (in field-number order, after
//    `name` (8), before any field above 9), the data straight from the
//    tensor: the same bytes SerializeToString of the whole model gives.
// Anything the walk does not plainly understand (groups, bad lengths,
// truncation) makes split decline, so the caller parses the whole model and
// protobuf reports the defect as before.
// ============================================================================
#pragma once

#include <cstddef>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loka/status.h"

namespace loka {

/// Initializer bytes held outside protobuf, by the initializer's position in the graph (the
/// order ModelProto.graph.initializer lists them); empty: that initializer keeps its own.
using InitializerPayloads = std::vector<std::optional<std::span<const std::byte>>>;

/// A model split by split_initializer_payloads.
struct SplitModel {
  std::string skeleton;          ///< a serialized ModelProto without the raw_data below
  InitializerPayloads payloads;  ///< each removed raw_data, pointing into the bytes that were split
};

/// Splits the serialized model `bytes`, removing each top-level initializer's raw_data of at
/// least `min_bytes`; nothing when no raw_data is that large or the bytes are not plainly a
/// ModelProto (parse them whole instead).
std::optional<SplitModel> split_initializer_payloads(std::span<const std::byte> bytes, size_t min_bytes);

/// Total bytes write_with_initializer_payloads writes for the same arguments; an error when
/// `skeleton` cannot take `payloads` (malformed, an initializer it does not have, or one that
/// has raw_data already).
Result<size_t> joined_model_size(std::string_view skeleton, const InitializerPayloads& payloads);
/// Writes `skeleton` with each payload inserted as its initializer's raw_data (see the header).
Status write_with_initializer_payloads(std::string_view skeleton, const InitializerPayloads& payloads,
                                       std::ostream& out);

}  // namespace loka
