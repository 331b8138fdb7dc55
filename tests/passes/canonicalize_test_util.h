// ============================================================================
// tests/passes/canonicalize_test_util.h — what the canonicalization tests
// share: running one pass by factory on IR text, CHECK-style golden matching
// of the printed IR, and running a graph before/after a rewrite on the CPU
// runtime with the same random inputs.
// ============================================================================
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "loka/status.h"
#include "passes/ir/graph.h"
#include "passes/pass.h"

namespace loka::testing {

struct PassRun {
  bool changed = false;
  std::map<std::string, double> statistics;
};

/// Runs the pass on `graph` with its declared option defaults, overridden by `options`.
Result<PassRun> run_pass(const PassInfo& info, Pass& pass, ir::Graph& graph,
                         const std::map<std::string, std::string>& options = {});

/// A graph before and after one pass, with what the pass reported.
struct Rewrite {
  std::unique_ptr<ir::Graph> before;  ///< parsed, shapes inferred
  std::unique_ptr<ir::Graph> after;   ///< the same, then the pass run on it
  PassRun run;
  std::string printed;                ///< print_graph(*after)
};

/// Parses `text`, infers shapes, and runs the pass on a clone; the result is verified.
Result<Rewrite> apply_pass(const std::string& text, const PassInfo& info, std::unique_ptr<Pass> pass,
                           const std::map<std::string, std::string>& options = {});

/// FileCheck-lite over `text`: each line of `checks` is "CHECK: s" (s on a later line than the
/// previous match), "CHECK-NEXT: s" (on the very next line) or "CHECK-NOT: s" (absent between
/// the previous match and the next one, or the end). Returns "" on success, else what failed.
std::string check_lines(const std::string& text, const std::string& checks);

/// apply_pass, failing the calling test (and returning an empty Rewrite) on error.
Rewrite apply_pass_or_fail(const std::string& text, const PassInfo& info, std::unique_ptr<Pass> pass,
                           const std::map<std::string, std::string>& options = {});

/// Expects the rewritten graph's outputs within `tolerance` of the original's for each batch size.
void expect_outputs_within(const Rewrite& rewrite, float tolerance, const std::vector<int64_t>& batches = {3},
                           unsigned seed = 7);

/// Largest |difference| between the outputs of `before` and `after` run on the CPU runtime
/// with the same random FP32 inputs (symbolic dims = `batch`); an error when either fails to
/// load or run, or their outputs differ in count or shape.
Result<float> max_output_difference(const ir::Graph& before, const ir::Graph& after, int64_t batch = 3,
                                    unsigned seed = 7);

}  // namespace loka::testing
