// ============================================================================
// passes/dispatch/budget_use.cc — the budget pin-precision left.
// ============================================================================
#include "passes/dispatch/budget_use.h"

#include <cmath>

namespace loka::dispatch {

using nlohmann::json;

Result<BudgetUse> budget_use(const json& document) {
  BudgetUse use;
  if (!document.contains("model") || !document["model"].contains("precision")) return use;
  const json& precision = document["model"]["precision"];
  if (!precision.is_object() || !precision.contains("budget") || !precision["budget"].is_string()) return use;
  LOKA_ASSIGN_OR_RETURN(const probe::Budget budget, probe::parse_budget(precision["budget"].get<std::string>()));
  if (budget.automatic) return use;
  use.known = true;
  use.metric = budget.metric;
  use.limit = budget.limit;
  use.predicted = precision.value("predicted_error", 0.0);
  if (precision.value("measured", false) && precision.contains("reserve") && precision["reserve"].is_number()) {
    const double reserve = precision["reserve"].get<double>();
    if (reserve >= 0 && reserve < 1) {
      use.measured = true;
      use.reserve = reserve;
    }
  }
  const json stored = precision.value("storage_error", json());
  if (stored.is_number() && std::isfinite(stored.get<double>()) && stored.get<double>() >= 0)
    use.storage_error = stored.get<double>();
  return use;
}

}  // namespace loka::dispatch
