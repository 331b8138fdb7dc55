// ============================================================================
// tests/cuda/copy_test.cc — GPU Transpose/Concat/Slice/Expand/Tile/Gather vs
// the CPU runtime's ops, byte for byte.
//
// Random shapes up to rank 6 and random element types (1, 2, 4 and 8 bytes)
// from seeded generators, printed on failure; awkward cases beside them:
// batch 1 and 65536, odd widths, the tiled transpose with and without a batch
// dim and ragged edges, negative slice steps, empty outputs, misaligned bases
// (no wide units), and out-of-range gather ids under both policies. The
// shape-planning helpers (coalescing, widening) are checked without a GPU.
// ============================================================================
#include <gtest/gtest.h>


#include <algorithm>
#include <climits>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "kernels/cuda/copy.h"
#include "runtime/single_node_util.h"

namespace loka {
namespace {

using testing::DeviceBytes;

class CudaCopy : public testing::CudaTest {};

constexpr DType kByteTypes[] = {DType::kUInt8, DType::kBFloat16, DType::kFloat32, DType::kInt64};

DType random_type(std::mt19937& rng) { return kByteTypes[std::uniform_int_distribution<size_t>(0, 3)(rng)]; }

/// Downloads `expected`'s shape and dtype from `device` and compares the bytes.
void expect_device_equals(const void* device, const Tensor& expected) {
  Tensor got = Tensor::zeros(expected.dtype(), expected.shape());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << cudaGetErrorString(cudaGetLastError());
  if (got.byte_size() > 0) {
    ASSERT_EQ(cudaMemcpy(got.raw(), device, got.byte_size(), cudaMemcpyDeviceToHost), cudaSuccess);
  }
  testing::expect_same_bytes(got.raw(), expected.raw(), static_cast<size_t>(got.element_count()), dtype_size(got.dtype()));
}

/// Reference from the CPU runtime; fails the test on error.
Tensor reference(const std::string& op, const std::vector<Tensor>& inputs,
                 const std::vector<std::pair<std::string, testing::TestAttribute>>& attributes = {}) {
  auto result = testing::run_single_node(op, 13, inputs, attributes);
  EXPECT_TRUE(result) << op << ": " << result.status().message();
  return result ? (*result)[0] : Tensor();
}

void check_transpose(const Tensor& x, const std::vector<int64_t>& perm, int64_t misalignment = 0) {
  SCOPED_TRACE("Transpose " + std::string(dtype_name(x.dtype())) + " " + shape_to_string(x.shape()) + " perm " +
               shape_to_string(perm) + (misalignment ? " misaligned" : ""));
  const Tensor expected = reference("Transpose", {x}, {{"perm", perm}});
  const size_t size = dtype_size(x.dtype());
  DeviceBytes d_x(x.byte_size() + 16), d_y(x.byte_size() + 16);
  char* src = d_x.as<char>() + misalignment * static_cast<int64_t>(size);
  char* dst = d_y.as<char>() + misalignment * static_cast<int64_t>(size);
  ASSERT_EQ(cudaMemcpy(src, x.raw(), x.byte_size(), cudaMemcpyHostToDevice), cudaSuccess);
  const Status status = cuda::launch_transpose(src, x.shape(), perm, size, dst, nullptr);
  ASSERT_TRUE(status.is_ok()) << status.message();
  expect_device_equals(dst, expected);
}

TEST_F(CudaCopy, RandomTransposesUpToRank6MatchTheCpuRuntime) {
  std::mt19937 rng(601);
  for (int trial = 0; trial < 200; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial) + " (seed 601)");
    const int rank = std::uniform_int_distribution<int>(1, 6)(rng);
    std::vector<int64_t> perm(static_cast<size_t>(rank));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    check_transpose(testing::random_bytes_tensor(rng, random_type(rng), testing::random_shape(rng, rank, 1, 6)), perm);
  }
}

