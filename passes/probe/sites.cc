// ============================================================================
// passes/probe/sites.cc — finding FP8 candidate sites.
// ============================================================================
#include "passes/probe/sites.h"

#include "passes/ir/graph_algorithms.h"
#include "passes/ir/text_format.h"

namespace loka::probe {
namespace {

/// Product of an activation's dims except the leading (batch) dim and the last `trailing` dims.
double rows_per_sample(const ir::TensorType& type, int trailing) {
  if (!type.shape || type.rank() < trailing) return 1.0;
  double rows = 1.0;
  for (int i = 1; i < type.rank() - trailing; ++i) {
    const ir::Dim& dim = (*type.shape)[static_cast<size_t>(i)];
    rows *= dim.is_known() ? static_cast<double>(dim.value) : 1.0;
  }
  return rows;
}

int64_t dim_or(const ir::TensorType& type, int index_from_end, int64_t fallback) {
  if (!type.shape || type.rank() < index_from_end) return fallback;
  const ir::Dim& dim = (*type.shape)[static_cast<size_t>(type.rank() - index_from_end)];
  return dim.is_known() ? dim.value : fallback;
}

/// True when `value` is computed from initializers and Constants alone (a weight
/// behind Transpose/Cast/Reshape, as the dynamo exporter writes Linear layers).
bool is_constant_derived(const ir::Value* value) {
  std::vector<const ir::Value*> pending = {value};
  std::vector<bool> seen;
  while (!pending.empty()) {
    const ir::Value* current = pending.back();
    pending.pop_back();
    if (current == nullptr || current->is_initializer()) continue;
    if (current->is_graph_input() || current->producer() == nullptr) return false;
    if (seen.size() <= current->id()) seen.resize(current->id() + 1, false);
    if (seen[current->id()]) continue;
    seen[current->id()] = true;
    for (const ir::Value* input : current->producer()->inputs()) pending.push_back(input);
  }
  return true;
}

}  // namespace

const char* site_kind_name(SiteKind kind) {
  switch (kind) {
    case SiteKind::kWeightGemm: return "weight_gemm";
    case SiteKind::kActivationMatMul: return "activation_matmul";
    case SiteKind::kEmbedding: return "embedding";
  }
  return "?";
}

std::vector<Site> find_sites(const ir::Graph& graph) {
  std::vector<Site> sites;
  auto order = ir::topological_order(graph);
  if (!order) return sites;
  for (const ir::Node* node : *order) {
    const ir::Value* a = node->input(0);
    const ir::Value* b = node->input(1);
    if (!a || !b) continue;
    Site site{node->name(), node->op_type(), SiteKind::kWeightGemm};
    if (node->is("Gemm")) {
      site.activation_transposed = node->attributes().get_int("transA", 0).value() != 0;
      site.weight_transposed = node->attributes().get_int("transB", 0).value() != 0;
      if (!is_constant_derived(b)) continue;  // a Gemm of two activations is rare; leave it
      const int64_t k = dim_or(b->type(), site.weight_transposed ? 1 : 2, 0);
      const int64_t n = dim_or(b->type(), site.weight_transposed ? 2 : 1, 0);
      site.flops_per_sample = 2.0 * static_cast<double>(k) * static_cast<double>(n);
    } else if (node->is("MatMul")) {
      if (is_constant_derived(b) && b->type().rank() == 2) {
        site.flops_per_sample = 2.0 * static_cast<double>(dim_or(b->type(), 2, 0)) *
                                static_cast<double>(dim_or(b->type(), 1, 0)) * rows_per_sample(a->type(), 1);
      } else if (!is_constant_derived(a) && !is_constant_derived(b)) {
        site.kind = SiteKind::kActivationMatMul;
        site.flops_per_sample = 2.0 * static_cast<double>(dim_or(a->type(), 2, 1)) *
                                static_cast<double>(dim_or(a->type(), 1, 0)) *
                                static_cast<double>(dim_or(b->type(), 1, 0)) * rows_per_sample(a->type(), 2);
      } else {
        continue;
      }
    } else if (node->is("Gather") && is_constant_derived(a) && a->type().rank() == 2 &&
               node->attributes().get_int("axis", 0).value() == 0) {
      site.kind = SiteKind::kEmbedding;
      site.activation_input = 1;  // the ids
      site.weight_input = 0;      // the table
      const double width = static_cast<double>(dim_or(a->type(), 1, 0));
      site.table_elements = static_cast<double>(dim_or(a->type(), 2, 0)) * width;
      site.gathered_per_sample = rows_per_sample(b->type(), 0) * width;
    } else {
      continue;
    }
    site.shape = ir::print_type(a->type()) + "x" + ir::print_type(b->type());
    sites.push_back(std::move(site));
  }
  return sites;
}

}  // namespace loka::probe
