// ============================================================================
// tests/runtime/initializer_payloads_test.cc — large initializer bytes kept
// out of protobuf (runtime/initializer_payloads.h): splitting a model and
// parsing the skeleton gives what parsing it whole gives; joining a skeleton
// with the data gives exactly protobuf's bytes; whatever the walk does not
// plainly understand is declined, and a join that cannot fit is an error.
// ============================================================================
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <random>
#include <sstream>
#include <string>

#include "model_builder.h"
#include "runtime/initializer_payloads.h"
#include "runtime/tensor_proto.h"
#include "test_support.h"

namespace loka {
namespace {

using testing::ModelBuilder;

std::span<const std::byte> as_bytes(const std::string& text) { return std::as_bytes(std::span(text)); }

/// A model with initializers of 64, 4 and 96 KiB (the middle one under the split threshold used
/// below), a doc string on the last (a TensorProto field numbered above raw_data) and metadata.
ModelBuilder model_with_tables() {
  std::mt19937 rng(3);
  ModelBuilder builder(17);
  builder.input("ids", DType::kInt64, {-1})
      .initializer("big", testing::random_tensor(rng, {2048, 8}))
      .initializer("small", testing::random_tensor(rng, {128, 8}))
      .initializer("bigger", testing::random_tensor(rng, {3072, 8}))
      .node("Gather", {"big", "ids"}, {"a"}, {}, "gather_big")
      .node("Gather", {"small", "ids"}, {"b"}, {}, "gather_small")
      .node("Gather", {"bigger", "ids"}, {"c"}, {}, "gather_bigger")
      .node("Sum", {"a", "b", "c"}, {"y"}, {}, "sum")
      .output("y", DType::kFloat32, {-1, 8});
  builder.proto().mutable_graph()->mutable_initializer(2)->set_doc_string("after raw_data on the wire");
  builder.proto().add_metadata_props()->set_key("loka.note");
  builder.proto().mutable_metadata_props(0)->set_value("kept");
  return builder;
}

/// `split` parsed, with each payload put back as raw_data, serialized again.
std::string reassembled(const SplitModel& split) {
  onnx::ModelProto model;
  EXPECT_TRUE(model.ParseFromString(split.skeleton));
  for (size_t i = 0; i < split.payloads.size(); ++i) {
    if (!split.payloads[i]) continue;
    EXPECT_FALSE(model.graph().initializer(static_cast<int>(i)).has_raw_data());
    model.mutable_graph()->mutable_initializer(static_cast<int>(i))
        ->set_raw_data(split.payloads[i]->data(), split.payloads[i]->size());
  }
  return model.SerializeAsString();
}

TEST(InitializerPayloads, SplittingAndPuttingBackGivesTheSameModel) {
  const std::string bytes = model_with_tables().serialize();
  const std::optional<SplitModel> split = split_initializer_payloads(as_bytes(bytes), 32 << 10);
  ASSERT_TRUE(split);
  ASSERT_EQ(split->payloads.size(), 3u);
  EXPECT_TRUE(split->payloads[0] && split->payloads[2]);
  EXPECT_FALSE(split->payloads[1]) << "under the threshold: left in the skeleton";
  EXPECT_LT(split->skeleton.size(), 8u << 10);
  // The payloads point into the split bytes, not into copies.
  EXPECT_GE(split->payloads[0]->data(), as_bytes(bytes).data());
  EXPECT_LE(split->payloads[2]->data() + split->payloads[2]->size(), as_bytes(bytes).data() + bytes.size());
  EXPECT_EQ(reassembled(*split), bytes);
  // A raw_data payload decodes as the proto's own raw_data would.
  onnx::ModelProto whole, skeleton;
  ASSERT_TRUE(whole.ParseFromString(bytes) && skeleton.ParseFromString(split->skeleton));
  auto expected = tensor_from_proto(whole.graph().initializer(0));
  auto actual = tensor_from_proto(skeleton.graph().initializer(0), {}, split->payloads[0]);
  ASSERT_TRUE(expected && actual);
  EXPECT_EQ(actual->to_floats(), expected->to_floats());
  EXPECT_EQ(actual->shape(), expected->shape());
}

TEST(InitializerPayloads, JoiningWritesTheBytesProtobufWrites) {
  ModelBuilder builder = model_with_tables();
  const std::string expected = builder.serialize();
  onnx::ModelProto skeleton = builder.proto();
  InitializerPayloads payloads(3);
  for (const int i : {0, 2}) {
    const std::string& raw = skeleton.graph().initializer(i).raw_data();
    payloads[static_cast<size_t>(i)] = as_bytes(builder.proto().graph().initializer(i).raw_data());
    EXPECT_FALSE(raw.empty());
    skeleton.mutable_graph()->mutable_initializer(i)->clear_raw_data();
  }
  const std::string skeleton_bytes = skeleton.SerializeAsString();
  auto size = joined_model_size(skeleton_bytes, payloads);
  ASSERT_TRUE(size) << size.status().message();
  EXPECT_EQ(*size, expected.size());
  std::ostringstream out;
  ASSERT_TRUE(write_with_initializer_payloads(skeleton_bytes, payloads, out));
  EXPECT_EQ(out.str(), expected);
}

TEST(InitializerPayloads, RepeatedGraphFieldsCountInitializersAcrossThemAsProtobufMerges) {
  // Two serialized ModelProtos back to back are one model: the second graph merges into the
  // first, its initializers appended.
  std::mt19937 rng(4);
  ModelBuilder first = model_with_tables();
  ModelBuilder second(17);
  second.initializer("late", testing::random_tensor(rng, {4096, 8}));
  const std::string bytes = first.serialize() + second.proto().SerializeAsString();
  const std::optional<SplitModel> split = split_initializer_payloads(as_bytes(bytes), 32 << 10);
  ASSERT_TRUE(split);
  ASSERT_EQ(split->payloads.size(), 4u);
  EXPECT_TRUE(split->payloads[3]);
  onnx::ModelProto whole;
  ASSERT_TRUE(whole.ParseFromString(bytes));
  EXPECT_EQ(whole.graph().initializer(3).name(), "late");
  EXPECT_EQ(reassembled(*split), whole.SerializeAsString());
}

std::string varint(uint64_t value) {
  std::string out;
  do {
    out += static_cast<char>((value & 0x7F) | (value >= 0x80 ? 0x80 : 0));
    value >>= 7;
  } while (value != 0);
  return out;
}

/// A length-delimited field on the wire.
std::string field(int number, const std::string& contents) {
  return static_cast<char>((number << 3) | 2) + varint(contents.size()) + contents;
}

TEST(InitializerPayloads, ATensorWithTwoRawDataFieldsIsLeftToProtobuf) {
  // A TensorProto followed by another holding only raw_data is one tensor with two raw_data
  // fields on the wire; protobuf keeps the last. The split leaves such a tensor whole.
  const onnx::ModelProto model = model_with_tables().proto();
  onnx::TensorProto later;
  later.set_raw_data(std::string(64 << 10, '\x01'));
  const std::string twice = model.graph().initializer(0).SerializeAsString() + later.SerializeAsString();
  onnx::ModelProto without_graph = model;
  without_graph.clear_graph();
  const std::string bytes = without_graph.SerializeAsString() +
                            field(7, model.graph().SerializeAsString() + field(5, twice));
  onnx::ModelProto whole;
  ASSERT_TRUE(whole.ParseFromString(bytes));
  ASSERT_EQ(whole.graph().initializer_size(), 4);
  ASSERT_EQ(whole.graph().initializer(3).raw_data(), later.raw_data());

  const std::optional<SplitModel> split = split_initializer_payloads(as_bytes(bytes), 32 << 10);
  ASSERT_TRUE(split);
  EXPECT_TRUE(split->payloads[0] && split->payloads[2]);
  EXPECT_TRUE(split->payloads.size() < 4 || !split->payloads[3]);
  onnx::ModelProto skeleton;
  ASSERT_TRUE(skeleton.ParseFromString(split->skeleton));
  EXPECT_EQ(skeleton.graph().initializer(3).raw_data(), later.raw_data());
  EXPECT_EQ(reassembled(*split), whole.SerializeAsString());
}

TEST(InitializerPayloads, DeclinesWhatItDoesNotPlainlyUnderstand) {
  const std::string bytes = model_with_tables().serialize();
  EXPECT_FALSE(split_initializer_payloads(as_bytes(bytes.substr(0, bytes.size() / 2)), 32 << 10)) << "truncated";
  EXPECT_FALSE(split_initializer_payloads(as_bytes(bytes), 1 << 20)) << "nothing that large";
  EXPECT_FALSE(split_initializer_payloads({}, 1)) << "empty";
  const std::string group = std::string(1, static_cast<char>((30 << 3) | 3)) + bytes;
  EXPECT_FALSE(split_initializer_payloads(as_bytes(group), 32 << 10)) << "a group";
}

TEST(InitializerPayloads, AJoinThatCannotFitIsAnError) {
  ModelBuilder builder = model_with_tables();
  const std::string whole = builder.serialize();
  const std::string data(16, '\0');
  InitializerPayloads has_raw_data{std::as_bytes(std::span(data))};
  auto already = joined_model_size(whole, has_raw_data);
  ASSERT_FALSE(already);
  EXPECT_NE(already.status().message().find("raw_data already"), std::string::npos) << already.status().message();
  InitializerPayloads past_the_end(8);
  past_the_end[7] = std::as_bytes(std::span(data));
  EXPECT_FALSE(joined_model_size(whole, past_the_end));
  EXPECT_FALSE(joined_model_size(whole.substr(0, whole.size() - 3), {}));
}

TEST(InitializerPayloads, APayloadOfTheWrongSizeIsRefusedAsRawDataWouldBe) {
  onnx::TensorProto proto;
  proto.set_name("t");
  proto.set_data_type(1);
  proto.add_dims(4);
  const std::string short_data(12, '\0');
  proto.set_raw_data(short_data);
  auto inline_error = tensor_from_proto(proto);
  proto.clear_raw_data();
  auto payload_error = tensor_from_proto(proto, {}, std::as_bytes(std::span(short_data)));
  ASSERT_FALSE(inline_error);
  ASSERT_FALSE(payload_error);
  EXPECT_EQ(payload_error.status().message(), inline_error.status().message());
}

}  // namespace
}  // namespace loka
