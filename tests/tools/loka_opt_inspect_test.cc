// ============================================================================
// tests/tools/loka_opt_inspect_test.cc — loka-opt and loka-inspect as a user runs them.
// ============================================================================
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <utility>

#include "test_support.h"

namespace loka {
namespace {

std::string tool(const char* name) { return (testing::tools_dir() / name).string(); }
std::string zoo(const char* model) { return (testing::source_dir() / "models" / "zoo" / model).string(); }

TEST(LokaOpt, HelpUsageErrorsAndPassList) {
  auto help = testing::run_command(tool("loka-opt") + " --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("--calib"), std::string::npos);
  auto passes = testing::run_command(tool("loka-opt") + " --list-passes");
  EXPECT_EQ(passes.exit_code, 0);
  EXPECT_NE(passes.output.find("probe"), std::string::npos);
  auto no_calib = testing::run_command(tool("loka-opt") + " " + zoo("dlrm_dot") + "/model.onnx -o /dev/null");
  EXPECT_EQ(no_calib.exit_code, 2) << no_calib.output;
  EXPECT_NE(no_calib.output.find("--calib"), std::string::npos);
  auto bad_pass = testing::run_command(tool("loka-opt") + " " + zoo("dlrm_dot") + "/model.onnx -o /dev/null --pipeline nope");
  EXPECT_EQ(bad_pass.exit_code, 2);
  EXPECT_NE(bad_pass.output.find("unknown pass 'nope'"), std::string::npos) << bad_pass.output;
  auto missing = testing::run_command(tool("loka-opt") + " /no/such/model.onnx -o /dev/null --pipeline infer-shapes");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("/no/such/model.onnx"), std::string::npos);
}

// --budget and --pin are read by passes late in the pipeline; a bad one is a usage error before
// anything runs: no model loaded, no Probe, no crash reproducer left behind.
TEST(LokaOpt, BadBudgetOrPinIsAUsageErrorBeforeAnyPassRuns) {
  const std::string opt = "LOKA_PASS_CACHE=off " + tool("loka-opt") + " /no/such/model.onnx -o /dev/null --calib " +
                          zoo("dlrm_dot") + "/calib ";
  const std::pair<std::string, std::string> cases[] = {
      {"--budget logloss=abc", "--budget 'logloss=abc': expected"},
      {"--budget logloss=-1", "--budget 'logloss=-1': expected"},
      {"--budget bogus=1", "--budget 'bogus=1': expected"},
      {"--pin linear=fp16", "--pin 'linear=fp16': expected REGEX=fp8|bf16|fp32 (got precision 'fp16')"},
      {"--pin '(=fp8'", "--pin '(=fp8': invalid regex"},
      {"--pin linear=bf16 --pin nothing", "--pin 'nothing': expected"},
  };
  for (const auto& [flags, message] : cases) {
    auto run = testing::run_command(opt + flags);
    EXPECT_EQ(run.exit_code, 2) << flags << "\n" << run.output;
    EXPECT_NE(run.output.find(message), std::string::npos) << flags << "\n" << run.output;
    // The model path is never reached: the refusal comes first, in one line.
    EXPECT_EQ(run.output.find("/no/such/model.onnx"), std::string::npos) << run.output;
    EXPECT_EQ(run.output.find("reproducer"), std::string::npos) << run.output;
    EXPECT_EQ(std::count(run.output.begin(), run.output.end(), '\n'), 1) << run.output;
  }
  auto good = testing::run_command(opt + "--budget logloss=0.001 --pin linear=bf16 --pipeline canonicalize");
  EXPECT_EQ(good.exit_code, 1) << good.output;  // past the checks, the missing model is what fails
  EXPECT_NE(good.output.find("/no/such/model.onnx"), std::string::npos) << good.output;
}

// A --pin whose regex matches no site is a warning on stderr, under --quiet too; the run goes on.
TEST(LokaOpt, APinMatchingNoSiteIsAWarning) {
  const auto dir = testing::make_temp_dir("loka-opt-pin");
  const std::string out = (dir / "pinned.onnx").string();
  auto run = testing::run_command("LOKA_PASS_CACHE=off " + tool("loka-opt") + " " + zoo("dlrm_dot") + "/model.onnx -o " +
                                  out + " --calib " + zoo("dlrm_dot") + "/calib --quiet --pin no_such_node=fp32 --pin " +
                                  "'.=fp32'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("loka-opt: warning: --pin 'no_such_node=fp32' matched no candidate site"), std::string::npos)
      << run.output;
  EXPECT_EQ(run.output.find("'.=fp32'"), std::string::npos) << run.output;  // it matched: no warning
}

// A second loka-opt of the same model reuses the Probe's and pin-precision's stored results
// (LOKA_PASS_CACHE), says so, and writes the same bytes; LOKA_PASS_CACHE=off stores nothing.
TEST(LokaOpt, ASecondRunReusesStoredProbeResultsAndWritesTheSameModel) {
  const auto dir = testing::make_temp_dir("loka-opt-cache");
  const std::string cache = (dir / "cache").string();
  const auto opt = [&](const std::string& env, const std::string& name) {
    return testing::run_command(env + " " + tool("loka-opt") + " " + zoo("dlrm_dot") + "/model.onnx -o " +
                                (dir / (name + ".onnx")).string() + " --calib " + zoo("dlrm_dot") + "/calib --report " +
                                (dir / (name + ".json")).string());
  };
  const auto probe_cached = [&](const std::string& name) {
    std::ifstream in(dir / (name + ".json"));
    const auto report = nlohmann::json::parse(in);
    for (const auto& pass : report["passes"])
      if (pass["pass"] == "probe") return pass["cached"].get<bool>();
    ADD_FAILURE() << "no probe in the report";
    return false;
  };
  auto first = opt("LOKA_PASS_CACHE=" + cache, "first");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_FALSE(probe_cached("first"));
  auto second = opt("LOKA_PASS_CACHE=" + cache, "second");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_TRUE(probe_cached("second"));
  EXPECT_NE(second.output.find("probe: reused the stored result"), std::string::npos) << second.output;
  std::ifstream a(dir / "first.onnx", std::ios::binary), b(dir / "second.onnx", std::ios::binary);
  EXPECT_TRUE(std::equal(std::istreambuf_iterator<char>(a), {}, std::istreambuf_iterator<char>(b), {}));
  auto off = opt("LOKA_PASS_CACHE=off XDG_CACHE_HOME=" + (dir / "xdg").string(), "off");
  ASSERT_EQ(off.exit_code, 0) << off.output;
  EXPECT_FALSE(probe_cached("off"));
  EXPECT_FALSE(std::filesystem::exists(dir / "xdg"));
}

// Under a logloss budget, when too few calibration samples keep GEMM sites out of FP8, the summary
// says how many would do; choosing again on the same Probe annotations under a rel_l2 budget (no
// sample noise in it) says nothing of the kind.
TEST(LokaOpt, TheSummarySaysWhenCalibrationSamplesAreTooFewForTheBudget) {
  const auto dir = testing::make_temp_dir("loka-opt-note");
  const std::string probed = (dir / "probed.onnx").string();
  auto logloss = testing::run_command("LOKA_PASS_CACHE=off " + tool("loka-opt") + " " + zoo("attention_ranker") +
                                      "/model.onnx -o " + probed + " --calib " + zoo("attention_ranker") +
                                      "/calib --budget logloss=0.0002 --pipeline canonicalize,infer-shapes,probe,"
                                      "pin-precision");  // what the note reads
  ASSERT_EQ(logloss.exit_code, 0) << logloss.output;
  const size_t note = logloss.output.find("calibration samples are too few for this budget");
  ASSERT_NE(note, std::string::npos) << logloss.output;
  EXPECT_NE(logloss.output.find("x as many) before its logloss noise leaves room for it", note), std::string::npos)
      << logloss.output;
  auto rel_l2 = testing::run_command("LOKA_PASS_CACHE=off " + tool("loka-opt") + " " + probed + " -o " +
                                     (dir / "rel_l2.onnx").string() + " --budget rel_l2=0.05 --pipeline pin-precision");
  ASSERT_EQ(rel_l2.exit_code, 0) << rel_l2.output;
  EXPECT_NE(rel_l2.output.find("predicted rel_l2"), std::string::npos) << rel_l2.output;
  EXPECT_EQ(rel_l2.output.find("too few for this budget"), std::string::npos) << rel_l2.output;
}

// BF16 storage chosen by the measured selection is in the summary; without that choice, no line.
TEST(LokaOpt, TheSummaryCountsWhatIsHeldInBf16) {
  const auto dir = testing::make_temp_dir("loka-opt-bf16");
  const std::string pipeline =
      "canonicalize,infer-shapes,probe,pin-precision{measure=true,bf16_storage=%s,storage_min_elements=0},"
      "insert-scales,fuse-gemm-epilogue,fuse-embedding-bags,store-tables-bf16,fuse-epilogue-quantize,"
      "store-activations-bf16,infer-shapes";
  for (const bool storage : {true, false}) {
    std::string chosen = pipeline;
    chosen.replace(chosen.find("%s"), 2, storage ? "true" : "false");
    auto run = testing::run_command("LOKA_PASS_CACHE=off " + tool("loka-opt") + " " + zoo("dlrm_dcnv2") + "/model.onnx -o " +
                                    (dir / "out.onnx").string() + " --calib " + zoo("dlrm_dcnv2") +
                                    "/calib --budget logloss=0.01 --pipeline '" + chosen + "'");
    ASSERT_EQ(run.exit_code, 0) << run.output;
    const size_t line = run.output.find("  BF16       ");
    if (!storage) {
      EXPECT_EQ(line, std::string::npos) << run.output;
      continue;
    }
    ASSERT_NE(line, std::string::npos) << run.output;
    EXPECT_NE(run.output.find("chosen activation sets held in BF16", line), std::string::npos) << run.output;
    EXPECT_EQ(run.output.find("  BF16       0 of", line), std::string::npos) << "a 1% budget holds some: " << run.output;
  }
}

// --device cuda checks the output on the GPU: with one, it runs a calibration batch there and
// reports the difference from the CPU; without one, it fails with one line naming the model and CUDA.
TEST(LokaOpt, DeviceCudaChecksTheOutputOnTheGpuOrSaysWhyItCannot) {
  const auto dir = testing::make_temp_dir("loka-opt-cuda");
  const std::string out = (dir / "dcnv2.loka.onnx").string();
  // No pass store: a stored result would add its "reused" line to the one-line error below.
  auto opt = testing::run_command("LOKA_PASS_CACHE=off " + tool("loka-opt") + " " + zoo("dlrm_dcnv2") +
                                  "/model.onnx -o " + out + " --calib " + zoo("dlrm_dcnv2") + "/calib --device cuda");
  if (opt.exit_code == 0) {
    EXPECT_NE(opt.output.find("cuda check ok: ran test_data_set_0 on the GPU"), std::string::npos) << opt.output;
  } else {
    EXPECT_EQ(opt.exit_code, 1) << opt.output;
    EXPECT_NE(opt.output.find(out), std::string::npos) << opt.output;
    EXPECT_NE(opt.output.find("CUDA"), std::string::npos) << opt.output;
    EXPECT_EQ(opt.output.find('\n'), opt.output.size() - 1) << "one line: " << opt.output;
  }
}

TEST(LokaOpt, ProbeAnnotatesEverySiteAndInspectShowsThem) {
  const auto dir = testing::make_temp_dir("loka-opt-cli");
  const std::string out = (dir / "dot.loka.onnx").string();
  auto opt = testing::run_command(tool("loka-opt") + " " + zoo("dlrm_dot") + "/model.onnx -o " + out + " --calib " +
                                  zoo("dlrm_dot") + "/calib --report " + (dir / "report.json").string());
  ASSERT_EQ(opt.exit_code, 0) << opt.output;
  EXPECT_NE(opt.output.find("candidate sites"), std::string::npos) << opt.output;

  auto json = testing::run_command(tool("loka-inspect") + " " + out + " --json");
  ASSERT_EQ(json.exit_code, 0) << json.output;
  const auto document = nlohmann::json::parse(json.output);
  ASSERT_TRUE(document.contains("model") && document.contains("nodes"));
  EXPECT_NE(document["model"]["pipeline"].get<std::string>().find("probe"), std::string::npos);
  size_t sites = 0;
  for (const auto& node : document["nodes"]) {
    for (const char* key : {"name", "op", "flops", "precision", "verdict", "kernel"}) EXPECT_TRUE(node.contains(key)) << key;
    if (node["verdict"].is_null()) continue;
    ++sites;
    const std::string verdict = node["verdict"];
    EXPECT_TRUE(verdict == "safe" || verdict == "unsafe" || verdict == "undecided") << verdict;
    for (const char* field : {"error", "local_error"}) {
      const auto& error = node[field];
      for (const char* key : {"rel_l2_mean", "rel_l2_ci95", "sqnr_db", "batches"}) EXPECT_TRUE(error.contains(key)) << field << "." << key;
      EXPECT_TRUE(error["rel_l2_ci95"][0].is_number() && error["rel_l2_ci95"][1].is_number()) << node["name"];
    }
    EXPECT_TRUE(node["recipes"].contains("e4m3_tensor") && node["recipes"].contains("e4m3_row"));
  }
  EXPECT_GE(sites, 5u);

  std::ifstream report_file(dir / "report.json");
  const auto report = nlohmann::json::parse(report_file);
  EXPECT_EQ(report["sites"].get<size_t>(), sites);
  // Loading and writing are timed beside the passes, in the report and the printed summary.
  for (const char* stage : {"load_seconds", "passes_seconds", "write_seconds"}) {
    ASSERT_TRUE(report.contains(stage) && report[stage].is_number()) << stage;
    EXPECT_GE(report[stage].get<double>(), 0.0) << stage;
    EXPECT_LE(report[stage].get<double>(), report["seconds"].get<double>()) << stage;
  }
  EXPECT_NE(opt.output.find("stages     load "), std::string::npos) << opt.output;

  const std::string dot = (dir / "graph.dot").string();
  auto table = testing::run_command(tool("loka-inspect") + " " + out + " --sort error --dot " + dot);
  ASSERT_EQ(table.exit_code, 0) << table.output;
  std::ifstream dot_file(dot);
  std::stringstream dot_text;
  dot_text << dot_file.rdbuf();
  for (const auto& node : document["nodes"]) {
    std::string quoted(1, '"');  // appended, not "..." + std::string: GCC 12 warns falsely (-Wrestrict) on that
    quoted += node["name"].get<std::string>() + '"';
    EXPECT_NE(dot_text.str().find(quoted), std::string::npos) << node["name"];
  }
  auto ranked = testing::run_command(tool("loka-inspect") + " " + out);
  EXPECT_NE(ranked.output.find("most sensitive sites"), std::string::npos);
  // --top N ranks N sites; 0 leaves the ranking out; a negative count is a usage error.
  auto two = testing::run_command(tool("loka-inspect") + " " + out + " --top 2");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  const std::string ranking = two.output.substr(two.output.find("most sensitive sites"));
  EXPECT_NE(ranking.find("\n  2. "), std::string::npos) << ranking;
  EXPECT_EQ(ranking.find("\n  3. "), std::string::npos) << ranking;
  auto none = testing::run_command(tool("loka-inspect") + " " + out + " --top 0");
  ASSERT_EQ(none.exit_code, 0) << none.output;
  EXPECT_EQ(none.output.find("most sensitive sites"), std::string::npos) << none.output;
  auto negative = testing::run_command(tool("loka-inspect") + " " + out + " --top -1");
  EXPECT_EQ(negative.exit_code, 2) << negative.output;
  EXPECT_NE(negative.output.find("--top must be >= 0, got -1"), std::string::npos) << negative.output;
}

}  // namespace
}  // namespace loka
