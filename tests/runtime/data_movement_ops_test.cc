// ============================================================================
// tests/runtime/data_movement_ops_test.cc — Gather, GatherElements, Concat,
// Slice, Split, Tile, Pad, Where and Not/And/Or/Xor against reference loops on
// random inputs of several dtypes (rank 0, size-1 and empty dims, negative
// axes and indices), plus the errors bad indices or arguments must produce.
// ============================================================================
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <numeric>

#include "single_node_util.h"
#include "test_support.h"

namespace loka {
namespace {

using testing::int_tensor;
using testing::random_bytes_tensor;
using testing::random_shape;
using testing::ravel;
using testing::run_single_node;
using testing::same_element;
using testing::unravel;

const DType kDTypes[] = {DType::kFloat32, DType::kInt64, DType::kUInt8, DType::kBFloat16, DType::kFloat8E4M3FN};

std::string failure(const Result<std::vector<Tensor>>& result) {
  EXPECT_FALSE(result) << "expected an error";
  return result ? std::string() : result.status().message();
}

#define EXPECT_MESSAGE_HAS(message, text) EXPECT_NE((message).find(text), std::string::npos) << (message)

/// Checks out[i] == x[source(coord of i)] for every element of `out`, which must have `shape`.
template <typename Source>
void expect_gathered(const Tensor& x, const Tensor& out, const Shape& shape, Source source) {
  ASSERT_EQ(out.dtype(), x.dtype());
  ASSERT_EQ(out.shape(), shape);
  for (int64_t i = 0; i < out.element_count(); ++i) {
    const int64_t from = source(unravel(i, shape));
    ASSERT_TRUE(same_element(x, from, out, i)) << "output element " << i << " of " << shape_to_string(shape);
  }
}

Tensor random_indices(std::mt19937& rng, const Shape& shape, int64_t bound, DType dtype) {
  std::uniform_int_distribution<int64_t> pick(-bound, bound - 1);
  Tensor t = Tensor::zeros(dtype, shape);
  for (int64_t i = 0; i < t.element_count(); ++i) {
    if (dtype == DType::kInt32) t.data<int32_t>()[i] = static_cast<int32_t>(pick(rng));
    else t.data<int64_t>()[i] = pick(rng);
  }
  return t;
}

// ---------------------------------------------------------------------------
// Gather

TEST(Gather, RandomAxesIndicesAndDtypes) {
  std::mt19937 rng(21);
  for (int trial = 0; trial < 60; ++trial) {
    const int rank = 1 + trial % 4;
    const Shape shape = random_shape(rng, rank, 1, 4);
    const Tensor x = random_bytes_tensor(rng, kDTypes[static_cast<size_t>(trial) % std::size(kDTypes)], shape);
    const int axis = static_cast<int>(rng() % static_cast<unsigned>(rank));
    const int64_t axis_attr = trial % 2 ? axis - rank : axis;
    const Shape index_shape = random_shape(rng, trial % 3, trial % 5 == 0 ? 0 : 1, 3);
    const Tensor indices = random_indices(rng, index_shape, shape[static_cast<size_t>(axis)],
                                          trial % 2 ? DType::kInt32 : DType::kInt64);
    auto out = run_single_node("Gather", 13, {x, indices}, {{"axis", axis_attr}});
    ASSERT_TRUE(out) << out.status().message();
    Shape expected(shape.begin(), shape.begin() + axis);
    expected.insert(expected.end(), index_shape.begin(), index_shape.end());
    expected.insert(expected.end(), shape.begin() + axis + 1, shape.end());
    const std::vector<int64_t> index_values = indices.to_int64s();
    expect_gathered(x, (*out)[0], expected, [&](const std::vector<int64_t>& coord) {
      std::vector<int64_t> source(coord.begin(), coord.begin() + axis);
      const std::vector<int64_t> index_coord(coord.begin() + axis, coord.begin() + axis + index_shape.size());
      int64_t index = index_values[static_cast<size_t>(ravel(index_coord, index_shape))];
      if (index < 0) index += shape[static_cast<size_t>(axis)];
      source.push_back(index);
      source.insert(source.end(), coord.begin() + axis + static_cast<int64_t>(index_shape.size()), coord.end());
      return ravel(source, shape);
    });
  }
}

TEST(Gather, OutOfRangeIndexNamesValueAndBound) {
  const Tensor x = Tensor::zeros(DType::kFloat32, {5, 2});
  std::string message = failure(run_single_node("Gather", 13, {x, int_tensor({0, 5})}));
  EXPECT_MESSAGE_HAS(message, "index 5");
  EXPECT_MESSAGE_HAS(message, "[-5, 4]");
  message = failure(run_single_node("Gather", 13, {x, int_tensor({-6}, DType::kInt32)}));
  EXPECT_MESSAGE_HAS(message, "index -6");
  message = failure(run_single_node("Gather", 13, {x, int_tensor({INT64_MAX})}, {{"axis", int64_t{1}}}));
  EXPECT_MESSAGE_HAS(message, "[-2, 1]");
  message = failure(run_single_node("Gather", 13, {Tensor::zeros(DType::kFloat32, {0, 2}), int_tensor({0})}));
  EXPECT_MESSAGE_HAS(message, "size 0");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Gather", 13, {x, int_tensor({0})}, {{"axis", int64_t{2}}})),
                     "out of range");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Gather", 13, {x, Tensor::from_floats({1}, std::vector<float>{0})})),
                     "INT64");
  // An empty index list on an empty axis is fine.
  auto out = run_single_node("Gather", 13, {Tensor::zeros(DType::kFloat32, {0, 2}), int_tensor({})});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].shape(), (Shape{0, 2}));
}

