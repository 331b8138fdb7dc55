// ============================================================================
// passes/canonicalize/lower_einsum.cc — `lower-einsum` (see header).
// ============================================================================
#include "passes/canonicalize/lower_einsum.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>

#include "passes/canonicalize/rewrite_utils.h"

namespace loka {
namespace {

bool is_letter(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }

Status check_term(const std::string& term, const char* what) {
  for (size_t i = 0; i < term.size(); ++i) {
    if (!is_letter(term[i]))
      return Status::error(std::string(what) + " '" + term + "' holds '" + term[i] + "', not a letter");
    if (term.find(term[i], i + 1) != std::string::npos)
      return Status::error(std::string("letter '") + term[i] + "' repeats in " + what + " '" + term +
                           "' (a diagonal or trace: not lowered)");
  }
  return Status::ok();
}

bool contains(const std::string& letters, char c) { return letters.find(c) != std::string::npos; }

/// The letters of `from` that satisfy `keep`, in `from`'s order.
template <typename Keep>
std::string letters_where(const std::string& from, Keep keep) {
  std::string out;
  for (char c : from)
    if (keep(c)) out += c;
  return out;
}

/// Builds the lowered nodes next to the Einsum, named after it.
class Lowering {
 public:
  Lowering(ir::Graph& graph, const ir::Node& einsum)
      : graph_(graph), base_(einsum.name().empty() ? "einsum" : einsum.name()),
        opset_(canonicalize::default_opset(graph)) {}

  /// `x` with its axes in the order of `to` (a permutation of `from`'s letters).
  ir::Value* transpose(ir::Value* x, const std::string& from, const std::string& to) {
    std::vector<int64_t> perm;
    for (char c : to) perm.push_back(static_cast<int64_t>(from.find(c)));
    std::vector<int64_t> identity(perm.size());
    std::iota(identity.begin(), identity.end(), 0);
    if (perm == identity) return x;
    ir::Node* node = add("Transpose", {x}, "transpose");
    node->mutable_attributes().set("perm", perm);
    return node->output(0);
  }

  /// `x` summed over the axes at `axes` (dropped).
  ir::Value* reduce_sum(ir::Value* x, const std::vector<int64_t>& axes) {
    if (axes.empty()) return x;
    ir::Node* node = nullptr;
    if (opset_ >= 13) {
      node = add("ReduceSum", {x, constant("axes", axes)}, "reduce_sum");
    } else {
      node = add("ReduceSum", {x}, "reduce_sum");
      node->mutable_attributes().set("axes", axes);
    }
    node->mutable_attributes().set("keepdims", int64_t{0});
    return node->output(0);
  }

  ir::Value* reshape(ir::Value* x, const std::vector<int64_t>& target) {
    return add("Reshape", {x, constant("shape", target)}, "reshape")->output(0);
  }

  ir::Node* matmul(ir::Value* a, ir::Value* b) { return add("MatMul", {a, b}, "matmul"); }

 private:
  ir::Node* add(const char* op, const std::vector<ir::Value*>& inputs, const char* step) {
    return graph_.add_node(op, inputs, 1, graph_.unique_node_name(base_ + "/" + step));
  }
  ir::Value* constant(const char* what, const std::vector<int64_t>& values) {
    return canonicalize::int64_initializer(graph_, base_ + "/" + what, values);
  }

