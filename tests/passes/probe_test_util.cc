#include "probe_test_util.h"

#include <gtest/gtest.h>

#include "passes/onnx/onnx_import.h"
#include "passes/pass_manager.h"
#include "passes/probe/annotations.h"
#include "test_support.h"

namespace loka::testing {

nlohmann::json probe_zoo_annotations(const std::string& model, const std::string& options) {
  const auto model_dir = source_dir() / "models" / "zoo" / model;
  auto graph = onnx_io::import_model_file(model_dir / "model.onnx");
  EXPECT_TRUE(graph) << graph.status().message();
  if (!graph) return {};
  auto pipeline = parse_pipeline("canonicalize,infer-shapes,probe{" + options + "}", PassRegistry::builtin());
  EXPECT_TRUE(pipeline) << pipeline.status().message();
  if (!pipeline) return {};
  CompileSettings settings;
  settings.calibration_data = model_dir / "calib";
  auto records = PassManager(PassRegistry::builtin(), {}).run(**graph, *pipeline, settings);
  EXPECT_TRUE(records) << records.status().message();
  auto document = read_annotations(**graph);
  EXPECT_TRUE(document) << document.status().message();
  return document ? *document : nlohmann::json{};
}

}  // namespace loka::testing
