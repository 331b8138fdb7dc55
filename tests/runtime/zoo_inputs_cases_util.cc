// ============================================================================
// tests/runtime/zoo_inputs_cases_util.cc — hostile run-time inputs on a zoo
// model, one suite for every device.
//
// The cases of the README's "Run-time inputs" section: a wrong dtype, rank or
// dim, inputs disagreeing on the batch, a batch above EngineOptions::max_batch,
// an empty batch, out-of-range embedding ids and NaN/Inf values. Each failure
// is one line naming the input or node, and the Session stays usable after it.
// The suite is parameterized by Device and instantiated by each test binary
// (tests/runtime: CPU; tests/cuda: CUDA, skipped with the reason where no GPU
// is usable), so the CPU and the GPU runtime are held to the same contract.
// ============================================================================
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "loka/session.h"
#include "runtime/tensor_proto.h"
#include "runtime/zoo_inputs_cases.h"
#include "test_support.h"

namespace loka {

using testing::expect_one_line_error;

void ZooInputs::SetUp() {
  const std::string unavailable = testing::device_unavailable_reason(GetParam());
  if (!unavailable.empty()) GTEST_SKIP() << "device test skipped: " << unavailable;
  const std::filesystem::path model = testing::source_dir() / "models" / "zoo" / "dlrm_dot";
  EngineOptions options;
  options.device = GetParam();
  options.max_batch = 64;
  auto engine = Engine::load_file(model / "model.onnx", options);
  ASSERT_TRUE(engine) << engine.status().message();
  engine_ = *engine;
  for (const char* file : {"input_0.pb", "input_1.pb"}) {
    auto tensor = read_tensor_file(model / "calib" / "test_data_set_0" / file);
    ASSERT_TRUE(tensor) << tensor.status().message();
    inputs_.push_back(rows(tensor->second, kRows));
  }
  ASSERT_EQ(inputs_[0].dtype(), DType::kFloat32);
  ASSERT_EQ(inputs_[1].dtype(), DType::kInt64);
  auto clean = engine_->new_session()->run(inputs_);
  ASSERT_TRUE(clean) << clean.status().message();
  clean_ = (*clean)[0].to_floats();
}

Tensor ZooInputs::rows(const Tensor& tensor, int64_t count) {
  Shape shape = tensor.shape();
  const size_t row_bytes = tensor.byte_size() / static_cast<size_t>(shape[0]);
  shape[0] = count;
  Tensor out = Tensor::zeros(tensor.dtype(), shape);
  for (int64_t r = 0; r < count; ++r)
    std::memcpy(static_cast<std::byte*>(out.raw()) + r * row_bytes,
                static_cast<const std::byte*>(tensor.raw()) + (r % tensor.dim(0)) * row_bytes, row_bytes);
  return out;
}

TEST_P(ZooInputs, WrongShapeOrDtypeNamesTheInput) {
  auto session = engine_->new_session();
  const auto run_with = [&](size_t which, Tensor replacement) {
    std::vector<Tensor> inputs = inputs_;
    inputs[which] = std::move(replacement);
    return session->run(inputs).status();
  };
  expect_one_line_error(run_with(1, Tensor::zeros(DType::kInt32, {kRows, 54})), {"'sparse'", "INT64", "INT32"});
  expect_one_line_error(run_with(0, Tensor::zeros(DType::kFloat64, {kRows, 13})), {"'dense'", "FLOAT", "DOUBLE"});
  expect_one_line_error(run_with(0, Tensor::zeros(DType::kFloat32, {kRows, 12})), {"'dense'", "dim 1", "13"});
  expect_one_line_error(run_with(0, Tensor::zeros(DType::kFloat32, {kRows * 13})), {"'dense'", "rank"});
  // Both inputs carry the symbolic dim 'batch': they must agree.
  expect_one_line_error(run_with(0, rows(inputs_[0], kRows + 1)), {"'sparse'", "'batch'", "9"});
  auto again = session->run(inputs_);
  ASSERT_TRUE(again) << again.status().message();
  EXPECT_EQ((*again)[0].to_floats(), clean_);
}

TEST_P(ZooInputs, BatchAboveTheMaximumIsRefusedAndAnEmptyBatchRuns) {
  auto session = engine_->new_session();
  expect_one_line_error(session->run(std::vector<Tensor>{rows(inputs_[0], 65), rows(inputs_[1], 65)}).status(),
                        {"'dense'", "batch 65", "maximum of 64"});
  auto full = session->run(std::vector<Tensor>{rows(inputs_[0], 64), rows(inputs_[1], 64)});
  ASSERT_TRUE(full) << full.status().message();
  EXPECT_EQ((*full)[0].shape(), (Shape{64, 1}));
  auto empty = session->run(std::vector<Tensor>{rows(inputs_[0], 0), rows(inputs_[1], 0)});
  ASSERT_TRUE(empty) << empty.status().message();
  EXPECT_EQ((*empty)[0].shape(), (Shape{0, 1}));
}

TEST_P(ZooInputs, OutOfRangeIdsFailNamingTheNodeAndTheSessionRecovers) {
  auto session = engine_->new_session();
  // Column 0 feeds table 0 (64 rows): valid ids are [-64, 63] (ONNX Gather wraps negatives).
  // The CPU names the id; the GPU flags it on the device and names the node only.
  for (const int64_t id : {int64_t{64}, int64_t{-65}, INT64_MAX, INT64_MIN}) {
    std::vector<Tensor> inputs = {inputs_[0], inputs_[1].clone()};
    inputs[1].data<int64_t>()[3 * 54] = id;
    std::vector<std::string> needles = {"/embeddings/Gather'", "out of range"};
    if (GetParam() == Device::kCpu) needles.push_back(std::to_string(id));
    expect_one_line_error(session->run(inputs).status(), needles);
  }
  // A negative id inside the table reads the row counted from the end, as ONNX says.
  std::vector<Tensor> wrapped = {inputs_[0], inputs_[1].clone()};
  wrapped[1].data<int64_t>()[3 * 54] = -1;
  EXPECT_TRUE(session->run(wrapped)) << "id -1";
  auto again = session->run(inputs_);
  ASSERT_TRUE(again) << again.status().message();
  EXPECT_EQ((*again)[0].to_floats(), clean_);
}

TEST_P(ZooInputs, NanAndInfinityRunAndStayInTheirRows) {
  // No value checks at run time: NaN and infinities flow through the arithmetic as IEEE 754
  // says, and only the samples that hold them are affected.
  std::vector<Tensor> inputs = {inputs_[0].clone(), inputs_[1]};
  float* dense = inputs[0].data<float>();
  dense[1 * 13 + 4] = std::numeric_limits<float>::quiet_NaN();
  dense[2 * 13 + 0] = std::numeric_limits<float>::infinity();
  dense[3 * 13 + 7] = -std::numeric_limits<float>::infinity();
  auto out = engine_->new_session()->run(inputs);
  ASSERT_TRUE(out) << out.status().message();
  const std::vector<float> prob = (*out)[0].to_floats();
  ASSERT_EQ(prob.size(), static_cast<size_t>(kRows));
  EXPECT_TRUE(std::isnan(prob[1]));
  for (int64_t r : {0, 4, 5, 6, 7}) EXPECT_EQ(prob[r], clean_[r]) << "row " << r;
}

}  // namespace loka
