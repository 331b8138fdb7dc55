// ============================================================================
// passes/dispatch/dispatch_pass.cc — `dispatch`: choosing, budgeting and
// recording kernels per GEMM node and bucket.
// ============================================================================
#include "passes/dispatch/dispatch_pass.h"

#include <algorithm>
#include <chrono>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

#include "kernels/registry/kernel_plan.h"
#include "passes/dispatch/budget_use.h"
#include "passes/dispatch/calibration_errors.h"
#include "passes/dispatch/gemm_problems.h"
#include "passes/dispatch/gpu_timer.h"
#include "passes/dispatch/norm_problems.h"
#include "passes/dispatch/perf_db.h"
#include "passes/ir/graph_algorithms.h"
#include "passes/probe/annotations.h"
#include "passes/probe/budget.h"
#include "passes/probe/probe_model.h"
#include "passes/probe/sites.h"

namespace loka {
namespace dispatch {
namespace {

using nlohmann::json;
using kernels::GemmPrecision;

constexpr double kInfinity = std::numeric_limits<double>::infinity();  ///< a candidate not allowed
/// Errors within this factor of the node's reference error are the same error
/// (cuBLASLt algorithms differ in summation order only).
constexpr double kSameErrorFactor = 1.05;
/// FP32 summation-order differences stay far below this relative error.
constexpr double kExactError = 1e-5;

/// The metric's field in a Probe error object.
const char* error_field(probe::BudgetMetric metric) {
  switch (metric) {
    case probe::BudgetMetric::kRelL2: return "rel_l2_mean";
    case probe::BudgetMetric::kMaxAbs: return "max_abs";
    case probe::BudgetMetric::kLogloss: return "logloss_expected_mean";
  }
  return "rel_l2_mean";
}

std::optional<double> error_value(const json& error, const char* field) {
  if (!error.is_object() || !error.contains(field) || !error[field].is_number()) return std::nullopt;
  const double value = error[field].get<double>();
  return std::isfinite(value) && value >= 0 ? std::optional<double>(value) : std::nullopt;
}

/// A node's FP8 model error and the recipe it was measured with.
struct SiteError {
  double value = 0;
  std::string recipe;
};

/// The node's FP8 model error: its recipe's for a QuantizedGemm, the smallest
/// measured recipe's for a node that stayed FP32; nothing when unmeasured.
std::optional<SiteError> site_fp8_error(const json& annotation, bool quantized, probe::BudgetMetric metric) {
  if (!annotation.is_object()) return std::nullopt;
  const char* field = error_field(metric);
  if (quantized) {
    const std::optional<double> value = error_value(annotation.value("error", json()), field);
    return value ? std::optional<SiteError>(SiteError{*value, annotation.value("recipe", "")}) : std::nullopt;
  }
  std::optional<SiteError> best;
  if (annotation.contains("recipes") && annotation["recipes"].is_object())
    for (const auto& [name, recipe] : annotation["recipes"].items())
      if (auto value = error_value(recipe.value("error", json()), field); value && (!best || *value < best->value))
        best = SiteError{*value, name};
  return best;
}

/// One candidate at one bucket, with the model error it would add.
struct Option {
  CandidateTiming timing;
  size_t order = 0;     ///< registry position (ties in time go to the earlier)
  double extra = 0;     ///< added model error; kInfinity when not allowed
};

struct NodeWork {
  GemmProblem problem;
  std::string name;
  std::vector<std::vector<Option>> buckets;  ///< options per bucket
  double granted = 0;                        ///< options with added error up to this are allowed
  double upgrade_extra = 0;                  ///< the added model error granted (0: free choices only)
};

/// The fastest option allowed (`extra` within `max_extra`); ties by registry order.
const Option* fastest(const std::vector<Option>& options, double max_extra, const Option* excluding = nullptr) {
  const Option* best = nullptr;
  for (const Option& o : options) {
    if (&o == excluding || o.extra > max_extra) continue;
    if (!best || o.timing.time_us < best->timing.time_us ||
        (o.timing.time_us == best->timing.time_us && o.order < best->order))
      best = &o;
  }
  return best;
}

/// The GEMM error of `o`'s arithmetic on the node's calibration inputs: its family's measured
/// error, times how far the candidate's synthetic error exceeds its family's best (an algorithm
/// that sums differently). Nothing for a family not measured there.
std::optional<double> calibrated_gemm_error(const Option& o, const std::vector<Option>& options,
                                            const FamilyErrors& calibration) {
  const GemmPrecision p = o.timing.candidate.precision;
  const double family = p == GemmPrecision::kBf16 ? calibration.bf16 : p == GemmPrecision::kTf32 ? calibration.tf32
                                                                                                   : kInfinity;
  if (!std::isfinite(family) || o.timing.candidate.fast_accum) return std::nullopt;
  double best = kInfinity;
  for (const Option& other : options)
    if (other.timing.candidate.precision == p && !other.timing.candidate.fast_accum)
      best = std::min(best, other.timing.rel_error);
  const double spread = best > 0 && std::isfinite(best) ? std::max(1.0, o.timing.rel_error / best) : 1.0;
  return family * spread;
}

/// Fills every option's added error for one node (`calibration`: its GEMM errors measured on its
/// calibration inputs, when there are any; they take the place of the synthetic ratio).
void price_options(NodeWork& work, const json& annotation, const BudgetUse& budget,
                   const FamilyErrors* calibration) {
  const bool quantized = work.problem.key.weight == DType::kFloat8E4M3FN;
  const std::string precision = annotation.is_object() ? annotation.value("precision", "") : "";
  const bool pinned = annotation.is_object() && annotation.contains("pinned_by");
  const bool pinned_fp32 = pinned && precision == "fp32";
  const bool pinned_bf16 = precision == "bf16" && !quantized;
  const std::optional<SiteError> measured_error =
      budget.known ? site_fp8_error(annotation, quantized, budget.metric) : std::nullopt;
  const bool have_site_error = measured_error.has_value();
  const double site_error = measured_error ? measured_error->value : 0.0;
  const bool calibrated =
      !quantized && calibration != nullptr && std::isfinite(calibration->fp8) && calibration->fp8 > 0;
  for (std::vector<Option>& options : work.buckets) {
    // The GEMM error of the node's own arithmetic (its FP8 recipe, or FP32) and of FP8 here.
    double fp8_ref = kInfinity;
    for (const Option& o : options)
      if ((o.timing.candidate.precision == GemmPrecision::kFp8E4M3 && !o.timing.candidate.fast_accum) ||
          o.timing.candidate.precision == GemmPrecision::kFp8Emulated)
        fp8_ref = std::min(fp8_ref, o.timing.rel_error);
    if (!quantized || !std::isfinite(fp8_ref) || fp8_ref <= 0) {
      kernels::GemmCandidate fp8;
      fp8.precision = GemmPrecision::kFp8E4M3;
      fp8_ref = quantized && std::isfinite(fp8_ref) && fp8_ref > 0 ? fp8_ref : expected_rel_error(fp8, work.problem.key);
    }
    const double own = quantized ? fp8_ref : 0.0;
    const double own_model = quantized ? site_error : 0.0;
    for (Option& o : options) {
      const GemmPrecision p = o.timing.candidate.precision;
      if (pinned_bf16) {  // the user asked for BF16 arithmetic
        o.extra = p == GemmPrecision::kBf16 ? 0.0 : kInfinity;
        continue;
      }
      if (o.timing.rel_error <= std::max(own * kSameErrorFactor, kExactError)) {
        o.extra = 0;
        continue;
      }
      if (!have_site_error || pinned_fp32) {
        o.extra = kInfinity;
        continue;
      }
      const std::optional<double> on_calibration =
          calibrated ? calibrated_gemm_error(o, options, *calibration) : std::nullopt;
      const double scale = on_calibration ? *on_calibration / calibration->fp8 : o.timing.rel_error / fp8_ref;
      const double model = site_error * (budget.metric == probe::BudgetMetric::kLogloss ? scale * scale : scale);
      o.extra = std::max(0.0, model - own_model);
    }
    // A pinned-bf16 node without a BF16 candidate keeps its exact ones.
    if (pinned_bf16 && std::none_of(options.begin(), options.end(), [](const Option& o) { return o.extra == 0; }))
      for (Option& o : options) o.extra = o.timing.rel_error <= kExactError ? 0.0 : kInfinity;
  }
}

/// One upgrade step of a node: allowing options with added error up to `limit`
/// saves `saved` µs (summed over buckets) against its free choices and spends
/// `extra` (the largest added error among the options then chosen).
struct Level {
  double limit = 0, extra = 0, saved = 0;
};

/// The node's upgrade levels, by growing limit; a level saving no more than a
/// cheaper one is dropped. Typically TF32, then BF16 (then FP8 FAST_ACCUM).
std::vector<Level> upgrade_levels(const NodeWork& work) {
  std::vector<double> limits;
  for (const std::vector<Option>& options : work.buckets)
    for (const Option& o : options)
      if (o.extra > 0 && std::isfinite(o.extra)) limits.push_back(o.extra);
  std::sort(limits.begin(), limits.end());
  limits.erase(std::unique(limits.begin(), limits.end()), limits.end());
  std::vector<Level> levels;
  for (double limit : limits) {
    Level level{limit, 0, 0};
    for (const std::vector<Option>& options : work.buckets) {
      const Option* base = fastest(options, 0.0);
      const Option* up = fastest(options, limit);
      if (!base || !up) continue;
      level.saved += base->timing.time_us - up->timing.time_us;
      level.extra = std::max(level.extra, up->extra);
    }
    if (level.saved > 0 && level.extra > 0 && (levels.empty() || level.saved > levels.back().saved))
      levels.push_back(level);
  }
  return levels;
}

/// Grants error-adding options greedily by time saved per unit of added error:
/// each step takes the node and level with the best marginal ratio (a node may
/// step up again later, e.g. TF32 then BF16) whose added error still fits
/// `headroom`. Ties go to the earlier node (topological order), then the lower level.
double grant_upgrades(std::vector<NodeWork>& nodes, double headroom) {
  std::vector<std::vector<Level>> levels;
  for (const NodeWork& work : nodes) levels.push_back(upgrade_levels(work));
  std::vector<const Level*> at(nodes.size(), nullptr);  ///< the level granted so far
  const Level none{};
  double used = 0;
  while (true) {
    size_t best_node = nodes.size();
    const Level* best_level = nullptr;
    double best_ratio = -1, best_extra = 0;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Level& current = at[i] ? *at[i] : none;
      for (const Level& level : levels[i]) {
        if (level.limit <= current.limit) continue;
        const double extra = level.extra - current.extra, saved = level.saved - current.saved;
        if (saved <= 0 || used + extra > headroom) continue;
        const double ratio = extra > 0 ? saved / extra : std::numeric_limits<double>::infinity();
        if (ratio > best_ratio) {
          best_node = i;
          best_level = &level;
          best_ratio = ratio;
          best_extra = extra;
        }
      }
    }
    if (best_level == nullptr) break;
    used += best_extra;
    at[best_node] = best_level;
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!at[i]) continue;
    nodes[i].granted = at[i]->limit;
    nodes[i].upgrade_extra = at[i]->extra;
  }
  return used;
}

json rounded(double value) {
  // Times are recorded to 0.001 µs: enough to rank, stable to print.
  return std::round(value * 1000.0) / 1000.0;
}

/// One bucket's choice as a node's annotation records it.
struct ChoiceRecord {
  std::string kernel;
  double time_us = 0;
  const char* precision = "";
  double rel_error = 0;
  std::string shape;
  size_t candidates = 0;
  std::optional<std::pair<std::string, double>> runner_up;  ///< name and time
};

/// Adds the choice to `per_bucket` and, at the reference bucket, as the node's "kernel".
void record_choice(json& annotation, json& per_bucket, int64_t bucket, bool reference, const ChoiceRecord& choice) {
  json entry = {{"kernel", choice.kernel},
                {"time_us", rounded(choice.time_us)},
                {"precision", choice.precision},
                {"rel_error", choice.rel_error},
                {"shape", choice.shape},
                {"candidates", choice.candidates}};
  entry["runner_up"] = choice.runner_up ? json(choice.runner_up->first) : json(nullptr);
  entry["runner_up_time_us"] = choice.runner_up ? rounded(choice.runner_up->second) : json(nullptr);
  if (reference) {
    annotation["kernel"] = choice.kernel;
    annotation["kernel_time_us"] = entry["time_us"];
    annotation["kernel_runner_up"] = entry["runner_up"];
    annotation["kernel_runner_up_time_us"] = entry["runner_up_time_us"];
    annotation["kernel_precision"] = entry["precision"];
  }
  per_bucket[std::to_string(bucket)] = std::move(entry);
}

/// The fastest norm timing whose error matches LoKA's kernel's (norm candidates trade no
/// precision: they differ in summation order only); ties by registry order. `excluding` skips one.
const NormTiming* fastest_norm(const std::vector<NormTiming>& timings, const NormTiming* excluding = nullptr) {
  double own = kInfinity;
  for (const NormTiming& t : timings)
    if (t.candidate.library == kernels::NormLibrary::kLoka) own = t.rel_error;
  const double allowed = std::isfinite(own) ? std::max(own * kSameErrorFactor, kExactError) : kExactError;
  const NormTiming* best = nullptr;
  for (const NormTiming& t : timings)
    if (&t != excluding && t.rel_error <= allowed && (!best || t.time_us < best->time_us)) best = &t;
  return best;
}

struct NormCounts {
  size_t dispatched = 0, unsized = 0, cudnn = 0;
};

/// Chooses every norm node's kernel per bucket, recording it in `nodes` and `plan`.
Result<NormCounts> dispatch_norms(const std::vector<ir::Node*>& order, NormTimer& timer, const DispatchOptions& options,
                                  int64_t reference, json& nodes, kernels::KernelPlan& plan) {
  NormCounts counts;
  for (const ir::Node* node : order) {
    std::optional<NormProblem> problem = describe_norm(*node, options.buckets);
    if (!problem) continue;
    json& annotation = nodes[node->name()];
    if (!annotation.is_object()) annotation = json{{"name", node->name()}, {"op", node->op_type()}};
    if (!problem->reason.empty()) {
      annotation["kernel_reason"] = problem->reason;
      ++counts.unsized;
      continue;
    }
    annotation.erase("kernel_reason");
    json per_bucket = json::object();
    for (const auto& [bucket, shape] : problem->shapes) {
      auto timings = timer.time(problem->key, shape);
      if (!timings)
        return timings.status().with_context("node '" + node->name() + "' (" + problem->key.to_string() + " " +
                                             shape.to_string() + "): ");
      const NormTiming* chosen = fastest_norm(*timings);
      if (!chosen)
        return Status::error("node '" + node->name() + "': no norm kernel ran for " + problem->key.to_string() + " " +
                             shape.to_string());
      const NormTiming* runner_up = fastest_norm(*timings, chosen);
      ChoiceRecord record{chosen->candidate.name(), chosen->time_us, problem->key.fp8_output ? "fp8_e4m3" : "fp32",
                          chosen->rel_error, shape.to_string(), timings->size(), std::nullopt};
      if (runner_up) record.runner_up = std::make_pair(runner_up->candidate.name(), runner_up->time_us);
      record_choice(annotation, per_bucket, bucket, bucket == reference, record);
      plan.nodes[node->name()].push_back({shape.rows, record.kernel});
      counts.cudnn += chosen->candidate.library == kernels::NormLibrary::kCudnn;
    }
    annotation["kernels"] = std::move(per_bucket);
    annotation["kernel_source"] = timer.source();
    annotation["kernel_extra_error"] = 0.0;  // a norm's candidates trade no precision
    ++counts.dispatched;
  }
  return counts;
}

/// The calibration GEMM errors (calibration_errors.h) of every FP32 node an upgrade may be priced
/// for: one with a Probe-measured FP8 error and its statistics, not pinned. Each is recorded in
/// the node's annotation as "calibration_errors". None without --calib data or upgrades.
Result<ErrorsByNode> measure_upgrade_errors(const ir::Graph& graph, PassContext& context,
                                            const std::vector<NodeWork>& works, json& nodes, const BudgetUse& budget,
                                            const DispatchOptions& options) {
  const std::filesystem::path& data = context.settings().calibration_data;
  if (!options.upgrades || !budget.known || options.calibration_rows <= 0 || data.empty()) return ErrorsByNode{};
  std::vector<CalibrationGemm> gemms;
  std::map<std::string, std::string> recipes;
  for (const NodeWork& work : works) {
    if (work.problem.key.weight != DType::kFloat32 || work.problem.node == nullptr) continue;
    const json& annotation = nodes[work.name];
    if (annotation.contains("pinned_by")) continue;  // pinned nodes are granted nothing
    const std::optional<SiteError> site = site_fp8_error(annotation, false, budget.metric);
    if (!site) continue;
    auto kind = parse_fp8_recipe(site->recipe);
    if (!kind) return kind.status().with_context("node '" + work.name + "': ");
    probe::Site described;
    described.node = work.name;
    described.kind =
        work.problem.key.constant_weight ? probe::SiteKind::kWeightGemm : probe::SiteKind::kActivationMatMul;
    auto scales = probe::scales_from_annotation(described, annotation);
    if (!scales) continue;  // no Probe statistics: the synthetic ratio prices it
    const bool e5m2 = *kind == Fp8RecipeSpec::Kind::kE5M2Tensor;
    gemms.push_back({work.problem.node, work.problem.key.layout,
                     Fp8RecipeSpec{*kind, !work.problem.key.constant_weight, e5m2 ? scales->e5m2_a : scales->a,
                                   e5m2 ? scales->e5m2_b : scales->b}});
    recipes[work.name] = site->recipe;
  }
  if (gemms.empty()) return ErrorsByNode{};
  LOKA_ASSIGN_OR_RETURN(const DataSetReader reader, DataSetReader::open(data));
  const auto started = std::chrono::steady_clock::now();
  CalibrationErrorOptions measure;
  measure.max_rows = options.calibration_rows;
  LOKA_ASSIGN_OR_RETURN(auto errors, measure_calibration_errors(graph, gemms, reader, measure));
  context.add_statistic("calibration-error-seconds",
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  context.add_statistic("calibration-error-nodes", static_cast<double>(errors.size()));
  for (const auto& [name, measured] : errors)
    nodes[name]["calibration_errors"] = {{"rows", measured.rows},          {"fp8_recipe", recipes[name]},
                                         {"fp8", measured.fp8},            {"bf16", measured.bf16},
                                         {"tf32", measured.tf32}};
  return errors;
}

}  // namespace

Result<std::vector<int64_t>> parse_buckets(const std::string& text) {
  std::vector<int64_t> buckets;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find_first_of(":,", start);
    if (end == std::string::npos) end = text.size();
    int64_t value = 0;
    const auto [stop, error] = std::from_chars(text.data() + start, text.data() + end, value);
    if (error != std::errc() || stop != text.data() + end || value <= 0 || (!buckets.empty() && value <= buckets.back()))
      return Status::error("option buckets='" + text + "': expected ascending positive batch sizes, e.g. 512:4096:16384");
    buckets.push_back(value);
    start = end + 1;
  }
  return buckets;
}

