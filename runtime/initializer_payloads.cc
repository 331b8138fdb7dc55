// ============================================================================
// runtime/initializer_payloads.cc — large initializer bytes kept out of
// protobuf (see the header).
// ============================================================================
#include "runtime/initializer_payloads.h"

#include <array>
#include <cstdint>
#include <deque>
#include <functional>

namespace loka {
namespace {

using Bytes = std::span<const std::byte>;

// Field numbers in onnx.proto, and the wire type of strings, bytes and messages.
constexpr uint32_t kModelGraph = 7;
constexpr uint32_t kGraphInitializer = 5;
constexpr uint32_t kTensorRawData = 9;
constexpr uint32_t kLengthDelimited = 2;

struct Field {
  uint32_t number = 0;
  uint32_t wire_type = 0;
  Bytes tag;      ///< the tag's own bytes
  Bytes whole;    ///< from the tag to the end of the value
  Bytes payload;  ///< a length-delimited field's contents
};

bool read_varint(Bytes bytes, size_t& at, uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64 && at < bytes.size(); shift += 7) {
    const auto byte = static_cast<uint8_t>(bytes[at++]);
    value |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;  // truncated, or longer than ten bytes
}

/// The fields of one message, in order; stops at the end or at the first malformed one.
class FieldReader {
 public:
  explicit FieldReader(Bytes message) : message_(message) {}

  std::optional<Field> next() {
    if (at_ >= message_.size()) return std::nullopt;
    const size_t start = at_;
    uint64_t tag = 0;
    if (!read_varint(message_, at_, tag) || (tag >> 32) != 0 || (tag >> 3) == 0) return fail();
    Field field;
    field.number = static_cast<uint32_t>(tag >> 3);
    field.wire_type = static_cast<uint32_t>(tag & 7);
    field.tag = message_.subspan(start, at_ - start);
    uint64_t value = 0;
    switch (field.wire_type) {
      case 0:
        if (!read_varint(message_, at_, value)) return fail();
        break;
      case 1:
      case 5: {
        const size_t width = field.wire_type == 1 ? 8 : 4;
        if (message_.size() - at_ < width) return fail();
        at_ += width;
        break;
      }
      case kLengthDelimited:
        if (!read_varint(message_, at_, value) || value > message_.size() - at_) return fail();
        field.payload = message_.subspan(at_, static_cast<size_t>(value));
        at_ += static_cast<size_t>(value);
        break;
      default:  // groups (3, 4), which ONNX never uses, and the undefined 6 and 7
        return fail();
    }
    field.whole = message_.subspan(start, at_ - start);
    return field;
  }
  bool failed() const { return failed_; }

 private:
  std::optional<Field> fail() {
    failed_ = true;
    return std::nullopt;
  }

  Bytes message_;
  size_t at_ = 0;
  bool failed_ = false;
};

bool is_raw_data(const Field& field) { return field.number == kTensorRawData && field.wire_type == kLengthDelimited; }

/// Output as byte ranges: stretches of the input, tensors' data, and the varints the rewrite
/// makes (kept in a deque shared by every level, whose elements never move).
class Pieces {
 public:
  using Varints = std::deque<std::array<std::byte, 10>>;
  explicit Pieces(Varints& varints) : varints_(varints) {}

  void add(Bytes bytes) {
    if (bytes.empty()) return;
    size_ += bytes.size();
    // Consecutive stretches of the input stay one range.
    if (!spans_.empty() && spans_.back().data() + spans_.back().size() == bytes.data())
      spans_.back() = Bytes(spans_.back().data(), spans_.back().size() + bytes.size());
    else
      spans_.push_back(bytes);
  }
  void add(const Pieces& other) {
    for (Bytes bytes : other.spans_) add(bytes);
  }
  void add_varint(uint64_t value) {
    std::array<std::byte, 10>& buffer = varints_.emplace_back();
    size_t length = 0;
    do {
      buffer[length++] = static_cast<std::byte>((value & 0x7F) | (value >= 0x80 ? 0x80 : 0));
      value >>= 7;
    } while (value != 0);
    add(Bytes(buffer.data(), length));
  }
  size_t size() const { return size_; }
  const std::vector<Bytes>& spans() const { return spans_; }
  Varints& varints() const { return varints_; }

