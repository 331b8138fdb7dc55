// ============================================================================
// tests/runtime/shape_ops_test.cc — Reshape, Flatten, Squeeze, Unsqueeze,
// Identity, Dropout, Transpose, Expand, Shape, Size, Constant,
// ConstantOfShape and Range against reference loops, on random inputs of
// several dtypes and awkward shapes (rank 0, size-1 and empty dims, negative
// axes), plus the errors a bad model or input must produce.
// ============================================================================
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <numeric>

#include "single_node_util.h"
#include "test_support.h"

namespace loka {
namespace {

using testing::int_tensor;
using testing::random_bytes_tensor;
using testing::random_shape;
using testing::run_single_node;
using testing::same_element;

const DType kDTypes[] = {DType::kFloat32, DType::kInt64, DType::kUInt8, DType::kFloat16, DType::kFloat8E4M3FN,
                         DType::kBool};

/// Runs a node that must fail and returns its message.
std::string failure(const Result<std::vector<Tensor>>& result) {
  EXPECT_FALSE(result) << "expected an error";
  return result ? std::string() : result.status().message();
}

#define EXPECT_MESSAGE_HAS(message, text) EXPECT_NE((message).find(text), std::string::npos) << (message)

/// Output must be a view of `input` (same bytes, same storage) with `shape`.
void expect_view(const Tensor& input, const Tensor& output, const Shape& shape) {
  EXPECT_EQ(output.shape(), shape);
  EXPECT_EQ(output.dtype(), input.dtype());
  EXPECT_EQ(output.raw(), input.raw()) << "expected a view sharing the input's storage";
}

// ---------------------------------------------------------------------------
// Reshape

TEST(Reshape, ZeroCopiesDimMinusOneInfersAndResultIsAView) {
  std::mt19937 rng(1);
  const Tensor x = random_bytes_tensor(rng, DType::kFloat32, {2, 3, 4});
  struct Case {
    std::vector<int64_t> shape;
    Shape expected;
  } cases[] = {{{0, -1}, {2, 12}}, {{-1}, {24}}, {{4, 0, 2}, {4, 3, 2}}, {{2, 3, 4}, {2, 3, 4}},
               {{-1, 1, 4}, {6, 1, 4}}, {{0, 0, 2, 2}, {2, 3, 2, 2}}, {{1, -1, 1}, {1, 24, 1}}};
  for (const Case& c : cases) {
    auto out = run_single_node("Reshape", 14, {x, int_tensor(c.shape)});
    ASSERT_TRUE(out) << out.status().message();
    expect_view(x, (*out)[0], c.expected);
  }
  // INT32 shapes are accepted too, and rank 0 <-> one element.
  const Tensor scalar = random_bytes_tensor(rng, DType::kInt64, {});
  auto out = run_single_node("Reshape", 13, {scalar, int_tensor({1, 1}, DType::kInt32)});
  ASSERT_TRUE(out) << out.status().message();
  expect_view(scalar, (*out)[0], {1, 1});
  out = run_single_node("Reshape", 13, {(*out)[0], int_tensor({})});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].shape(), Shape{});
}

TEST(Reshape, AllowZeroMakesZeroLiteralAndEmptyTensorsWork) {
  const Tensor empty = Tensor::zeros(DType::kFloat32, {0, 3});
  auto out = run_single_node("Reshape", 14, {empty, int_tensor({3, 0})}, {{"allowzero", int64_t{1}}});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].shape(), (Shape{3, 0}));
  // Without allowzero, 0 copies dim 1 (3): [3, 3] has 9 elements, not 0.
  EXPECT_MESSAGE_HAS(failure(run_single_node("Reshape", 14, {empty, int_tensor({3, 0})})), "cannot reshape");
  EXPECT_MESSAGE_HAS(
      failure(run_single_node("Reshape", 14, {empty, int_tensor({0, -1})}, {{"allowzero", int64_t{1}}})),
      "allowzero");
}

