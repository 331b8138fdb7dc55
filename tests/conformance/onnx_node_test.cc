// ============================================================================
// tests/conformance/onnx_node_test.cc — the ONNX backend node tests on the CPU runtime.
//
// Two sources of the onnx project's own test data: Debian's libonnx-testdata
// (onnx 1.12, opsets <= 17) and the installed onnx wheel (newer cases, FP8
// Cast/CastLike/QuantizeLinear/DequantizeLinear among them; written into the
// build folder by generate_wheel_node_data.py). Every applicable case becomes a
// named GoogleTest (OnnxNode.<test> / OnnxNodeWheel.<test>); excluded cases are
// registered too and skipped with their reason from excluded_node_tests.txt. A
// source whose data is missing is one skipped test saying why. The Summary test
// runs whatever the filter left out, prints the totals and fails when any case
// failed or an exclusion entry no longer matches an applicable case.
// ============================================================================
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "conformance/node_conformance.h"

namespace loka::conformance {
namespace {

namespace fs = std::filesystem;

/// One data source: where it lives, or why it is missing.
struct Source {
  std::string id;          ///< "debian", "wheel"
  std::string suite;       ///< GoogleTest suite of its cases
  fs::path root;
  std::string unavailable;  ///< non-empty when the data cannot be used, with the reason
  std::vector<NodeCase> cases = {};
};

struct Suite {
  fs::path exclusion_file;
  ExclusionList exclusions;
  std::string setup_error;  ///< an unreadable exclusion file or data folder
  std::vector<Source> sources;
  std::map<std::string, std::string> outcomes;  ///< "<source>/<name>" -> failure text ("" = passed)
};

/// Built on first use, during static initialization (the tests are registered then), and
/// never destroyed: the registered tests point into it until the process ends.
Suite& suite() {
  static Suite* built = [] {
    auto* s = new Suite;
    s->exclusion_file = fs::path(LOKA_SOURCE_DIR) / "tests" / "conformance" / "excluded_node_tests.txt";
    if (auto list = read_exclusions(s->exclusion_file)) {
      s->exclusions = std::move(*list);
    } else {
      s->setup_error = list.status().message();
    }
    s->sources.push_back({"debian", "OnnxNode", LOKA_ONNX_NODE_DIR, ""});
    s->sources.push_back({"wheel", "OnnxNodeWheel", LOKA_ONNX_WHEEL_NODE_DIR, LOKA_ONNX_WHEEL_UNAVAILABLE});
    for (Source& source : s->sources) {
      if (!source.unavailable.empty()) continue;
      if (!fs::is_directory(source.root)) {
        source.unavailable = "no node test data at " + source.root.string();
        continue;
      }
      if (auto cases = discover_cases(source.root, source.id, s->exclusions)) {
        source.cases = std::move(*cases);
      } else {
        s->setup_error += (s->setup_error.empty() ? "" : "; ") + cases.status().message();
      }
    }
    return s;
  }();
  return *built;
}

/// Runs a case once per process; the Summary reuses what the named tests already ran.
const std::string& outcome(const NodeCase& node_case) {
  auto& outcomes = suite().outcomes;
  const std::string key = node_case.source + "/" + node_case.name;
  auto it = outcomes.find(key);
  if (it == outcomes.end()) it = outcomes.emplace(key, run_case(node_case)).first;
  return it->second;
}

class NodeCaseTest : public ::testing::Test {
 public:
  explicit NodeCaseTest(const NodeCase* node_case) : node_case_(node_case) {}
  void TestBody() override {
    if (node_case_->kind == CaseKind::kExcluded) GTEST_SKIP() << "excluded: " << node_case_->reason;
    const std::string& failure = outcome(*node_case_);
    EXPECT_TRUE(failure.empty()) << node_case_->folder.string() << "\n" << failure;
  }

 private:
  const NodeCase* node_case_;
};

class DataSourceTest : public ::testing::Test {
 public:
  explicit DataSourceTest(const Source* source) : source_(source) {}
  void TestBody() override {
    if (!source_->unavailable.empty()) GTEST_SKIP() << source_->id << " node test data unavailable: " << source_->unavailable;
    ASSERT_FALSE(source_->cases.empty()) << "no node tests found under " << source_->root.string();
    std::cout << source_->id << " node tests: " << source_->cases.size() << " under " << source_->root.string() << "\n";
  }