 private:
  Varints& varints_;
  std::vector<Bytes> spans_;
  size_t size_ = 0;
};

/// Gets the contents of the initializer at `index` and appends what replaces them; false to stop.
using TensorEdit = std::function<bool(size_t index, Bytes tensor, Pieces& out)>;

/// Copies `model` to `out`, passing each top-level initializer's contents through `edit` and
/// rewriting the lengths around them; false when malformed or `edit` stops.
bool rewrite_model(Bytes model, const TensorEdit& edit, Pieces& out) {
  size_t initializers = 0;  // protobuf merges repeated `graph` fields: their initializers add up
  FieldReader fields(model);
  while (const std::optional<Field> field = fields.next()) {
    if (field->number != kModelGraph || field->wire_type != kLengthDelimited) {
      out.add(field->whole);
      continue;
    }
    Pieces graph(out.varints());
    FieldReader graph_fields(field->payload);
    while (const std::optional<Field> entry = graph_fields.next()) {
      if (entry->number != kGraphInitializer || entry->wire_type != kLengthDelimited) {
        graph.add(entry->whole);
        continue;
      }
      Pieces tensor(out.varints());
      if (!edit(initializers++, entry->payload, tensor)) return false;
      graph.add(entry->tag);
      graph.add_varint(tensor.size());
      graph.add(tensor);
    }
    if (graph_fields.failed()) return false;
    out.add(field->tag);
    out.add_varint(graph.size());
    out.add(graph);
  }
  return !fields.failed();
}

Bytes as_bytes(std::string_view text) { return {reinterpret_cast<const std::byte*>(text.data()), text.size()}; }

/// The pieces of `skeleton` with `payloads` inserted as raw_data.
Status join(std::string_view skeleton, const InitializerPayloads& payloads, Pieces& out) {
  std::string problem;
  size_t inserted = 0;
  const TensorEdit edit = [&](size_t index, Bytes tensor, Pieces& kept) {
    if (index >= payloads.size() || !payloads[index]) {
      kept.add(tensor);
      return true;
    }
    const Bytes data = *payloads[index];
    bool done = false;
    const auto insert = [&] {
      kept.add_varint((kTensorRawData << 3) | kLengthDelimited);
      kept.add_varint(data.size());
      kept.add(data);
      done = true;
    };
    FieldReader fields(tensor);
    while (const std::optional<Field> field = fields.next()) {
      if (is_raw_data(*field)) {
        problem = "initializer " + std::to_string(index) + " has raw_data already";
        return false;
      }
      // Protobuf writes known fields in field-number order: raw_data goes before the first above it.
      if (!done && field->number > kTensorRawData) insert();
      kept.add(field->whole);
    }
    if (fields.failed()) return false;
    if (!done) insert();
    ++inserted;
    return true;
  };
  if (!rewrite_model(as_bytes(skeleton), edit, out))
    return Status::error(problem.empty() ? "the model skeleton is not a well-formed ModelProto" : problem);
  size_t expected = 0;
  for (const auto& payload : payloads) expected += payload.has_value();
  if (inserted != expected)
    return Status::error("initializer data for " + std::to_string(expected - inserted) +
                         " initializers the model skeleton does not have");
  return Status::ok();
}

}  // namespace

std::optional<SplitModel> split_initializer_payloads(std::span<const std::byte> bytes, size_t min_bytes) {
  SplitModel split;
  const TensorEdit edit = [&](size_t index, Bytes tensor, Pieces& kept) {
    std::optional<Bytes> raw;
    int raw_fields = 0;
    FieldReader fields(tensor);
    while (const std::optional<Field> field = fields.next())
      if (is_raw_data(*field)) ++raw_fields, raw = field->payload;
    if (fields.failed()) return false;
    // More than one raw_data field (the last wins in protobuf) is left for protobuf to resolve.
    if (raw_fields != 1 || raw->size() < min_bytes) {
      kept.add(tensor);
      return true;
    }
    FieldReader again(tensor);
    while (const std::optional<Field> field = again.next())
      if (!is_raw_data(*field)) kept.add(field->whole);
    if (split.payloads.size() <= index) split.payloads.resize(index + 1);
    split.payloads[index] = *raw;
    return true;
  };
  Pieces::Varints varints;
  Pieces out(varints);
  if (!rewrite_model(bytes, edit, out) || split.payloads.empty()) return std::nullopt;
  split.skeleton.reserve(out.size());
  for (Bytes span : out.spans()) split.skeleton.append(reinterpret_cast<const char*>(span.data()), span.size());
  return split;
}

Result<size_t> joined_model_size(std::string_view skeleton, const InitializerPayloads& payloads) {
  Pieces::Varints varints;
  Pieces out(varints);
  LOKA_RETURN_IF_ERROR(join(skeleton, payloads, out));
  return out.size();
}

Status write_with_initializer_payloads(std::string_view skeleton, const InitializerPayloads& payloads,
                                       std::ostream& out) {
  Pieces::Varints varints;
  Pieces pieces(varints);
  LOKA_RETURN_IF_ERROR(join(skeleton, payloads, pieces));
  for (Bytes span : pieces.spans())
    if (!out.write(reinterpret_cast<const char*>(span.data()), static_cast<std::streamsize>(span.size())))
      return Status::error("write failed");
  return Status::ok();
}

}  // namespace loka