TEST(Reshape, RejectsIncompatibleShapes) {
  const Tensor x = Tensor::zeros(DType::kFloat32, {2, 3});
  EXPECT_MESSAGE_HAS(failure(run_single_node("Reshape", 14, {x, int_tensor({4})})), "cannot reshape [2,3]");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Reshape", 14, {x, int_tensor({-1, -1})})), "more than one -1");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Reshape", 14, {x, int_tensor({4, -1})})), "-1 cannot be inferred");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Reshape", 14, {x, int_tensor({6, 1, 0})})), "copies dim 2");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Reshape", 14, {x, int_tensor({-2, -3})})), "invalid dim -2");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Reshape", 14, {x, Tensor::from_floats({1}, std::vector<float>{6})})),
                     "INT64");
}

// ---------------------------------------------------------------------------
// Flatten, Squeeze, Unsqueeze, Identity

TEST(Flatten, EveryAxisIncludingNegativeAndRank) {
  std::mt19937 rng(2);
  for (const Shape& shape : {Shape{2, 3, 4, 5}, Shape{1, 0, 3}, Shape{7}, Shape{}}) {
    const Tensor x = random_bytes_tensor(rng, DType::kFloat16, shape);
    const int rank = x.rank();
    for (int axis = -rank; axis <= rank; ++axis) {
      auto out = run_single_node("Flatten", 13, {x}, {{"axis", int64_t{axis}}});
      ASSERT_TRUE(out) << out.status().message();
      const int split = axis < 0 ? axis + rank : axis;
      int64_t outer = 1, inner = 1;
      for (int d = 0; d < rank; ++d) (d < split ? outer : inner) *= shape[static_cast<size_t>(d)];
      expect_view(x, (*out)[0], {outer, inner});
    }
    EXPECT_MESSAGE_HAS(failure(run_single_node("Flatten", 13, {x}, {{"axis", int64_t{rank + 1}}})), "out of range");
  }
  auto out = run_single_node("Flatten", 13, {Tensor::zeros(DType::kFloat32, {2, 3, 4})});  // default axis 1
  ASSERT_TRUE(out);
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 12}));
}

TEST(Squeeze, AxesAsAttributeBefore13AndInputFrom13) {
  std::mt19937 rng(3);
  const Tensor x = random_bytes_tensor(rng, DType::kInt64, {1, 3, 1, 1, 2});
  auto out = run_single_node("Squeeze", 11, {x}, {{"axes", std::vector<int64_t>{0, -2}}});
  ASSERT_TRUE(out) << out.status().message();
  expect_view(x, (*out)[0], {3, 1, 2});
  out = run_single_node("Squeeze", 13, {x, int_tensor({-3, 0})});
  ASSERT_TRUE(out) << out.status().message();
  expect_view(x, (*out)[0], {3, 1, 2});
  out = run_single_node("Squeeze", 21, {x});  // no axes: every size-1 dim
  ASSERT_TRUE(out) << out.status().message();
  expect_view(x, (*out)[0], {3, 2});
  out = run_single_node("Squeeze", 13, {Tensor::zeros(DType::kFloat32, {1})});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].shape(), Shape{});
}

TEST(Squeeze, RejectsNonUnitAxisRepeatsAndOutOfRange) {
  const Tensor x = Tensor::zeros(DType::kFloat32, {1, 3});
  EXPECT_MESSAGE_HAS(failure(run_single_node("Squeeze", 13, {x, int_tensor({1})})), "cannot squeeze axis 1 of size 3");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Squeeze", 13, {x, int_tensor({0, -2})})), "repeats");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Squeeze", 13, {x, int_tensor({2})})), "out of range");
}

TEST(Unsqueeze, AxesRefersToTheOutputAndMayBeUnsortedOrNegative) {
  std::mt19937 rng(4);
  const Tensor x = random_bytes_tensor(rng, DType::kFloat8E4M3FN, {3, 4});
  struct Case {
    std::vector<int64_t> axes;
    Shape expected;
  } cases[] = {{{0}, {1, 3, 4}}, {{2}, {3, 4, 1}}, {{-1}, {3, 4, 1}}, {{3, 0}, {1, 3, 4, 1}},
               {{1, -2, 0}, {1, 1, 3, 1, 4}}};
  for (const Case& c : cases) {
    auto out = run_single_node("Unsqueeze", 13, {x, int_tensor(c.axes)});
    ASSERT_TRUE(out) << out.status().message();
    expect_view(x, (*out)[0], c.expected);
    out = run_single_node("Unsqueeze", 11, {x}, {{"axes", c.axes}});
    ASSERT_TRUE(out) << out.status().message();
    expect_view(x, (*out)[0], c.expected);
  }
  auto out = run_single_node("Unsqueeze", 13, {Tensor::scalar_float(2.0f), int_tensor({0})});
  ASSERT_TRUE(out);
  EXPECT_EQ((*out)[0].shape(), Shape{1});
  EXPECT_MESSAGE_HAS(failure(run_single_node("Unsqueeze", 13, {x, int_tensor({3})})), "out of range");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Unsqueeze", 13, {x, int_tensor({1, 1})})), "repeats");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Unsqueeze", 13, {x})), "axes");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Unsqueeze", 11, {x})), "axes");
}

