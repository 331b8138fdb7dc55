// ============================================================================
// tests/passes/pass_cache_test.cc — the PassManager's store of Probe and
// pin-precision results (passes/pass_cache.h): a second run restores the
// same annotations and statistics without running; any change of model,
// options, settings or calibration data runs again; a damaged or foreign
// entry is a miss and is rewritten; an unwritable store costs nothing but a
// log line; passes that are not cacheable always run. Keys hash each
// initializer once per run, again exactly when a pass gave it new data, and
// come out as a fresh store would make them.
// ============================================================================
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
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

std::string key_of(const PassCache& cache, const ir::Graph& graph, const CompileSettings& settings) {
  auto key = cache.key_text("probe", {{"batches", "3"}}, settings, graph);
  EXPECT_TRUE(key) << key.status().message();
  return key ? *key : std::string();
}

TEST(PassCache, KeysHashEachInitializerOncePerRunAndAgainOnlyWhenAPassGivesItNewData) {
  auto loaded = testing::load_zoo_model("dlrm_dot");
  ASSERT_TRUE(loaded) << loaded.status().message();
  ir::Graph& graph = **loaded;
  const CompileSettings settings = settings_for(zoo_calibration("dlrm_dot"));
  const PassCache cache(testing::make_temp_dir("loka-pass-cache"));
  const auto hashed = [&] { return cache.fingerprints().initializer_bytes_hashed(); };
  uint64_t total = 0;
  ir::Value* largest = nullptr;
  for (ir::Value* value : graph.values()) {
    if (!value->is_initializer()) continue;
    total += value->initializer()->byte_size();
    if (value->initializer()->dtype() == DType::kFloat32 &&
        (!largest || value->initializer()->byte_size() > largest->initializer()->byte_size()))
      largest = value;
  }
  ASSERT_NE(largest, nullptr);
  const size_t largest_bytes = largest->initializer()->byte_size();

  const std::string first = key_of(cache, graph, settings);
  EXPECT_EQ(hashed(), total);
  EXPECT_EQ(key_of(cache, graph, settings), first);
  EXPECT_EQ(hashed(), total) << "initializers whose data did not change are not hashed again";

  // A pass gives one initializer new data: that one alone is hashed, and the key is the one a
  // fresh store makes.
  const Tensor original = *largest->initializer();
  Tensor changed = original.clone();
  changed.data<float>()[0] += 1.0f;
  graph.set_initializer(largest, changed);
  const std::string after = key_of(cache, graph, settings);
  EXPECT_NE(after, first);
  EXPECT_EQ(hashed(), total + largest_bytes);
  EXPECT_EQ(after, key_of(PassCache(testing::make_temp_dir("loka-pass-cache")), graph, settings));
  // The original bytes in new storage: the first key again (keys follow content, not storage).
  graph.set_initializer(largest, original.clone());
  EXPECT_EQ(key_of(cache, graph, settings), first);

  // Only the structure changes (a pass writes metadata): a new key, no initializer hashed.
  const uint64_t before = hashed();
  graph.metadata["loka.test"] = "changed";
  EXPECT_NE(key_of(cache, graph, settings), first);
  EXPECT_EQ(hashed(), before);
}

TEST(PassCache, AStorageFreedAndMadeAgainOverTheSameMemoryIsHashedAgain) {
  // Digests are remembered by storage, held weakly. A storage freed and a new one made over the
  // same memory, now holding other values, must not pass for the old one (the weak reference
  // keeps a remembered address from being handed out again while it is remembered).
  std::vector<float> memory(1024, 1.0f);
  ir::Graph graph;
  ir::Value* weight = graph.add_initializer("w", Tensor::wrap(DType::kFloat32, {1024}, memory.data()));
  const CompileSettings settings;
  const PassCache cache(testing::make_temp_dir("loka-pass-cache"));
  const std::string first = key_of(cache, graph, settings);
  graph.set_initializer(weight, Tensor::scalar_float(0.0f));  // frees the storage: the store holds none
  std::fill(memory.begin(), memory.end(), 2.0f);
  graph.set_initializer(weight, Tensor::wrap(DType::kFloat32, {1024}, memory.data()));
  const std::string second = key_of(cache, graph, settings);
  EXPECT_NE(second, first);
  EXPECT_EQ(second, key_of(PassCache(testing::make_temp_dir("loka-pass-cache")), graph, settings));
}

TEST(PassCache, APassThatRewritesWeightsBetweenStoredPassesChangesTheLaterKey) {
  // migrate-outliers keys its calibration run (hashing every initializer), then rescales
  // weights; a second migrate-outliers, keyed by the same store, must see the rescaled ones.
  const fs::path cache = testing::make_temp_dir("loka-pass-cache");
  const CompileSettings settings = settings_for(zoo_calibration("attention_ranker"));
  const std::string migrate = "migrate-outliers{min_ratio=1}";
  const std::string prefix = "canonicalize,infer-shapes," + migrate + ",infer-shapes";
  const PipelineRun run = run_cached(cache, settings, prefix + "," + migrate, "attention_ranker");
  ASSERT_GT(record_of(run, "migrate-outliers").statistics.at("sites-migrated"), 0.0);
  std::set<std::string> stored_keys;
  for (const auto& entry : fs::directory_iterator(cache)) {
    std::ifstream in(entry.path());
    stored_keys.insert(nlohmann::json::parse(in).at("key").get<std::string>());
  }
  ASSERT_EQ(stored_keys.size(), 2u) << "one calibration key before the migration, one after";

  // The same model, passes and data without a store, keyed afresh.
  const auto graph_after = [&](const std::string& pipeline) {
    auto graph = testing::load_zoo_model("attention_ranker");
    EXPECT_TRUE(graph) << graph.status().message();
    auto records = testing::run_pipeline(**graph, pipeline, settings);
    EXPECT_TRUE(records) << records.status().message();
    return std::move(graph).value();
  };
  auto parsed = parse_pipeline(migrate, testing::mods_registry());
  ASSERT_TRUE(parsed) << parsed.status().message();
  const auto fresh_key = [&](const ir::Graph& graph) {
    auto key = PassCache(testing::make_temp_dir("loka-pass-cache"))
                   .key_text("migrate-outliers-calibration", parsed->front().options, settings, graph);
    EXPECT_TRUE(key) << key.status().message();
    return key ? *key : std::string();
  };
  EXPECT_EQ(stored_keys.count(fresh_key(*graph_after("canonicalize,infer-shapes"))), 1u) << "before the migration";
  EXPECT_EQ(stored_keys.count(fresh_key(*graph_after(prefix))), 1u) << "after it";
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
