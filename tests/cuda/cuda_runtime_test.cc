// ============================================================================
// tests/cuda/cuda_runtime_test.cc — the CUDA Engine/Session against the CPU.
//
// Every zoo model (and exporter variant) runs its eval data on the GPU and
// matches the CPU runtime; batches between buckets are padded and sliced
// back; run_on_device agrees with run; out-of-range ids fail naming the node;
// 8 serving threads give the single-thread outputs with flat device memory;
// the arena report names the buffers alive at the arena's peak; profile_nodes
// times every step;
// the hostile run-time inputs of tests/runtime (zoo_inputs_cases_util.cc) on
// the GPU.
// Skips visibly without a GPU.
// ============================================================================
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

#include "kernels/cuda/device.h"
#include "loka/engine.h"
#include "loka/session.h"
#include "model_builder.h"
#include "runtime/test_data.h"
#include "runtime/zoo_inputs_cases.h"
#include "test_support.h"

namespace loka {
namespace {

class CudaRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = cuda::device_unavailable_reason();
    if (!reason.empty()) GTEST_SKIP() << "GPU test skipped: " << reason;
  }
};

/// The largest |a - b| over two output lists (infinite when shapes differ).
float max_difference(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return INFINITY;
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].shape() != b[i].shape()) return INFINITY;
    worst = std::max(worst, testing::max_abs_difference(a[i], b[i]));
  }
  return worst;
}

/// A data set's inputs in the engine's order.
std::vector<Tensor> inputs_of(const Engine& engine, const DataSet& data) {
  std::vector<std::string> names;
  for (const TensorInfo& info : engine.inputs()) names.push_back(info.name);
  auto ordered = order_inputs(data, names);
  EXPECT_TRUE(ordered) << ordered.status().message();
  return ordered ? *ordered : std::vector<Tensor>{};
}

/// The first `rows` rows of every batch-major input.
std::vector<Tensor> first_rows(const std::vector<Tensor>& inputs, int64_t rows) {
  std::vector<Tensor> out;
  for (const Tensor& t : inputs) {
    Shape shape = t.shape();
    shape[0] = rows;
    Tensor part = Tensor::zeros(t.dtype(), shape);
    std::memcpy(part.raw(), t.raw(), part.byte_size());
    out.push_back(part);
  }
  return out;
}

class ZooOnCuda : public CudaRuntime, public ::testing::WithParamInterface<std::string> {};