TEST(Identity, SharesStorageForEveryDtype) {
  std::mt19937 rng(5);
  for (DType dtype : kDTypes) {
    const Tensor x = random_bytes_tensor(rng, dtype, {2, 0, 3});
    auto out = run_single_node("Identity", 21, {x});
    ASSERT_TRUE(out) << out.status().message();
    expect_view(x, (*out)[0], x.shape());
  }
}

// ---------------------------------------------------------------------------
// Dropout (inference)

TEST(Dropout, IsIdentityWithAllTrueMask) {
  std::mt19937 rng(6);
  const Tensor x = testing::random_tensor(rng, {3, 5});
  auto out = run_single_node("Dropout", 13, {x, Tensor::scalar_float(0.3f)}, {}, 2);
  ASSERT_TRUE(out) << out.status().message();
  expect_view(x, (*out)[0], x.shape());
  const Tensor& mask = (*out)[1];
  ASSERT_EQ(mask.dtype(), DType::kBool);
  ASSERT_EQ(mask.shape(), x.shape());
  for (uint8_t v : mask.values<uint8_t>()) EXPECT_EQ(v, 1);
  // Opset 7: the mask has the data's type.
  out = run_single_node("Dropout", 7, {x}, {{"ratio", 0.5f}}, 2);
  ASSERT_TRUE(out) << out.status().message();
  ASSERT_EQ((*out)[1].dtype(), DType::kFloat32);
  for (float v : (*out)[1].values<float>()) EXPECT_EQ(v, 1.0f);
}

TEST(Dropout, TrainingModeOnlyWithZeroRatio) {
  const Tensor x = Tensor::zeros(DType::kFloat32, {4});
  Tensor on = Tensor::zeros(DType::kBool, {});
  on.data<uint8_t>()[0] = 1;
  EXPECT_MESSAGE_HAS(failure(run_single_node("Dropout", 13, {x, Tensor::scalar_float(0.5f), on})), "training_mode");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Dropout", 13, {x, Tensor(), on})), "training_mode");  // default 0.5
  auto out = run_single_node("Dropout", 13, {x, Tensor::scalar_float(0.0f), on});
  EXPECT_TRUE(out) << out.status().message();
  const Tensor off = Tensor::zeros(DType::kBool, {});
  out = run_single_node("Dropout", 13, {x, Tensor::scalar_float(0.9f), off});
  EXPECT_TRUE(out) << out.status().message();
}

// ---------------------------------------------------------------------------
// Transpose

Tensor reference_transpose(const Tensor& x, const std::vector<int64_t>& perm) {
  Shape shape(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) shape[d] = x.shape()[static_cast<size_t>(perm[d])];
  Tensor out = Tensor::zeros(x.dtype(), shape);
  const size_t size = dtype_size(x.dtype());
  for (int64_t i = 0; i < out.element_count(); ++i) {
    const std::vector<int64_t> coord = testing::unravel(i, shape);
    std::vector<int64_t> source(coord.size());
    for (size_t d = 0; d < perm.size(); ++d) source[static_cast<size_t>(perm[d])] = coord[d];
    std::memcpy(static_cast<std::byte*>(out.raw()) + i * size,
                static_cast<const std::byte*>(x.raw()) + testing::ravel(source, x.shape()) * size, size);
  }
  return out;
}

void expect_same_bytes(const Tensor& expected, const Tensor& actual) {
  ASSERT_EQ(actual.dtype(), expected.dtype());
  ASSERT_EQ(actual.shape(), expected.shape());
  for (int64_t i = 0; i < expected.element_count(); ++i)
    ASSERT_TRUE(same_element(expected, i, actual, i)) << "element " << i << " of " << shape_to_string(actual.shape());
}