TEST_F(CudaCopy, TiledTransposeShapesMatchTheCpuRuntime) {
  std::mt19937 rng(602);
  for (DType dtype : kByteTypes) {
    // Ragged tile edges on both sides (two matrices: too few for the whole-matrix kernel).
    check_transpose(testing::random_bytes_tensor(rng, dtype, {2, 300, 170}), {0, 2, 1});
    check_transpose(testing::random_bytes_tensor(rng, dtype, {65536, 13}), {1, 0});
    check_transpose(testing::random_bytes_tensor(rng, dtype, {13, 65536}), {1, 0});
    check_transpose(testing::random_bytes_tensor(rng, dtype, {1, 7}), {1, 0});
    check_transpose(testing::random_bytes_tensor(rng, dtype, {3, 65, 33}), {0, 2, 1});
    check_transpose(testing::random_bytes_tensor(rng, dtype, {2, 3, 64, 32}), {0, 1, 3, 2});
    check_transpose(testing::random_bytes_tensor(rng, dtype, {5, 16, 3, 7}), {2, 0, 3, 1});
    check_transpose(testing::random_bytes_tensor(rng, dtype, {4, 5, 6, 8}), {0, 2, 1, 3});  // inner contiguous: wide units
    check_transpose(testing::random_bytes_tensor(rng, dtype, {4, 5, 6, 8}), {0, 2, 1, 3}, 1);
    check_transpose(testing::random_bytes_tensor(rng, dtype, {65537, 2, 3}), {0, 2, 1});  // whole matrices
  }
  // More batches than a grid's z dimension holds (65535), of matrices that fill their tiles: the
  // tiled kernel loops over them (one byte an element: 64 MiB).
  check_transpose(testing::random_bytes_tensor(rng, DType::kUInt8, {65537, 32, 32}), {0, 2, 1});
}

// Batches of packed matrices staged whole, one per block (kWholeMatrixTranspose): DHEN's and
// Wukong's first token transpose at batch 4096, the fewest matrices it takes (32; 31 and a single
// one go to the tiles), 65536 tiny odd matrices, and the 48 KiB edge, which the 8-byte type
// passes over to the tiles.
TEST_F(CudaCopy, WholeMatrixTransposeShapesMatchTheCpuRuntime) {
  std::mt19937 rng(607);
  for (DType dtype : kByteTypes) {
    check_transpose(testing::random_bytes_tensor(rng, dtype, {4096, 34, 128}), {0, 2, 1});
    check_transpose(testing::random_bytes_tensor(rng, dtype, {32, 372, 33}), {0, 2, 1});
    check_transpose(testing::random_bytes_tensor(rng, dtype, {32, 34, 128}), {0, 2, 1});
    check_transpose(testing::random_bytes_tensor(rng, dtype, {31, 34, 128}), {0, 2, 1});
    check_transpose(testing::random_bytes_tensor(rng, dtype, {1, 34, 128}), {0, 2, 1});
    check_transpose(testing::random_bytes_tensor(rng, dtype, {64, 128, 34}), {0, 2, 1});
    check_transpose(testing::random_bytes_tensor(rng, dtype, {65536, 3, 5}), {0, 2, 1});
    check_transpose(testing::random_bytes_tensor(rng, dtype, {50, 95, 40}), {0, 2, 1});
    check_transpose(testing::random_bytes_tensor(rng, dtype, {8, 4, 34, 17}), {0, 1, 3, 2});  // batch dims merge
  }
}

TEST_F(CudaCopy, RandomConcatsMatchTheCpuRuntime) {
  std::mt19937 rng(603);
  for (int trial = 0; trial < 150; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial) + " (seed 603)");
    const int rank = std::uniform_int_distribution<int>(1, 6)(rng);
    const int axis = std::uniform_int_distribution<int>(0, rank - 1)(rng);
    const Shape base = testing::random_shape(rng, rank, 1, 5);
    const DType dtype = random_type(rng);
    const int count = std::uniform_int_distribution<int>(1, 5)(rng);
    std::vector<Tensor> inputs;
    std::vector<std::vector<int64_t>> shapes;
    std::vector<std::unique_ptr<DeviceBytes>> device;
    std::vector<const void*> pointers;
    for (int i = 0; i < count; ++i) {
      Shape shape = base;
      shape[static_cast<size_t>(axis)] = std::uniform_int_distribution<int64_t>(0, 4)(rng);
      inputs.push_back(testing::random_bytes_tensor(rng, dtype, shape));
      shapes.push_back(shape);
      device.push_back(std::make_unique<DeviceBytes>(inputs.back()));
      pointers.push_back(device.back()->get());
    }
    std::string description = "Concat axis " + std::to_string(axis) + " " + std::string(dtype_name(dtype));
    for (const Shape& s : shapes) {
      description += ' ';
      description += shape_to_string(s);
    }
    SCOPED_TRACE(description);
    const Tensor expected = reference("Concat", inputs, {{"axis", int64_t{axis}}});
    DeviceBytes d_out(expected.byte_size());
    const Status status = cuda::launch_concat(pointers, shapes, axis, dtype_size(dtype), d_out.get(), nullptr);
    ASSERT_TRUE(status.is_ok()) << status.message();
    expect_device_equals(d_out.get(), expected);
  }
}

