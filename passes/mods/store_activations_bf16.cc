// ============================================================================
// passes/mods/store_activations_bf16.cc — BF16 activation sets and
// `store-activations-bf16`.
// ============================================================================
#include "passes/mods/store_activations_bf16.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "passes/mods/fuse_gemm_epilogue.h"
#include "passes/probe/annotations.h"
#include "runtime/view_ops.h"

namespace loka {
namespace {

using nlohmann::json;

/// Ops that move elements without arithmetic: their output is stored as their inputs are (the
/// runtime's views, and Concat, whose inputs its output holds side by side).
bool is_view(const ir::Node& node) {
  return is_view_op(node.domain(), node.op_type()) || node.is("Concat");
}

/// The inputs of a view that carry its elements (Reshape's shape and the axes inputs do not).
std::vector<ir::Value*> viewed_inputs(const ir::Node& node) {
  if (node.is("Concat")) return node.inputs();
  return {node.input(0)};
}

/// Ops fuse-gemm-epilogue folds into the GEMM before them.
bool is_epilogue_op(const ir::Node& node) {
  return node.domain().empty() && (node.is("Relu") || node.is("Gelu") || node.is("Add") || node.is("Mul"));
}

double elements_per_sample(const ir::Value& value) {
  const ir::TensorType& type = value.type();
  if (!type.has_rank() || type.rank() < 2) return 0;
  double elements = 1;
  for (int d = 1; d < type.rank(); ++d) {
    if (!(*type.shape)[static_cast<size_t>(d)].is_known()) return 0;
    elements *= static_cast<double>((*type.shape)[static_cast<size_t>(d)].value);
  }
  return elements;
}

/// What a source node is: the weight GEMM site whose epilogue computes it (nearest first,
/// through Relu/Gelu/Add/Mul), "" for an embedding bag (the ReduceSum of a lookup's rows, which
/// fuse-embedding-bags makes an EmbeddingBags), or nothing when it is neither. The search
/// does not pass through `skip` (a reader's own set: a Mul/Add reading it belongs to the epilogue
/// of the GEMM on its other side, not of the set's source).
std::optional<std::string> source_gemm(const ir::Node& source, const std::map<std::string, const probe::Site*>& sites,
                                       const std::set<const ir::Value*>& skip = {}) {
  const auto site_of = [&](const ir::Node& node) -> const probe::Site* {
    const auto it = sites.find(node.name());
    return it == sites.end() ? nullptr : it->second;
  };
  if (const probe::Site* site = site_of(source)) {
    // A lookup read directly (no bag sum) is no EmbeddingBags output: nothing would write it in
    // BF16. An activation x activation MatMul has no fused epilogue that would.
    if (site->kind == probe::SiteKind::kWeightGemm) return site->node;
    return std::nullopt;
  }
  // A bag: the sum of a lookup's rows.
  if (source.is("ReduceSum") && source.input(0) && source.input(0)->producer()) {
    const probe::Site* lookup = site_of(*source.input(0)->producer());
    if (lookup && lookup->kind == probe::SiteKind::kEmbedding) return std::string();
  }
  if (!is_epilogue_op(source)) return std::nullopt;
  // Breadth first, a few nodes deep: the DCN layer's Add(Mul(x0, Gemm(x)), x) reaches its own
  // GEMM (two steps) before the previous layer's (through x, three).
  std::deque<std::pair<const ir::Node*, int>> pending{{&source, 0}};
  while (!pending.empty()) {
    const auto [node, depth] = pending.front();
    pending.pop_front();
    for (const ir::Value* input : node->inputs()) {
      if (input == nullptr || input->is_initializer() || input->producer() == nullptr || skip.count(input)) continue;
      const ir::Node& producer = *input->producer();
      if (const probe::Site* site = site_of(producer); site && site->kind == probe::SiteKind::kWeightGemm)
        return site->node;
      if (depth < 3 && is_epilogue_op(producer)) pending.push_back({&producer, depth + 1});
    }
  }
  return std::nullopt;
}

/// The set of values joined to `start` by views: every value a view reads or writes with it.
std::vector<ir::Value*> view_set(ir::Value* start) {
  std::vector<ir::Value*> set;
  std::set<const ir::Value*> seen{start};
  std::deque<ir::Value*> pending{start};
  const auto visit = [&](ir::Value* value) {
    if (value && seen.insert(value).second) pending.push_back(value);
  };
  while (!pending.empty()) {
    ir::Value* value = pending.front();
    pending.pop_front();
    set.push_back(value);
    if (value->producer() && is_view(*value->producer()))
      for (ir::Value* input : viewed_inputs(*value->producer())) visit(input);
    for (const ir::Use& use : value->uses()) {
      if (!is_view(*use.node)) continue;
      const std::vector<ir::Value*> inputs = viewed_inputs(*use.node);
      if (std::find(inputs.begin(), inputs.end(), value) == inputs.end()) continue;  // e.g. a Reshape's shape
      visit(use.node->output(0));
      for (ir::Value* input : inputs) visit(input);
    }
  }
  return set;
}

}  // namespace

std::vector<ActivationStorageCandidate> find_activation_storage_candidates(const ir::Graph& graph,
                                                                          const std::vector<probe::Site>& sites,
                                                                          double min_elements) {
  std::map<std::string, const probe::Site*> by_node;
  for (const probe::Site& site : sites) by_node[site.node] = &site;
  std::vector<ActivationStorageCandidate> candidates;
  std::set<const ir::Value*> done;
  for (ir::Value* start : graph.values()) {
    if (done.count(start) || start->is_initializer() || start->is_graph_input() || start->producer() == nullptr ||
        start->type().dtype != DType::kFloat32)
      continue;
    const std::vector<ir::Value*> set = view_set(start);
    done.insert(set.begin(), set.end());
    ActivationStorageCandidate c;
    bool storable = true;
    std::set<std::string> gemms;
    const std::set<const ir::Value*> members(set.begin(), set.end());
    for (const ir::Value* value : set) {
      if (value->is_initializer() || value->is_graph_input() || value->is_graph_output() || value->producer() == nullptr ||
          value->type().dtype != DType::kFloat32) {
        storable = false;
        break;
      }
      c.elements_per_sample = std::max(c.elements_per_sample, elements_per_sample(*value));
      const ir::Node& producer = *value->producer();
      // A GEMM's output read only by the next op of its epilogue is fused away with it: never stored.
      if (value->uses().size() == 1 && is_epilogue_op(*value->uses()[0].node) &&
          (by_node.count(producer.name()) || is_epilogue_op(producer))) {
        storable = false;
        break;
      }
      if (!is_view(producer)) {
        const std::optional<std::string> gemm = source_gemm(producer, by_node);
        if (!gemm || value->producer_output_index() != 0) {
          storable = false;
          break;
        }
        if (!gemm->empty()) gemms.insert(*gemm);
        c.sources.push_back(producer.name());
      }
      for (const ir::Use& use : value->uses()) {
        const ir::Node& reader = *use.node;
        if (is_view(reader)) continue;
        const auto site = by_node.find(reader.name());
        // A GEMM site reading the set as its activation reads BF16 in either precision
        // (QuantizedGemm quantizes it, FusedGemm widens it): no requirement on its precision, but
        // it must have the FusedGemm form should it stay FP32 (which refuses transA, a C that is
        // no bias row, alpha or beta other than 1).
        if (site != by_node.end() && site->second->kind == probe::SiteKind::kWeightGemm &&
            site->second->activation_input == use.input_index) {
          if (!can_become_fused_gemm(reader)) {
            storable = false;
            break;
          }
          continue;
        }
        // A Mul or Add is a fused epilogue's Multiplier or Residual: only QuantizedGemm's epilogue
        // reads those in BF16, so the GEMM it follows (on its other side) must be FP8.
        const std::optional<std::string> gemm = reader.domain().empty() && (reader.is("Mul") || reader.is("Add"))
                                                    ? source_gemm(reader, by_node, members)
                                                    : std::nullopt;
        if (!gemm || gemm->empty()) {
          storable = false;
          break;
        }
        gemms.insert(*gemm);
      }
      if (!storable) break;
    }
    if (!storable || c.sources.empty() || c.elements_per_sample < min_elements) continue;
    for (const ir::Value* value : set) c.values.push_back(value->name());
    c.gemm_sites.assign(gemms.begin(), gemms.end());
    candidates.push_back(std::move(c));
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const auto& x, const auto& y) { return x.elements_per_sample > y.elements_per_sample; });
  return candidates;
}

