// ============================================================================
// tests/dispatch/perf_db_test.cc — the perf DB file round-trips byte-exactly,
// answers only for its device, and the perf-DB timer measures each problem
// once per device (a fake measurement stands in for the GPU).
// ============================================================================
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "kernels/registry/kernel_registry.h"
#include "passes/dispatch/gemm_timer.h"
#include "passes/dispatch/perf_db.h"
#include "gemm_test_keys.h"
#include "test_support.h"

namespace loka::dispatch {
namespace {

using testing::make_temp_dir;

const DeviceFingerprint kH100{"NVIDIA H100 80GB HBM3", "13000", "130100"};
const DeviceFingerprint kH200{"NVIDIA H200", "13000", "130100"};
const DeviceFingerprint kH100NewLibrary{"NVIDIA H100 80GB HBM3", "13000", "130200"};

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

kernels::GemmKey gemm_key() {
  kernels::GemmKey key;
  key.op = "Gemm";
  return key;
}

/// A stand-in for the GPU autotuner: two candidates, times that depend on M, counted calls.
struct FakeMeasure {
  int calls = 0;
  MeasureFn fn() {
    return [this](const kernels::GemmKey& key, const kernels::GemmShape& shape) -> Result<std::vector<CandidateTiming>> {
      ++calls;
      std::vector<CandidateTiming> out;
      for (const kernels::GemmCandidate& c : kernels::gemm_candidates(key, shape, {2, false, true}))
        out.push_back({c, 1.0 + 0.001 * static_cast<double>(shape.m) / (c.algorithm + 1) + 0.1 / 3.0, c.precision == kernels::GemmPrecision::kBf16 ? 0.002 : 1e-7});
      return out;
    };
  }
};

TEST(PerfDb, RoundTripsByteExactly) {
  const auto dir = make_temp_dir("perfdb");
  PerfDb db;
  db.put(kH100, "Gemm:f32*f32->f32:none:nt:bias+none|m=512,n=256,k=512", "cublaslt.fp32.algo1",
         PerfRecord{12.345678901234, 1.5e-7, 15});
  db.put(kH200, "Gemm:f32*f32->f32:none:nt:bias+none|m=512,n=256,k=512", "cublaslt.bf16.algo0",
         PerfRecord{0.1 + 0.2, 0.0021, 15});
  ASSERT_TRUE(db.save(dir / "a.json").is_ok());
  auto loaded = PerfDb::load(dir / "a.json");
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  EXPECT_EQ(loaded->size(), 2u);
  EXPECT_EQ(loaded->find(kH200, "Gemm:f32*f32->f32:none:nt:bias+none|m=512,n=256,k=512", "cublaslt.bf16.algo0"),
            (PerfRecord{0.1 + 0.2, 0.0021, 15}));
  ASSERT_TRUE(loaded->save(dir / "b.json").is_ok());
  EXPECT_EQ(read_file(dir / "a.json"), read_file(dir / "b.json"));
}

TEST(PerfDb, ConcurrentRunsSavingTheSameFileKeepEachOthersEntries) {
  // Two loka-opt runs load the same (empty) DB, tune different problems and save one after the
  // other: the second save must not drop the first one's entries.
  const auto path = make_temp_dir("perfdb") / "shared.json";
  auto first = PerfDb::load(path);
  auto second = PerfDb::load(path);
  ASSERT_TRUE(first && second);
  first->put(kH100, "problem-a", "cublaslt.fp32.algo0", PerfRecord{10.0, 1e-7, 15});
  first->put(kH100, "problem-c", "cublaslt.tf32.algo1", PerfRecord{7.0, 3e-4, 15});
  second->put(kH100, "problem-b", "cublaslt.bf16.algo0", PerfRecord{5.0, 2e-3, 15});
  second->put(kH100, "problem-a", "cublaslt.fp32.algo0", PerfRecord{11.0, 1e-7, 15});
  ASSERT_TRUE(first->save(path).is_ok());
  ASSERT_TRUE(second->save(path).is_ok());
  auto merged = PerfDb::load(path);
  ASSERT_TRUE(merged) << merged.status().message();
  EXPECT_EQ(merged->size(), 3u);
  EXPECT_EQ(merged->find(kH100, "problem-c", "cublaslt.tf32.algo1"), (PerfRecord{7.0, 3e-4, 15}));
  EXPECT_EQ(merged->find(kH100, "problem-b", "cublaslt.bf16.algo0"), (PerfRecord{5.0, 2e-3, 15}));
  EXPECT_EQ(merged->find(kH100, "problem-a", "cublaslt.fp32.algo0"), (PerfRecord{11.0, 1e-7, 15}))
      << "the saving run's own measurement wins";
}

TEST(PerfDb, MissingFileIsEmptyAndBadFilesAreNamed) {
  const auto dir = make_temp_dir("perfdb");
  auto empty = PerfDb::load(dir / "absent.json");
  ASSERT_TRUE(empty.is_ok());
  EXPECT_EQ(empty->size(), 0u);
  for (const char* text : {"not json", "[]", "{\"version\": 2, \"entries\": []}",
                           "{\"version\": 1, \"entries\": [{\"gpu\": \"x\"}]}",
                           "{\"version\": 1, \"entries\": [{\"gpu\": \"x\", \"driver\": \"1\", \"cublaslt\": \"1\", "
                           "\"problem\": \"p\", \"candidate\": \"c\", \"median_us\": -1, \"rel_error\": 0, \"samples\": 1}]}"}) {
    std::ofstream(dir / "bad.json") << text;
    auto loaded = PerfDb::load(dir / "bad.json");
    ASSERT_FALSE(loaded.is_ok()) << text;
    EXPECT_NE(loaded.status().message().find("bad.json"), std::string::npos) << loaded.status().message();
  }
}

TEST(PerfDb, AnswersOnlyForItsDevice) {
  PerfDb db;
  db.put(kH100, "p", "cublaslt.fp32.algo0", PerfRecord{1, 0, 1});
  EXPECT_TRUE(db.find(kH100, "p", "cublaslt.fp32.algo0").has_value());
  EXPECT_FALSE(db.find(kH200, "p", "cublaslt.fp32.algo0").has_value());
  EXPECT_FALSE(db.find(kH100NewLibrary, "p", "cublaslt.fp32.algo0").has_value());
  EXPECT_TRUE(db.problem_only_elsewhere(kH200, "p"));
  EXPECT_FALSE(db.problem_only_elsewhere(kH100, "p"));
  EXPECT_FALSE(db.problem_only_elsewhere(kH200, "q"));
  EXPECT_EQ(db.other_devices(kH200), (std::set<DeviceFingerprint>{kH100}));
}

TEST(PerfDbTimer, MeasuresOncePerDeviceAndReusesTheDatabase) {
  const auto dir = make_temp_dir("perfdb");
  FakeMeasure fake;
  const kernels::GemmShape shape{4096, 256, 512, 1};
  std::vector<CandidateTiming> first;
  {
    PerfDb db;
    PerfDbUse use;
    auto timer = make_perf_db_timer(db, kH100, fake.fn(), use);
    auto timed = timer->time(gemm_key(), shape);
    ASSERT_TRUE(timed.is_ok()) << timed.status().message();
    first = *timed;
    EXPECT_EQ(fake.calls, 1);
    EXPECT_EQ(use.tuned, 1u);
    ASSERT_TRUE(timer->time(gemm_key(), shape).is_ok());  // same problem: from the database
    EXPECT_EQ(fake.calls, 1);
    EXPECT_EQ(use.hits, 1u);
    EXPECT_EQ(timer->device(), kH100.to_string());
    ASSERT_TRUE(db.save(dir / "db.json").is_ok());
  }
  {  // A later run on the same device: nothing measured, the same numbers.
    auto db = PerfDb::load(dir / "db.json");
    ASSERT_TRUE(db.is_ok());
    PerfDbUse use;
    auto timer = make_perf_db_timer(*db, kH100, fake.fn(), use);
    auto timed = timer->time(gemm_key(), shape);
    ASSERT_TRUE(timed.is_ok());
    EXPECT_EQ(fake.calls, 1);
    ASSERT_EQ(timed->size(), first.size());
    for (size_t i = 0; i < first.size(); ++i) {
      EXPECT_EQ((*timed)[i].candidate, first[i].candidate);
      EXPECT_EQ((*timed)[i].time_us, first[i].time_us);
      EXPECT_EQ((*timed)[i].rel_error, first[i].rel_error);
    }
  }
  {  // Another cuBLASLt version: the entries are detected as foreign and the problem re-tuned.
    auto db = PerfDb::load(dir / "db.json");
    ASSERT_TRUE(db.is_ok());
    PerfDbUse use;
    auto timer = make_perf_db_timer(*db, kH100NewLibrary, fake.fn(), use);
    ASSERT_TRUE(timer->time(gemm_key(), shape).is_ok());
    EXPECT_EQ(fake.calls, 2);
    EXPECT_EQ(use.foreign, 1u);
    EXPECT_EQ(db->size(), 2 * first.size());  // both devices' entries kept
  }
}

TEST(PerfDbTimer, AnswersOnlyTheCandidatesItsOptionsOffer) {
  // A database filled with every variant (FAST_ACCUM, 8 algorithms) must not hand them to a
  // run that turned them off: on full-size Wukong, FAST_ACCUM kernels from a warm database gave
  // a model optimized with fast_accum=false 6x the eval drift it has without them.
  const kernels::GemmKey key = testing::quantized_gemm_key(kernels::ScaleGranularity::kTensor);
  const kernels::GemmShape shape{4096, 256, 512, 1};
  PerfDb db;
  PerfDbUse use;
  const MeasureFn everything = [](const kernels::GemmKey& k, const kernels::GemmShape& s) -> Result<std::vector<CandidateTiming>> {
    std::vector<CandidateTiming> out;
    for (const kernels::GemmCandidate& c : kernels::gemm_candidates(k, s, {8, true, true}))
      out.push_back({c, 1.0 + c.algorithm, 1e-3});
    return out;
  };
  auto filled = make_perf_db_timer(db, kH100, everything, use)->time(key, shape);
  ASSERT_TRUE(filled.is_ok()) << filled.status().message();
  ASSERT_TRUE(std::any_of(filled->begin(), filled->end(), [](const CandidateTiming& t) { return t.candidate.fast_accum; }));

  const kernels::CandidateOptions narrow{2, false, true};
  auto answered = make_perf_db_timer(db, kH100, everything, use, narrow)->time(key, shape);
  ASSERT_TRUE(answered.is_ok()) << answered.status().message();
  EXPECT_EQ(use.hits, 1u);
  std::vector<std::string> expected;
  for (const kernels::GemmCandidate& c : kernels::gemm_candidates(key, shape, narrow)) expected.push_back(c.name());
  std::vector<std::string> names;
  for (const CandidateTiming& t : *answered) {
    names.push_back(t.candidate.name());
    EXPECT_FALSE(t.candidate.fast_accum) << t.candidate.name();
    EXPECT_LT(t.candidate.algorithm, 2) << t.candidate.name();
  }
  EXPECT_EQ(names, expected);
}

TEST(PerfDbTimer, AFailedMeasurementIsAnError) {
  PerfDb db;
  PerfDbUse use;
  auto timer = make_perf_db_timer(db, kH100,
                                  [](const kernels::GemmKey&, const kernels::GemmShape&) -> Result<std::vector<CandidateTiming>> {
                                    return Status::error("CUDA out of memory");
                                  },
                                  use);
  auto timed = timer->time(gemm_key(), {512, 256, 512, 1});
  ASSERT_FALSE(timed.is_ok());
  EXPECT_NE(timed.status().message().find("out of memory"), std::string::npos);
}

}  // namespace
}  // namespace loka::dispatch