TEST_F(CudaCopy, ConcatOfEmbeddingColumnsAtBatch65536) {
  std::mt19937 rng(604);
  std::vector<Tensor> inputs;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<std::unique_ptr<DeviceBytes>> device;
  std::vector<const void*> pointers;
  for (int64_t width : {16, 13, 1, 64}) {
    inputs.push_back(testing::random_bytes_tensor(rng, DType::kFloat32, {65536, 1, width}));
    shapes.push_back(inputs.back().shape());
    device.push_back(std::make_unique<DeviceBytes>(inputs.back()));
    pointers.push_back(device.back()->get());
  }
  const Tensor expected = reference("Concat", inputs, {{"axis", int64_t{2}}});
  DeviceBytes d_out(expected.byte_size());
  ASSERT_TRUE(cuda::launch_concat(pointers, shapes, 2, 4, d_out.get(), nullptr).is_ok());
  expect_device_equals(d_out.get(), expected);
}

TEST_F(CudaCopy, InputsWrittenInPlaceAreNotCopiedAndTheirPointerIsNotRead) {
  // As a Concat whose GEMM inputs wrote their slices already: those slices keep what was there.
  std::mt19937 rng(605);
  std::vector<Tensor> inputs;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<std::unique_ptr<DeviceBytes>> device;
  std::vector<const void*> pointers;
  for (int64_t width : {32, 16, 64}) {
    inputs.push_back(testing::random_bytes_tensor(rng, DType::kFloat32, {513, 6, width}));
    shapes.push_back(inputs.back().shape());
    device.push_back(std::make_unique<DeviceBytes>(inputs.back()));
    pointers.push_back(device.back()->get());
  }
  const Tensor expected = reference("Concat", inputs, {{"axis", int64_t{2}}});
  DeviceBytes d_out(expected);  // the "producers" already wrote every slice
  pointers[0] = pointers[2] = nullptr;
  ASSERT_EQ(cudaMemset(device[1]->get(), 0, inputs[1].byte_size()), cudaSuccess);  // not what the slice holds
  ASSERT_TRUE(cuda::launch_concat(pointers, shapes, 2, 4, d_out.get(), nullptr, {true, true, true}).is_ok());
  expect_device_equals(d_out.get(), expected);
  // Negative twin: the middle input copied (zeros) over its slice.
  ASSERT_TRUE(cuda::launch_concat(pointers, shapes, 2, 4, d_out.get(), nullptr, {true, false, true}).is_ok());
  const Tensor got = d_out.download_tensor(DType::kFloat32, expected.shape());
  const auto values = got.values<float>();
  size_t zeros = 0, others = 0;
  for (size_t at = 0; at < values.size(); ++at) {
    const int64_t column = static_cast<int64_t>(at % 112);
    const bool middle = column >= 32 && column < 48;
    if (middle) zeros += values[at] == 0.0f;
    else others += std::memcmp(&values[at], expected.data<float>() + at, 4) == 0;
  }
  EXPECT_EQ(zeros, size_t{513 * 6 * 16});
  EXPECT_EQ(others, size_t{513 * 6 * 96});
}

