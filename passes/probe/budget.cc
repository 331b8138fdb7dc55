// ============================================================================
// passes/probe/budget.cc — parsing and sharing the accuracy budget.
// ============================================================================
#include "passes/probe/budget.h"

#include <cmath>
#include <cstdlib>
#include <sstream>

namespace loka::probe {

std::string Budget::metric_name() const {
  switch (metric) {
    case BudgetMetric::kRelL2: return "rel_l2";
    case BudgetMetric::kMaxAbs: return "max_abs";
    case BudgetMetric::kLogloss: return "logloss";
  }
  return "?";
}

std::string Budget::to_string() const {
  if (automatic) return "auto";
  std::ostringstream out;
  out << metric_name() << "=" << limit;
  return out.str();
}

Budget Budget::resolve(bool have_labels) const {
  if (!automatic) return *this;
  return have_labels ? Budget{BudgetMetric::kLogloss, 0.0002, false} : Budget{BudgetMetric::kRelL2, 0.01, false};
}

double Budget::site_threshold(size_t site_count) const {
  return limit / std::sqrt(static_cast<double>(site_count > 0 ? site_count : 1));
}

Result<Budget> parse_budget(const std::string& spec) {
  if (spec.empty() || spec == "auto") return Budget{BudgetMetric::kRelL2, 0.01, true};
  const size_t equals = spec.find('=');
  const auto fail = [&spec] {
    return Status::error("--budget '" + spec + "': expected rel_l2=X, max_abs=X, logloss=X (relative) or auto");
  };
  if (equals == std::string::npos) return fail();
  const std::string name = spec.substr(0, equals);
  char* end = nullptr;
  const double limit = std::strtod(spec.c_str() + equals + 1, &end);
  if (*end != '\0' || !(limit > 0) || !std::isfinite(limit)) return fail();
  if (name == "rel_l2") return Budget{BudgetMetric::kRelL2, limit, false};
  if (name == "max_abs") return Budget{BudgetMetric::kMaxAbs, limit, false};
  if (name == "logloss") return Budget{BudgetMetric::kLogloss, limit, false};
  return fail();
}

}  // namespace loka::probe