TEST(Transpose, RandomPermutationsOfRandomShapesAndDtypes) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 60; ++trial) {
    const int rank = trial % 6;
    const DType dtype = kDTypes[static_cast<size_t>(trial) % std::size(kDTypes)];
    const Shape shape = random_shape(rng, rank, trial % 7 == 0 ? 0 : 1, 5);
    const Tensor x = random_bytes_tensor(rng, dtype, shape);
    std::vector<int64_t> perm(static_cast<size_t>(rank));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    auto out = run_single_node("Transpose", 21, {x}, {{"perm", perm}});
    ASSERT_TRUE(out) << out.status().message();
    expect_same_bytes(reference_transpose(x, perm), (*out)[0]);
  }
}

TEST(Transpose, DefaultReversesAxes) {
  std::mt19937 rng(8);
  const Tensor x = random_bytes_tensor(rng, DType::kInt64, {2, 3, 4});
  auto out = run_single_node("Transpose", 13, {x});
  ASSERT_TRUE(out) << out.status().message();
  expect_same_bytes(reference_transpose(x, {2, 1, 0}), (*out)[0]);
}

TEST(Transpose, RejectsBadPermutations) {
  const Tensor x = Tensor::zeros(DType::kFloat32, {2, 3, 4});
  for (const std::vector<int64_t>& perm : {std::vector<int64_t>{0, 0, 1}, {0, 1}, {0, 1, 3}, {-1, 0, 1}, {0, 1, 2, 3}})
    EXPECT_MESSAGE_HAS(failure(run_single_node("Transpose", 13, {x}, {{"perm", perm}})), "not a permutation");
}

// ---------------------------------------------------------------------------
// Expand

TEST(Expand, BidirectionalBroadcastAgainstReference) {
  std::mt19937 rng(9);
  struct Case {
    Shape input;
    std::vector<int64_t> shape;
    Shape expected;
  } cases[] = {{{3, 1}, {2, 3, 4}, {2, 3, 4}}, {{1}, {5}, {5}},         {{2, 3}, {1, 1}, {2, 3}},
               {{4, 1, 2}, {3, 1}, {4, 3, 2}}, {{}, {2, 2}, {2, 2}},     {{1, 3}, {0, 1}, {0, 3}},
               {{2, 1}, {}, {2, 1}},           {{1, 1, 1}, {1, 6, 1}, {1, 6, 1}}};
  for (const Case& c : cases)
    for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kInt8}) {
      const Tensor x = random_bytes_tensor(rng, dtype, c.input);
      auto out = run_single_node("Expand", 13, {x, int_tensor(c.shape)});
      ASSERT_TRUE(out) << out.status().message();
      const Tensor& y = (*out)[0];
      ASSERT_EQ(y.shape(), c.expected);
      const size_t offset = c.expected.size() - c.input.size();
      for (int64_t i = 0; i < y.element_count(); ++i) {
        const std::vector<int64_t> coord = testing::unravel(i, c.expected);
        std::vector<int64_t> source(c.input.size());
        for (size_t d = 0; d < source.size(); ++d) source[d] = c.input[d] == 1 ? 0 : coord[offset + d];
        ASSERT_TRUE(same_element(x, testing::ravel(source, c.input), y, i)) << shape_to_string(c.input);
      }
    }
}

TEST(Expand, RejectsShapesThatDoNotBroadcast) {
  const Tensor x = Tensor::zeros(DType::kFloat32, {2, 3});
  EXPECT_MESSAGE_HAS(failure(run_single_node("Expand", 13, {x, int_tensor({4, 3, 2})})), "not broadcastable");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Expand", 13, {x, int_tensor({-1, 3})})), "negative");
}

// ---------------------------------------------------------------------------
// Shape, Size

