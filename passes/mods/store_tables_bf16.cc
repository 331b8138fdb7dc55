// ============================================================================
// passes/mods/store_tables_bf16.cc — `store-tables-bf16`.
// ============================================================================
#include "passes/mods/store_tables_bf16.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/cpu/parallel_rows.h"
#include "loka/bfloat16.h"
#include "loka/test_data.h"
#include "passes/dispatch/budget_use.h"
#include "passes/dispatch/gpu_timer.h"
#include "passes/probe/annotations.h"
#include "passes/probe/drawn_labels.h"
#include "passes/probe/metrics.h"
#include "passes/probe/tapped_run.h"

namespace loka {
namespace {

using nlohmann::json;

/// One float32 table (initializer) the EmbeddingBags nodes read, with every slot reading it:
/// a table read twice is stored once.
struct TableCandidate {
  ir::Value* fp32 = nullptr;
  ir::Value* bf16 = nullptr;                          ///< its BF16 copy, while trials run
  std::vector<std::pair<ir::Node*, size_t>> slots;    ///< (EmbeddingBags node, input index)
  std::vector<std::string> lookups;                   ///< the lookup sites it came from (annotation keys)
  double elements = 0;                                ///< the table's (kept: one of the two values goes)
  bool pinned_bf16 = false;
};

/// `table` rounded to BF16 (round to nearest even, NaN kept).
Tensor to_bf16(const Tensor& table) {
  Tensor out = Tensor::zeros(DType::kBFloat16, table.shape());
  const float* in = table.data<float>();
  auto* codes = out.data<uint16_t>();
  const int64_t count = static_cast<int64_t>(table.element_count());
  cpu::parallel_rows(count, 1 << 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) codes[i] = float_to_bf16(in[i]);
  });
  return out;
}

/// A model's outputs on every calibration set, with the labels a logloss budget judges them by.
struct OutputsOnData {
  std::vector<std::vector<Tensor>> outputs;  ///< per set, every graph output
  /// Per set (logloss only): labels.pb, or drawn from the first output of the model as it stands
  /// (the Probe drew its labels from the FP32 model's: close, not the same).
  std::vector<std::vector<float>> labels;
};

/// Runs `graph` on every calibration set (on `device`); the labels come from `labelled` when given.
Result<OutputsOnData> run_on_calibration(const ir::Graph& graph, const DataSetReader& reader, probe::BudgetMetric metric,
                                         int64_t max_rows, Device device, const OutputsOnData* labelled) {
  std::vector<std::string> names;
  for (const ir::Value* output : graph.outputs()) names.push_back(output->name());
  OutputsOnData result;
  probe::TappedRunOptions options;
  options.model_name = "store-tables-bf16 trial model";
  options.max_rows = max_rows;
  options.device = device;
  const bool draw = probe::first_output_is_probability(graph);
  LOKA_RETURN_IF_ERROR(probe::run_tapped(
      graph, names, reader, reader.size(), options, [&](const probe::TappedBatch& batch) -> Status {
        result.outputs.emplace_back(batch.values.begin(), batch.values.end());
        if (metric != probe::BudgetMetric::kLogloss || labelled) return Status::ok();
        if (batch.data.labels) result.labels.push_back(batch.data.labels->to_floats());
        else if (draw) result.labels.push_back(probe::draw_labels(batch.values[0], probe::drawn_label_seed(batch.index)));
        else return Status::error("calibration data " + batch.data.location.string() + ": no labels.pb for a logloss budget");
        return Status::ok();
      }));
  if (labelled) result.labels = labelled->labels;
  return result;
}

