// ============================================================================
// passes/mods/store_tables_bf16.cc — `store-tables-bf16`.
// ============================================================================
#include "passes/mods/store_tables_bf16.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <cstdio>
#include <optional>
#include <string>
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

/// A float32 table of an EmbeddingBags that may go to BF16.
struct TableCandidate {
  ir::Node* bags = nullptr;
  size_t input = 0;     ///< the table's input slot on `bags`
  std::string lookup;   ///< the lookup site it came from (annotation key)
  double elements = 0;
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

/// A model's outputs on every calibration set (the CPU runtime's, deterministic), with the
/// labels a logloss budget judges them against.
struct OutputsOnData {
  std::vector<std::vector<Tensor>> outputs;  ///< per set, every graph output
  std::vector<std::vector<float>> labels;    ///< per set (logloss only): labels.pb, or drawn as the Probe draws
};

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

/// How far `test` moves the model from `base` on the calibration data, in the budget's metric.
/// logloss: the pooled drift relative to base's logloss plus `noise_sigmas` standard deviations
/// of the gap an eval set of `judged_samples` may show (pin-precision's measured bound);
/// rel_l2: ‖test − base‖ / ‖base‖ over every float output; max_abs: the largest difference.
/// Added to the selection's own error, this bounds the model's (the triangle inequality).
double measured_increment(const OutputsOnData& base, const OutputsOnData& test, probe::BudgetMetric metric,
                          double judged_samples, double noise_sigmas) {
  double drift = 0, squared_changes = 0, base_logloss = 0, samples = 0;
  double difference = 0, reference = 0, max_abs = 0;
  for (size_t set = 0; set < base.outputs.size(); ++set) {
    if (metric == probe::BudgetMetric::kLogloss) {
      const std::vector<double> before = probe::logloss_terms(base.outputs[set][0], base.labels[set]);
      const std::vector<double> after = probe::logloss_terms(test.outputs[set][0], base.labels[set]);
      for (size_t i = 0; i < std::min(before.size(), after.size()); ++i) {
        drift += after[i] - before[i];
        squared_changes += (after[i] - before[i]) * (after[i] - before[i]);
        base_logloss += before[i];
        samples += 1;
      }
      continue;
    }
    for (size_t o = 0; o < base.outputs[set].size(); ++o) {
      if (!dtype_is_float(base.outputs[set][o].dtype())) continue;
      const std::vector<float> b = base.outputs[set][o].to_floats(), t = test.outputs[set][o].to_floats();
      for (size_t i = 0; i < std::min(b.size(), t.size()); ++i) {
        const double d = static_cast<double>(t[i]) - b[i];
        difference += d * d;
        reference += static_cast<double>(b[i]) * b[i];
        max_abs = std::max(max_abs, std::fabs(d));
      }
    }
  }
  const double inf = std::numeric_limits<double>::infinity();
  switch (metric) {
    case probe::BudgetMetric::kLogloss: {
      if (!(base_logloss > 0)) return inf;
      const double mean = base_logloss / samples;
      const double noise = std::sqrt(squared_changes / samples) / mean;
      const double spread = std::sqrt(1.0 / samples + 1.0 / std::max(1.0, judged_samples));
      const double bound = std::fabs(drift) / base_logloss + noise_sigmas * noise * spread;
      return std::isfinite(bound) ? bound : inf;
    }
    case probe::BudgetMetric::kMaxAbs: return std::isfinite(max_abs) ? max_abs : inf;
    default:
      if (!std::isfinite(difference)) return inf;
      return reference > 0 ? std::sqrt(difference / reference) : (difference > 0 ? inf : 0.0);
  }
}

class StoreTablesBf16Pass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    LOKA_ASSIGN_OR_RETURN(json document, read_annotations(graph));
    json& nodes = document["nodes"];
    const std::vector<TableCandidate> tables = float_tables(graph, nodes);
    if (tables.empty()) return false;
    if (!document.contains("model") || !document["model"].contains("precision"))
      return Status::error("needs pin-precision's annotations (model.precision is missing): run probe and "
                           "pin-precision before store-tables-bf16");
    LOKA_ASSIGN_OR_RETURN(const dispatch::BudgetUse budget, dispatch::budget_use(document));

    // The user's fp32 pins (and fp8 pins that could not be lowered) stay; bf16 pins go whatever
    // they cost; the rest, largest first (the most bytes saved), while the headroom allows.
    std::vector<TableCandidate> candidates, open;
    for (const TableCandidate& t : tables) {
      const json& annotation = nodes.contains(t.lookup) ? nodes[t.lookup] : json();
      const bool pinned = annotation.is_object() && annotation.contains("pinned_by");
      if (pinned && annotation.value("precision", "") != "bf16") continue;
      (pinned ? candidates : open).push_back(t);
    }
    const size_t pinned = candidates.size();
    std::stable_sort(open.begin(), open.end(),
                     [](const TableCandidate& x, const TableCandidate& y) { return x.elements > y.elements; });
    const std::filesystem::path& calibration = context.settings().calibration_data;
    if (!open.empty() && (calibration.empty() || !budget.known)) {
      for (const TableCandidate& t : open)
        nodes[t.lookup]["storage_reason"] =
            calibration.empty() ? "no calibration data (--calib) to measure BF16 on" : "no known budget";
      open.clear();
    }
    candidates.insert(candidates.end(), open.begin(), open.end());
    if (candidates.empty()) {  // the reasons above are all that changed
      const bool noted = !tables.empty() && document["nodes"] != (*read_annotations(graph))["nodes"];
      if (noted) write_annotations(graph, document);
      return noted;
    }