TEST(Shape, StartAndEndClampLikeOnnx15) {
  std::mt19937 rng(10);
  const Shape shape = {2, 3, 5, 7};
  const Tensor x = random_bytes_tensor(rng, DType::kUInt8, shape);
  const int64_t rank = 4;
  for (int64_t start = -6; start <= 6; ++start)
    for (int64_t end = -6; end <= 6; ++end) {
      auto out = run_single_node("Shape", 15, {x}, {{"start", start}, {"end", end}}, 1, DType::kInt64);
      ASSERT_TRUE(out) << out.status().message();
      // Reference: Python slicing shape[start:end].
      std::vector<int64_t> expected;
      const int64_t s = std::clamp(start < 0 ? start + rank : start, int64_t{0}, rank);
      const int64_t e = std::clamp(end < 0 ? end + rank : end, int64_t{0}, rank);
      for (int64_t d = s; d < e; ++d) expected.push_back(shape[static_cast<size_t>(d)]);
      EXPECT_EQ((*out)[0].to_int64s(), expected) << start << ":" << end;
      EXPECT_EQ((*out)[0].shape(), (Shape{static_cast<int64_t>(expected.size())}));
    }
  auto out = run_single_node("Shape", 13, {Tensor::scalar_float(1.0f)}, {}, 1, DType::kInt64);
  ASSERT_TRUE(out);
  EXPECT_EQ((*out)[0].shape(), Shape{0});
}

TEST(Size, CountsElements) {
  for (const Shape& shape : {Shape{}, Shape{0, 4}, Shape{2, 3, 4}}) {
    auto out = run_single_node("Size", 13, {Tensor::zeros(DType::kFloat16, shape)}, {}, 1, DType::kInt64);
    ASSERT_TRUE(out) << out.status().message();
    ASSERT_EQ((*out)[0].shape(), Shape{});
    EXPECT_EQ((*out)[0].data<int64_t>()[0], element_count(shape));
  }
}

// ---------------------------------------------------------------------------
// Constant, ConstantOfShape

TEST(Constant, EveryValueForm) {
  std::mt19937 rng(11);
  const Tensor value = random_bytes_tensor(rng, DType::kFloat8E5M2, {2, 3});
  auto out = run_single_node("Constant", 13, {}, {{"value", value}}, 1, DType::kFloat8E5M2);
  ASSERT_TRUE(out) << out.status().message();
  expect_same_bytes(value, (*out)[0]);

  out = run_single_node("Constant", 13, {}, {{"value_float", 2.5f}});
  ASSERT_TRUE(out) << out.status().message();
  ASSERT_EQ((*out)[0].shape(), Shape{});
  EXPECT_EQ((*out)[0].data<float>()[0], 2.5f);

  out = run_single_node("Constant", 13, {}, {{"value_floats", std::vector<float>{1.0f, -2.0f}}});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].to_floats(), (std::vector<float>{1.0f, -2.0f}));

  out = run_single_node("Constant", 13, {}, {{"value_int", int64_t{-7}}}, 1, DType::kInt64);
  ASSERT_TRUE(out) << out.status().message();
  ASSERT_EQ((*out)[0].shape(), Shape{});
  EXPECT_EQ((*out)[0].data<int64_t>()[0], -7);

  out = run_single_node("Constant", 13, {}, {{"value_ints", std::vector<int64_t>{4, 5, 6}}}, 1, DType::kInt64);
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].to_int64s(), (std::vector<int64_t>{4, 5, 6}));
}

TEST(Constant, RejectsMissingExtraAndUnsupportedValues) {
  EXPECT_MESSAGE_HAS(failure(run_single_node("Constant", 13, {}, {})), "exactly one");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Constant", 13, {}, {{"value_float", 1.0f}, {"value_int", int64_t{1}}})),
                     "exactly one");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Constant", 13, {}, {{"value_string", std::string("x")}})),
                     "not supported");
  // A sparse_value attribute is refused when the node's attributes are read.
  testing::ModelBuilder builder(13);
  builder.node("Constant", {}, {"y"}).output_unshaped("y", DType::kFloat32);
  auto* attribute = builder.proto().mutable_graph()->mutable_node(0)->add_attribute();
  attribute->set_name("sparse_value");
  attribute->set_type(onnx::AttributeProto::SPARSE_TENSOR);
  auto engine = builder.build_engine();
  ASSERT_FALSE(engine);
  EXPECT_MESSAGE_HAS(engine.status().message(), "sparse");
}