// ---------------------------------------------------------------------------
// GatherElements

TEST(GatherElements, RandomAgainstReferenceIncludingSmallerIndexDims) {
  std::mt19937 rng(22);
  for (int trial = 0; trial < 40; ++trial) {
    const int rank = 1 + trial % 4;
    const Shape shape = random_shape(rng, rank, 1, 4);
    const Tensor x = random_bytes_tensor(rng, kDTypes[static_cast<size_t>(trial) % std::size(kDTypes)], shape);
    const int axis = static_cast<int>(rng() % static_cast<unsigned>(rank));
    Shape index_shape(shape.size());
    for (size_t d = 0; d < shape.size(); ++d)
      index_shape[d] = static_cast<int>(d) == axis ? 1 + static_cast<int64_t>(rng() % 4)
                                                   : 1 + static_cast<int64_t>(rng() % static_cast<unsigned>(shape[d]));
    const Tensor indices = random_indices(rng, index_shape, shape[static_cast<size_t>(axis)],
                                          trial % 2 ? DType::kInt32 : DType::kInt64);
    auto out = run_single_node("GatherElements", 13, {x, indices}, {{"axis", int64_t{axis - (trial % 3 ? 0 : rank)}}});
    ASSERT_TRUE(out) << out.status().message();
    const std::vector<int64_t> index_values = indices.to_int64s();
    expect_gathered(x, (*out)[0], index_shape, [&](const std::vector<int64_t>& coord) {
      std::vector<int64_t> source = coord;
      int64_t index = index_values[static_cast<size_t>(ravel(coord, index_shape))];
      source[static_cast<size_t>(axis)] = index < 0 ? index + shape[static_cast<size_t>(axis)] : index;
      return ravel(source, shape);
    });
  }
}

TEST(GatherElements, RejectsBadIndicesAndShapes) {
  const Tensor x = Tensor::zeros(DType::kFloat32, {2, 3});
  Tensor indices = Tensor::zeros(DType::kInt64, {2, 1});
  indices.data<int64_t>()[1] = 3;
  std::string message = failure(run_single_node("GatherElements", 13, {x, indices}, {{"axis", int64_t{1}}}));
  EXPECT_MESSAGE_HAS(message, "index 3");
  EXPECT_MESSAGE_HAS(message, "[-3, 2]");
  EXPECT_MESSAGE_HAS(failure(run_single_node("GatherElements", 13, {x, Tensor::zeros(DType::kInt64, {3, 1})},
                                             {{"axis", int64_t{1}}})),
                     "exceed");
  EXPECT_MESSAGE_HAS(failure(run_single_node("GatherElements", 13, {x, Tensor::zeros(DType::kInt64, {2})})), "rank");
}

// ---------------------------------------------------------------------------
// Concat