Result<bool> dispatch_kernels(ir::Graph& graph, PassContext& context, GemmTimer& timer, NormTimer& norm_timer,
                              const DispatchOptions& options) {
  if (options.buckets.empty()) return Status::error("dispatch needs at least one batch bucket");
  LOKA_ASSIGN_OR_RETURN(json document, read_annotations(graph));
  const std::string before = document.dump();
  LOKA_ASSIGN_OR_RETURN(const BudgetUse budget, budget_use(document));
  LOKA_ASSIGN_OR_RETURN(const std::vector<ir::Node*> order, ir::topological_order(graph));
  const int64_t reference = std::find(options.buckets.begin(), options.buckets.end(), options.reference_bucket) !=
                                    options.buckets.end()
                                ? options.reference_bucket
                                : options.buckets.back();

  json& nodes = document["nodes"];
  std::vector<NodeWork> works;
  size_t unsized = 0;
  for (const ir::Node* node : order) {
    std::optional<GemmProblem> problem = describe_gemm(*node, options.buckets);
    if (!problem) continue;
    json& annotation = nodes[node->name()];
    if (!annotation.is_object()) annotation = json{{"name", node->name()}, {"op", node->op_type()}};
    if (!problem->reason.empty()) {
      annotation["kernel_reason"] = problem->reason;
      ++unsized;
      continue;
    }
    NodeWork work;
    work.problem = std::move(*problem);
    work.name = node->name();
    for (const auto& [bucket, shape] : work.problem.shapes) {
      auto timings = timer.time(work.problem.key, shape);
      if (!timings)
        return timings.status().with_context("node '" + node->name() + "' (" + work.problem.key.to_string() + " " +
                                             shape.to_string() + "): ");
      if (timings->empty())
        return Status::error("node '" + node->name() + "': no kernel candidate for " + work.problem.key.to_string() +
                             " " + shape.to_string());
      std::vector<Option> opts;
      for (size_t i = 0; i < timings->size(); ++i) opts.push_back(Option{(*timings)[i], i, 0});
      work.buckets.push_back(std::move(opts));
    }
    works.push_back(std::move(work));
  }
  LOKA_ASSIGN_OR_RETURN(const auto calibration, measure_upgrade_errors(graph, context, works, nodes, budget, options));
  for (NodeWork& work : works) {
    const auto measured = calibration.find(work.name);
    price_options(work, nodes[work.name], budget, measured == calibration.end() ? nullptr : &measured->second);
  }
  const double used = grant_upgrades(works, options.upgrades ? budget.headroom() : 0.0);

  kernels::KernelPlan plan;
  plan.device = timer.device();
  std::map<std::string, double> precision_counts;
  for (const NodeWork& work : works) {
    json& annotation = nodes[work.name];
    annotation.erase("kernel_reason");
    const double max_extra = work.granted;
    json per_bucket = json::object();
    std::vector<std::string> attribute;
    for (size_t b = 0; b < work.buckets.size(); ++b) {
      const auto& [bucket, shape] = work.problem.shapes[b];
      const Option* chosen = fastest(work.buckets[b], max_extra);
      if (!chosen) return Status::error("node '" + work.name + "': no allowed kernel at batch " + std::to_string(bucket));
      const Option* runner_up = fastest(work.buckets[b], max_extra, chosen);
      const std::string name = chosen->timing.candidate.name();
      ChoiceRecord record{name, chosen->timing.time_us, kernels::precision_name(chosen->timing.candidate.precision),
                          chosen->timing.rel_error, shape.to_string(), work.buckets[b].size(), std::nullopt};
      if (runner_up) record.runner_up = std::make_pair(runner_up->timing.candidate.name(), runner_up->timing.time_us);
      record_choice(annotation, per_bucket, bucket, bucket == reference, record);
      plan.nodes[work.name].push_back({shape.rows(), name});
      attribute.push_back(std::to_string(shape.rows()) + ":" + name);
      precision_counts[kernels::precision_name(chosen->timing.candidate.precision)] += 1;
    }
    annotation["kernels"] = std::move(per_bucket);
    annotation["kernel_source"] = timer.source();
    annotation["kernel_extra_error"] = work.upgrade_extra;
    ir::Node* node = graph.find_node(work.name);
    if (node && node->domain() == "ai.loka") node->mutable_attributes().set("kernel", attribute);
  }

  LOKA_ASSIGN_OR_RETURN(const NormCounts norms, dispatch_norms(order, norm_timer, options, reference, nodes, plan));

  json summary = {{"device", timer.device()},
                  {"source", timer.source()},
                  {"buckets", options.buckets},
                  {"reference_bucket", reference},
                  {"gemm_nodes", works.size() + unsized},
                  {"dispatched_nodes", works.size()},
                  {"norm_nodes", norms.dispatched + norms.unsized},
                  {"dispatched_norm_nodes", norms.dispatched},
                  {"budget_known", budget.known},
                  {"headroom", budget.headroom()},
                  {"extra_error", used}};
  if (budget.known) {
    summary["budget"] = document["model"]["precision"]["budget"];
    summary["headroom_from"] = budget.measured ? "measured selection: the reserve" : "prediction";
    if (budget.storage_error > 0) summary["storage_error"] = budget.storage_error;  // store-tables-bf16's
    summary["predicted_error"] = budget.spent() + used;
    summary["within_budget"] = budget.spent() + used <= budget.limit;
  }
  document["model"]["dispatch"] = std::move(summary);
  context.add_statistic("gemm-nodes", static_cast<double>(works.size() + unsized));
  context.add_statistic("dispatched-nodes", static_cast<double>(works.size()));
  context.add_statistic("unsized-nodes", static_cast<double>(unsized));
  for (const auto& [precision, count] : precision_counts) context.add_statistic(precision + "-choices", count);
  context.add_statistic("budget-upgrades",
                        static_cast<double>(std::count_if(works.begin(), works.end(), [](const NodeWork& w) { return w.granted > 0; })));
  context.add_statistic("extra-error", used);
  context.add_statistic("norm-nodes", static_cast<double>(norms.dispatched + norms.unsized));
  context.add_statistic("cudnn-norm-choices", static_cast<double>(norms.cudnn));

  const std::string plan_text = plan.to_text();
  const bool plan_changed = graph.metadata[kernels::kKernelPlanKey] != plan_text;
  graph.metadata[kernels::kKernelPlanKey] = plan_text;
  if (document.dump() == before && !plan_changed) return false;
  write_annotations(graph, document);
  return true;
}

}  // namespace dispatch

