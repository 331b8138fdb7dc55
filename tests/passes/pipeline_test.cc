// ============================================================================
// tests/passes/pipeline_test.cc — pipeline strings are checked when parsed:
// every option's type, and a string option's accepted values, before any
// pass runs (a typo in the last pass's option must not cost the Probe first).
// ============================================================================
#include <gtest/gtest.h>

#include <string>

#include "passes/pass_registry.h"
#include "passes/pipeline.h"

namespace loka {
namespace {

std::string parse_error(const std::string& text) {
  auto pipeline = parse_pipeline(text, PassRegistry::builtin());
  return pipeline ? std::string() : pipeline.status().message();
}

TEST(Pipeline, AStringOptionWithChoicesRefusesAnyOtherValue) {
  const std::pair<const char*, const char*> refused[] = {
      {"probe{device=tpu}", "pass 'probe': option 'device' needs one of auto, cpu, cuda, got 'tpu'"},
      {"probe{method=replay}", "pass 'probe': option 'method' needs one of auto, hooks, switches, got 'replay'"},
      {"migrate-outliers{device=}", "pass 'migrate-outliers': option 'device' needs one of auto, cpu, cuda, got ''"},
      {"pin-precision{measure=yes}", "pass 'pin-precision': option 'measure' needs one of auto, true, false, 1, 0"},
      {"canonicalize,dispatch{device=CUDA}", "pass 'dispatch': option 'device' needs one of auto, cpu, cuda, got 'CUDA'"},
  };
  for (const auto& [text, message] : refused) EXPECT_NE(parse_error(text).find(message), std::string::npos) << text;
  for (const char* accepted : {"probe{device=cpu,method=hooks}", "probe{device=cuda,method=switches}",
                               "migrate-outliers{device=auto}", "pin-precision{measure=1}", "dispatch{device=cpu}"})
    EXPECT_EQ(parse_error(accepted), "") << accepted;
}

TEST(Pipeline, FreeTextAndTypedOptionsAreCheckedAsBefore) {
  // A string option without choices takes any text (a path, a list the pass parses itself).
  EXPECT_EQ(parse_error("dispatch{perf_db=/tmp/anything.json,buckets=8:64}"), "");
  EXPECT_NE(parse_error("probe{batches=abc}").find("option 'batches' needs an integer, got 'abc'"), std::string::npos);
  EXPECT_NE(parse_error("probe{nope=1}").find("pass 'probe' has no option 'nope'"), std::string::npos);
}

}  // namespace
}  // namespace loka