// ------------------------------------------------------------------- pass ---

namespace {

bool is_loka(const ir::Node& node, const char* op) { return node.is(op, "ai.loka"); }

/// Why the lowered set cannot be BF16, or "" when it can: every computing node writes BF16
/// (QuantizedGemm Y, EmbeddingBags), every other reader reads it (QuantizedGemm X,
/// Multiplier, Residual; FusedGemm X with a 2-D W), nothing else sees it. A float Gemm or
/// MatMul site reading it as X (one with no epilogue, which fuse-gemm-epilogue left alone) goes
/// to `to_fuse`: as a FusedGemm it reads BF16.
std::string lowering_obstacle(const std::vector<ir::Value*>& set, std::vector<ir::Node*>& to_fuse) {
  for (const ir::Value* value : set) {
    if (value->is_graph_output()) return "'" + value->name() + "' is a graph output";
    if (value->type().dtype != DType::kFloat32) return "'" + value->name() + "' is not FLOAT";
    const ir::Node* producer = value->producer();
    if (producer == nullptr) return "'" + value->name() + "' has no producer";
    if (!is_view(*producer)) {
      const bool writes = (is_loka(*producer, "QuantizedGemm") || is_loka(*producer, "EmbeddingBags")) &&
                          value->producer_output_index() == 0;
      if (!writes) return "'" + value->name() + "' is computed by " + producer->op_type() + " '" + producer->name() + "'";
    }
    for (const ir::Use& use : value->uses()) {
      const ir::Node& reader = *use.node;
      if (is_view(reader)) continue;
      const bool reads =
          (is_loka(reader, "QuantizedGemm") && (use.input_index == 0 || use.input_index == 5 || use.input_index == 6)) ||
          (is_loka(reader, "FusedGemm") && use.input_index == 0 && reader.input(1) && reader.input(1)->type().rank() == 2);
      if (reads) continue;
      if (use.input_index == 0 && can_become_fused_gemm(reader)) {
        if (std::find(to_fuse.begin(), to_fuse.end(), use.node) == to_fuse.end()) to_fuse.push_back(use.node);
        continue;
      }
      return "'" + value->name() + "' is read by " + reader.op_type() + " '" + reader.name() + "'";
    }
  }
  return "";
}

class StoreActivationsBf16Pass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    LOKA_ASSIGN_OR_RETURN(json document, read_annotations(graph));
    const json* chosen = nullptr;
    if (document.contains("model") && document["model"].contains("precision") &&
        document["model"]["precision"].contains("bf16_activations"))
      chosen = &document["model"]["precision"]["bf16_activations"];
    if (chosen == nullptr || !chosen->is_array() || chosen->empty()) return false;
    json report = json::array();
    size_t lowered = 0;
    double bytes_per_sample = 0, float_readers_fused = 0;
    for (const json& entry : *chosen) {
      const json values = entry.is_object() ? entry.value("values", json::array()) : json::array();
      json outcome = {{"values", values}};
      // Fusion removed some of the set's values (a bag's sum, a view it folded): the lowered set
      // is what views join to the values that remain, and it must hold all of them.
      std::vector<ir::Value*> surviving;
      for (const json& name : values)
        if (ir::Value* value = name.is_string() ? graph.find_value(name.get<std::string>()) : nullptr;
            value && value->producer())
          surviving.push_back(value);
      if (surviving.empty()) {
        outcome["stored"] = false;
        outcome["reason"] = entry.is_object() && values.is_array() ? "none of its values is in the lowered graph"
                                                                   : "unreadable entry (expected {\"values\": [names]})";
        report.push_back(outcome);
        continue;
      }
      const std::vector<ir::Value*> set = view_set(surviving.front());
      std::string obstacle;
      for (const ir::Value* value : surviving)
        if (std::find(set.begin(), set.end(), value) == set.end())
          obstacle = "fusion split it: '" + value->name() + "' is no longer joined to '" + surviving.front()->name() + "'";
      // Run again on a lowered graph: the set is BF16 already.
      const bool already = std::all_of(set.begin(), set.end(), [](const ir::Value* v) { return v->type().dtype == DType::kBFloat16; });
      if (already) {
        outcome["stored"] = true;
        report.push_back(outcome);
        ++lowered;
        continue;
      }
      std::vector<ir::Node*> to_fuse;
      if (obstacle.empty()) obstacle = lowering_obstacle(set, to_fuse);
      outcome["stored"] = obstacle.empty();
      if (!obstacle.empty()) {
        outcome["reason"] = obstacle;
        report.push_back(outcome);
        continue;
      }
      // The float readers become FusedGemms (lowering_obstacle checked that each can: a failure
      // here is a bug, reported with the set's name).
      json fused_readers = json::array();
      for (ir::Node* gemm : to_fuse) {
        const std::string name = gemm->name();
        if (const Status fused = become_fused_gemm(graph, *gemm, document); !fused.is_ok())
          return Status::error("set of '" + surviving.front()->name() + "': " + fused.message());
        fused_readers.push_back(name);
      }
      if (!fused_readers.empty()) outcome["fused_readers"] = fused_readers;
      float_readers_fused += static_cast<double>(fused_readers.size());
      double largest = 0;
      for (ir::Value* value : set) {
        value->mutable_type().dtype = DType::kBFloat16;
        largest = std::max(largest, elements_per_sample(*value));
        ir::Node* producer = value->producer();
        // output_dtype is a TensorProto type, which DType's values are.
        if (!is_view(*producer))
          producer->mutable_attributes().set("output_dtype", static_cast<int64_t>(DType::kBFloat16));
      }
      bytes_per_sample += 2 * largest;
      ++lowered;
      report.push_back(outcome);
    }
    document["model"]["precision"]["bf16_activations_lowered"] = report;
    write_annotations(graph, document);
    context.add_statistic("sets-chosen", static_cast<double>(chosen->size()));
    context.add_statistic("sets-stored-bf16", static_cast<double>(lowered));
    context.add_statistic("bytes-saved-per-sample", bytes_per_sample);
    context.add_statistic("float-readers-fused", float_readers_fused);
    return true;  // the report at least
  }
};

}  // namespace

PassInfo store_activations_bf16_pass_info() {
  return PassInfo{"store-activations-bf16",
                  "hold the activation sets pin-precision chose for BF16 storage in BF16 between the fused ops that "
                  "write and read them",
                  {},
                  {"sets-chosen", "sets-stored-bf16", "bytes-saved-per-sample", "float-readers-fused"},
                  /*result_cacheable=*/true};
}

std::unique_ptr<Pass> make_store_activations_bf16_pass() { return std::make_unique<StoreActivationsBf16Pass>(); }

}  // namespace loka