namespace {

class DispatchPass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    dispatch::DispatchOptions options;
    LOKA_ASSIGN_OR_RETURN(options.buckets, dispatch::parse_buckets(context.string_option("buckets")));
    options.reference_bucket = context.int_option("reference_bucket");
    options.upgrades = context.bool_option("upgrades");
    options.calibration_rows = context.int_option("calibration_rows");
    if (options.calibration_rows < 0)
      return Status::error("dispatch option calibration_rows must be >= 0, got " +
                           std::to_string(options.calibration_rows));
    // auto: the kernels are for this machine's GPU when it has one (loka-opt's --device says
    // where the model is checked, not which GPU the engine targets).
    LOKA_ASSIGN_OR_RETURN(const bool use_gpu, dispatch::resolve_device_option(context.string_option("device")));
    if (!use_gpu) {
      auto timer = dispatch::make_cost_model_timer();
      auto norm_timer = dispatch::make_cost_model_norm_timer();
      return dispatch::dispatch_kernels(graph, context, *timer, *norm_timer, options);
    }
    const std::string db_option = context.string_option("perf_db");
    const std::filesystem::path db_path = db_option.empty() ? dispatch::default_perf_db_path() : std::filesystem::path(db_option);
    LOKA_ASSIGN_OR_RETURN(dispatch::PerfDb db, dispatch::PerfDb::load(db_path));
    dispatch::PerfDbUse use;
    dispatch::GpuTimerOptions gpu;
    gpu.max_algorithms = static_cast<int>(context.int_option("algorithms"));
    gpu.fast_accum = context.bool_option("fast_accum");
    gpu.repeats = static_cast<int>(context.int_option("repeats"));
    gpu.cudnn_engines = static_cast<int>(context.int_option("cudnn"));
    if (gpu.cudnn_engines < 0) return Status::error("dispatch option cudnn must be >= 0, got " + std::to_string(gpu.cudnn_engines));
    gpu.cudnn_norm_engines = static_cast<int>(context.int_option("cudnn_norm"));
    if (gpu.cudnn_norm_engines < 0)
      return Status::error("dispatch option cudnn_norm must be >= 0, got " + std::to_string(gpu.cudnn_norm_engines));
    LOKA_ASSIGN_OR_RETURN(auto timer, dispatch::make_gpu_timer(db, use, gpu));
    LOKA_ASSIGN_OR_RETURN(auto norm_timer, dispatch::make_gpu_norm_timer(db, use, gpu));
    const size_t before = db.size();
    auto changed = dispatch::dispatch_kernels(graph, context, *timer, *norm_timer, options);
    // Save what was measured even when a later node failed: the time is spent.
    if (db.size() != before) LOKA_RETURN_IF_ERROR(db.save(db_path));
    LOKA_RETURN_IF_ERROR(changed.status());
    context.add_statistic("perf-db-hits", static_cast<double>(use.hits));
    context.add_statistic("tuned-problems", static_cast<double>(use.tuned));
    context.add_statistic("timing-lock-waits", static_cast<double>(use.timing_waits));
    if (use.foreign > 0) {
      LOKA_ASSIGN_OR_RETURN(const dispatch::DeviceFingerprint here, dispatch::gpu_fingerprint());
      std::string others;
      for (const dispatch::DeviceFingerprint& other : db.other_devices(here))
        others += (others.empty() ? "" : "; ") + other.to_string();
      std::fprintf(stderr,
                   "dispatch: perf DB %s: %zu problem(s) were measured on another GPU or library version (%s), not "
                   "this one (%s): ignored and re-tuned\n",
                   db_path.string().c_str(), use.foreign, others.c_str(), here.to_string().c_str());
    }
    return changed;
  }
};

}  // namespace

