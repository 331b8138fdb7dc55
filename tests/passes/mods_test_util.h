// ============================================================================
// tests/passes/mods_test_util.h — what the Mods tests share: running a
// pipeline that includes the Mods passes, running an IR graph on the CPU
// runtime, comparing two graphs on a data directory, probing a graph, and the
// zoo models.
//
// The Mods passes are registered here, on top of the built-in registry, so the
// tests do not depend on where passes/pipelines.cc places them.
// ============================================================================
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <utility>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loka/status.h"
#include "loka/tensor.h"
#include "passes/ir/graph.h"
#include "passes/pass_manager.h"

namespace loka::testing {

/// `text` parsed and printed back (the canonical form golden tests compare), or "parse error: ...".
std::string canonical_ir(const std::string& text);

/// The built-in passes plus canonicalize, center-norm-weights, migrate-outliers and fuse-layernorm-quant.
const PassRegistry& mods_registry();

/// Parses `pipeline` against mods_registry() and runs it on `graph` (verifier between passes).
Result<std::vector<PassRunRecord>> run_pipeline(ir::Graph& graph, const std::string& pipeline,
                                                const CompileSettings& settings = {});

/// Exports `graph` and runs it once on the CPU runtime.
Result<std::vector<Tensor>> run_graph(const ir::Graph& graph, const std::vector<Tensor>& inputs);

/// Largest |a - b| over every output of the two graphs, over the first `max_sets`
/// data sets of `data` (inputs matched by name).
Result<float> max_output_difference_on_data(const ir::Graph& a, const ir::Graph& b, const std::filesystem::path& data,
                                    size_t max_sets);

/// Expects `lower_to_qdq` (--format qdq) to turn `fused` into standard ops only, computing its
/// outputs within 1e-5 on the first data set of `data`.
void expect_qdq_lowering_computes_the_same(const ir::Graph& fused, const std::filesystem::path& data);

/// Runs infer-shapes and probe{options} with --calib `calib` and `budget`; the annotation document.
Result<nlohmann::json> probe_graph(ir::Graph& graph, const std::filesystem::path& calib, const std::string& options,
                                   const std::string& budget);

/// The top-level zoo models (models/zoo/<name>/model.onnx with calib/ and eval/), sorted.
std::vector<std::string> zoo_model_names();
/// The planted Gemm of the Probe and centring tests: W1 [16,32] and b1 [32], and with
/// `common_mode` every row k of W1 carries +a_k on all outputs and b1 +25 — a common
/// mode a following LayerNorm removes exactly in FP32 but FP8 error scales with.
std::pair<Tensor, Tensor> planted_gemm_weights(std::mt19937& rng, bool common_mode);
/// Pooled mean logloss of `graph`'s first output over the labelled data sets in `eval`.
Result<double> eval_logloss(const ir::Graph& graph, const std::filesystem::path& eval);
struct LoglossDrift {
  double fp32 = 0, fp8 = 0;
  double relative_drift = 0;  ///< |fp8 - fp32| / fp32
};
/// Eval logloss of the FP32 `reference` and the rewritten `graph`, and their relative drift.
Result<LoglossDrift> eval_logloss_drift(const ir::Graph& reference, const ir::Graph& graph,
                                        const std::filesystem::path& eval);

/// Builds a chain of layers on one input x[batch, features]: each call appends
/// a node reading the previous output, named as given, with fresh initializers.
class ChainBuilder {
 public:
  explicit ChainBuilder(int64_t features);
  /// Gemm(previous, w, b) (`bias` may be undefined: no C input).
  ChainBuilder& gemm(const std::string& name, const Tensor& w, const Tensor& bias = Tensor());
  /// LayerNormalization(previous, gamma, beta) over the last axis.
  ChainBuilder& layer_norm(const std::string& name, const Tensor& gamma, const Tensor& beta);
  /// The graph, with the last output as its output.
  std::unique_ptr<ir::Graph> finish();

 private:
  std::unique_ptr<ir::Graph> graph_;
  ir::Value* last_ = nullptr;
};

/// Zoo model `name` imported and brought to the form Mods run on ("canonicalize,infer-shapes").
Result<std::unique_ptr<ir::Graph>> load_zoo_model(const std::string& name);

/// A data directory of `batches` test_data_set_<k>/input_0.pb files, input `name` uniform in [-1, 1).
std::filesystem::path write_random_inputs(std::mt19937& rng, const std::string& name, const Shape& batch_shape,
                                          int batches);

/// What a fusion pass did to one IR text: the printed result (annotations removed), whether it
/// changed, its statistics and annotations, and the graph before and after.
struct Fusion {
  std::string printed;
  bool changed = false;
  std::map<std::string, double> statistics;
  nlohmann::json annotations;
  std::unique_ptr<ir::Graph> before, after;
};

/// An IR text list of `count` E4M3 codes cycling through a few small values ("[0x38, 0x40, ...]"),
/// for the FP8 weights of golden IR tests.
std::string e4m3_codes_ir(int64_t count);
/// An IR text list of `count` ones ("[1, 1, ...]").
std::string ones_ir(int64_t count);
/// FP8 E4M3FN weight codes [n, k] of values uniform in [-3, 3).
Tensor random_e4m3_weight(std::mt19937& rng, int64_t n, int64_t k);

/// Parses `input` and runs `pass` then infer-shapes (which checks the rewrite against the type
/// rules); failures are test failures.
Fusion apply_fusion(const std::string& input, const std::string& pass);

/// Expects `pass` to leave `input` as it was (printed canonically).
void expect_fusion_unchanged(const std::string& input, const std::string& pass);

}  // namespace loka::testing