TEST_P(ZooOnCuda, EvalOutputsMatchTheCpuRuntime) {
  const auto folder = testing::source_dir() / "models" / "zoo" / GetParam();
  auto cpu = Engine::load_file(folder / "model.onnx");
  ASSERT_TRUE(cpu) << cpu.status().message();
  EngineOptions options;
  options.device = Device::kCuda;
  options.max_batch = 4096;
  auto gpu = Engine::load_file(folder / "model.onnx", options);
  ASSERT_TRUE(gpu) << gpu.status().message();
  auto reader = DataSetReader::open(folder / "eval");
  ASSERT_TRUE(reader) << reader.status().message();
  auto cpu_session = (*cpu)->new_session();
  auto gpu_session = (*gpu)->new_session();
  for (size_t d = 0; d < reader->size(); ++d) {
    auto data = reader->read(d);
    ASSERT_TRUE(data) << data.status().message();
    const std::vector<Tensor> inputs = inputs_of(**cpu, *data);
    // The full set, then batches that fall between buckets (padded on the GPU).
    for (int64_t rows : {inputs[0].dim(0), int64_t{1}, int64_t{7}, int64_t{100}}) {
      const std::vector<Tensor> batch = first_rows(inputs, std::min(rows, inputs[0].dim(0)));
      auto expected = cpu_session->run(batch);
      ASSERT_TRUE(expected) << expected.status().message();
      auto actual = gpu_session->run(batch);
      ASSERT_TRUE(actual) << actual.status().message();
      // FP32 GEMMs in another summation order: probabilities agree to ~1e-6.
      EXPECT_LE(max_difference(*expected, *actual), 2e-5f) << GetParam() << " " << data->label << " rows " << rows;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooOnCuda, ::testing::ValuesIn(testing::zoo_model_dirs()),
                         [](const auto& info) { return testing::zoo_test_name(info.param); });

TEST_F(CudaRuntime, RunOnDeviceAgreesWithRun) {
  const auto folder = testing::source_dir() / "models" / "zoo" / "dlrm_dcnv2";
  EngineOptions options;
  options.device = Device::kCuda;
  options.max_batch = 1024;
  auto engine = Engine::load_file(folder / "model.onnx", options);
  ASSERT_TRUE(engine) << engine.status().message();
  auto reader = DataSetReader::open(folder / "eval");
  ASSERT_TRUE(reader);
  auto data = reader->read(0);
  ASSERT_TRUE(data);
  const std::vector<Tensor> inputs = first_rows(inputs_of(**engine, *data), 300);
  auto session = (*engine)->new_session();
  auto expected = session->run(inputs);
  ASSERT_TRUE(expected) << expected.status().message();

  std::vector<void*> buffers;
  std::vector<DeviceView> views;
  for (const Tensor& t : inputs) {
    void* device = nullptr;
    ASSERT_EQ(cudaMalloc(&device, t.byte_size()), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(device, t.raw(), t.byte_size(), cudaMemcpyHostToDevice), cudaSuccess);
    buffers.push_back(device);
    views.push_back(DeviceView{t.dtype(), t.shape(), device});
  }
  auto outputs = session->run_on_device(views);
  ASSERT_TRUE(outputs) << outputs.status().message();
  ASSERT_EQ(cudaStreamSynchronize(static_cast<cudaStream_t>(session->cuda_stream())), cudaSuccess);
  ASSERT_EQ(outputs->size(), expected->size());
  for (size_t o = 0; o < outputs->size(); ++o) {
    EXPECT_EQ((*outputs)[o].shape, (*expected)[o].shape());
    Tensor host = Tensor::zeros((*outputs)[o].dtype, (*outputs)[o].shape);
    ASSERT_EQ(cudaMemcpy(host.raw(), (*outputs)[o].data, host.byte_size(), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(testing::max_abs_difference(host, (*expected)[o]), 0.0f);
  }
  for (void* b : buffers) cudaFree(b);
}

TEST_F(CudaRuntime, OutOfRangeIdsFailNamingTheNodeAndReadNothingOutside) {
  testing::ModelBuilder b(17);
  b.input("ids", DType::kInt64, {-1});
  std::mt19937 rng(3);
  b.initializer("table", testing::random_tensor(rng, {10, 8}));
  b.node("Gather", {"table", "ids"}, {"rows"}, {}, "lookup");
  b.output("rows", DType::kFloat32, {-1, 8});
  EngineOptions options;
  options.device = Device::kCuda;
  options.max_batch = 64;
  auto engine = b.build_engine(options);
  ASSERT_TRUE(engine) << engine.status().message();
  auto session = (*engine)->new_session();
  const std::vector<int64_t> good = {0, 9, -10, 3};
  auto ok = session->run(std::vector<Tensor>{Tensor::from_int64s({4}, good)});
  ASSERT_TRUE(ok) << ok.status().message();
  const std::vector<int64_t> bad = {0, 10, 3};
  auto failed = session->run(std::vector<Tensor>{Tensor::from_int64s({3}, bad)});
  ASSERT_FALSE(failed);
  EXPECT_NE(failed.status().message().find("node 'lookup'"), std::string::npos) << failed.status().message();
  EXPECT_NE(failed.status().message().find("out of range"), std::string::npos) << failed.status().message();
  // The Session stays usable.
  auto again = session->run(std::vector<Tensor>{Tensor::from_int64s({4}, good)});
  ASSERT_TRUE(again) << again.status().message();
  EXPECT_EQ(max_difference(*ok, *again), 0.0f);
}

TEST_F(CudaRuntime, ABatchAboveTheLargestBucketIsRefused) {
  const auto folder = testing::source_dir() / "models" / "zoo" / "dlrm_dot";
  EngineOptions options;
  options.device = Device::kCuda;
  options.max_batch = 64;
  auto engine = Engine::load_file(folder / "model.onnx", options);
  ASSERT_TRUE(engine) << engine.status().message();
  std::vector<Tensor> inputs;
  for (const TensorInfo& info : (*engine)->inputs()) {
    Shape shape = info.shape;
    shape[0] = 65;
    inputs.push_back(Tensor::zeros(info.dtype, shape));
  }
  auto result = (*engine)->new_session()->run(inputs);
  ASSERT_FALSE(result);
  EXPECT_NE(result.status().message().find("exceeds"), std::string::npos) << result.status().message();
}

/// a = Relu(x) [B,64], w = Concat(a, a) [B,128], b = Relu(w), c = Concat(w, b) [B,256], y = Relu(c):
/// w, b and c are alive at the second Concat ("join"), as many bytes as c and y at the last Relu,
/// and more than anywhere else; nothing is written in place (w is read twice, b by a Relu's rows).
TEST_F(CudaRuntime, TheArenaReportNamesWhatIsAliveAtThePeak) {
  testing::ModelBuilder builder(17);
  builder.input("x", DType::kFloat32, {-1, 64});
  builder.node("Relu", {"x"}, {"a"}, {}, "first");
  builder.node("Concat", {"a", "a"}, {"w"}, {{"axis", int64_t{1}}}, "widen");
  builder.node("Relu", {"w"}, {"b"}, {}, "second");
  builder.node("Concat", {"w", "b"}, {"c"}, {{"axis", int64_t{1}}}, "join");
  builder.node("Relu", {"c"}, {"y"}, {}, "last");
  builder.output("y", DType::kFloat32, {-1, 256});
  EngineOptions options;
  options.device = Device::kCuda;
  options.batch_buckets = {16, 64};
  options.max_batch = 64;
  auto engine = builder.build_engine(options);
  ASSERT_TRUE(engine) << engine.status().message();
  auto session = (*engine)->new_session();
  auto report = session->arena_report(10);  // planned here: no run has needed the bucket yet
  ASSERT_TRUE(report) << report.status().message();
  EXPECT_EQ(report->batch, 16);
  const size_t row = 16 * sizeof(float);  // bytes of one column at batch 16
  EXPECT_EQ(report->peak_node, "join");   // the first of the two steps holding the most
  EXPECT_EQ(report->peak_bytes, 512 * row);
  EXPECT_GE(report->arena_bytes, report->peak_bytes);
  std::vector<std::string> names;
  std::vector<size_t> bytes;
  for (const ArenaBuffer& b : report->live_at_peak) {
    names.push_back(b.name);
    bytes.push_back(b.bytes);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"c", "w", "b"}));  // largest first, then in value order
  EXPECT_EQ(bytes, (std::vector<size_t>{256 * row, 128 * row, 128 * row}));
  auto largest = session->arena_report(64);
  ASSERT_TRUE(largest) << largest.status().message();
  EXPECT_EQ(largest->batch, 64);
  EXPECT_FALSE(session->arena_report(65));  // above the largest bucket
  EXPECT_FALSE(session->arena_report(0));
}

/// profile_nodes enqueues node by node with events between them, outside the bucket's graph: every
/// step gets a time, the one that does the work the most, and later graph runs are unchanged.
TEST_F(CudaRuntime, ProfileNodesTimesEveryStepAndLeavesTheGraphRunsAsTheyWere) {
  std::mt19937 rng(31);
  testing::ModelBuilder builder(17);
  builder.input("x", DType::kFloat32, {-1, 512})
      .initializer("w", testing::random_tensor(rng, {512, 512}))
      .initializer("shape", Tensor::from_int64s({3}, std::vector<int64_t>{-1, 256, 2}))
      .node("Neg", {"x"}, {"a"}, {}, "negate")
      .node("MatMul", {"a", "w"}, {"b"}, {}, "project")
      .node("Reshape", {"b", "shape"}, {"c"}, {}, "view")
      .node("Relu", {"c"}, {"y"}, {}, "rectify")
      .output("y", DType::kFloat32, {-1, 256, 2});
  EngineOptions options;
  options.device = Device::kCuda;
  auto engine = builder.build_engine(options);
  ASSERT_TRUE(engine) << engine.status().message();
  auto session = (*engine)->new_session();
  const std::vector<Tensor> inputs = {testing::random_tensor(rng, {4096, 512})};
  auto before = session->run(inputs);
  ASSERT_TRUE(before) << before.status().message();
  auto profile = session->profile_nodes(inputs, 5);
  ASSERT_TRUE(profile) << profile.status().message();
  std::vector<std::string> names;
  for (const NodeTiming& node : *profile) names.push_back(node.name);
  EXPECT_EQ(names, (std::vector<std::string>{"negate", "project", "view", "rectify"}));
  double summed = 0;
  for (const NodeTiming& node : *profile) {
    EXPECT_GE(node.median_ms, 0.0) << node.name;
    summed += node.median_ms;
  }
  // Against a graph run of the same work (inputs already on the device): the events bracket every
  // step (the sum misses no kernel) and the steps ran back to back (no host gaps counted).
  void* device_x = nullptr;
  ASSERT_EQ(cudaMalloc(&device_x, inputs[0].byte_size()), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(device_x, inputs[0].raw(), inputs[0].byte_size(), cudaMemcpyHostToDevice), cudaSuccess);
  const std::vector<DeviceView> views = {DeviceView{DType::kFloat32, inputs[0].shape(), device_x}};
  auto stream = static_cast<cudaStream_t>(session->cuda_stream());
  cudaEvent_t start = nullptr, stop = nullptr;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&stop), cudaSuccess);
  std::vector<float> graph_ms;
  for (int r = 0; r < 7; ++r) {
    ASSERT_EQ(cudaEventRecord(start, stream), cudaSuccess);
    ASSERT_TRUE(session->run_on_device(views));
    ASSERT_EQ(cudaEventRecord(stop, stream), cudaSuccess);
    ASSERT_EQ(cudaEventSynchronize(stop), cudaSuccess);
    float ms = 0;
    ASSERT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaSuccess);
    graph_ms.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(device_x);
  std::sort(graph_ms.begin(), graph_ms.end());
  const double graph = graph_ms[graph_ms.size() / 2];
  EXPECT_GT(summed, 0.5 * graph) << "graph run " << graph << " ms";
  EXPECT_LT(summed, 2.0 * graph + 0.02) << "graph run " << graph << " ms";
  // 4096 x 512 x 512 multiply-adds against a pass over 2M floats; the Reshape is a view (no kernel).
  EXPECT_GT((*profile)[1].median_ms, 0.0);
  EXPECT_GT((*profile)[1].median_ms, (*profile)[2].median_ms);
  EXPECT_LT((*profile)[2].median_ms, 0.05) << "a view launches nothing";
  auto after = session->run(inputs);
  ASSERT_TRUE(after) << after.status().message();
  EXPECT_EQ(max_difference(*before, *after), 0.0f);
  const std::vector<Tensor> narrow = {testing::random_tensor(rng, {8, 511})};
  auto refused = session->profile_nodes(narrow, 3);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.status().message().find("'x'"), std::string::npos) << refused.status().message();
}