PassInfo dispatch_pass_info() {
  return PassInfo{
      "dispatch",
      "choose each GEMM node's kernel per batch bucket: fastest candidate within the accuracy budget (GPU-measured "
      "through the perf DB, or the cost model)",
      {{"device", OptionType::kString, "auto",
        "where times come from: cuda (autotune on this GPU, perf DB), cpu (the cost model), auto (cuda when a GPU "
        "is usable in this build, else cpu)",
        {"auto", "cpu", "cuda"}},
       {"perf_db", OptionType::kString, "",
        "perf DB file (default: $LOKA_PERF_DB, else ~/.cache/loka/perfdb.json)"},
       {"buckets", OptionType::kString, "512:4096:16384",
        "batch buckets to choose kernels for, ':'-separated (a ',' would end the option in a pipeline string)"},
       {"reference_bucket", OptionType::kInt, "4096", "the bucket whose choice is the node's \"kernel\""},
       {"algorithms", OptionType::kInt, "8", "cuBLASLt heuristic algorithms timed per family (GPU only)"},
       {"fast_accum", OptionType::kBool, "false",
        "also offer FP8 FAST_ACCUM variants (GPU only; off by default: their accumulation error is biased, and on "
        "full-size Wukong it moved eval logloss 6x more than the FP8 recipes the budget accounts for)"},
       {"upgrades", OptionType::kBool, "true",
        "spend the budget's headroom on kernels that add error (TF32/BF16 for FP32 nodes); false: error-free "
        "choices only"},
       {"calibration_rows", OptionType::kInt, "256",
        "rows of --calib data on which each FP32 node's TF32, BF16 and FP8 GEMM errors are measured, to price "
        "upgrades (0: the autotuner's synthetic errors alone)"},
       {"repeats", OptionType::kInt, "15", "timed launches per candidate; the median is kept (GPU only)"},
       {"cudnn", OptionType::kInt, "0",
        "cuDNN FP8 matmul graphs timed per FP8 problem: engine configurations 0..N-1 of cuDNN's heuristic (GPU "
        "only; off by default: on an H100 they won 0 of 24 rec-model shapes against cuBLASLt, and each plan "
        "compiles kernels when built, about 1 s). A perf DB answers a problem it holds without timing them: give "
        "such runs their own perf_db"},
       {"cudnn_norm", OptionType::kInt, std::to_string(kernels::kOfferedCudnnNormEngines),
        "cuDNN LayerNorm graphs timed per norm problem against LoKA's kernel: engine configurations 0..N-1 of "
        "cuDNN's heuristic (GPU only; 0: LoKA's kernel only)"}},
      {"gemm-nodes", "dispatched-nodes", "unsized-nodes", "fp32-choices", "tf32-choices", "bf16-choices", "fp8_e4m3-choices",
       "fp8_emulated-choices", "budget-upgrades", "extra-error", "norm-nodes", "cudnn-norm-choices", "perf-db-hits",
       "tuned-problems", "timing-lock-waits", "calibration-error-nodes", "calibration-error-seconds"}};
}

std::unique_ptr<Pass> make_dispatch_pass() { return std::make_unique<DispatchPass>(); }

}  // namespace loka
