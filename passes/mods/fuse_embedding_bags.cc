// ============================================================================
// passes/mods/fuse_embedding_bags.cc — `fuse-embedding-bags`.
// ============================================================================
#include "passes/mods/fuse_embedding_bags.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "passes/canonicalize/rewrite_utils.h"
#include "passes/mods/rewrite_helpers.h"
#include "passes/probe/annotations.h"

namespace loka {
namespace {

using mods::kLokaDomain;

/// One matched bag: its nodes (readers first), its table and the id columns it pools.
struct Bag {
  std::vector<ir::Node*> nodes;      ///< [Unsqueeze,] ReduceSum, lookup, [Slice]
  std::string lookup;                ///< the Gather's or QuantizedGather's name (it outlives the node)
  ir::Value* ids = nullptr;          ///< the whole [B, H] id matrix
  ir::Value* table = nullptr;
  ir::Value* row_scale = nullptr;    ///< QuantizedGather only
  int64_t begin = 0, end = 0;        ///< id columns [begin, end)
  int64_t width = 0;                 ///< D
};

/// The single axis a node lists (attribute or constant input `index`), normalised against `rank`.
std::optional<int64_t> single_axis(const ir::Node& node, size_t index, int rank) {
  auto axes = canonicalize::attribute_or_input_ints(node, "axes", index);
  if (!axes || axes->size() != 1) return std::nullopt;
  const int64_t axis = (*axes)[0] < 0 ? (*axes)[0] + rank : (*axes)[0];
  return axis >= 0 && axis < rank ? std::optional<int64_t>(axis) : std::nullopt;
}

/// True for a rank-2 integer id matrix with a known column count.
bool is_id_matrix(const ir::Value* value) {
  const ir::TensorType& type = value->type();
  return (type.dtype == DType::kInt64 || type.dtype == DType::kInt32) && type.rank() == 2 &&
         (*type.shape)[1].is_known();
}

/// Fills `bag.ids`, `begin`, `end` from the lookup's ids: a column Slice of an id matrix, or the matrix itself.
bool match_ids(ir::Value* ids, Bag& bag) {
  ir::Node* slice = ids->producer();
  if (slice == nullptr || !slice->is("Slice")) {
    if (!is_id_matrix(ids)) return false;
    bag.ids = ids;
    bag.begin = 0;
    bag.end = (*ids->type().shape)[1].value;
    return true;
  }
  if (!canonicalize::has_exactly_uses(ids, 1) || !is_id_matrix(slice->input(0))) return false;
  const int64_t columns = (*slice->input(0)->type().shape)[1].value;
  auto starts = canonicalize::attribute_or_input_ints(*slice, "starts", 1);
  auto ends = canonicalize::attribute_or_input_ints(*slice, "ends", 2);
  auto axes = canonicalize::attribute_or_input_ints(*slice, "axes", 3);
  auto steps = canonicalize::attribute_or_input_ints(*slice, "steps", 4);
  if (!starts || !ends || !axes || !steps || starts->size() != 1 || ends->size() != 1) return false;
  if (axes->size() != 1 || ((*axes)[0] != 1 && (*axes)[0] != -1)) return false;  // omitted axes: axis 0
  if (!steps->empty() && (steps->size() != 1 || (*steps)[0] != 1)) return false;
  // ONNX Slice bounds: negative counts from the end, then clamp to [0, columns].
  const auto clamp = [columns](int64_t at) { return std::clamp(at < 0 ? at + columns : at, int64_t{0}, columns); };
  bag.begin = clamp((*starts)[0]);
  bag.end = clamp((*ends)[0]);
  if (bag.end <= bag.begin) return false;
  bag.ids = slice->input(0);
  bag.nodes.push_back(slice);
  return true;
}

/// The bag feeding Concat input `value` ([B, 1, D]), or nothing when it is not one.
std::optional<Bag> match_bag(ir::Value* value) {
  Bag bag;
  ir::Node* node = value->producer();
  if (node == nullptr || !canonicalize::has_exactly_uses(value, 1)) return std::nullopt;
  if (node->is("Unsqueeze")) {
    if (single_axis(*node, 1, 3) != 1) return std::nullopt;
    bag.nodes.push_back(node);
    value = node->input(0);
    node = value->producer();
    if (node == nullptr || !canonicalize::has_exactly_uses(value, 1)) return std::nullopt;
  }
  if (!node->is("ReduceSum")) return std::nullopt;
  // The bag axis comes back either from keepdims or from the Unsqueeze, never both.
  auto keepdims = node->attributes().get_int("keepdims", 1);
  const bool kept = keepdims && *keepdims == 1;
  if (kept == !bag.nodes.empty()) return std::nullopt;
  ir::Value* gathered = node->input(0);
  if (gathered->type().rank() != 3 || single_axis(*node, 1, 3) != 1) return std::nullopt;
  bag.nodes.push_back(node);
  ir::Node* lookup = gathered->producer();
  if (lookup == nullptr || !canonicalize::has_exactly_uses(gathered, 1)) return std::nullopt;
  ir::Value* ids = nullptr;
  if (lookup->is("Gather")) {
    auto axis = lookup->attributes().get_int("axis", 0);
    if (!axis || *axis != 0) return std::nullopt;
    const Tensor* table = canonicalize::constant_data(lookup->input(0));
    if (table == nullptr || table->dtype() != DType::kFloat32 || table->rank() != 2 || !lookup->input(0)->is_initializer())
      return std::nullopt;
    ids = lookup->input(1);
  } else if (lookup->is("QuantizedGather", kLokaDomain)) {
    bag.row_scale = lookup->input(1);
    ids = lookup->input(2);
  } else {
    return std::nullopt;
  }
  bag.lookup = lookup->name();
  bag.table = lookup->input(0);
  if (bag.table->type().rank() != 2 || !(*bag.table->type().shape)[1].is_known()) return std::nullopt;
  bag.width = (*bag.table->type().shape)[1].value;
  bag.nodes.push_back(lookup);
  if (ids == nullptr || !match_ids(ids, bag)) return std::nullopt;
  return bag;
}

/// A run of Concat inputs [first, first + bags.size()) that becomes one EmbeddingBags.
struct Run {
  size_t first = 0;
  std::vector<Bag> bags;
};

/// The Concat's fusable runs: consecutive bags over contiguous columns of one id matrix, one D.
std::vector<Run> find_runs(const ir::Node& concat) {
  std::vector<Run> runs;
  if (concat.output(0)->type().rank() != 3) return runs;
  auto axis = concat.attributes().get_int("axis");
  if (!axis || (*axis != 1 && *axis != -2)) return runs;
  Run current;
  for (size_t i = 0; i < concat.inputs().size(); ++i) {
    std::optional<Bag> bag = match_bag(concat.input(i));
    const bool extends = bag && !current.bags.empty() && bag->ids == current.bags.back().ids &&
                         bag->begin == current.bags.back().end && bag->width == current.bags.back().width;
    if (!extends && !current.bags.empty()) {
      runs.push_back(std::move(current));
      current = Run{};
    }
    if (!bag) continue;
    if (current.bags.empty()) current.first = i;
    current.bags.push_back(std::move(*bag));
  }
  if (!current.bags.empty()) runs.push_back(std::move(current));
  return runs;
}

/// The EmbeddingBags node of `run`: the id matrix, (table, row scale or omitted) per bag, offsets.
canonicalize::NodeSpec bags_spec(const Run& run, const std::string& name) {
  canonicalize::NodeSpec spec{"EmbeddingBags", {run.bags[0].ids}, {}, name, kLokaDomain};
  std::vector<int64_t> offsets{run.bags[0].begin};
  for (const Bag& bag : run.bags) {
    spec.inputs.push_back(bag.table);
    spec.inputs.push_back(bag.row_scale);  // null (omitted) for a float32 table
    offsets.push_back(bag.end);
  }
  if (spec.inputs.back() == nullptr) spec.inputs.pop_back();  // ONNX drops a trailing omitted input
  spec.attributes.set("offsets", offsets);
  return spec;
}

/// The annotation of a fused node: what it absorbed and the precision of its tables.
void annotate(nlohmann::json& nodes, const std::string& name, const Run& run) {
  nlohmann::json& entry = nodes[name];
  entry["name"] = name;
  entry["op"] = "EmbeddingBags";
  entry["from"] = nlohmann::json::array();
  size_t fp8 = 0;
  for (const Bag& bag : run.bags) {
    entry["from"].push_back(bag.lookup);
    if (bag.row_scale) ++fp8;
    if (nodes.contains(bag.lookup)) nodes[bag.lookup]["fused_into"] = name;
  }
  // One precision per node: FP8 only when every table is (the contract has no "mixed").
  entry["precision"] = fp8 == run.bags.size() ? "fp8_e4m3" : "fp32";
  entry["tables"] = {{"fp8_e4m3", fp8}, {"fp32", run.bags.size() - fp8}};
}

class FuseEmbeddingBagsPass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    std::vector<std::pair<ir::Node*, std::vector<Run>>> matches;
    for (ir::Node* node : graph.nodes())
      if (node->is("Concat"))
        if (std::vector<Run> runs = find_runs(*node); !runs.empty()) matches.emplace_back(node, std::move(runs));
    if (matches.empty()) return false;
    LOKA_ASSIGN_OR_RETURN(nlohmann::json document, read_annotations(graph));
    for (auto& [concat, runs] : matches) LOKA_RETURN_IF_ERROR(fuse(graph, concat, runs, document["nodes"], context));
    mods::import_loka_domain(graph);
    write_annotations(graph, document);
    return true;
  }