/// How far `test` moves the model from `base` on the calibration data, in the budget's metric,
/// judged as pin-precision judges a measured selection (probe::OutputChange and eval_bound):
///   logloss: the pooled drift relative to base's logloss (the FP8 model's, not FP32's: second
///            order) plus `noise_sigmas` standard deviations of the gap an eval set of
///            `judged_samples` may show;
///   rel_l2:  ‖test − base‖ / ‖base‖ over every float output;
///   max_abs: the largest difference.
/// Infinity where not finite. Added to the selection's own error (noise terms add linearly),
/// this bounds the model's: the triangle inequality.
Result<double> measured_increment(const OutputsOnData& base, const OutputsOnData& test, probe::BudgetMetric metric,
                                  double judged_samples, double noise_sigmas) {
  probe::OutputChange change;
  for (size_t set = 0; set < base.outputs.size(); ++set) {
    const Status added =
        metric == probe::BudgetMetric::kLogloss
            ? (test.outputs[set].empty() || base.outputs[set].empty()
                   ? Status::error("no outputs")
                   : change.add_logloss(probe::logloss_terms(base.outputs[set][0], base.labels[set]),
                                        probe::logloss_terms(test.outputs[set][0], base.labels[set])))
            : change.add_outputs(base.outputs[set], test.outputs[set]);
    if (!added) return Status::error("trial model: " + added.message());
  }
  if (metric == probe::BudgetMetric::kLogloss && change.samples == 0)
    return std::numeric_limits<double>::infinity();  // nothing to judge by: nothing fits
  const double bound =
      probe::eval_bound(change.value(metric), change.sample_noise(metric), change.samples, judged_samples, noise_sigmas);
  return std::isfinite(bound) ? bound : std::numeric_limits<double>::infinity();  // NaN must not fit
}

/// The trials' settings: where they run and how a logloss increment is judged.
struct TrialSettings {
  probe::BudgetMetric metric = probe::BudgetMetric::kRelL2;
  int64_t max_rows = 0;
  Device device = Device::kCpu;
  double judged_samples = 1, noise_sigmas = probe::kDefaultNoiseSigmas;
};

