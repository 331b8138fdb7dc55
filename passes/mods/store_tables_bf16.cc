// ============================================================================
// passes/mods/store_tables_bf16.cc — `store-tables-bf16`.
// ============================================================================
#include "passes/mods/store_tables_bf16.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/cpu/parallel_rows.h"
#include "loka/bfloat16.h"
#include "loka/float8.h"
#include "passes/dispatch/budget_use.h"
#include "passes/mods/insert_scales.h"
#include "passes/probe/annotations.h"

namespace loka {
namespace {

using nlohmann::json;

/// A float32 table of an EmbeddingBags that may go to BF16.
struct TableCandidate {
  ir::Node* bags = nullptr;
  size_t input = 0;     ///< the table's input slot on `bags`
  std::string lookup;   ///< the lookup site it came from (annotation key)
  bool pinned_bf16 = false;
  double elements = 0;
  double added_error = 0;  ///< priced model error of storing it in BF16
};

/// The best E4M3 recipe error of a lookup site that stayed FP32, in the budget's metric.
std::optional<dispatch::SiteError> e4m3_site_error(const json& annotation, probe::BudgetMetric metric) {
  std::optional<dispatch::SiteError> best;
  if (!annotation.is_object() || !annotation.contains("recipes") || !annotation["recipes"].is_object()) return best;
  for (const char* recipe : {"e4m3_tensor", "e4m3_row"}) {
    if (!annotation["recipes"].contains(recipe)) continue;
    const std::optional<double> value =
        dispatch::error_value(annotation["recipes"][recipe].value("error", json()), dispatch::error_field(metric));
    if (value && (!best || *value < best->value)) best = dispatch::SiteError{*value, recipe};
  }
  return best;
}

/// ‖bf16(T) − T‖ / ‖fp8(T) − T‖ over the whole table, FP8 as insert-scales would store it (one
/// scale, or one per row); nothing when FP8 is exact on it (a table of zeros).
std::optional<double> bf16_to_fp8_error_ratio(const Tensor& table, bool per_row) {
  const QuantizedWeight fp8 = quantize_table(table, per_row);
  const int64_t v = table.dim(0), d = table.dim(1);
  const float* values = table.data<float>();
  const uint8_t* codes = fp8.codes.data<uint8_t>();
  const float* scales = fp8.scales.data<float>();
  // Sums per block of rows, added in block order: the figure does not depend on the thread count.
  constexpr int64_t kBlock = 4096;
  const int64_t blocks = (v + kBlock - 1) / kBlock;
  std::vector<double> bf16_sums(static_cast<size_t>(blocks)), fp8_sums(static_cast<size_t>(blocks));
  cpu::parallel_rows(blocks, 1, [&](int64_t first, int64_t last) {
    for (int64_t block = first; block < last; ++block) {
      double bf16_sum = 0, fp8_sum = 0;
      for (int64_t row = block * kBlock; row < std::min(v, (block + 1) * kBlock); ++row) {
        const float scale = scales[per_row ? row : 0];
        for (int64_t col = 0; col < d; ++col) {
          const float x = values[row * d + col];
          if (!std::isfinite(x)) continue;  // the same inf or NaN either way
          const double bf16 = bf16_to_float(float_to_bf16(x)) - static_cast<double>(x);
          const double fp8 = static_cast<double>(fp8e4m3fn_to_float(codes[row * d + col])) * scale - x;
          bf16_sum += bf16 * bf16;
          fp8_sum += fp8 * fp8;
        }
      }
      bf16_sums[static_cast<size_t>(block)] = bf16_sum;
      fp8_sums[static_cast<size_t>(block)] = fp8_sum;
    }
  });
  double bf16_total = 0, fp8_total = 0;
  for (int64_t block = 0; block < blocks; ++block) {
    bf16_total += bf16_sums[static_cast<size_t>(block)];
    fp8_total += fp8_sums[static_cast<size_t>(block)];
  }
  if (!(fp8_total > 0)) return std::nullopt;
  return std::sqrt(bf16_total / fp8_total);
}

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

class StoreTablesBf16Pass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    LOKA_ASSIGN_OR_RETURN(json document, read_annotations(graph));
    json& nodes = document["nodes"];
    std::vector<TableCandidate> tables = float_tables(graph, nodes);
    if (tables.empty()) return false;
    if (!document.contains("model") || !document["model"].contains("precision"))
      return Status::error("needs pin-precision's annotations (model.precision is missing): run probe and "
                           "pin-precision before store-tables-bf16");
    LOKA_ASSIGN_OR_RETURN(const dispatch::BudgetUse budget, dispatch::budget_use(document));

