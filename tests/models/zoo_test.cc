// ============================================================================
// tests/models/zoo_test.cc — the committed model zoo runs on the CPU runtime.
//
// For every models/zoo/<name>/ and models/zoo/exports/<variant>/ folder, the
// model is loaded with loka::Engine and each eval/test_data_set_<k> is run;
// the outputs must match onnxruntime's FP32 outputs (output_<i>.pb, written by
// models/make_zoo.py) within 1e-5 absolute. Main models also run their
// calibration sets (which carry no outputs): every probability must be finite
// and in [0, 1]. A layout test checks what the rest of LoKA relies on: five
// models, both exporters and opsets 13/17/18 covered, at least 4 calibration
// batches of 256 and 2 eval batches of 1024 with labels. When a model fails to
// load, the engine's message names the node, op and opset it cannot run.
// ============================================================================
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "loka/engine.h"
#include "loka/session.h"
#include "runtime/test_data.h"
#include "test_support.h"

namespace loka {
namespace {

namespace fs = std::filesystem;

constexpr float kTolerance = 1e-5f;
const std::vector<std::string> kModels = {"dlrm_dot", "dlrm_dcnv2", "wukong", "dhen", "attention_ranker"};

fs::path zoo_root() { return testing::source_dir() / "models" / "zoo"; }

/// One folder to check: a main model ("dhen") or an export variant ("exports/dhen_torchscript_op13").
struct ZooEntry {
  std::string name;  ///< relative to the zoo root
  bool is_variant;
};

/// GoogleTest prints parameters with this (instead of their bytes).
void PrintTo(const ZooEntry& entry, std::ostream* os) { *os << entry.name; }

std::vector<ZooEntry> zoo_entries() {
  std::vector<ZooEntry> entries;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(zoo_root(), ec)) {
    if (!e.is_directory() || e.path().filename() == "exports") continue;
    entries.push_back({e.path().filename().string(), false});
  }
  for (const auto& e : fs::directory_iterator(zoo_root() / "exports", ec)) {
    if (e.is_directory()) entries.push_back({"exports/" + e.path().filename().string(), true});
  }
  std::sort(entries.begin(), entries.end(), [](const ZooEntry& a, const ZooEntry& b) { return a.name < b.name; });
  return entries;
}

struct Totals {
  std::atomic<int> models{0};
  std::atomic<int> eval_sets{0};
  std::atomic<int> calib_sets{0};
};
Totals& totals() {
  static Totals t;
  return t;
}

/// Prints how much of the zoo ran once every test is done.
class ZooSummary : public ::testing::Environment {
 public:
  void TearDown() override {
    std::printf("[zoo] %d model(s) ran; %d eval data set(s) matched onnxruntime within %g; %d calib data set(s) ran\n",
                totals().models.load(), totals().eval_sets.load(), static_cast<double>(kTolerance),
                totals().calib_sets.load());
  }
};
const auto* const kSummary = ::testing::AddGlobalTestEnvironment(new ZooSummary);

Result<nlohmann::json> read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return Status::error("cannot open " + path.string());
  auto doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Status::error("not JSON: " + path.string());
  return doc;
}

/// Rows in the first dim of every input of every data set under `folder`; fails on a mismatch.
void expect_batches(const fs::path& folder, size_t min_sets, int64_t rows, bool need_outputs) {
  auto reader = DataSetReader::open(folder);
  ASSERT_TRUE(reader) << reader.status().message();
  EXPECT_GE(reader->size(), min_sets) << folder;
  for (size_t k = 0; k < reader->size(); ++k) {
    auto data = reader->read(k);
    ASSERT_TRUE(data) << data.status().message();
    ASSERT_EQ(data->inputs.size(), 2u) << data->label;
    EXPECT_EQ(data->inputs[0].name, "dense") << data->label;
    EXPECT_EQ(data->inputs[1].name, "sparse") << data->label;
    for (const auto& input : data->inputs) EXPECT_EQ(input.tensor.dim(0), rows) << folder << " " << input.name;
    ASSERT_TRUE(data->labels.has_value()) << folder << " " << data->label << ": no labels.pb";
    for (float y : data->labels->to_floats()) ASSERT_TRUE(y == 0.0f || y == 1.0f) << data->label;
    if (need_outputs) {
      EXPECT_EQ(data->outputs.size(), 1u) << folder << " " << data->label;
    }
  }
}