class StoreTablesBf16Pass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    LOKA_ASSIGN_OR_RETURN(json document, read_annotations(graph));
    json& nodes = document["nodes"];
    std::vector<TableCandidate> tables = float_tables(graph, nodes);
    if (tables.empty()) {
      if (!nodes.is_object() || !unclaim_unstored(nodes, {})) return false;
      write_annotations(graph, document);
      return true;
    }
    if (!document.contains("model") || !document["model"].contains("precision"))
      return Status::error("needs pin-precision's annotations (model.precision is missing): run probe and "
                           "pin-precision before store-tables-bf16");
    LOKA_ASSIGN_OR_RETURN(const dispatch::BudgetUse budget, dispatch::budget_use(document));

    // A user's fp32 pin on any of a table's lookups (or an fp8 pin that could not be lowered)
    // keeps it; a bf16 pin stores it whatever it costs; the rest go largest first (the most bytes
    // saved) while the headroom allows.
    // Tables pin-precision's measured selection put in BF16 ("table_storage_by") are stored
    // with no trial: their error is already in its measurement, with the FP8 sites'.
    std::vector<TableCandidate> candidates, open, decided;
    for (TableCandidate& t : tables) {
      // Decided only when pin-precision took every lookup of the table: a table two lookups read
      // is rounded for both, and one of them may have measured over budget.
      bool kept = false, selected = !t.lookups.empty();
      for (const std::string& lookup : t.lookups) {
        const json annotation = nodes.value(lookup, json());  // a copy: no null entry for a lookup without one
        selected &= annotation.is_object() && annotation.value("table_storage_by", "") == "pin-precision";
        if (!annotation.is_object() || !annotation.contains("pinned_by")) continue;
        (annotation.value("precision", "") == "bf16" ? t.pinned_bf16 : kept) = true;
      }
      if (kept) continue;
      (t.pinned_bf16 ? candidates : selected ? decided : open).push_back(std::move(t));
    }

    const size_t pinned = candidates.size();
    std::stable_sort(open.begin(), open.end(),
                     [](const TableCandidate& x, const TableCandidate& y) { return x.elements > y.elements; });
    const std::filesystem::path& calibration = context.settings().calibration_data;
    const bool measurable = !calibration.empty() && budget.known;
    // When pin-precision measured BF16 storage, a table it left FP32 did not fit there, with
    // the noise terms combined as they are; a second trial here would add a bound of its own.
    const bool selection_measured = document["model"]["precision"].contains("bf16_tables");
    const bool noted = (!measurable || selection_measured) && !open.empty();
    if (!measurable) {
      for (const TableCandidate& t : open)
        note(nodes, t, calibration.empty() ? "no calibration data (--calib) to measure BF16 on" : "no known budget");
      open.clear();
    } else if (selection_measured) {
      for (const TableCandidate& t : open) {
        // pin-precision's own reason when it gave one (over budget, evaluation limit); a lookup it
        // took whose table another lookup also reads, and that one was not taken, is undone.
        std::string reason = "BF16 not chosen by pin-precision's measured selection";
        for (const std::string& lookup : t.lookups) {
          json& annotation = nodes[lookup];
          if (!annotation.is_object()) annotation = json{{"name", lookup}};
          if (annotation.contains("storage_reason")) reason = annotation["storage_reason"].get<std::string>();
          if (annotation.value("table_storage_by", "") == "pin-precision") undo_selection(annotation);
        }
        note(nodes, t, reason);
      }
      open.clear();
    }
    candidates.insert(candidates.end(), std::make_move_iterator(open.begin()), std::make_move_iterator(open.end()));
    if (candidates.empty() && decided.empty()) {  // the reasons above are all that changed
      const bool unclaimed = unclaim_unstored(nodes, {});
      if (noted || unclaimed) write_annotations(graph, document);
      return noted || unclaimed;
    }

    TrialSettings trials;
    std::optional<DataSetReader> reader;
    if (measurable) {
      // Everything that can fail before a table is touched: the graph stays as it was on an error.
      LOKA_ASSIGN_OR_RETURN(reader, DataSetReader::open(calibration));
      trials.metric = budget.metric;
      trials.max_rows = context.int_option("max_rows");
      // On the GPU when there is one, as pin-precision measures (the CUDA runtime reads BF16
      // tables too); the CPU runtime otherwise.
      trials.device = dispatch::gpu_unavailable_reason().empty() ? Device::kCuda : Device::kCpu;
      const json probe_summary = document["model"].value("probe", json::object());
      trials.noise_sigmas = probe_summary.value("noise_sigmas", probe::kDefaultNoiseSigmas);
      if (budget.metric == probe::BudgetMetric::kLogloss) {
        trials.judged_samples = probe_summary.value("logloss_judged_samples", 0.0);
        if (!(trials.judged_samples > 0))
          return Status::error("a logloss budget needs the Probe's logloss statistics "
                               "(model.probe.logloss_judged_samples): re-run the probe with labelled calibration data");
      }
    }

    const auto add_bf16_copy = [&](TableCandidate& t) {
      t.bf16 = graph.add_initializer(graph.unique_value_name(t.fp32->name() + ".bf16"), to_bf16(*t.fp32->initializer()));
    };
    for (TableCandidate& t : candidates) add_bf16_copy(t);
    std::vector<bool> chosen(candidates.size(), false);
    std::fill(chosen.begin(), chosen.begin() + static_cast<std::ptrdiff_t>(pinned), true);
    Result<double> spent = measurable && !candidates.empty()
                               ? choose(graph, context, candidates, pinned, *reader, trials, budget, nodes, chosen)
                               : Result<double>(0.0);
    if (!spent) chosen.assign(candidates.size(), false);  // back as it was, then the error
    for (TableCandidate& t : decided) {
      add_bf16_copy(t);
      candidates.push_back(std::move(t));
      chosen.push_back(static_cast<bool>(spent));
    }
    point(graph, candidates, chosen);
    for (size_t i = 0; i < candidates.size(); ++i) {
      ir::Value* unused = chosen[i] ? candidates[i].fp32 : candidates[i].bf16;
      if (!unused->has_uses() && !unused->is_graph_input() && !unused->is_graph_output()) graph.erase_value(unused);
    }
    LOKA_RETURN_IF_ERROR(spent.status());

    std::set<std::string> stored_lookups;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (!chosen[i]) continue;
      for (const std::string& name : candidates[i].lookups) {
        stored_lookups.insert(name);
        json& lookup = nodes[name];
        if (!lookup.is_object()) lookup = json::object();
        lookup["name"] = name;
        lookup["precision"] = "bf16";
        lookup["table_storage"] = "bf16";
        lookup.erase("storage_reason");
        if (i >= pinned && !lookup.contains("table_storage_by"))
          lookup["precision_reason"] = "table stored in BF16 (FP8 over budget; BF16 within the headroom)";
      }
      context.add_statistic("tables-stored-bf16");
      context.add_statistic("bytes-saved", 2 * candidates[i].elements);
    }
    unclaim_unstored(nodes, stored_lookups);
    for (ir::Node* bags : graph.nodes())
      if (bags->is("EmbeddingBags", "ai.loka")) count_formats(*bags, nodes[bags->name()]);
    document["model"]["precision"]["storage_error"] = budget.storage_error + *spent;
    context.add_statistic("storage-error", *spent);
    write_annotations(graph, document);
    return true;
  }

 private:
  /// Every float32 initializer table of an ai.loka::EmbeddingBags, once however many slots read
  /// it, with the lookups it came from (fuse-embedding-bags records them, in table order, as the
  /// node's "from"); a node without that record is noted and left alone.
  static std::vector<TableCandidate> float_tables(const ir::Graph& graph, json& nodes) {
    std::vector<TableCandidate> tables;
    for (ir::Node* node : graph.nodes()) {
      if (!node->is("EmbeddingBags", "ai.loka")) continue;
      const json from = nodes.contains(node->name()) ? nodes[node->name()].value("from", json::array()) : json::array();
      const size_t count = node->inputs().size() / 2;
      if (from.size() != count) {
        if (nodes[node->name()].is_object() || nodes[node->name()].is_null())
          nodes[node->name()]["storage_reason"] = "its annotation does not name its tables' lookups (\"from\")";
        continue;
      }
      for (size_t t = 0; t < count; ++t) {
        ir::Value* table = node->input(1 + 2 * t);
        if (!table || !table->is_initializer() || table->initializer()->dtype() != DType::kFloat32 ||
            table->initializer()->rank() != 2 || !from[t].is_string())
          continue;
        auto same = std::find_if(tables.begin(), tables.end(), [&](const TableCandidate& c) { return c.fp32 == table; });
        if (same == tables.end()) {
          same = tables.emplace(tables.end());
          same->fp32 = table;
          same->elements = static_cast<double>(table->initializer()->element_count());
        }
        same->slots.emplace_back(node, 1 + 2 * t);
        same->lookups.push_back(from[t].get<std::string>());
      }
    }
    return tables;
  }

  /// Points every slot of each candidate at its BF16 copy where `in_bf16`, else at the FP32 table.
  static void point(ir::Graph& graph, const std::vector<TableCandidate>& candidates, const std::vector<bool>& in_bf16) {
    for (size_t i = 0; i < candidates.size(); ++i)
      for (const auto& [node, input] : candidates[i].slots)
        graph.set_input(node, input, in_bf16[i] ? candidates[i].bf16 : candidates[i].fp32);
  }

  /// The trials: which candidates go to BF16 (`chosen`, the pinned first `pinned` already in),
  /// and what the chosen set measured. Everything at once first, one run when it all fits; else
  /// the pins, then one table more at a time, kept when the set with it still fits.
  static Result<double> choose(ir::Graph& graph, PassContext& context, const std::vector<TableCandidate>& candidates,
                               size_t pinned, const DataSetReader& reader, const TrialSettings& trials,
                               const dispatch::BudgetUse& budget, json& nodes, std::vector<bool>& chosen) {
    const auto started = std::chrono::steady_clock::now();
    point(graph, candidates, std::vector<bool>(candidates.size(), false));
    LOKA_ASSIGN_OR_RETURN(const OutputsOnData base,
                          run_on_calibration(graph, reader, trials.metric, trials.max_rows, trials.device, nullptr));
    const auto measure = [&](const std::vector<bool>& in_bf16) -> Result<double> {
      point(graph, candidates, in_bf16);
      context.add_statistic("trial-runs");
      LOKA_ASSIGN_OR_RETURN(const OutputsOnData trial,
                            run_on_calibration(graph, reader, trials.metric, trials.max_rows, trials.device, &base));
      return measured_increment(base, trial, trials.metric, trials.judged_samples, trials.noise_sigmas);
    };
    const std::vector<bool> everything(candidates.size(), true);
    LOKA_ASSIGN_OR_RETURN(double spent, measure(everything));
    if (spent <= budget.headroom() || pinned == candidates.size()) {
      chosen = everything;
    } else {
      spent = 0;
      if (pinned > 0) {
        LOKA_ASSIGN_OR_RETURN(spent, measure(chosen));
      }
      for (size_t i = pinned; i < candidates.size(); ++i) {
        std::vector<bool> trial = chosen;
        trial[i] = true;
        LOKA_ASSIGN_OR_RETURN(const double with, measure(trial));
        if (with > budget.headroom()) {
          char text[128];
          std::snprintf(text, sizeof text, "BF16 over the headroom (measured %.3g > %.3g)", with, budget.headroom());
          note(nodes, candidates[i], text);
          continue;
        }
        chosen = std::move(trial);
        spent = with;
      }
    }
    context.add_statistic("calibration-seconds",
                          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    return spent;
  }

  /// A lookup pin-precision put in BF16 whose table stays FP32: its annotation says FP32 again.
  static void undo_selection(json& lookup) {
    lookup.erase("table_storage");
    lookup.erase("table_storage_by");
    lookup.erase("precision_reason");
    lookup["precision"] = "fp32";
  }

  /// Lookups pin-precision chose whose table no EmbeddingBags reads (a Gather left unfused) keep
  /// their FP32 table, only the fused op reading BF16 ones: their annotations say so. True when
  /// one changed.
  static bool unclaim_unstored(json& nodes, const std::set<std::string>& stored) {
    bool changed = false;
    for (auto& [name, lookup] : nodes.items())
      if (lookup.is_object() && lookup.value("table_storage_by", "") == "pin-precision" &&
          lookup.value("table_storage", "") == "bf16" && !stored.count(name)) {
        undo_selection(lookup);
        lookup["storage_reason"] = "its lookup is not part of an EmbeddingBags, the op that reads BF16 tables";
        changed = true;
      }
    return changed;
  }

  /// Why a table stays FP32, on each of its lookups' annotations.
  static void note(json& nodes, const TableCandidate& t, const std::string& reason) {
    for (const std::string& name : t.lookups) {
      json& lookup = nodes[name];
      if (!lookup.is_object()) lookup = json::object();
      lookup["name"] = name;
      lookup["storage_reason"] = reason;
    }
  }

  /// The fused node's "tables" (how many of its tables each format holds), and its precision
  /// "bf16" when every table is.
  static void count_formats(const ir::Node& bags, json& annotation) {
    size_t fp8 = 0, bf16 = 0, fp32 = 0;
    for (size_t input = 1; input < bags.inputs().size(); input += 2) {
      const ir::Value* table = bags.input(input);
      if (!table) continue;
      const DType dtype = table->type().dtype;
      fp8 += dtype == DType::kFloat8E4M3FN;
      bf16 += dtype == DType::kBFloat16;
      fp32 += dtype == DType::kFloat32;
    }
    if (!annotation.is_object()) return;
    annotation["tables"] = {{"fp8_e4m3", fp8}, {"bf16", bf16}, {"fp32", fp32}};
    if (bf16 > 0 && fp8 == 0 && fp32 == 0) annotation["precision"] = "bf16";
  }
};

}  // namespace

PassInfo store_tables_bf16_pass_info() {
  return PassInfo{"store-tables-bf16",
                  "store the float32 embedding tables of EmbeddingBags in BF16 where the error budget's headroom "
                  "allows (largest first; measured on the calibration data)",
                  {{"max_rows", OptionType::kInt, "0",
                    "rows of each calibration set the trial models run on (0: every row)"}},
                  {"tables-stored-bf16", "bytes-saved", "storage-error", "trial-runs", "calibration-seconds"}};
}

std::unique_ptr<Pass> make_store_tables_bf16_pass() { return std::make_unique<StoreTablesBf16Pass>(); }

}  // namespace loka
