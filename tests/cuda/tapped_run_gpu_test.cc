// ============================================================================
// tests/cuda/tapped_run_gpu_test.cc — the calibration run on the GPU
// (passes/probe/tapped_run.h), which the Probe's amax phase and
// migrate-outliers use when there is one.
//
// The tapped values match the CPU run's (the GPU's FP32 GEMMs sum in another
// order: close, not equal), with calibration sets of different sizes, one of
// them a value whose leading dim is not the batch (rows of padding would show
// there); on the zoo, the Probe's statistics from the GPU match the CPU's
// (weights and tables, read from the graph, exactly), and migrate-outliers
// calibrates on the GPU.
// ============================================================================
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cuda_test_util.h"
#include "passes/ir/text_format.h"
#include "passes/onnx/onnx_import.h"
#include "passes/pass_manager.h"
#include "passes/probe/tapped_run.h"
#include "passes/probe_test_util.h"
#include "runtime/tensor_proto.h"
#include "test_support.h"

namespace loka {
namespace {

namespace fs = std::filesystem;

class CudaTappedRun : public testing::CudaTest {};

/// Every batch's tapped values of `graph` on `device`.
std::vector<std::vector<Tensor>> tapped_values(const ir::Graph& graph, const std::vector<std::string>& names,
                                               const fs::path& data, Device device) {
  std::vector<std::vector<Tensor>> all;
  auto reader = DataSetReader::open(data);
  EXPECT_TRUE(reader) << reader.status().message();
  if (!reader) return all;
  probe::TappedRunOptions options;
  options.device = device;
  const Status status = probe::run_tapped(graph, names, *reader, reader->size(), options,
                                          [&](const probe::TappedBatch& batch) {
                                            all.emplace_back(batch.values.begin(), batch.values.end());
                                            return Status::ok();
                                          });
  EXPECT_TRUE(status) << status.message();
  return all;
}

TEST_F(CudaTappedRun, ValuesMatchTheCpuRunWhateverTheBatchSizes) {
  auto graph = ir::parse_graph(R"(graph "chain" {
  opset "" 17
  input %x : f32[batch,64]
  init %w1 : f32[64,48] = )" + [] {
    std::mt19937 rng(9);
    std::string text = "[";
    for (int i = 0; i < 64 * 48; ++i) text += (i ? ", " : "") + std::to_string(std::uniform_real_distribution<float>(-0.2f, 0.2f)(rng));
    return text + "]";
  }() + R"(
  init %flat : i64[2] = [-1, 16]
  %h = MatMul(%x, %w1) : f32[batch,48] @"fc1"
  %r = Relu(%h) : f32[batch,48] @"relu"
  %t = Reshape(%r, %flat) : f32[?,16] @"split_rows"
  output %t
})");
  ASSERT_TRUE(graph) << graph.status().message();
  std::mt19937 rng(10);
  const fs::path data = testing::make_temp_dir("loka-tapped-run-gpu");
  const std::vector<int64_t> rows = {96, 96, 37, 96};  // the third set is smaller: a second load at its size
  for (size_t b = 0; b < rows.size(); ++b) {
    fs::create_directories(data / ("test_data_set_" + std::to_string(b)));
    ASSERT_TRUE(write_tensor_file(data / ("test_data_set_" + std::to_string(b)) / "input_0.pb", "x",
                                  testing::random_tensor(rng, {rows[b], 64})));
  }
  const std::vector<std::string> names = {"h", "x", "t", "h"};
  const auto cpu = tapped_values(**graph, names, data, Device::kCpu);
  const auto gpu = tapped_values(**graph, names, data, Device::kCuda);
  ASSERT_EQ(cpu.size(), rows.size());
  ASSERT_EQ(gpu.size(), rows.size());
  for (size_t b = 0; b < rows.size(); ++b) {
    SCOPED_TRACE("batch " + std::to_string(b) + " of " + std::to_string(rows[b]) + " rows");
    ASSERT_EQ(gpu[b].size(), names.size());
    for (size_t v = 0; v < names.size(); ++v) {
      SCOPED_TRACE(names[v]);
      ASSERT_EQ(gpu[b][v].shape(), cpu[b][v].shape());  // [rows*3, 16] for t: no padded rows
      testing::expect_close(gpu[b][v], cpu[b][v], 64, 1e-5f);
    }
  }
}

class CudaTappedRunZoo : public testing::CudaTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(CudaTappedRunZoo, ProbeStatisticsFromTheGpuMatchTheCpus) {
  const nlohmann::json cpu = testing::probe_zoo_annotations(GetParam(), "device=cpu,batches=2");
  const nlohmann::json gpu = testing::probe_zoo_annotations(GetParam(), "device=cuda,batches=2");
  ASSERT_TRUE(cpu.contains("nodes") && gpu.contains("nodes"));
  EXPECT_GE(gpu["model"]["probe"]["calibration_seconds"].get<double>(), 0.0);
  size_t operands = 0;
  for (const auto& [name, node] : cpu["nodes"].items()) {
    if (!node.contains("stats")) continue;
    for (const auto& [operand, stats] : node["stats"].items()) {
      SCOPED_TRACE(name + " " + operand);
      const nlohmann::json& other = gpu["nodes"][name]["stats"][operand];
      ++operands;
      EXPECT_EQ(other["values"], stats["values"]);
      const double want = stats["amax"], got = other["amax"];
      if (operand == "weight" || node["site"] == "embedding") EXPECT_EQ(got, want) << "read from the graph on both";
      else EXPECT_NEAR(got, want, 1e-4 * want + 1e-6);
      EXPECT_NEAR(other["mean"].get<double>(), stats["mean"].get<double>(),
                  1e-4 * std::fabs(stats["std"].get<double>()) + 1e-6);
    }
  }
  EXPECT_GE(operands, 10u);
}

TEST_P(CudaTappedRunZoo, MigrateOutliersCalibratesOnTheGpu) {
  const fs::path dir = testing::source_dir() / "models" / "zoo" / GetParam();
  CompileSettings settings;
  settings.calibration_data = dir / "calib";
  std::map<std::string, double> migrated;
  for (const char* device : {"cpu", "cuda"}) {
    auto graph = onnx_io::import_model_file(dir / "model.onnx");
    ASSERT_TRUE(graph) << graph.status().message();
    auto pipeline = parse_pipeline(std::string("canonicalize,infer-shapes,migrate-outliers{min_ratio=1,device=") +
                                       device + "}",
                                   PassRegistry::builtin());
    ASSERT_TRUE(pipeline) << pipeline.status().message();
    auto records = PassManager(PassRegistry::builtin(), {}).run(**graph, *pipeline, settings);
    ASSERT_TRUE(records) << device << ": " << records.status().message();
    const auto& statistics = records->back().statistics;
    // A model without candidate sites (dlrm_dot) runs no calibration, so it reports no time.
    if (statistics.at("sites-considered") > 0) EXPECT_GE(statistics.at("calibration-seconds"), 0.0) << device;
    migrated[device] = statistics.count("sites-migrated") ? statistics.at("sites-migrated") : 0.0;
  }
  // min_ratio=1 migrates every site whose channel amax is not flat: the same ones on either device.
  EXPECT_EQ(migrated["cuda"], migrated["cpu"]);
}

INSTANTIATE_TEST_SUITE_P(Zoo, CudaTappedRunZoo, ::testing::Values("dlrm_dot", "wukong", "attention_ranker", "dlrm_dcnv2"));

}  // namespace
}  // namespace loka