    // Price every table the user did not keep FP32.
    std::vector<TableCandidate> priced;
    for (TableCandidate& t : tables) {
      const json annotation = nodes.contains(t.lookup) ? nodes[t.lookup] : json();
      const std::string precision = annotation.is_object() ? annotation.value("precision", "") : "";
      const bool pinned = annotation.is_object() && annotation.contains("pinned_by");
      if (pinned && precision != "bf16") continue;  // the user's fp32 (or an unlowerable fp8) stays
      t.pinned_bf16 = pinned;
      if (!t.pinned_bf16) {
        const std::optional<dispatch::SiteError> fp8 =
            budget.known ? e4m3_site_error(annotation, budget.metric) : std::nullopt;
        if (!fp8) continue;  // unmeasured: nothing to price it by
        const std::optional<double> ratio =
            bf16_to_fp8_error_ratio(*t.bags->input(t.input)->initializer(), fp8->recipe == "e4m3_row");
        if (!ratio) continue;
        t.added_error = dispatch::scaled_model_error(fp8->value, *ratio, budget.metric);
      }
      priced.push_back(t);
    }
    // The largest tables save the most bytes: first.
    std::stable_sort(priced.begin(), priced.end(),
                     [](const TableCandidate& x, const TableCandidate& y) { return x.elements > y.elements; });
    double left = budget.headroom(), spent = 0;
    std::vector<TableCandidate> chosen;
    for (const TableCandidate& t : priced) {
      if (!t.pinned_bf16 && t.added_error > left) continue;
      left = std::max(0.0, left - t.added_error);
      spent += t.added_error;
      chosen.push_back(t);
    }
    if (chosen.empty()) return false;

    for (const TableCandidate& t : chosen) {
      store_in_bf16(graph, t);
      json& lookup = nodes[t.lookup];
      if (!lookup.is_object()) lookup = json{{"name", t.lookup}};
      lookup["precision"] = "bf16";
      lookup["table_storage"] = "bf16";
      lookup["storage_error"] = t.added_error;
      if (!t.pinned_bf16) {
        char text[128];
        std::snprintf(text, sizeof text, "table stored in BF16 (FP8 over budget; priced %.3g of the headroom)",
                      t.added_error);
        lookup["precision_reason"] = text;
      }
      context.add_statistic("tables-stored-bf16");
      context.add_statistic("bytes-saved", 2 * t.elements);
    }
    for (ir::Node* bags : graph.nodes())
      if (bags->is("EmbeddingBags", "ai.loka")) count_formats(*bags, nodes[bags->name()]);
    json& precision = document["model"]["precision"];
    precision["storage_error"] = budget.storage_error + spent;
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
        tables.push_back({node, input, from[t].get<std::string>(), false,
                          static_cast<double>(table->initializer()->element_count())});
      }
    }
    return tables;
  }

  /// Points the node's table input at a BF16 copy, and drops the FP32 one when nothing else reads it.
  static void store_in_bf16(ir::Graph& graph, const TableCandidate& t) {
    ir::Value* fp32 = t.bags->input(t.input);
    ir::Value* bf16 = graph.add_initializer(graph.unique_value_name(fp32->name() + ".bf16"), to_bf16(*fp32->initializer()));
    graph.set_input(t.bags, t.input, bf16);
    if (!fp32->has_uses() && !fp32->is_graph_input() && !fp32->is_graph_output()) graph.erase_value(fp32);
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
                  "allows (largest first; priced from the Probe's FP8 error)",
                  {},
                  {"tables-stored-bf16", "bytes-saved", "storage-error"}};
}

std::unique_ptr<Pass> make_store_tables_bf16_pass() { return std::make_unique<StoreTablesBf16Pass>(); }

}  // namespace loka