 private:
  /// Rewrites one Concat: a single run covering every input replaces it (same name and output);
  /// otherwise each run's output takes the run's place in a new Concat.
  static Status fuse(ir::Graph& graph, ir::Node* concat, const std::vector<Run>& runs, nlohmann::json& nodes,
                     PassContext& context) {
    const std::string concat_name = concat->name();
    std::vector<ir::Node*> absorbed{concat};
    for (const Run& run : runs) {
      for (const Bag& bag : run.bags) absorbed.insert(absorbed.end(), bag.nodes.begin(), bag.nodes.end());
      context.add_statistic("bags-fused", static_cast<double>(run.bags.size()));
      context.add_statistic("nodes-created");
    }
    std::vector<ir::Value*> operands;  // constants only the absorbed nodes read (axes, Slice bounds) go with them
    for (const ir::Node* node : absorbed)
      for (ir::Value* input : node->inputs())
        if (input && input->is_initializer()) operands.push_back(input);
    const bool whole = runs.size() == 1 && runs[0].bags.size() == concat->inputs().size();
    if (whole) {
      LOKA_ASSIGN_OR_RETURN(ir::Node * fused, canonicalize::replace_with_node(graph, concat->output(0), absorbed,
                                                                               bags_spec(runs[0], concat_name)));
      annotate(nodes, fused->name(), runs[0]);
    } else {
      canonicalize::NodeSpec spec{"Concat", {}, concat->attributes(), concat_name, ""};
      size_t next = 0;
      for (const Run& run : runs) {
        for (; next < run.first; ++next) spec.inputs.push_back(concat->input(next));
        const canonicalize::NodeSpec bags = bags_spec(run, graph.unique_node_name(concat_name + "_embedding_bags"));
        ir::Node* fused = graph.add_node(bags.op_type, bags.inputs, 1, bags.name, bags.domain);
        fused->mutable_attributes() = bags.attributes;
        const ir::TensorType& ids = run.bags[0].ids->type();
        fused->output(0)->set_type(ir::TensorType{
            DType::kFloat32, std::vector<ir::Dim>{(*ids.shape)[0], ir::Dim::known(static_cast<int64_t>(run.bags.size())),
                                                  ir::Dim::known(run.bags[0].width)}});
        annotate(nodes, fused->name(), run);
        spec.inputs.push_back(fused->output(0));
        next = run.first + run.bags.size();
      }
      for (; next < concat->inputs().size(); ++next) spec.inputs.push_back(concat->input(next));
      LOKA_RETURN_IF_ERROR(canonicalize::replace_with_node(graph, concat->output(0), absorbed, spec).status());
    }
    std::sort(operands.begin(), operands.end());
    operands.erase(std::unique(operands.begin(), operands.end()), operands.end());
    for (ir::Value* value : operands)
      if (!value->has_uses() && !value->is_graph_input() && !value->is_graph_output()) graph.erase_value(value);
    return Status::ok();
  }
};

}  // namespace

PassInfo fuse_embedding_bags_pass_info() {
  return PassInfo{"fuse-embedding-bags",
                  "fuse per-table Slice/Gather/ReduceSum embedding bags stacked by a Concat into one table-batched "
                  "ai.loka EmbeddingBags",
                  {},
                  {"bags-fused", "nodes-created"}};
}

std::unique_ptr<Pass> make_fuse_embedding_bags_pass() { return std::make_unique<FuseEmbeddingBagsPass>(); }

}  // namespace loka