TEST(Concat, RandomInputsAlongEveryAxisIncludingEmpty) {
  std::mt19937 rng(23);
  for (int trial = 0; trial < 40; ++trial) {
    const int rank = 1 + trial % 4;
    const DType dtype = kDTypes[static_cast<size_t>(trial) % std::size(kDTypes)];
    const Shape base = random_shape(rng, rank, 1, 3);
    const int axis = static_cast<int>(rng() % static_cast<unsigned>(rank));
    const size_t count = 1 + rng() % 4;
    std::vector<Tensor> inputs;
    std::vector<int64_t> starts;  // position of each input along the axis
    int64_t total = 0;
    for (size_t k = 0; k < count; ++k) {
      Shape shape = base;
      shape[static_cast<size_t>(axis)] = static_cast<int64_t>(rng() % 4);  // 0 allowed
      inputs.push_back(random_bytes_tensor(rng, dtype, shape));
      starts.push_back(total);
      total += shape[static_cast<size_t>(axis)];
    }
    auto out = run_single_node("Concat", 13, inputs, {{"axis", int64_t{trial % 2 ? axis - rank : axis}}});
    ASSERT_TRUE(out) << out.status().message();
    Shape expected = base;
    expected[static_cast<size_t>(axis)] = total;
    const Tensor& y = (*out)[0];
    ASSERT_EQ(y.shape(), expected);
    for (int64_t i = 0; i < y.element_count(); ++i) {
      std::vector<int64_t> coord = unravel(i, expected);
      int64_t& position = coord[static_cast<size_t>(axis)];
      const size_t k = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), position) - starts.begin() - 1);
      // Skip inputs that are empty along the axis and share the same start.
      size_t source = k;
      while (inputs[source].dim(axis) == 0) --source;
      position -= starts[source];
      ASSERT_TRUE(same_element(inputs[source], ravel(coord, inputs[source].shape()), y, i));
    }
  }
}

TEST(Concat, RejectsMismatchedShapesTypesAndScalars) {
  const Tensor a = Tensor::zeros(DType::kFloat32, {2, 3});
  EXPECT_MESSAGE_HAS(failure(run_single_node("Concat", 13, {a, Tensor::zeros(DType::kFloat32, {3, 3})},
                                             {{"axis", int64_t{1}}})),
                     "cannot concatenate");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Concat", 13, {a, Tensor::zeros(DType::kInt64, {2, 3})},
                                             {{"axis", int64_t{0}}})),
                     "cannot concatenate");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Concat", 13, {a, Tensor::zeros(DType::kFloat32, {2, 3, 1})},
                                             {{"axis", int64_t{0}}})),
                     "cannot concatenate");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Concat", 13, {Tensor::scalar_float(1)}, {{"axis", int64_t{0}}})),
                     "out of range");
}

// ---------------------------------------------------------------------------
// Slice

/// Python's slice(start, end, step).indices(dim), written as the language
/// reference states it, then enumerated; with ONNX's one deviation: for a
/// negative step, a start before the first element clamps to 0 (Python: empty).
std::vector<int64_t> onnx_slice_reference(int64_t start, int64_t end, int64_t step, int64_t dim) {
  const auto adjust = [&](int64_t v, int64_t low, int64_t high) {
    if (v < 0) return v < -dim ? low : std::max(v + dim, low);  // (no overflow for extreme values)
    return std::min(v, high);
  };
  std::vector<int64_t> picked;
  if (dim == 0) return picked;
  if (step > 0) {
    const int64_t s = adjust(start, 0, dim), e = adjust(end, 0, dim);
    for (int64_t i = s; i < e; i += step) picked.push_back(i);
  } else {
    const int64_t s = adjust(start, 0, dim - 1), e = adjust(end, -1, dim - 1);
    for (int64_t i = s; i > e; i += step) picked.push_back(i);
  }
  return picked;
}

