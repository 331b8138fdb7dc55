// ============================================================================
// tests/passes/pass_manager_test.cc — a failing pass leaves a reproducer: the
// pipeline's input IR (as it was before the first pass, although earlier
// passes changed the graph) and the pipeline string, which re-run the failure.
// ============================================================================
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "mods_test_util.h"
#include "passes/ir/text_format.h"
#include "passes/pass_manager.h"
#include "passes/pass_registry.h"
#include "test_support.h"

namespace loka {
namespace {

constexpr const char* kInput = R"(graph "repro" {
  opset "" 17
  input %x : f32[batch,2]
  init %w : f32[2,2] = [1, 2, 3, 4]
  %i = Identity(%x) @"identity"
  %y = MatMul(%i, %w) @"mm"
  output %y
})";

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(PassManager, AFailingPassSavesThePipelineInputAndItsPipeline) {
  auto graph = ir::parse_graph(kInput);
  ASSERT_TRUE(graph) << graph.status().message();
  const std::string before = ir::print_graph(**graph);
  // canonicalize changes the graph (Identity removed); the Probe then fails without calibration data.
  auto pipeline = parse_pipeline("canonicalize,probe", testing::mods_registry());
  ASSERT_TRUE(pipeline) << pipeline.status().message();
  PassManagerOptions options;
  options.reproducer_dir = testing::make_temp_dir("loka-pass-manager-repro");
  auto records = PassManager(testing::mods_registry(), options).run(**graph, *pipeline, CompileSettings{});
  ASSERT_FALSE(records);
  const std::string message = records.status().message();
  EXPECT_NE(message.find("pass 'probe'"), std::string::npos) << message;
  const size_t at = message.find("(reproducer: ");
  ASSERT_NE(at, std::string::npos) << message;
  const std::string ir_path = message.substr(at + 13, message.find(".ir and", at) + 3 - (at + 13));
  EXPECT_EQ(read_file(ir_path), before);  // the input, not the canonicalized graph
  const std::string pipeline_path = ir_path.substr(0, ir_path.size() - 3) + ".pipeline";
  EXPECT_NE(read_file(pipeline_path).find("canonicalize"), std::string::npos);
  EXPECT_NE(ir::print_graph(**graph), before);  // the pipeline did change the graph before failing
}

}  // namespace
}  // namespace loka