  ir::Graph& graph_;
  std::string base_;
  int64_t opset_;
};

/// Sizes of an operand's letters (-1: unknown), from its inferred type.
std::map<char, int64_t> letter_sizes(const std::string& term, const ir::TensorType& type) {
  std::map<char, int64_t> sizes;
  for (size_t i = 0; i < term.size(); ++i) {
    const ir::Dim& dim = (*type.shape)[i];
    sizes[term[i]] = dim.is_known() ? dim.value : -1;
  }
  return sizes;
}

/// The size of a merged group of letters: their product, -1 when any is unknown (1 when empty).
int64_t group_size(const std::string& group, const std::map<char, int64_t>& sizes) {
  int64_t size = 1;
  for (char c : group) {
    const int64_t s = sizes.at(c);
    if (s < 0) return -1;
    size *= s;
  }
  return size;
}

/// A Reshape target: `zeros` leading 0s (dims copied), then `sizes`; nothing when more than one
/// size is unknown (Reshape infers one -1 only).
std::optional<std::vector<int64_t>> reshape_target(size_t zeros, const std::vector<int64_t>& sizes) {
  if (std::count(sizes.begin(), sizes.end(), -1) > 1) return std::nullopt;
  std::vector<int64_t> target(zeros, 0);
  target.insert(target.end(), sizes.begin(), sizes.end());
  return target;
}

/// How a two-operand contraction becomes one MatMul: the letter orders the operands are
/// transposed to, the Reshapes around it (none where the dims already line up), and the
/// letters of the MatMul's (reshaped) result.
struct ContractionPlan {
  std::string a_order, b_order, y_letters;
  std::optional<std::vector<int64_t>> a_target, b_target, y_target;
};

/// The letters of `group` as sizes (-1 unknown).
std::vector<int64_t> sizes_of(const std::string& group, const std::map<char, int64_t>& sizes) {
  std::vector<int64_t> out;
  for (char c : group) out.push_back(sizes.at(c));
  return out;
}

/// Plans MatMul(A, B) for operands with letters `a` and `b` (nothing left to sum) and output
/// `out`. Leading dims MatMul broadcasts stay dims (a Reshape copies them with 0), so symbolic
/// sizes such as the batch survive; merged groups need their sizes, one unknown per Reshape.
Result<ContractionPlan> plan_contraction(const std::string& a, const std::string& b, const std::string& out,
                                         const std::map<char, int64_t>& sizes) {
  const std::string batch = letters_where(out, [&](char c) { return contains(a, c) && contains(b, c); });
  const std::string left = letters_where(out, [&](char c) { return contains(a, c) && !contains(b, c); });
  const std::string right = letters_where(out, [&](char c) { return contains(b, c) && !contains(a, c); });
  const std::string contract = letters_where(a, [&](char c) { return contains(b, c) && !contains(out, c); });
  const int64_t m = group_size(left, sizes), k = group_size(contract, sizes), n = group_size(right, sizes);
  const auto need = [](std::optional<std::vector<int64_t>> target, const char* what) -> Result<std::vector<int64_t>> {
    if (!target) return Status::error(std::string(what) + " merges dims with more than one unknown size");
    return *target;
  };
  ContractionPlan plan;
  if (!batch.empty()) {
    // [batch..., M, K] x [batch..., K, N]; a one-letter group is already its dim.
    plan.a_order = batch + left + contract;
    plan.b_order = batch + contract + right;
    plan.y_letters = batch + left + right;
    if (left.size() != 1 || contract.size() != 1) {
      LOKA_ASSIGN_OR_RETURN(plan.a_target, need(reshape_target(batch.size(), {m, k}), "the first operand"));
    }
    if (contract.size() != 1 || right.size() != 1) {
      LOKA_ASSIGN_OR_RETURN(plan.b_target, need(reshape_target(batch.size(), {k, n}), "the second operand"));
    }
    if (left.size() != 1 || right.size() != 1) {
      LOKA_ASSIGN_OR_RETURN(plan.y_target,
                            need(reshape_target(batch.size(), sizes_of(left + right, sizes)), "the output"));
    }
  } else if (left.size() == 1 && contract.size() == 1 && right.size() >= 2) {
    // A matrix on the left of every sample ("mn,bnk->bmk"): B's other letters lead, and
    // MatMul broadcasts A [M, K] over them — the token-mixing form.
    const std::string leading = right.substr(0, right.size() - 1);
    plan.a_order = left + contract;
    plan.b_order = leading + contract + right.back();
    plan.y_letters = leading + left + right.back();
  } else {
    // A's other letters lead ("bnd,dk->bnk" is [b, n, d] x [d, k]); B is one [K, N] matrix.
    plan.a_order = left + contract;
    plan.b_order = contract + right;
    plan.y_letters = left + right;
    if (left.empty()) {
      LOKA_ASSIGN_OR_RETURN(plan.a_target, need(reshape_target(0, {1, k}), "the first operand"));
    } else if (contract.size() != 1) {
      LOKA_ASSIGN_OR_RETURN(plan.a_target, need(reshape_target(left.size(), {k}), "the first operand"));
    }
    if (contract.size() != 1 || right.size() != 1) {
      LOKA_ASSIGN_OR_RETURN(plan.b_target, need(reshape_target(0, {k, n}), "the second operand"));
    }
    if (left.empty() || right.size() != 1) {
      LOKA_ASSIGN_OR_RETURN(plan.y_target, need(reshape_target(left.size(), sizes_of(right, sizes)), "the output"));
    }
  }
  return plan;
}

/// Lowers `einsum`; an error says why it stays (nothing changed then).
Status lower(ir::Graph& graph, ir::Node* einsum) {
  const size_t operands = einsum->inputs().size();
  if (operands < 1 || operands > 2) return Status::error("only one or two operands are lowered");
  LOKA_ASSIGN_OR_RETURN(const std::string text, einsum->attributes().get_string("equation"));
  LOKA_ASSIGN_OR_RETURN(const EinsumEquation equation, parse_einsum_equation(text, operands));
  std::vector<ir::Value*> x(einsum->inputs().begin(), einsum->inputs().end());
  std::map<char, int64_t> sizes;
  for (size_t i = 0; i < operands; ++i) {
    if (x[i] == nullptr || !x[i]->type().has_rank()) return Status::error("operand ranks unknown (run infer-shapes)");
    if (x[i]->type().rank() != static_cast<int>(equation.inputs[i].size()))
      return Status::error("operand " + std::to_string(i) + " has rank " + std::to_string(x[i]->type().rank()) +
                           ", its term '" + equation.inputs[i] + "' " + std::to_string(equation.inputs[i].size()));
    for (const auto& [c, s] : letter_sizes(equation.inputs[i], x[i]->type()))
      if (!sizes.count(c) || sizes[c] < 0) sizes[c] = s;
  }
  if (operands == 2 && (x[0]->type().dtype != DType::kFloat32 || x[1]->type().dtype != DType::kFloat32))
    return Status::error("a contraction is lowered for float32 operands only");

  const std::string& out = equation.output;
  // Letters one operand alone has and the output lacks are summed first.
  std::vector<std::string> kept(operands);
  std::vector<std::vector<int64_t>> summed(operands);
  for (size_t i = 0; i < operands; ++i)
    for (size_t a = 0; a < equation.inputs[i].size(); ++a) {
      const char c = equation.inputs[i][a];
      const bool elsewhere = contains(out, c) || (operands == 2 && contains(equation.inputs[1 - i], c));
      if (elsewhere) kept[i] += c;
      else summed[i].push_back(static_cast<int64_t>(a));
    }
  // Plan before adding a node, so a refusal changes nothing.
  std::optional<ContractionPlan> plan;
  if (operands == 2) {
    LOKA_ASSIGN_OR_RETURN(plan, plan_contraction(kept[0], kept[1], out, sizes));
  }

  Lowering build(graph, *einsum);
  const std::string name = einsum->name();
  for (size_t i = 0; i < operands; ++i) x[i] = build.reduce_sum(x[i], summed[i]);
  ir::Value* y = x[0];
  ir::Node* product = nullptr;
  std::string y_letters = kept[0];
  if (plan) {
    ir::Value* a = build.transpose(x[0], kept[0], plan->a_order);
    ir::Value* b = build.transpose(x[1], kept[1], plan->b_order);
    if (plan->a_target) a = build.reshape(a, *plan->a_target);
    if (plan->b_target) b = build.reshape(b, *plan->b_target);
    product = build.matmul(a, b);
    y = product->output(0);
    if (plan->y_target) y = build.reshape(y, *plan->y_target);
    y_letters = plan->y_letters;
  }
  y = build.transpose(y, y_letters, out);
  // The Einsum's output keeps its name and readers; remove-identities drops the Identity.
  canonicalize::NodeSpec result{"Identity", {y}, {}, graph.unique_node_name(name + "/result"), ""};
  LOKA_RETURN_IF_ERROR(canonicalize::replace_with_node(graph, einsum->output(0), {einsum}, std::move(result)).status());
  // The contraction is the GEMM site the Probe and Dispatch report: it takes the Einsum's name.
  if (product != nullptr && !name.empty()) graph.rename_node(product, name);
  return Status::ok();
}

class LowerEinsumPass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    bool changed = false;
    for (uint32_t id = 0; id < graph.node_id_bound(); ++id) {
      ir::Node* node = graph.node_by_id(id);
      if (node == nullptr || !node->is("Einsum")) continue;
      if (lower(graph, node).is_ok()) {
        context.add_statistic("einsum-lowered");
        changed = true;
      } else {
        context.add_statistic("einsum-kept");
      }
    }
    return changed;
  }
};

}  // namespace