TEST(Slice, RandomBoundsStepsAndAxesAgainstReference) {
  std::mt19937 rng(24);
  const int64_t extremes[] = {INT64_MIN, INT64_MAX, -1000, 1000};
  for (int trial = 0; trial < 120; ++trial) {
    const int rank = 1 + trial % 4;
    const Shape shape = random_shape(rng, rank, trial % 9 == 0 ? 0 : 1, 6);
    const Tensor x = random_bytes_tensor(rng, kDTypes[static_cast<size_t>(trial) % std::size(kDTypes)], shape);
    std::vector<int> axes_order(static_cast<size_t>(rank));
    std::iota(axes_order.begin(), axes_order.end(), 0);
    std::shuffle(axes_order.begin(), axes_order.end(), rng);
    const size_t n = 1 + rng() % static_cast<unsigned>(rank);
    std::vector<int64_t> starts, ends, axes, steps;
    std::vector<std::vector<int64_t>> picked(static_cast<size_t>(rank));
    for (int d = 0; d < rank; ++d)
      for (int64_t i = 0; i < shape[static_cast<size_t>(d)]; ++i) picked[static_cast<size_t>(d)].push_back(i);
    std::uniform_int_distribution<int64_t> bound(-8, 8), step_pick(-3, 3);
    for (size_t k = 0; k < n; ++k) {
      const int axis = axes_order[k];
      int64_t start = bound(rng), end = bound(rng), step = 0;
      while (step == 0) step = step_pick(rng);
      if (rng() % 5 == 0) start = extremes[rng() % 4];
      if (rng() % 5 == 0) end = extremes[rng() % 4];
      starts.push_back(start);
      ends.push_back(end);
      axes.push_back(rng() % 2 ? axis : axis - rank);
      steps.push_back(step);
      picked[static_cast<size_t>(axis)] = onnx_slice_reference(start, end, step, shape[static_cast<size_t>(axis)]);
    }
    auto out = run_single_node("Slice", 13, {x, int_tensor(starts), int_tensor(ends), int_tensor(axes, DType::kInt32),
                                             int_tensor(steps)});
    ASSERT_TRUE(out) << out.status().message();
    Shape expected(static_cast<size_t>(rank));
    for (size_t d = 0; d < expected.size(); ++d) expected[d] = static_cast<int64_t>(picked[d].size());
    expect_gathered(x, (*out)[0], expected, [&](const std::vector<int64_t>& coord) {
      std::vector<int64_t> source(coord.size());
      for (size_t d = 0; d < coord.size(); ++d) source[d] = picked[d][static_cast<size_t>(coord[d])];
      return ravel(source, shape);
    });
  }
}

TEST(Slice, DefaultAxesAndStepsAndOpset9Attributes) {
  std::mt19937 rng(25);
  const Tensor x = random_bytes_tensor(rng, DType::kFloat32, {4, 5});
  const auto check = [&](const Result<std::vector<Tensor>>& out) {
    ASSERT_TRUE(out) << out.status().message();
    expect_gathered(x, (*out)[0], {2, 3}, [](const std::vector<int64_t>& c) { return (c[0] + 1) * 5 + c[1]; });
  };
  check(run_single_node("Slice", 13, {x, int_tensor({1, 0}), int_tensor({3, -2})}));
  check(run_single_node("Slice", 13, {x, int_tensor({1, 0}), int_tensor({3, -2}), Tensor(), int_tensor({1, 1})}));
  check(run_single_node("Slice", 9, {x}, {{"starts", std::vector<int64_t>{1, 0}}, {"ends", std::vector<int64_t>{3, 3}}}));
  // Full reversal of a row with the usual exporter idiom.
  auto out = run_single_node("Slice", 13, {x, int_tensor({-1}), int_tensor({INT64_MIN}), int_tensor({1}), int_tensor({-1})});
  ASSERT_TRUE(out) << out.status().message();
  expect_gathered(x, (*out)[0], {4, 5}, [](const std::vector<int64_t>& c) { return c[0] * 5 + (4 - c[1]); });
}

TEST(Slice, RejectsZeroStepRepeatedAxesAndLengthMismatch) {
  const Tensor x = Tensor::zeros(DType::kFloat32, {4, 5});
  EXPECT_MESSAGE_HAS(failure(run_single_node("Slice", 13, {x, int_tensor({0}), int_tensor({2}), int_tensor({0}),
                                                           int_tensor({0})})),
                     "zero");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Slice", 13, {x, int_tensor({0, 0}), int_tensor({2, 2}),
                                                           int_tensor({1, -1})})),
                     "repeat");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Slice", 13, {x, int_tensor({0, 0}), int_tensor({2})})), "entries");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Slice", 13, {x, int_tensor({0}), int_tensor({2}), int_tensor({2})})),
                     "out of range");
}

// ---------------------------------------------------------------------------
// Split

