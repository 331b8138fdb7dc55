// ============================================================================
// tests/conformance/node_conformance.h — finding, classifying and running ONNX
// backend node tests (the onnx project's own test data) against the CPU runtime.
//
// A node test is a folder holding model.onnx and test_data_set_<k>/ folders of
// input_<i>.pb / output_<i>.pb. Each one is classified before anything runs:
// applicable (every op it uses, subgraphs included, is registered for the
// model's opset), excluded (named in the exclusion file with a reason), or not
// applicable (naming the ops or opsets LoKA lacks, or the types it cannot hold:
// string, int4/int2, FP4, E8M0, sequence, optional). Only applicable cases run;
// every other one is counted and reported, never dropped silently.
// ============================================================================
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "loka/status.h"
#include "loka/tensor.h"

namespace loka::conformance {

enum class CaseKind {
  kApplicable,     ///< every op registered at the model's opset: runs
  kExcluded,       ///< applicable but listed in the exclusion file: reported with its reason
  kUnsupportedOp,   ///< not applicable: uses an op (or opset of one) LoKA does not register
  kUnsupportedType, ///< not applicable: uses a type LoKA cannot hold (string, int4, sequence, ...)
};

struct NodeCase {
  std::string name;                ///< the folder name, "test_abs"
  std::string source;              ///< which data it came from ("debian", "wheel")
  std::filesystem::path folder;
  CaseKind kind = CaseKind::kUnsupportedOp;
  std::string reason = {};                     ///< exclusion reason, or what LoKA lacks
  std::vector<std::string> missing_ops = {};   ///< for kUnsupportedOp: "Op" or "Op@opset"
  std::vector<std::string> missing_types = {}; ///< for kUnsupportedType: "INT4", "sequence", ...
};

/// Exclusions read from a file of "<test_name> <reason...>" lines ('#' starts a comment).
struct ExclusionList {
  std::map<std::string, std::string> reasons;  ///< test name -> one-line reason
};
/// Reads the exclusion file; an entry without a reason or a name given twice is an error.
Result<ExclusionList> read_exclusions(const std::filesystem::path& path);

/// Classifies every node test folder under `root` (sorted by name), reading each model.onnx
/// for its op types. A model that cannot be read is applicable, so running it fails by name.
Result<std::vector<NodeCase>> discover_cases(const std::filesystem::path& root, const std::string& source,
                                             const ExclusionList& exclusions);

/// Compares one output with onnx's backend-runner tolerances: floats within
/// |got - want| <= atol + rtol * |want| (NaN matches NaN, infinities match exactly),
/// integers, bools and FP8 codes exactly (any NaN code matches any NaN code).
/// Returns an empty string on a match, else what differs (first mismatches listed).
std::string compare_output(const std::string& name, const Tensor& got, const Tensor& want, double rtol = 1e-3,
                           double atol = 1e-5);

/// Loads the case's model, runs every data set through a Session and compares all
/// outputs. Returns an empty string when everything matches, else the reasons.
std::string run_case(const NodeCase& node_case);

}  // namespace loka::conformance