TEST(ConstantOfShape, FillsWithValueOfAnyType) {
  Tensor value = Tensor::zeros(DType::kInt32, {1});
  value.data<int32_t>()[0] = -123;
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{2, 3}, {0, 5}, {}, {1}}) {
    auto out = run_single_node("ConstantOfShape", 20, {int_tensor(shape)}, {{"value", value}}, 1, DType::kInt32);
    ASSERT_TRUE(out) << out.status().message();
    EXPECT_EQ((*out)[0].shape(), Shape(shape.begin(), shape.end()));
    for (int32_t v : (*out)[0].values<int32_t>()) EXPECT_EQ(v, -123);
  }
  auto out = run_single_node("ConstantOfShape", 9, {int_tensor({4})}, {}, 1, DType::kFloat32);  // default 0.0f
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].dtype(), DType::kFloat32);
  EXPECT_EQ((*out)[0].to_floats(), std::vector<float>(4, 0.0f));
  EXPECT_MESSAGE_HAS(failure(run_single_node("ConstantOfShape", 20, {int_tensor({2, -1})})), "negative");
  EXPECT_MESSAGE_HAS(
      failure(run_single_node("ConstantOfShape", 20, {int_tensor({2})}, {{"value", Tensor::zeros(DType::kFloat32, {2})}})),
      "one element");
}

// ---------------------------------------------------------------------------
// Range

template <typename T>
Tensor scalar_of(DType dtype, T value) {
  Tensor t = Tensor::zeros(dtype, {});
  *t.data<T>() = value;
  return t;
}

TEST(Range, MatchesReferenceForIntsAndFloats) {
  const int64_t int_cases[][3] = {{0, 10, 3}, {10, 0, -3}, {5, 5, 1}, {0, 10, -1}, {-7, 7, 7}, {3, -8, -2}};
  for (const auto& c : int_cases) {
    for (DType dtype : {DType::kInt64, DType::kInt32}) {
      const auto make = [&](int64_t v) {
        return dtype == DType::kInt64 ? scalar_of<int64_t>(dtype, v) : scalar_of<int32_t>(dtype, static_cast<int32_t>(v));
      };
      auto out = run_single_node("Range", 11, {make(c[0]), make(c[1]), make(c[2])});
      ASSERT_TRUE(out) << out.status().message();
      std::vector<int64_t> expected;
      for (int64_t v = c[0]; c[2] > 0 ? v < c[1] : v > c[1]; v += c[2]) expected.push_back(v);
      EXPECT_EQ((*out)[0].to_int64s(), expected) << c[0] << " " << c[1] << " " << c[2];
      EXPECT_EQ((*out)[0].dtype(), dtype);
    }
  }
  auto out = run_single_node("Range", 11, {Tensor::scalar_float(1.0f), Tensor::scalar_float(2.0f), Tensor::scalar_float(0.25f)});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].to_floats(), (std::vector<float>{1.0f, 1.25f, 1.5f, 1.75f}));
  out = run_single_node("Range", 11, {Tensor::scalar_float(0.0f), Tensor::scalar_float(1.0f), Tensor::scalar_float(0.3f)});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].element_count(), 4);  // ceil(1 / 0.3)
  // Extreme int64 bounds: exact count, no overflow.
  out = run_single_node("Range", 11, {scalar_of<int64_t>(DType::kInt64, INT64_MIN), scalar_of<int64_t>(DType::kInt64, INT64_MAX),
                                      scalar_of<int64_t>(DType::kInt64, int64_t{1} << 62)});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].to_int64s(), (std::vector<int64_t>{INT64_MIN, INT64_MIN + (int64_t{1} << 62), 0, int64_t{1} << 62}));
}

TEST(Range, RejectsZeroDeltaMixedTypesAndNonScalars) {
  const Tensor one = Tensor::scalar_float(1.0f);
  EXPECT_MESSAGE_HAS(failure(run_single_node("Range", 11, {one, one, Tensor::scalar_float(0.0f)})), "delta");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Range", 11, {one, scalar_of<int64_t>(DType::kInt64, 3), one})), "type");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Range", 11, {one, Tensor::zeros(DType::kFloat32, {2}), one})), "scalar");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Range", 11, {one, Tensor::scalar_float(NAN), one})), "too many");
}

}  // namespace
}  // namespace loka