/// Every timed run reads the inputs as given: the arena lends an input's bytes to later values
/// after its last reader, so a profile that staged them once would look up garbage ids from the
/// second run on (and fail on the out-of-range check, or time other work).
TEST_F(CudaRuntime, ProfileNodesStagesTheInputsForEveryRun) {
  std::mt19937 rng(37);
  testing::ModelBuilder builder(17);
  builder.input("ids", DType::kInt64, {-1, 4})
      .initializer("table", testing::random_tensor(rng, {100, 64}))
      .node("Gather", {"table", "ids"}, {"rows"}, {}, "lookup")
      .node("Relu", {"rows"}, {"positive"}, {}, "rectify")
      .node("Neg", {"positive"}, {"y"}, {}, "negate")
      .output("y", DType::kFloat32, {-1, 4, 64});
  EngineOptions options;
  options.device = Device::kCuda;
  auto engine = builder.build_engine(options);
  ASSERT_TRUE(engine) << engine.status().message();
  std::vector<int64_t> ids(256 * 4);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 37) % 100);
  const std::vector<Tensor> inputs = {Tensor::from_int64s({256, 4}, ids)};
  auto session = (*engine)->new_session();
  auto before = session->run(inputs);
  ASSERT_TRUE(before) << before.status().message();
  auto profile = session->profile_nodes(inputs, 9);
  ASSERT_TRUE(profile) << profile.status().message();
  EXPECT_EQ(profile->size(), 3u);
  auto after = session->run(inputs);
  ASSERT_TRUE(after) << after.status().message();
  EXPECT_EQ(max_difference(*before, *after), 0.0f);
}