/// Checks that `outputs` are consecutive pieces of `x` along `axis` with `sizes`.
void expect_split(const Tensor& x, const std::vector<Tensor>& outputs, int axis, const std::vector<int64_t>& sizes) {
  ASSERT_EQ(outputs.size(), sizes.size());
  int64_t start = 0;
  for (size_t k = 0; k < outputs.size(); ++k) {
    Shape shape = x.shape();
    shape[static_cast<size_t>(axis)] = sizes[k];
    expect_gathered(x, outputs[k], shape, [&](std::vector<int64_t> coord) {
      coord[static_cast<size_t>(axis)] += start;
      return ravel(coord, x.shape());
    });
    start += sizes[k];
  }
}

TEST(Split, EqualVariableAndUnevenPieces) {
  std::mt19937 rng(26);
  const Tensor x = random_bytes_tensor(rng, DType::kBFloat16, {3, 7, 2});
  auto out = run_single_node("Split", 13, {x, int_tensor({2, 0, 5})}, {{"axis", int64_t{-2}}}, 3);
  ASSERT_TRUE(out) << out.status().message();
  expect_split(x, *out, 1, {2, 0, 5});
  out = run_single_node("Split", 11, {x}, {{"axis", int64_t{1}}, {"split", std::vector<int64_t>{3, 4}}}, 2);
  ASSERT_TRUE(out) << out.status().message();
  expect_split(x, *out, 1, {3, 4});
  out = run_single_node("Split", 13, {x}, {}, 3);  // default: axis 0, equal
  ASSERT_TRUE(out) << out.status().message();
  expect_split(x, *out, 0, {1, 1, 1});
  out = run_single_node("Split", 18, {x}, {{"axis", int64_t{1}}, {"num_outputs", int64_t{4}}}, 4);
  ASSERT_TRUE(out) << out.status().message();
  expect_split(x, *out, 1, {2, 2, 2, 1});  // opset 18: the last piece is smaller
  out = run_single_node("Split", 18, {x, int_tensor({6, 1})}, {{"axis", int64_t{1}}}, 2);
  ASSERT_TRUE(out) << out.status().message();
  expect_split(x, *out, 1, {6, 1});
}

TEST(Split, RejectsSizesThatDoNotAddUp) {
  const Tensor x = Tensor::zeros(DType::kFloat32, {7});
  EXPECT_MESSAGE_HAS(failure(run_single_node("Split", 13, {x, int_tensor({3, 3})}, {}, 2)), "sums to 6");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Split", 13, {x, int_tensor({8, -1})}, {}, 2)), "negative");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Split", 13, {x, int_tensor({7})}, {}, 2)), "entries");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Split", 13, {x}, {}, 2)), "cannot be split");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Split", 18, {Tensor::zeros(DType::kFloat32, {5})},
                                             {{"num_outputs", int64_t{4}}}, 4)),
                     "cannot be split");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Split", 18, {x}, {{"num_outputs", int64_t{3}}}, 2)), "num_outputs");
}

// ---------------------------------------------------------------------------
// Tile

TEST(Tile, RandomRepeatsAgainstModuloReference) {
  std::mt19937 rng(27);
  for (int trial = 0; trial < 40; ++trial) {
    const int rank = trial % 4;
    const Shape shape = random_shape(rng, rank, trial % 6 == 0 ? 0 : 1, 3);
    const Tensor x = random_bytes_tensor(rng, kDTypes[static_cast<size_t>(trial) % std::size(kDTypes)], shape);
    std::vector<int64_t> repeats(static_cast<size_t>(rank));
    for (int64_t& r : repeats) r = static_cast<int64_t>(rng() % 4);  // 0 allowed
    auto out = run_single_node("Tile", 13, {x, int_tensor(repeats)});
    ASSERT_TRUE(out) << out.status().message();
    Shape expected(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) expected[d] = shape[d] * repeats[d];
    expect_gathered(x, (*out)[0], expected, [&](std::vector<int64_t> coord) {
      for (size_t d = 0; d < coord.size(); ++d) coord[d] %= shape[d];
      return ravel(coord, shape);
    });
  }
  const Tensor x = Tensor::zeros(DType::kFloat32, {2, 3});
  EXPECT_MESSAGE_HAS(failure(run_single_node("Tile", 13, {x, int_tensor({2})})), "one entry per axis");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Tile", 13, {x, int_tensor({2, -1})})), "negative");
}

// ---------------------------------------------------------------------------
// Pad