    // Every candidate's BF16 copy; a trial points the tables it stores at theirs.
    std::vector<ir::Value*> fp32_values, bf16_values;
    for (const TableCandidate& t : candidates) {
      ir::Value* fp32 = t.bags->input(t.input);
      fp32_values.push_back(fp32);
      bf16_values.push_back(
          graph.add_initializer(graph.unique_value_name(fp32->name() + ".bf16"), to_bf16(*fp32->initializer())));
    }
    const auto point = [&](const std::vector<bool>& in_bf16) {
      for (size_t i = 0; i < candidates.size(); ++i)
        graph.set_input(candidates[i].bags, candidates[i].input, in_bf16[i] ? bf16_values[i] : fp32_values[i]);
    };
    std::vector<bool> chosen(candidates.size(), false);
    std::fill(chosen.begin(), chosen.begin() + static_cast<std::ptrdiff_t>(pinned), true);
    double spent = 0;
    if (candidates.size() > pinned) {
      const auto started = std::chrono::steady_clock::now();
      LOKA_ASSIGN_OR_RETURN(const DataSetReader reader, DataSetReader::open(calibration));
      const int64_t max_rows = context.int_option("max_rows");
      // On the GPU when there is one, as pin-precision measures (the CUDA runtime reads BF16 tables
      // too); the CPU runtime otherwise.
      const Device device = dispatch::gpu_unavailable_reason().empty() ? Device::kCuda : Device::kCpu;
      point(std::vector<bool>(candidates.size(), false));
      LOKA_ASSIGN_OR_RETURN(const OutputsOnData base,
                            run_on_calibration(graph, reader, budget.metric, max_rows, device, nullptr));
      const json probe_summary = document["model"].value("probe", json::object());
      const double judged = probe_summary.value("logloss_judged_samples", 0.0);
      const double sigmas = probe_summary.value("noise_sigmas", probe::kDefaultNoiseSigmas);
      const auto measure = [&](const std::vector<bool>& in_bf16) -> Result<double> {
        point(in_bf16);
        context.add_statistic("trial-runs");
        LOKA_ASSIGN_OR_RETURN(const OutputsOnData trial,
                              run_on_calibration(graph, reader, budget.metric, max_rows, device, &base));
        return measured_increment(base, trial, budget.metric, judged, sigmas);
      };
      // Everything at once first: one run when it all fits. Else one table more at a time, kept
      // when the set with it still fits.
      const std::vector<bool> everything(candidates.size(), true);
      LOKA_ASSIGN_OR_RETURN(spent, measure(everything));
      if (spent <= budget.headroom()) {
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
            nodes[candidates[i].lookup]["storage_reason"] = text;
            continue;
          }
          chosen = std::move(trial);
          spent = with;
        }
      }
      context.add_statistic("calibration-seconds",
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    }
    point(chosen);
    for (size_t i = 0; i < candidates.size(); ++i) {
      ir::Value* unused = chosen[i] ? fp32_values[i] : bf16_values[i];
      if (!unused->has_uses() && !unused->is_graph_input() && !unused->is_graph_output()) graph.erase_value(unused);
    }
    if (std::none_of(chosen.begin(), chosen.end(), [](bool c) { return c; })) {
      write_annotations(graph, document);  // the storage reasons
      return true;
    }

    for (size_t i = 0; i < candidates.size(); ++i) {
      if (!chosen[i]) continue;
      json& lookup = nodes[candidates[i].lookup];
      if (!lookup.is_object()) lookup = json{{"name", candidates[i].lookup}};
      lookup["precision"] = "bf16";
      lookup["table_storage"] = "bf16";
      lookup.erase("storage_reason");
      if (i >= pinned) lookup["precision_reason"] = "table stored in BF16 (FP8 over budget; BF16 within the headroom)";
      context.add_statistic("tables-stored-bf16");
      context.add_statistic("bytes-saved", 2 * candidates[i].elements);
    }
    for (ir::Node* bags : graph.nodes())
      if (bags->is("EmbeddingBags", "ai.loka")) count_formats(*bags, nodes[bags->name()]);
    document["model"]["precision"]["storage_error"] = budget.storage_error + spent;
    context.add_statistic("storage-error", spent);
    write_annotations(graph, document);
    return true;
  }

 private:
  /// Every float32 initializer table of an ai.loka::EmbeddingBags, with the lookup it came from
  /// (fuse-embedding-bags records them in order as the node's "from").
  static std::vector<TableCandidate> float_tables(const ir::Graph& graph, const json& nodes) {
    std::vector<TableCandidate> tables;
    for (ir::Node* node : graph.nodes()) {
      if (!node->is("EmbeddingBags", "ai.loka") || !nodes.contains(node->name())) continue;
      const json from = nodes[node->name()].value("from", json::array());
      for (size_t input = 1, t = 0; input < node->inputs().size(); input += 2, ++t) {
        const ir::Value* table = node->input(input);
        if (!table || !table->is_initializer() || table->initializer()->dtype() != DType::kFloat32 ||
            table->initializer()->rank() != 2 || t >= from.size() || !from[t].is_string())
          continue;
        tables.push_back({node, input, from[t].get<std::string>(),
                          static_cast<double>(table->initializer()->element_count())});
      }
    }
    return tables;
  }

  /// The fused node's "tables": how many of its tables each format holds.
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