TEST_F(CudaCopy, RandomSlicesWithNegativeStepsMatchTheCpuRuntime) {
  std::mt19937 rng(605);
  for (int trial = 0; trial < 200; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial) + " (seed 605)");
    const int rank = std::uniform_int_distribution<int>(1, 6)(rng);
    const Shape shape = testing::random_shape(rng, rank, 1, 7);
    std::vector<int64_t> starts, steps, counts, onnx_ends, axes;
    for (int d = 0; d < rank; ++d) {
      const int64_t dim = shape[static_cast<size_t>(d)];
      int64_t step = std::uniform_int_distribution<int64_t>(-3, 3)(rng);
      if (step == 0) step = 1;
      const int64_t start = std::uniform_int_distribution<int64_t>(0, dim - 1)(rng);
      const int64_t room = step > 0 ? (dim - 1 - start) / step + 1 : start / -step + 1;
      const int64_t count = std::uniform_int_distribution<int64_t>(trial % 17 == 0 ? 0 : 1, room)(rng);
      const int64_t end = start + count * step;
      starts.push_back(start);
      steps.push_back(step);
      counts.push_back(count);
      onnx_ends.push_back(end < 0 ? INT64_MIN : end);  // a negative end would count from the back
      axes.push_back(d);
    }
    const DType dtype = random_type(rng);
    SCOPED_TRACE("Slice " + std::string(dtype_name(dtype)) + " " + shape_to_string(shape) + " starts " +
                 shape_to_string(starts) + " steps " + shape_to_string(steps) + " counts " + shape_to_string(counts));
    const Tensor x = testing::random_bytes_tensor(rng, dtype, shape);
    const Tensor expected = reference("Slice", {x, testing::int_tensor(starts), testing::int_tensor(onnx_ends),
                                                testing::int_tensor(axes), testing::int_tensor(steps)});
    ASSERT_EQ(expected.shape(), counts);
    DeviceBytes d_x(x), d_y(expected.byte_size());
    const Status status = cuda::launch_slice(d_x.get(), shape, starts, steps, counts, dtype_size(dtype), d_y.get(), nullptr);
    ASSERT_TRUE(status.is_ok()) << status.message();
    expect_device_equals(d_y.get(), expected);
  }
}

TEST_F(CudaCopy, SliceColumnsOfAWideIdMatrixAtBatch65536) {
  std::mt19937 rng(606);
  const Tensor x = testing::random_bytes_tensor(rng, DType::kInt64, {65536, 54});
  const Tensor expected = reference("Slice", {x, testing::int_tensor({13}), testing::int_tensor({16}),
                                              testing::int_tensor({1}), testing::int_tensor({1})});
  DeviceBytes d_x(x), d_y(expected.byte_size());
  ASSERT_TRUE(cuda::launch_slice(d_x.get(), {65536, 54}, {0, 13}, {1, 1}, {65536, 3}, 8, d_y.get(), nullptr).is_ok());
  expect_device_equals(d_y.get(), expected);
}

TEST_F(CudaCopy, RandomExpandsAndTilesMatchTheCpuRuntime) {
  std::mt19937 rng(607);
  for (int trial = 0; trial < 150; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial) + " (seed 607)");
    const int rank = std::uniform_int_distribution<int>(1, 6)(rng);
    const Shape out_shape = testing::random_shape(rng, rank, 1, 5);
    const int drop = std::uniform_int_distribution<int>(0, rank)(rng) / 2;
    Shape shape(out_shape.begin() + drop, out_shape.end());
    for (int64_t& d : shape)
      if (std::bernoulli_distribution(0.4)(rng)) d = 1;
    const DType dtype = random_type(rng);
    const Tensor x = testing::random_bytes_tensor(rng, dtype, shape);
    {
      SCOPED_TRACE("Expand " + shape_to_string(shape) + " to " + shape_to_string(out_shape));
      const Tensor expected = reference("Expand", {x, testing::int_tensor(out_shape)});
      DeviceBytes d_x(x), d_y(expected.byte_size());
      const Status status = cuda::launch_expand(d_x.get(), shape, out_shape, dtype_size(dtype), d_y.get(), nullptr);
      ASSERT_TRUE(status.is_ok()) << status.message();
      expect_device_equals(d_y.get(), expected);
    }
    std::vector<int64_t> repeats(shape.size());
    for (int64_t& r : repeats) r = std::uniform_int_distribution<int64_t>(trial % 11 == 0 ? 0 : 1, 3)(rng);
    {
      SCOPED_TRACE("Tile " + shape_to_string(shape) + " repeats " + shape_to_string(repeats));
      const Tensor expected = reference("Tile", {x, testing::int_tensor(repeats)});
      DeviceBytes d_x(x), d_y(expected.byte_size());
      const Status status = cuda::launch_tile(d_x.get(), shape, repeats, dtype_size(dtype), d_y.get(), nullptr);
      ASSERT_TRUE(status.is_ok()) << status.message();
      expect_device_equals(d_y.get(), expected);
    }
  }
}

