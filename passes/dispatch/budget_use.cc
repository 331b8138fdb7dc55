// ============================================================================
// passes/dispatch/budget_use.cc — the budget pin-precision left, and site errors.
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
  if (std::optional<double> stored = error_value(precision.value("storage_error", json()), nullptr))
    use.storage_error = *stored;
  return use;
}

const char* error_field(probe::BudgetMetric metric) {
  switch (metric) {
    case probe::BudgetMetric::kRelL2: return "rel_l2_mean";
    case probe::BudgetMetric::kMaxAbs: return "max_abs";
    case probe::BudgetMetric::kLogloss: return "logloss_expected_mean";
  }
  return "rel_l2_mean";
}

std::optional<double> error_value(const json& error, const char* field) {
  const json* number = &error;
  if (field != nullptr) {
    if (!error.is_object() || !error.contains(field)) return std::nullopt;
    number = &error[field];
  }
  if (!number->is_number()) return std::nullopt;
  const double value = number->get<double>();
  return std::isfinite(value) && value >= 0 ? std::optional<double>(value) : std::nullopt;
}

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

double scaled_model_error(double site_error, double local_ratio, probe::BudgetMetric metric) {
  return site_error * (metric == probe::BudgetMetric::kLogloss ? local_ratio * local_ratio : local_ratio);
}

}  // namespace loka::dispatch
