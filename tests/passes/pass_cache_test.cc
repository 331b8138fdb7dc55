// ============================================================================
// tests/passes/pass_cache_test.cc — the PassManager's store of Probe and
// pin-precision results (passes/pass_cache.h): a second run restores the
// same annotations and statistics without running; any change of model,
// options, settings or calibration data runs again; a damaged or foreign
// entry is a miss and is rewritten; an unwritable store costs nothing but a
// log line; passes that are not cacheable always run.
// ============================================================================
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "mods_test_util.h"
#include "passes/ir/text_format.h"
#include "passes/pass_cache.h"
#include "passes/pass_manager.h"
#include "passes/probe/annotations.h"
#include "test_support.h"

namespace loka {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPipeline = "canonicalize,infer-shapes,probe{batches=3},pin-precision{measure=false}";

struct PipelineRun {
  std::vector<PassRunRecord> records;
  std::string annotations;
  std::string log;
};

CompileSettings settings_for(const fs::path& calibration) {
  CompileSettings settings;
  settings.calibration_data = calibration;
  settings.budget = "auto";
  return settings;
}

fs::path zoo_calibration(const std::string& name) { return testing::source_dir() / "models" / "zoo" / name / "calib"; }

/// Runs `pipeline` on a fresh copy of zoo model `name` with the store in `cache`.
PipelineRun run_cached(const fs::path& cache, const CompileSettings& settings, const std::string& pipeline = kPipeline,
               const std::string& name = "dlrm_dot") {
  PipelineRun run;
  auto graph = testing::load_zoo_model(name);
  EXPECT_TRUE(graph) << graph.status().message();
  if (!graph) return run;
  auto parsed = parse_pipeline(pipeline, testing::mods_registry());
  EXPECT_TRUE(parsed) << parsed.status().message();
  std::ostringstream log;
  PassManagerOptions options;
  options.reproducer_dir = testing::make_temp_dir("loka-cache-repro");
  options.cache_dir = cache;
  options.log = &log;
  auto records = PassManager(testing::mods_registry(), options).run(**graph, *parsed, settings);
  EXPECT_TRUE(records) << records.status().message();
  if (records) run.records = *records;
  run.annotations = (*graph)->metadata[kAnnotationsKey];
  run.log = log.str();
  return run;
}

const PassRunRecord& record_of(const PipelineRun& run, const std::string& pass) {
  for (const PassRunRecord& record : run.records)
    if (record.pass == pass) return record;
  static const PassRunRecord none;
  ADD_FAILURE() << "no record of " << pass;
  return none;
}

TEST(PassCache, ASecondRunRestoresTheProbeAndPinPrecisionResults) {
  const fs::path cache = testing::make_temp_dir("loka-pass-cache");
  const CompileSettings settings = settings_for(zoo_calibration("dlrm_dot"));
  const PipelineRun first = run_cached(cache, settings);
  EXPECT_FALSE(record_of(first, "probe").cached);
  EXPECT_FALSE(record_of(first, "pin-precision").cached);
  const PipelineRun second = run_cached(cache, settings);
  EXPECT_TRUE(record_of(second, "probe").cached);
  EXPECT_TRUE(record_of(second, "pin-precision").cached);
  EXPECT_FALSE(record_of(second, "canonicalize").cached) << "canonicalize rewrites the IR: never stored";
  EXPECT_EQ(second.annotations, first.annotations);
  EXPECT_EQ(record_of(second, "probe").statistics, record_of(first, "probe").statistics);
  EXPECT_EQ(record_of(second, "pin-precision").changed, record_of(first, "pin-precision").changed);
  EXPECT_NE(second.log.find("probe: reused the stored result"), std::string::npos) << second.log;
  // Nothing stored: every pass runs.
  const PipelineRun uncached = run_cached(fs::path(), settings);
  EXPECT_FALSE(record_of(uncached, "probe").cached);
}

TEST(PassCache, AnyChangeOfOptionsSettingsDataOrModelRunsAgain) {
  const fs::path cache = testing::make_temp_dir("loka-pass-cache");
  const CompileSettings settings = settings_for(zoo_calibration("dlrm_dot"));
  run_cached(cache, settings);
  EXPECT_FALSE(record_of(run_cached(cache, settings, "canonicalize,infer-shapes,probe{batches=2}"), "probe").cached);
  CompileSettings other_budget = settings;
  other_budget.budget = "rel_l2=0.02";
  const PipelineRun budget = run_cached(cache, other_budget);
  EXPECT_FALSE(record_of(budget, "probe").cached);
  // Calibration data: the same files less one data set.
  const fs::path fewer = testing::make_temp_dir("loka-cache-calib");
  fs::copy(zoo_calibration("dlrm_dot"), fewer, fs::copy_options::recursive);
  std::vector<fs::path> sets;
  for (const auto& entry : fs::directory_iterator(fewer)) sets.push_back(entry.path());
  std::sort(sets.begin(), sets.end());
  ASSERT_GE(sets.size(), 2u);
  fs::remove_all(sets.back());
  EXPECT_FALSE(record_of(run_cached(cache, settings_for(fewer)), "probe").cached);
  // Another model with its own data.
  EXPECT_FALSE(record_of(run_cached(cache, settings_for(zoo_calibration("wukong")), kPipeline, "wukong"), "probe").cached);
  // The original is still stored.
  EXPECT_TRUE(record_of(run_cached(cache, settings), "probe").cached);
}

TEST(PassCache, DamagedOrForeignEntriesAreMissesAndGetRewritten) {
  const fs::path cache = testing::make_temp_dir("loka-pass-cache");
  const CompileSettings settings = settings_for(zoo_calibration("dlrm_dot"));
  const PipelineRun first = run_cached(cache, settings);
  std::vector<fs::path> entries;
  for (const auto& entry : fs::directory_iterator(cache)) entries.push_back(entry.path());
  ASSERT_EQ(entries.size(), 2u);  // probe and pin-precision
  for (const fs::path& entry : entries) std::ofstream(entry, std::ios::trunc) << "{\"key\": truncated";
  const PipelineRun second = run_cached(cache, settings);
  EXPECT_FALSE(record_of(second, "probe").cached);
  EXPECT_FALSE(second.annotations.empty());
  EXPECT_TRUE(record_of(run_cached(cache, settings), "probe").cached) << "the damaged entry was rewritten";
  // An entry whose key text differs (a hash collision, another build's file) is not taken.
  for (const fs::path& entry : entries) {
    if (entry.filename().string().rfind("probe-", 0) != 0) continue;  // the rewritten probe entry
    std::ifstream in(entry);
    auto json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(json.is_object()) << entry;
    json["key"] = json["key"].get<std::string>() + "something else\n";
    std::ofstream(entry, std::ios::trunc) << json.dump();
  }
  EXPECT_FALSE(record_of(run_cached(cache, settings), "probe").cached);
}

TEST(PassCache, MigrateOutliersRestoresItsCalibrationAndRewritesTheSame) {
  const fs::path cache = testing::make_temp_dir("loka-pass-cache");
  const CompileSettings settings = settings_for(zoo_calibration("attention_ranker"));
  const std::string pipeline = "canonicalize,infer-shapes,migrate-outliers{min_ratio=1}";
  const auto rewrite = [&](bool restored) {
    auto graph = testing::load_zoo_model("attention_ranker");
    EXPECT_TRUE(graph) << graph.status().message();
    auto parsed = parse_pipeline(pipeline, testing::mods_registry());
    PassManagerOptions options;
    options.cache_dir = cache;
    auto records = PassManager(testing::mods_registry(), options).run(**graph, *parsed, settings);
    EXPECT_TRUE(records) << records.status().message();
    const auto& statistics = records->back().statistics;
    EXPECT_GT(statistics.at("sites-migrated"), 0.0);
    EXPECT_EQ(statistics.count("calibration-restored"), restored ? 1u : 0u);
    return ir::print_graph(**graph);
  };
  const std::string first = rewrite(false);
  EXPECT_EQ(rewrite(true), first) << "the restored calibration gives the same factors, bit for bit";
}

TEST(PassCache, AnUnwritableStoreIsALogLineNotAnError) {
  const fs::path blocker = testing::make_temp_dir("loka-pass-cache") / "a-file";
  std::ofstream(blocker) << "not a directory";
  const PipelineRun run = run_cached(blocker / "cache", settings_for(zoo_calibration("dlrm_dot")));
  EXPECT_FALSE(record_of(run, "probe").cached);
  EXPECT_FALSE(run.annotations.empty());
  EXPECT_NE(run.log.find("probe: result not stored: cannot create"), std::string::npos) << run.log;
}

TEST(PassCache, TheDefaultStoreFollowsTheEnvironment) {
  const char* saved = std::getenv("LOKA_PASS_CACHE");
  const std::string restore = saved ? saved : "";
  ::setenv("LOKA_PASS_CACHE", "off", 1);
  EXPECT_FALSE(default_pass_cache_dir().has_value());
  ::setenv("LOKA_PASS_CACHE", "/somewhere/else", 1);
  EXPECT_EQ(default_pass_cache_dir(), fs::path("/somewhere/else"));
  ::unsetenv("LOKA_PASS_CACHE");
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(default_pass_cache_dir(), fs::path("/xdg/loka/passes"));
  ::unsetenv("XDG_CACHE_HOME");
  if (saved) ::setenv("LOKA_PASS_CACHE", restore.c_str(), 1);
}

}  // namespace
}  // namespace loka