/// Input coordinate for output coordinate `o`, or -1 for the constant, written
/// as numpy describes each mode (reflect mirrors repeatedly without the edge).
int64_t reference_pad_source(const std::string& mode, int64_t o, int64_t before, int64_t dim) {
  int64_t i = o - before;
  if (i >= 0 && i < dim) return i;
  if (mode == "constant") return -1;
  if (mode == "edge") return std::clamp(i, int64_t{0}, dim - 1);
  if (mode == "wrap") {
    while (i < 0) i += dim;
    return i % dim;
  }
  if (dim == 1) return 0;
  while (i < 0 || i >= dim) i = i < 0 ? -i : 2 * (dim - 1) - i;
  return i;
}

TEST(Pad, EveryModeWithRandomPadsIncludingCropping) {
  std::mt19937 rng(28);
  for (const std::string mode : {"constant", "edge", "reflect", "wrap"}) {
    for (int trial = 0; trial < 25; ++trial) {
      const int rank = 1 + trial % 3;
      const Shape shape = random_shape(rng, rank, 1, 4);
      const DType dtype = kDTypes[static_cast<size_t>(trial) % std::size(kDTypes)];
      const Tensor x = random_bytes_tensor(rng, dtype, shape);
      std::vector<int64_t> pads(2 * static_cast<size_t>(rank));
      Shape expected(shape.size());
      for (size_t d = 0; d < shape.size(); ++d) {
        std::uniform_int_distribution<int64_t> pick(-shape[d] / 2, 6);
        pads[d] = pick(rng);
        pads[d + shape.size()] = pick(rng);
        expected[d] = shape[d] + pads[d] + pads[d + shape.size()];
      }
      const Tensor value = random_bytes_tensor(rng, dtype, {});
      auto out = run_single_node("Pad", 19, {x, int_tensor(pads), value}, {{"mode", mode}});
      ASSERT_TRUE(out) << mode << ": " << out.status().message();
      const Tensor& y = (*out)[0];
      ASSERT_EQ(y.shape(), expected);
      for (int64_t i = 0; i < y.element_count(); ++i) {
        std::vector<int64_t> coord = unravel(i, expected);
        bool constant = false;
        for (size_t d = 0; d < coord.size(); ++d) {
          coord[d] = reference_pad_source(mode, coord[d], pads[d], shape[d]);
          constant = constant || coord[d] < 0;
        }
        ASSERT_TRUE(constant ? same_element(value, 0, y, i) : same_element(x, ravel(coord, shape), y, i))
            << mode << " element " << i << " of " << shape_to_string(expected);
      }
    }
  }
}

TEST(Pad, AxesInputOpset2AttributesAndErrors) {
  std::mt19937 rng(29);
  const Tensor x = testing::random_tensor(rng, {2, 3});
  // Opset 18 axes: pad only axis -1 by (1, 2) with the default zero.
  auto out = run_single_node("Pad", 18, {x, int_tensor({1, 2}), Tensor(), int_tensor({-1})});
  ASSERT_TRUE(out) << out.status().message();
  ASSERT_EQ((*out)[0].shape(), (Shape{2, 6}));
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t c = 0; c < 6; ++c)
      EXPECT_EQ((*out)[0].data<float>()[r * 6 + c], c >= 1 && c < 4 ? x.data<float>()[r * 3 + c - 1] : 0.0f);
  // Opset 2: pads and value are attributes.
  out = run_single_node("Pad", 2, {x}, {{"pads", std::vector<int64_t>{1, 0, 0, 0}}, {"value", 7.5f}});
  ASSERT_TRUE(out) << out.status().message();
  ASSERT_EQ((*out)[0].shape(), (Shape{3, 3}));
  for (int64_t i = 0; i < 9; ++i) EXPECT_EQ((*out)[0].data<float>()[i], i < 3 ? 7.5f : x.data<float>()[i - 3]);

  EXPECT_MESSAGE_HAS(failure(run_single_node("Pad", 13, {x, int_tensor({1, 1})})), "2 entries per padded axis");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Pad", 13, {x, int_tensor({0, -4, 0, 0})})), "crop");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Pad", 13, {x, int_tensor({0, 0, 0, 0}), int_tensor({1})})),
                     "constant_value");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Pad", 13, {x, int_tensor({0, 0, 0, 0})}, {{"mode", std::string("odd")}})),
                     "mode");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Pad", 13, {Tensor::zeros(DType::kFloat32, {0}), int_tensor({1, 1})},
                                             {{"mode", std::string("edge")}})),
                     "empty axis");
}