TEST_F(CudaCopy, ExpandABiasRowToBatch65536) {
  std::mt19937 rng(608);
  const Tensor x = testing::random_bytes_tensor(rng, DType::kFloat32, {1, 1, 16});
  const Tensor expected = reference("Expand", {x, testing::int_tensor({65536, 3, 16})});
  DeviceBytes d_x(x), d_y(expected.byte_size());
  ASSERT_TRUE(cuda::launch_expand(d_x.get(), {1, 1, 16}, {65536, 3, 16}, 4, d_y.get(), nullptr).is_ok());
  expect_device_equals(d_y.get(), expected);
}

TEST_F(CudaCopy, GatherOnAnyAxisMatchesTheCpuRuntime) {
  std::mt19937 rng(609);
  for (int trial = 0; trial < 80; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial) + " (seed 609)");
    const DType dtype = random_type(rng);
    const int rank = std::uniform_int_distribution<int>(1, 4)(rng);
    const Shape shape = testing::random_shape(rng, rank, 1, 9);
    const int axis = std::uniform_int_distribution<int>(0, rank - 1)(rng);
    const Tensor data = testing::random_bytes_tensor(rng, dtype, shape);
    const bool ids_int64 = trial % 2 == 0;
    const Shape id_shape = testing::random_shape(rng, std::uniform_int_distribution<int>(0, 2)(rng), 1, 5);
    Tensor ids = Tensor::zeros(ids_int64 ? DType::kInt64 : DType::kInt32, trial == 7 ? Shape{65536} : id_shape);
    const int64_t rows = shape[static_cast<size_t>(axis)];
    std::uniform_int_distribution<int64_t> id(-rows, rows - 1);
    for (int64_t i = 0; i < ids.element_count(); ++i) {
      if (ids_int64) ids.data<int64_t>()[i] = id(rng);
      else ids.data<int32_t>()[i] = static_cast<int32_t>(id(rng));
    }
    SCOPED_TRACE("Gather " + std::string(dtype_name(dtype)) + " data " + shape_to_string(shape) + " axis " +
                 std::to_string(axis) + " ids " + shape_to_string(ids.shape()));
    const Tensor expected = reference("Gather", {data, ids}, {{"axis", int64_t{axis}}});
    DeviceBytes d_data(data), d_ids(ids), d_out(expected.byte_size()), flag(std::vector<int>{0});
    int64_t outer = 1;
    for (int d = 0; d < axis; ++d) outer *= shape[static_cast<size_t>(d)];
    const size_t row_bytes = data.byte_size() / static_cast<size_t>(outer * rows);
    const Status status = cuda::launch_gather_rows(d_data.get(), rows, row_bytes, d_ids.get(), ids_int64,
                                                   ids.element_count(), d_out.get(), cuda::IndexPolicy::kError,
                                                   flag.as<int>(), nullptr, outer);
    ASSERT_TRUE(status.is_ok()) << status.message();
    expect_device_equals(d_out.get(), expected);
    EXPECT_EQ(flag.download_vector<int>(1)[0], 0);
  }
}

