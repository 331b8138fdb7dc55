// ============================================================================
// tests/passes/tapped_run_test.cc — probe::run_tapped, the calibration run
// both the Probe and migrate-outliers use: the tapped values are what the
// nodes read (checked against an Observer on the same CPU runtime), a value
// asked for twice comes back twice from one output, graph inputs come from the
// batch, max_rows runs a batch's leading rows, and the errors name the value,
// the data set or the input.
// ============================================================================
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <unordered_map>

#include "loka/engine.h"
#include "loka/session.h"
#include "passes/ir/text_format.h"
#include "passes/onnx/onnx_export.h"
#include "passes/probe/tapped_run.h"
#include "runtime/tensor_proto.h"
#include "test_support.h"

namespace loka {
namespace {

namespace fs = std::filesystem;

constexpr const char* kModel = R"(graph "chain" {
  opset "" 17
  input %x : f32[batch,4]
  init %w1 : f32[4,3] = [1, -2, 0.5, 0.25, 1, -1, 3, 0, 1, -0.5, 2, 1]
  init %w2 : f32[3,2] = [1, 2, -1, 0.5, 0.25, -3]
  %h = MatMul(%x, %w1) : f32[batch,3] @"fc1"
  %r = Relu(%h) : f32[batch,3] @"relu"
  %y = MatMul(%r, %w2) : f32[batch,2] @"fc2"
  output %y
})";

/// Data sets of input "x" with the given row counts, random values.
fs::path write_batches(std::mt19937& rng, const std::vector<int64_t>& rows) {
  const fs::path dir = testing::make_temp_dir("loka-tapped-run");
  for (size_t b = 0; b < rows.size(); ++b) {
    const fs::path set = dir / ("test_data_set_" + std::to_string(b));
    fs::create_directories(set);
    EXPECT_TRUE(write_tensor_file(set / "input_0.pb", "x", testing::random_tensor(rng, {rows[b], 4})));
  }
  return dir;
}

/// Per node name, its first input as each run of the CPU runtime read it (the reference).
class FirstInputRecorder final : public Observer {
 public:
  void before_node(const NodeInfo& node, std::span<Tensor> inputs) override {
    seen_[std::string(node.name)].push_back(inputs[0].clone());
  }
  const std::vector<Tensor>& seen(const std::string& node) const { return seen_.at(node); }

 private:
  std::unordered_map<std::string, std::vector<Tensor>> seen_;
};

/// The same shape and the same numbers, bit for bit.
void expect_same(const Tensor& actual, const Tensor& expected) {
  EXPECT_EQ(actual.shape(), expected.shape());
  EXPECT_EQ(actual.to_floats(), expected.to_floats());
}

std::unique_ptr<ir::Graph> chain() {
  auto graph = ir::parse_graph(kModel);
  EXPECT_TRUE(graph) << graph.status().message();
  return graph ? std::move(graph).value() : nullptr;
}

struct Collected {
  Status status = Status::ok();
  std::vector<size_t> batches;              ///< the batch index of each call
  std::vector<std::vector<Tensor>> values;  ///< per call, the values handed over
};

Collected collect(const ir::Graph& graph, const std::vector<std::string>& names, const fs::path& data, size_t batches,
                  bool refuse_non_finite = false, int64_t max_rows = 0) {
  Collected collected;
  auto reader = DataSetReader::open(data);
  EXPECT_TRUE(reader) << reader.status().message();
  if (!reader) return collected;
  probe::TappedRunOptions options;
  options.refuse_non_finite_inputs = refuse_non_finite;
  options.max_rows = max_rows;
  collected.status = probe::run_tapped(graph, names, *reader, batches, options, [&](const probe::TappedBatch& batch) {
    collected.batches.push_back(batch.index);
    collected.values.emplace_back(batch.values.begin(), batch.values.end());
    return Status::ok();
  });
  return collected;
}

TEST(TappedRun, HandsOverWhatTheNodesReadBatchByBatch) {
  std::mt19937 rng(5);
  auto graph = chain();
  ASSERT_TRUE(graph);
  // Batches of different sizes: the CPU Engine takes any; on CUDA each size is its own load.
  const fs::path data = write_batches(rng, {6, 6, 3});
  const Collected tapped = collect(*graph, {"h", "x", "h", "r"}, data, 8);
  ASSERT_TRUE(tapped.status) << tapped.status.message();
  EXPECT_EQ(tapped.batches, (std::vector<size_t>{0, 1, 2})) << "every data set once, in order, none beyond";

  // The reference: the original model on the same runtime, its nodes' inputs seen by an Observer.
  auto bytes = onnx_io::export_model_bytes(*graph);
  ASSERT_TRUE(bytes) << bytes.status().message();
  auto engine = Engine::load_bytes(std::as_bytes(std::span(bytes->data(), bytes->size())));
  ASSERT_TRUE(engine) << engine.status().message();
  auto session = (*engine)->new_session();
  FirstInputRecorder recorder;
  session->set_observer(&recorder);
  auto reader = DataSetReader::open(data);
  ASSERT_TRUE(reader);
  for (size_t b = 0; b < 3; ++b) {
    auto set = reader->read(b);
    ASSERT_TRUE(set) << set.status().message();
    const std::vector<Tensor> inputs = {set->inputs[0].tensor};
    ASSERT_TRUE(session->run(inputs));
  }
  for (size_t b = 0; b < 3; ++b) {
    SCOPED_TRACE("batch " + std::to_string(b));
    const std::vector<Tensor>& values = tapped.values[b];
    ASSERT_EQ(values.size(), 4u);
    expect_same(values[0], recorder.seen("relu")[b]);
    expect_same(values[1], recorder.seen("fc1")[b]);
    expect_same(values[3], recorder.seen("fc2")[b]);
    // "h" twice: one tapped output, handed over twice.
    EXPECT_EQ(values[0].data<float>(), values[2].data<float>());
  }
}