/// The serving pattern: one Engine, a Session per thread, many runs.
TEST_F(CudaRuntime, EightServingThreadsGiveTheSingleThreadOutputsWithFlatMemory) {
  const auto folder = testing::source_dir() / "models" / "zoo" / "wukong";
  EngineOptions options;
  options.device = Device::kCuda;
  options.max_batch = 512;
  auto engine = Engine::load_file(folder / "model.onnx", options);
  ASSERT_TRUE(engine) << engine.status().message();
  auto reader = DataSetReader::open(folder / "eval");
  ASSERT_TRUE(reader);
  auto data = reader->read(0);
  ASSERT_TRUE(data);
  const std::vector<Tensor> all = inputs_of(**engine, *data);
  // Three request sizes in three buckets.
  const std::vector<std::vector<Tensor>> requests = {first_rows(all, 1), first_rows(all, 60), first_rows(all, 512)};
  std::vector<std::vector<Tensor>> expected;
  {
    auto session = (*engine)->new_session();
    for (const auto& request : requests) {
      auto out = session->run(request);
      ASSERT_TRUE(out) << out.status().message();
      expected.push_back(*out);
    }
  }
  const char* env = std::getenv("LOKA_SERVING_RUNS");
  const int runs = env ? std::atoi(env) : 10000;
  constexpr int kThreads = 8;
  std::atomic<int> mismatches{0}, failures{0}, growth{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      auto session = (*engine)->new_session();
      size_t warm_bytes = 0;
      for (int r = 0; r < runs; ++r) {
        const size_t which = static_cast<size_t>((r + t) % 3);
        auto out = session->run(requests[which]);
        if (!out) {
          ++failures;
          continue;
        }
        if (max_difference(*out, expected[which]) != 0.0f) ++mismatches;
        if (r == 2) warm_bytes = session->device_bytes();  // every bucket planned
        if (r > 2 && session->device_bytes() != warm_bytes) ++growth;
      }
    });
  for (std::thread& thread : threads) thread.join();
  std::printf("[ serving ] %d threads x %d runs: %d mismatches, %d failures, %d runs with device memory growth\n",
              kThreads, runs, mismatches.load(), failures.load(), growth.load());
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(growth.load(), 0);
}

}  // namespace
}  // namespace loka

namespace loka {
namespace {
// Wrong dtype/shape, a batch above the maximum, an empty batch, out-of-range ids and NaN/Inf,
// held to the CPU runtime's contract (tests/runtime/zoo_inputs_cases_util.cc).
INSTANTIATE_TEST_SUITE_P(Cuda, ZooInputs, ::testing::Values(Device::kCuda), testing::device_name);
}  // namespace

namespace testing {
std::string device_unavailable_reason(Device device) {
  return device == Device::kCuda ? cuda::device_unavailable_reason() : "";
}
}  // namespace testing
}  // namespace loka