TEST_F(CudaCopy, GatherRowsOutOfRangeIdsZeroFillOrClamp) {
  const std::vector<float> data = {1, 2, 3, 4, 5, 6};  // [3, 2]
  const std::vector<int64_t> ids = {-4, 3, -3, 2, INT64_MAX};
  DeviceBytes d_data(data), d_ids(ids), d_out(ids.size() * 2 * sizeof(float));
  for (cuda::IndexPolicy policy : {cuda::IndexPolicy::kError, cuda::IndexPolicy::kClamp}) {
    DeviceBytes flag(std::vector<int>{0});
    ASSERT_TRUE(cuda::launch_gather_rows(d_data.get(), 3, 8, d_ids.get(), true, 5, d_out.get(), policy, flag.as<int>(),
                                         nullptr)
                    .is_ok());
    const std::vector<float> got = d_out.download_vector<float>(10);
    const std::vector<float> expected = policy == cuda::IndexPolicy::kError
                                            ? std::vector<float>{0, 0, 0, 0, 1, 2, 5, 6, 0, 0}
                                            : std::vector<float>{1, 2, 5, 6, 1, 2, 5, 6, 5, 6};
    EXPECT_EQ(got, expected);
    EXPECT_EQ(flag.download_vector<int>(1)[0], policy == cuda::IndexPolicy::kError ? 1 : 0);
  }
}

TEST(CudaCopyPlan, CoalescingMergesContiguousDimsAndWideningPicksTheLargestUnit) {
  // [8, 3, 16] float32 copied contiguously: one dim of 384 elements, moved 16 bytes at a time.
  cuda::CopyPlan plan;
  plan.unit_bytes = 4;
  plan.dims.push(8, {48, 48});
  plan.dims.push(3, {16, 16});
  plan.dims.push(16, {1, 1});
  alignas(16) static char buffer[16];
  cuda::simplify_copy(plan, buffer, buffer);
  ASSERT_EQ(plan.dims.rank, 1);
  EXPECT_EQ(plan.dims.extent[0], 96);
  EXPECT_EQ(plan.unit_bytes, 16);
  // A transpose keeps two dims and the element size; a misaligned base refuses wide units.
  cuda::CopyPlan transpose;
  transpose.unit_bytes = 2;
  transpose.dims.push(1, {0, 0});
  transpose.dims.push(5, {1, 7});
  transpose.dims.push(7, {5, 1});
  cuda::simplify_copy(transpose, buffer, buffer);
  ASSERT_EQ(transpose.dims.rank, 2);
  EXPECT_EQ(transpose.unit_bytes, 2);
  EXPECT_EQ(cuda::copy_kernel_for(transpose), cuda::CopyKernel::kTiledTranspose);  // one matrix: the tiles
  cuda::CopyPlan rows;
  rows.unit_bytes = 4;
  rows.dims.push(10, {0, 8});  // broadcast rows of 8 floats
  rows.dims.push(8, {1, 1});
  cuda::simplify_copy(rows, buffer + 4, buffer);
  EXPECT_EQ(rows.unit_bytes, 4);
  cuda::simplify_copy(rows, buffer, buffer);
  EXPECT_EQ(rows.unit_bytes, 16);
  EXPECT_EQ(rows.dims.extent[1], 2);
  EXPECT_EQ(rows.dims.stride[1][0], 2);
}

/// The simplified plan of transposing a packed [batch, rows, cols] tensor of `unit` bytes to [batch, cols, rows].
cuda::CopyPlan batched_transpose_plan(int64_t batch, int64_t rows, int64_t cols, int unit, int64_t src_row_pitch = 0) {
  if (src_row_pitch == 0) src_row_pitch = cols;
  cuda::CopyPlan plan;
  plan.unit_bytes = unit;
  plan.dims.push(batch, {rows * src_row_pitch, rows * cols});
  plan.dims.push(cols, {1, rows});
  plan.dims.push(rows, {src_row_pitch, 1});
  alignas(16) static char buffer[16];
  cuda::simplify_copy(plan, buffer, buffer);
  return plan;
}