Result<EinsumEquation> parse_einsum_equation(const std::string& equation, size_t operand_count) {
  std::string text;
  for (char c : equation)
    if (!std::isspace(static_cast<unsigned char>(c))) text += c;
  if (text.find('.') != std::string::npos) return Status::error("an ellipsis ('...') is not lowered");
  const size_t arrow = text.find("->");
  const std::string lhs = text.substr(0, arrow);
  EinsumEquation parsed;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    parsed.inputs.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (parsed.inputs.size() != operand_count)
    return Status::error("equation '" + equation + "' has " + std::to_string(parsed.inputs.size()) + " terms for " +
                         std::to_string(operand_count) + " operands");
  for (const std::string& term : parsed.inputs) LOKA_RETURN_IF_ERROR(check_term(term, "term"));
  std::string all = std::accumulate(parsed.inputs.begin(), parsed.inputs.end(), std::string());
  if (arrow != std::string::npos) {
    parsed.output = text.substr(arrow + 2);
    LOKA_RETURN_IF_ERROR(check_term(parsed.output, "output"));
    for (char c : parsed.output)
      if (!contains(all, c)) return Status::error(std::string("output letter '") + c + "' is in no operand");
  } else {
    // Implicit output: the letters used exactly once, in alphabetical (ASCII) order, as numpy.
    std::sort(all.begin(), all.end());
    for (char c : all)
      if (std::count(all.begin(), all.end(), c) == 1) parsed.output += c;
  }
  return parsed;
}

PassInfo lower_einsum_pass_info() {
  return PassInfo{"lower-einsum",
                  "lower Einsum (one or two operands) into ReduceSum, Transpose, Reshape and MatMul nodes",
                  {},
                  {"einsum-lowered", "einsum-kept"}};
}

std::unique_ptr<Pass> make_lower_einsum_pass() { return std::make_unique<LowerEinsumPass>(); }

}  // namespace loka