// ---------------------------------------------------------------------------
// Where and boolean ops

TEST(Where, ThreeWayBroadcastAgainstReference) {
  std::mt19937 rng(30);
  struct Case {
    Shape condition, x, y;
  } cases[] = {{{2, 3}, {2, 3}, {2, 3}}, {{3}, {2, 1}, {}}, {{1, 4}, {3, 1}, {1}}, {{}, {2, 2}, {2, 2}},
               {{2, 0}, {1}, {2, 1}},     {{2, 1, 3}, {4, 1}, {1, 4, 3}}};
  for (const Case& c : cases)
    for (DType dtype : {DType::kFloat32, DType::kInt64, DType::kFloat8E5M2}) {
      const Tensor condition = random_bytes_tensor(rng, DType::kBool, c.condition);
      const Tensor x = random_bytes_tensor(rng, dtype, c.x);
      const Tensor y = random_bytes_tensor(rng, dtype, c.y);
      auto out = run_single_node("Where", 16, {condition, x, y}, {}, 1, dtype);
      ASSERT_TRUE(out) << out.status().message();
      const Tensor& result = (*out)[0];
      const size_t rank = std::max({c.condition.size(), c.x.size(), c.y.size()});
      ASSERT_EQ(static_cast<size_t>(result.rank()), rank);
      // Reads operand `shape` at output coordinate `coord` with numpy broadcasting.
      const auto at = [&](const Shape& shape, const std::vector<int64_t>& coord) {
        std::vector<int64_t> own(shape.size());
        for (size_t d = 0; d < shape.size(); ++d) own[d] = shape[d] == 1 ? 0 : coord[rank - shape.size() + d];
        return ravel(own, shape);
      };
      for (int64_t i = 0; i < result.element_count(); ++i) {
        const std::vector<int64_t> coord = unravel(i, result.shape());
        const bool take_x = condition.data<uint8_t>()[at(c.condition, coord)] != 0;
        ASSERT_TRUE(take_x ? same_element(x, at(c.x, coord), result, i) : same_element(y, at(c.y, coord), result, i));
      }
    }
  const Tensor condition = Tensor::zeros(DType::kBool, {2});
  EXPECT_MESSAGE_HAS(failure(run_single_node("Where", 16, {condition, Tensor::zeros(DType::kFloat32, {3}),
                                                           Tensor::zeros(DType::kFloat32, {3})})),
                     "do not broadcast");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Where", 16, {condition, Tensor::zeros(DType::kFloat32, {2}),
                                                           Tensor::zeros(DType::kInt64, {2})})),
                     "different types");
  EXPECT_MESSAGE_HAS(failure(run_single_node("Where", 16, {Tensor::zeros(DType::kFloat32, {2}),
                                                           Tensor::zeros(DType::kFloat32, {2}),
                                                           Tensor::zeros(DType::kFloat32, {2})})),
                     "BOOL");
}

TEST(Logical, NotAndOrXorWithBroadcast) {
  std::mt19937 rng(31);
  const Tensor a = random_bytes_tensor(rng, DType::kBool, {3, 4});
  const Tensor b = random_bytes_tensor(rng, DType::kBool, {4});
  const auto byte = [](const Tensor& t, int64_t i) { return t.data<uint8_t>()[i] != 0; };
  auto out = run_single_node("Not", 1, {a});
  ASSERT_TRUE(out) << out.status().message();
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(byte((*out)[0], i), !byte(a, i));
  const std::pair<const char*, bool (*)(bool, bool)> ops[] = {
      {"And", [](bool x, bool y) { return x && y; }},
      {"Or", [](bool x, bool y) { return x || y; }},
      {"Xor", [](bool x, bool y) { return x != y; }}};
  for (const auto& [name, fn] : ops) {
    out = run_single_node(name, 7, {a, b});
    ASSERT_TRUE(out) << out.status().message();
    ASSERT_EQ((*out)[0].shape(), (Shape{3, 4}));
    for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(byte((*out)[0], i), fn(byte(a, i), byte(b, i % 4))) << name;
  }
  EXPECT_MESSAGE_HAS(failure(run_single_node("And", 7, {a, Tensor::zeros(DType::kFloat32, {4})})), "BOOL");
}

}  // namespace
}  // namespace loka