TEST(CudaCopyPlan, PackedMatricesTheTilesFillBadlyTransposeWholeUpTo48KiB) {
  using cuda::CopyKernel;
  // 34 rows fill 53% of two tile rows: whole (34 x 129 floats, 17 544 bytes), also as 8-byte units;
  // from 32 matrices on (a single one is no batch dim at all once simplified).
  EXPECT_EQ(cuda::copy_kernel_for(batched_transpose_plan(4096, 34, 128, 4)), CopyKernel::kWholeMatrixTranspose);
  EXPECT_EQ(cuda::copy_kernel_for(batched_transpose_plan(4096, 34, 128, 8)), CopyKernel::kWholeMatrixTranspose);
  EXPECT_EQ(cuda::copy_kernel_for(batched_transpose_plan(32, 34, 128, 4)), CopyKernel::kWholeMatrixTranspose);
  EXPECT_EQ(cuda::copy_kernel_for(batched_transpose_plan(31, 34, 128, 4)), CopyKernel::kTiledTranspose);
  EXPECT_EQ(cuda::copy_kernel_for(batched_transpose_plan(1, 34, 128, 4)), CopyKernel::kTiledTranspose);
  // 64 rows fill their tiles: tiles, faster there. 95 x 127 fills 98% of them. The 85% edge:
  // 54 of 64 rows fill 84.4%, 55 rows 85.9%.
  EXPECT_EQ(cuda::copy_kernel_for(batched_transpose_plan(4096, 64, 128, 4)), CopyKernel::kTiledTranspose);
  EXPECT_EQ(cuda::copy_kernel_for(batched_transpose_plan(64, 95, 127, 4)), CopyKernel::kTiledTranspose);
  EXPECT_EQ(cuda::copy_kernel_for(batched_transpose_plan(64, 54, 128, 4)), CopyKernel::kWholeMatrixTranspose);
  EXPECT_EQ(cuda::copy_kernel_for(batched_transpose_plan(64, 55, 128, 4)), CopyKernel::kTiledTranspose);
  // The 48 KiB edge: 372 rows of 33 floats (an odd pitch already) take 49 104 bytes, 373 rows 49 236.
  EXPECT_EQ(cuda::copy_kernel_for(batched_transpose_plan(32, 372, 33, 4)), CopyKernel::kWholeMatrixTranspose);
  EXPECT_EQ(cuda::copy_kernel_for(batched_transpose_plan(32, 373, 33, 4)), CopyKernel::kTiledTranspose);
  // Source rows apart by more than their length: not one packed run, so tiles.
  EXPECT_EQ(cuda::copy_kernel_for(batched_transpose_plan(64, 34, 128, 4, 136)), CopyKernel::kTiledTranspose);
  // A plain copy is neither.
  cuda::CopyPlan copy;
  copy.unit_bytes = 4;
  copy.dims.push(34, {128, 128});
  copy.dims.push(100, {1, 1});
  EXPECT_EQ(cuda::copy_kernel_for(copy), CopyKernel::kStrided);
}

TEST(CudaCopyArgs, MalformedArgumentsAreRefusedWithAReason) {
  int dummy = 0;
  Status status = cuda::launch_transpose(&dummy, {2, 3}, {0, 0}, 4, &dummy, nullptr);
  EXPECT_NE(status.message().find("perm [0,0] is not a permutation"), std::string::npos) << status.message();
  status = cuda::launch_slice(&dummy, {5}, {4}, {1}, {2}, 4, &dummy, nullptr);
  EXPECT_NE(status.message().find("outside [0, 5)"), std::string::npos) << status.message();
  status = cuda::launch_concat({&dummy, &dummy}, {{2, 3}, {3, 3}}, 1, 4, &dummy, nullptr);
  EXPECT_NE(status.message().find("outside axis 1"), std::string::npos) << status.message();
  status = cuda::launch_concat({&dummy, &dummy}, {{2, 3}, {2, 3}}, 1, 4, &dummy, nullptr, {true});
  EXPECT_NE(status.message().find("1 in-place flags for 2 inputs"), std::string::npos) << status.message();
  status = cuda::launch_expand(&dummy, {3}, {2, 4}, 4, &dummy, nullptr);
  EXPECT_NE(status.message().find("does not broadcast to [2,4]"), std::string::npos) << status.message();
  status = cuda::launch_tile(&dummy, {3}, {1}, 3, &dummy, nullptr);
  EXPECT_NE(status.message().find("element size 3"), std::string::npos) << status.message();
}

}  // namespace
}  // namespace loka