TEST(ZooLayout, FiveModelsBothExportersAndOpsetsWithData) {
  std::set<std::string> exporters;
  std::set<int> opsets;
  for (const auto& name : kModels) {
    SCOPED_TRACE(name);
    const fs::path dir = zoo_root() / name;
    ASSERT_TRUE(fs::is_regular_file(dir / "model.onnx")) << dir;
    auto facts = read_json(dir / "facts.json");
    ASSERT_TRUE(facts) << facts.status().message();
    ASSERT_TRUE((*facts)["exporter"].is_string() && (*facts)["opset"].is_number_integer());
    exporters.insert((*facts)["exporter"].get<std::string>());
    opsets.insert((*facts)["opset"].get<int>());
    for (const char* precision : {"bf16", "fp8_naive"}) {
      const auto& q = (*facts)["quality"][precision];
      EXPECT_TRUE(q["logloss_drift_pct"].is_number() && q["auc_drift"].is_number()) << precision;
    }
    expect_batches(dir / "calib", 4, 256, false);
    expect_batches(dir / "eval", 2, 1024, true);
  }
  EXPECT_EQ(exporters, (std::set<std::string>{"dynamo", "torchscript"}));
  for (int opset : {13, 17, 18}) EXPECT_TRUE(opsets.count(opset)) << "no committed model at opset " << opset;
}

/// One data set run through a session: the data (with its expected outputs) and what came out.
struct RunResult {
  DataSet data;
  std::vector<Tensor> outputs;
};

/// Reads data set `k` of `reader` and runs it; errors name the model and the data set.
Result<RunResult> run_data_set(Session& session, const DataSetReader& reader, size_t k,
                               const std::vector<std::string>& input_names, const std::string& model) {
  auto data = reader.read(k);
  if (!data) return data.status();
  auto inputs = order_inputs(*data, input_names);
  if (!inputs) return inputs.status();
  auto outputs = session.run(*inputs);
  if (!outputs) return Status::error(model + " " + data->label + ": " + outputs.status().message());
  return RunResult{std::move(*data), std::move(*outputs)};
}

class ZooModel : public ::testing::TestWithParam<ZooEntry> {};

TEST_P(ZooModel, MatchesOnnxRuntimeOutputs) {
  const ZooEntry& entry = GetParam();
  const fs::path dir = zoo_root() / entry.name;
  auto engine = Engine::load_file(dir / "model.onnx");
  ASSERT_TRUE(engine) << entry.name << ": " << engine.status().message();
  std::vector<std::string> input_names;
  for (const auto& info : (*engine)->inputs()) input_names.push_back(info.name);
  auto session = (*engine)->new_session();

  auto reader = DataSetReader::open(dir / "eval");
  ASSERT_TRUE(reader) << reader.status().message();
  ASSERT_GE(reader->size(), 1u) << dir;
  for (size_t k = 0; k < reader->size(); ++k) {
    auto run = run_data_set(*session, *reader, k, input_names, entry.name);
    ASSERT_TRUE(run) << run.status().message();
    const std::string where = entry.name + " " + run->data.label;
    ASSERT_EQ(run->outputs.size(), run->data.outputs.size()) << where;
    for (size_t i = 0; i < run->outputs.size(); ++i) {
      const Tensor& got = run->outputs[i];
      const Tensor& want = run->data.outputs[i].tensor;
      ASSERT_EQ(got.dtype(), DType::kFloat32) << where << " output " << i;
      ASSERT_EQ(got.shape(), want.shape()) << where << " output " << i;
      EXPECT_LE(testing::max_abs_difference(got, want), kTolerance) << where << " output " << i;
    }
    ++totals().eval_sets;
  }

  if (!entry.is_variant) {
    auto calib = DataSetReader::open(dir / "calib");
    ASSERT_TRUE(calib) << calib.status().message();
    for (size_t k = 0; k < calib->size(); ++k) {
      auto run = run_data_set(*session, *calib, k, input_names, entry.name);
      ASSERT_TRUE(run) << run.status().message();
      ASSERT_EQ(run->outputs.size(), 1u) << entry.name << " " << run->data.label;
      for (float p : run->outputs[0].to_floats()) ASSERT_TRUE(std::isfinite(p) && p >= 0.0f && p <= 1.0f) << p;
      ++totals().calib_sets;
    }
  }
  ++totals().models;
}

std::string entry_test_name(const ::testing::TestParamInfo<ZooEntry>& info) {
  std::string name = info.param.name;
  std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooModel, ::testing::ValuesIn(zoo_entries()), entry_test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ZooModel);

}  // namespace
}  // namespace loka