TEST(TappedRun, AGraphOutputIsTappedWhereItIsAndNothingElseRuns) {
  std::mt19937 rng(6);
  auto graph = chain();
  ASSERT_TRUE(graph);
  const Collected tapped = collect(*graph, {"y"}, write_batches(rng, {2}), 1);
  ASSERT_TRUE(tapped.status) << tapped.status.message();
  ASSERT_EQ(tapped.values.size(), 1u);
  EXPECT_EQ(tapped.values[0][0].shape(), (Shape{2, 2}));
  // Only graph inputs asked for: handed over from the batch.
  const Collected inputs = collect(*graph, {"x"}, write_batches(rng, {5}), 1);
  ASSERT_TRUE(inputs.status) << inputs.status.message();
  EXPECT_EQ(inputs.values.at(0).at(0).shape(), (Shape{5, 4}));
}

TEST(TappedRun, RefusesInitializersAndUnknownValues) {
  std::mt19937 rng(7);
  auto graph = chain();
  ASSERT_TRUE(graph);
  const fs::path data = write_batches(rng, {2});
  const Collected initializer = collect(*graph, {"h", "w1"}, data, 1);
  ASSERT_FALSE(initializer.status);
  EXPECT_NE(initializer.status.message().find("'w1' is an initializer"), std::string::npos)
      << initializer.status.message();
  EXPECT_TRUE(initializer.batches.empty());
  const Collected unknown = collect(*graph, {"nope"}, data, 1);
  ASSERT_FALSE(unknown.status);
  EXPECT_NE(unknown.status.message().find("no value 'nope'"), std::string::npos) << unknown.status.message();
}

TEST(TappedRun, MaxRowsRunsTheLeadingRowsOfEachBatch) {
  std::mt19937 rng(13);
  auto graph = chain();
  ASSERT_TRUE(graph);
  const fs::path data = write_batches(rng, {6, 2});
  const Collected whole = collect(*graph, {"x", "r"}, data, 2);
  const Collected first = collect(*graph, {"x", "r"}, data, 2, false, /*max_rows=*/4);
  ASSERT_TRUE(whole.status) << whole.status.message();
  ASSERT_TRUE(first.status) << first.status.message();
  ASSERT_EQ(first.values.size(), 2u);
  for (size_t v = 0; v < 2; ++v) {
    // Batch 0: the first 4 of its 6 rows, the values the whole run computed for them.
    const Tensor& cut = first.values[0][v];
    const Tensor& full = whole.values[0][v];
    ASSERT_EQ(cut.dim(0), 4);
    const std::vector<float> all = full.to_floats();
    EXPECT_EQ(cut.to_floats(), std::vector<float>(all.begin(), all.begin() + cut.element_count()));
    // Negative twin: batch 1 has 2 rows, fewer than asked: run whole.
    expect_same(first.values[1][v], whole.values[1][v]);
  }
}

TEST(TappedRun, NonFiniteInputsAreRefusedOnlyWhenAsked) {
  auto graph = chain();
  ASSERT_TRUE(graph);
  const fs::path dir = testing::make_temp_dir("loka-tapped-run-nan");
  fs::create_directories(dir / "test_data_set_0");
  ASSERT_TRUE(write_tensor_file(dir / "test_data_set_0" / "input_0.pb", "x",
                                Tensor::from_floats({1, 4}, std::vector<float>{1, NAN, 0, 2})));
  const Collected refused = collect(*graph, {"h"}, dir, 1, /*refuse_non_finite=*/true);
  ASSERT_FALSE(refused.status);
  EXPECT_NE(refused.status.message().find("calibration data " + (dir / "test_data_set_0").string() +
                                          ": input 'x' contains NaN or infinity"),
            std::string::npos)
      << refused.status.message();
  // Negative twin: not asked, the run goes on and the NaN reaches the tapped value.
  const Collected allowed = collect(*graph, {"h"}, dir, 1);
  ASSERT_TRUE(allowed.status) << allowed.status.message();
  const Tensor& h = allowed.values.at(0).at(0);
  EXPECT_TRUE(std::isnan(h.data<float>()[0])) << "1*w + NaN*w: every channel NaN";
}

TEST(TappedRun, RunErrorsNameTheDataSetAndConsumerErrorsStopTheRun) {
  std::mt19937 rng(8);
  auto graph = chain();
  ASSERT_TRUE(graph);
  // A batch the model cannot take: 5 features where it multiplies by a [4, 3] weight.
  const fs::path bad = testing::make_temp_dir("loka-tapped-run-bad");
  fs::create_directories(bad / "test_data_set_0");
  ASSERT_TRUE(write_tensor_file(bad / "test_data_set_0" / "input_0.pb", "x", testing::random_tensor(rng, {2, 5})));
  const Collected failed = collect(*graph, {"h"}, bad, 1);
  ASSERT_FALSE(failed.status);
  EXPECT_EQ(failed.status.message().rfind("calibration batch " + (bad / "test_data_set_0").string() + ": ", 0), 0u)
      << failed.status.message();

  auto reader = DataSetReader::open(write_batches(rng, {2, 2, 2}));
  ASSERT_TRUE(reader);
  size_t calls = 0;
  const Status stopped = probe::run_tapped(*graph, std::vector<std::string>{"h"}, *reader, 3, {},
                                           [&](const probe::TappedBatch& batch) {
                                             ++calls;
                                             return batch.index == 1 ? Status::error("enough") : Status::ok();
                                           });
  EXPECT_EQ(stopped.message(), "enough");
  EXPECT_EQ(calls, 2u);
}

}  // namespace
}  // namespace loka