 private:
  const Source* source_;
};

// Registers the named tests before main() runs, so filters and listings see them.
const bool kRegistered = [] {
  for (const Source& source : suite().sources) {
    ::testing::RegisterTest("OnnxNodeData", source.id.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [&source]() -> ::testing::Test* { return new DataSourceTest(&source); });
    for (const NodeCase& node_case : source.cases)
      if (node_case.kind == CaseKind::kApplicable || node_case.kind == CaseKind::kExcluded)
        ::testing::RegisterTest(source.suite.c_str(), node_case.name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                                [&node_case]() -> ::testing::Test* { return new NodeCaseTest(&node_case); });
  }
  return true;
}();

/// Wheel cases the generator could not restate at LoKA's opset, with its reasons.
std::vector<std::string> not_generated(const Source& source) {
  std::vector<std::string> lines;
  std::ifstream in(source.root / "not_generated.txt");
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') lines.push_back(line);
  return lines;
}

TEST(OnnxNodeConformance, Summary) {
  Suite& s = suite();
  ASSERT_TRUE(s.setup_error.empty()) << s.setup_error;
  int ran = 0, passed = 0, excluded = 0, unsupported_op = 0, unsupported_type = 0;
  std::string failed;
  std::map<std::string, int> missing_counts, type_counts;
  std::map<std::string, bool> exclusion_used;
  for (const auto& [name, reason] : s.exclusions.reasons) exclusion_used[name] = false;
  std::ostringstream excluded_lines;
  bool every_source_read = true;
  for (const Source& source : s.sources) {
    if (!source.unavailable.empty()) {
      every_source_read = false;
      std::cout << "conformance: " << source.id << " data not used: " << source.unavailable << "\n";
    }
    for (const NodeCase& node_case : source.cases) {
      switch (node_case.kind) {
        case CaseKind::kApplicable:
          ++ran;
          if (outcome(node_case).empty()) {
            ++passed;
          } else {
            failed += " " + source.suite + "." + node_case.name;
          }
          break;
        case CaseKind::kExcluded:
          ++excluded;
          exclusion_used[node_case.name] = true;
          excluded_lines << "  excluded " << source.suite << "." << node_case.name << ": " << node_case.reason << "\n";
          break;
        case CaseKind::kUnsupportedOp:
          ++unsupported_op;
          for (const std::string& op : node_case.missing_ops) ++missing_counts[op];
          break;
        case CaseKind::kUnsupportedType:
          ++unsupported_type;
          for (const std::string& type : node_case.missing_types) ++type_counts[type];
          break;
      }
    }
  }
  std::cout << "conformance: " << ran << " ran, " << passed << " passed, " << excluded << " excluded ("
            << s.exclusion_file.string() << "), " << unsupported_op << " unsupported-op tests not applicable, "
            << unsupported_type << " unsupported-type tests not applicable\n"
            << excluded_lines.str();
  std::cout << "  ops (or op@opset) LoKA lacks, with the number of tests needing each:";
  for (const auto& [op, count] : missing_counts) std::cout << " " << op << "=" << count;
  std::cout << "\n  types LoKA cannot hold, with the number of tests (whose ops it has) needing each:";
  for (const auto& [type, count] : type_counts) std::cout << " " << type << "=" << count;
  std::cout << "\n";
  for (const Source& source : s.sources) {
    if (source.id != "wheel" || !source.unavailable.empty()) continue;
    const std::vector<std::string> lines = not_generated(source);
    std::cout << "  wheel cases not valid at LoKA's highest opset (not generated): " << lines.size() << "\n";
    for (const std::string& line : lines)
      if (line.find("FLOAT8") != std::string::npos || line.find("e4m3") != std::string::npos ||
          line.find("e5m2") != std::string::npos)
        std::cout << "    " << line << "\n";
  }

  EXPECT_EQ(passed, ran) << "failed:" << failed;
  // A stale entry hides nothing today but would silently hide a future case; the list must stay exact.
  // Entries for a source that is unavailable here cannot be judged, so they are only checked with all data.
  if (every_source_read) {
    for (const auto& [name, used] : exclusion_used)
      EXPECT_TRUE(used) << "exclusion entry '" << name << "' matches no applicable node test: remove it";
  }
}

}  // namespace
}  // namespace loka::conformance
