// ============================================================================
// passes/mods/pin_precision.cc — `pin-precision`: greedy FP8 selection under
// the model budget, with user pins.
// ============================================================================
#include "passes/mods/pin_precision.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <regex>

#include "passes/dispatch/gpu_timer.h"
#include "passes/mods/insert_scales.h"
#include "passes/mods/measure_candidate.h"
#include "passes/mods/store_activations_bf16.h"
#include "passes/probe/annotations.h"
#include "passes/probe/budget.h"
#include "passes/probe/metrics.h"
#include "passes/probe/sites.h"

namespace loka {
namespace {

using nlohmann::json;

constexpr std::array<const char*, 2> kRecipes = {"e4m3_tensor", "e4m3_row"};
constexpr size_t kTensor = 0, kRow = 1;

// ------------------------------------------------------------------ rules ---

struct PinRule {
  std::string text;  ///< as given, recorded in "pinned_by"
  std::regex pattern;
  std::string precision;  ///< "fp8_e4m3", "bf16" or "fp32"
};

Result<std::vector<PinRule>> parse_rules(const std::vector<std::string>& texts) {
  std::vector<PinRule> rules;
  for (const std::string& text : texts) {
    const size_t equals = text.rfind('=');
    const std::string expected = "--pin '" + text + "': expected REGEX=fp8|bf16|fp32";
    if (equals == std::string::npos || equals == 0) return Status::error(expected);
    const std::string precision = text.substr(equals + 1);
    std::string canonical;
    if (precision == "fp8" || precision == "fp8_e4m3")
      canonical = "fp8_e4m3";
    else if (precision == "bf16" || precision == "fp32")
      canonical = precision;
    else
      return Status::error(expected + " (got precision '" + precision + "')");
    try {
      rules.push_back(PinRule{text, std::regex(text.substr(0, equals), std::regex::ECMAScript), canonical});
    } catch (const std::regex_error& error) {
      return Status::error("--pin '" + text + "': invalid regex: " + error.what());
    }
  }
  return rules;
}

Result<bool> rule_matches(const PinRule& rule, const std::string& name) {
  try {
    return std::regex_search(name, rule.pattern);
  } catch (const std::regex_error& error) {  // e.g. the regex engine's complexity limit
    return Status::error("--pin '" + rule.text + "' on node '" + name + "': " + error.what());
  }
}

/// The last rule matching `name` (later rules win), or null.
Result<const PinRule*> matching_rule(const std::vector<PinRule>& rules, const std::string& name) {
  const PinRule* match = nullptr;
  for (const PinRule& rule : rules) {
    LOKA_ASSIGN_OR_RETURN(const bool matches, rule_matches(rule, name));
    if (matches) match = &rule;
  }
  return match;
}

/// The rules that match no site's name: they pin nothing, most likely a mistyped node name.
Result<json> rules_matching_no_site(const std::vector<PinRule>& rules, const std::vector<probe::Site>& sites) {
  json unmatched = json::array();
  for (const PinRule& rule : rules) {
    bool matched = false;
    for (const probe::Site& site : sites) {
      LOKA_ASSIGN_OR_RETURN(matched, rule_matches(rule, site.node));
      if (matched) break;
    }
    if (!matched) unmatched.push_back(rule.text);
  }
  return unmatched;
}

// ----------------------------------------------------------------- budget ---

/// The budget to select under: --budget, with "auto" resolved as the Probe did.
Result<probe::Budget> resolve_budget(const std::string& spec, const json& probe_summary) {
  LOKA_ASSIGN_OR_RETURN(probe::Budget budget, probe::parse_budget(spec));
  if (!budget.automatic) return budget;
  if (!probe_summary.contains("budget") || !probe_summary["budget"].is_string())
    return Status::error("--budget auto: the Probe recorded no resolved budget (model.probe.budget)");
  LOKA_ASSIGN_OR_RETURN(probe::Budget recorded, probe::parse_budget(probe_summary["budget"].get<std::string>()));
  if (recorded.automatic) return Status::error("--budget auto: the Probe recorded 'auto', not a resolved budget");
  return recorded;
}

/// A site's share of the predicted model error: a part that adds linearly
/// and a part that adds in quadrature (independent rounding errors).
struct SiteError {
  double linear = 0;
  double squared = 0;
  SiteError operator+(const SiteError& other) const { return {linear + other.linear, squared + other.squared}; }
};

/// How site errors combine into the model prediction for one budget metric.
///  - rel_l2, max_abs: the site's model-output error, in quadrature.
///  - logloss: the Probe's expected drift (KL, additive) plus the eval-set
///    noise of the per-sample logloss change (its second moment, additive,
///    then square-rooted) — see probe::LoglossShift. Summing measured
///    |drift| per site instead adds up noise, not error.
struct ErrorModel {
  probe::BudgetMetric metric;
  double limit;  ///< what the selection may spend: the budget less the reserve
  double reserve = 0;  ///< the share of the budget left to dispatch (option reserve)
  double judged_samples = 1;  ///< logloss: the eval-set size the noise term assumes
  double noise_sigmas = probe::kDefaultNoiseSigmas;  ///< logloss: noise standard deviations allowed for

  /// The site's error from its Probe error object; absent when unmeasured.
  std::optional<SiteError> site_error(const json& error) const {
    if (metric == probe::BudgetMetric::kLogloss) {
      const auto expected = number(error, "logloss_expected_mean");
      const auto second_moment = number(error, "logloss_second_moment_mean");
      if (!expected || !second_moment) return std::nullopt;
      const double noise = noise_sigmas * noise_sigmas / judged_samples;
      return SiteError{*expected, *second_moment * noise};
    }
    const auto value = number(error, metric == probe::BudgetMetric::kMaxAbs ? "max_abs" : "rel_l2_mean");
    if (!value) return std::nullopt;
    return SiteError{0, *value * *value};
  }
  double predicted(const SiteError& total) const { return total.linear + std::sqrt(total.squared); }
  /// A measured selection's error as an eval set of judged_samples samples may see it: the
  /// calibration figure plus noise_sigmas standard deviations of the gap between the
  /// calibration drift and an eval set's (independent samples, so their variances add).
  /// Without it, the measured greedy fits the calibration sets' noise: tiny DHEN measured
  /// within 0.7 x budget and drifted 0.0225% on eval under 0.02% (H200, 2026-11-26).
  double measured_bound(const SelectionError& error) const {
    return probe::eval_bound(error.value, error.sample_noise, error.samples, judged_samples, noise_sigmas);
  }
  bool fits(const SiteError& total) const { return predicted(total) <= limit; }

 private:
  static std::optional<double> number(const json& error, const char* field) {
    if (!error.is_object() || !error.contains(field) || !error[field].is_number()) return std::nullopt;
    const double value = error[field].get<double>();
    return std::isfinite(value) && value >= 0 ? std::optional<double>(value) : std::nullopt;
  }
};

// ------------------------------------------------------------------ sites ---

struct Candidate {
  std::string name;
  double flops = 0;
  double table_elements = 0;        ///< embedding sites: see probe::Site
  double gathered_per_sample = 0;
  std::string obstacle;  ///< non-empty: insert-scales cannot lower it
  const PinRule* pin = nullptr;
  bool unsafe = false;                         ///< the Probe's site verdict
  std::array<std::optional<SiteError>, 2> error;  ///< per recipe (absent: unmeasured)
  std::array<bool, 2> recipe_unsafe = {false, false};
  bool has_static_scale = false;  ///< stats.activation.scale_e4m3 (needed by e4m3_tensor)
  std::optional<size_t> recipe;   ///< chosen FP8 recipe
  bool bf16_table = false;        ///< a lookup left out of FP8 whose table is stored in BF16 (measured)
  std::string reason;             ///< why not FP8
};

Candidate describe(const ir::Node& node, const probe::Site& site, const json& annotation, const ErrorModel& model) {
  Candidate c;
  c.name = site.node;
  c.flops = site.flops_per_sample;
  c.table_elements = site.table_elements;
  c.gathered_per_sample = site.gathered_per_sample;
  c.obstacle = fp8_lowering_obstacle(node);
  if (!annotation.is_object()) return c;
  c.unsafe = annotation.value("verdict", "") == "unsafe";
  const json* stats = annotation.contains("stats") ? &annotation["stats"] : nullptr;
  c.has_static_scale = stats && stats->contains("activation") && (*stats)["activation"].contains("scale_e4m3") &&
                       (*stats)["activation"]["scale_e4m3"].is_number() &&
                       (*stats)["activation"]["scale_e4m3"].get<double>() > 0;
  for (size_t r = 0; r < kRecipes.size(); ++r) {
    const json* entry = nullptr;
    if (annotation.contains("recipes") && annotation["recipes"].contains(kRecipes[r]))
      entry = &annotation["recipes"][kRecipes[r]];
    if (entry) {
      c.error[r] = model.site_error(entry->value("error", json()));
      c.recipe_unsafe[r] = entry->value("verdict", "") == "unsafe";
    } else if (annotation.value("recipe", "") == kRecipes[r]) {
      c.error[r] = model.site_error(annotation.value("error", json()));
    }
  }
  return c;
}

/// Order among sites of equal rank: more GEMM FLOPs first; then, for embedding tables (no
/// FLOPs), the larger table first, and of equal tables the one read more per sample. An FP8
/// table saves 3 bytes an element at rest and in every gather, and gathers join the selection
/// last, from what the GEMMs left of the budget: taken in topological order, 7 of full-size
/// DLRM-DCNv2's 26 tables stayed FP32 (H200, 2026-11-27).
bool goes_first_among_equals(const Candidate& x, const Candidate& y) {
  if (x.flops != y.flops) return x.flops > y.flops;
  if (x.table_elements != y.table_elements) return x.table_elements > y.table_elements;
  return x.gathered_per_sample > y.gathered_per_sample;
}

/// Usable for an unpinned selection: measured, not judged unsafe, and for the
/// tensor recipe a calibrated static scale (embeddings take theirs from the table).
bool recipe_usable(const Candidate& c, size_t r, bool embedding) {
  if (!c.error[r] || c.recipe_unsafe[r]) return false;
  return r != kTensor || embedding || c.has_static_scale;
}

// ------------------------------------------------------------------- pass ---

class PinPrecisionPass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    LOKA_ASSIGN_OR_RETURN(json document, read_annotations(graph));
    const std::string before = document.dump();
    const json& summary = document["model"].value("probe", json());
    if (!summary.is_object())
      return Status::error("needs the Probe's annotations (model.probe is missing): run probe before pin-precision");
    LOKA_ASSIGN_OR_RETURN(const probe::Budget budget, resolve_budget(context.settings().budget, summary));
    LOKA_ASSIGN_OR_RETURN(const std::vector<PinRule> rules, parse_rules(context.settings().pin_rules));
    const double reserve = context.float_option("reserve");
    if (!(reserve >= 0 && reserve < 1)) return Status::error("option reserve must be in [0, 1)");
    // Sites fill the budget less the reserve; dispatch may spend the rest (with what the
    // sites leave) on TF32/BF16 for the FP32 nodes, which add little error and save much time.
    ErrorModel model{budget.metric, budget.limit * (1.0 - reserve), reserve};
    if (budget.metric == probe::BudgetMetric::kLogloss) {
      const json samples = summary.value("logloss_judged_samples", json());
      if (!samples.is_number() || !(samples.get<double>() > 0))
        return Status::error("--budget " + budget.to_string() +
                             " needs the Probe's logloss statistics (model.probe.logloss_judged_samples): "
                             "re-run the probe with labelled calibration data");
      model.judged_samples = samples.get<double>();
      model.noise_sigmas = summary.value("noise_sigmas", probe::kDefaultNoiseSigmas);
    }

    std::vector<probe::Site> sites = probe::find_sites(graph);
    std::vector<Candidate> candidates;
    json& nodes = document["nodes"];
    for (const probe::Site& site : sites) {
      const ir::Node* node = graph.find_node(site.node);
      if (node == nullptr) return Status::error("site '" + site.node + "' has no node of that name");
      const json annotation = nodes.contains(site.node) ? nodes[site.node] : json();
      Candidate c = describe(*node, site, annotation, model);
      LOKA_ASSIGN_OR_RETURN(c.pin, matching_rule(rules, site.node));
      if (budget.metric == probe::BudgetMetric::kLogloss && annotation.is_object() && annotation.contains("recipes") &&
          !c.error[kTensor] && !c.error[kRow] && !c.pin)
        return Status::error("--budget " + budget.to_string() +
                             " needs the Probe's logloss drift per site "
                             "(calibration data with labels.pb); site '" +
                             site.node + "' has none");
      candidates.push_back(std::move(c));
    }
    LOKA_ASSIGN_OR_RETURN(const json unmatched_pins, rules_matching_no_site(rules, sites));

    LOKA_ASSIGN_OR_RETURN(const bool measure, measure_requested(context));
    SiteError total;
    select_pinned(candidates, sites, model, total);
    std::optional<Measurement> measured;
    if (measure) {
      Measurement m;
      m.margin = context.float_option("margin");
      m.max_evaluations = static_cast<size_t>(std::max<int64_t>(0, context.int_option("max_evaluations")));
      if (!(m.margin > 0)) return Status::error("option margin must be positive");
      std::vector<probe::SiteSwitches> switches;
      for (const probe::Site& site : sites) {
        // A site the Probe did not measure has no scales; it cannot be selected, so no switches.
        auto scales = probe::scales_from_annotation(site, nodes.contains(site.node) ? nodes[site.node] : json());
        switches.push_back(scales ? probe::switches_for(site, *scales) : probe::SiteSwitches{site.node, {}});
      }
      m.storage_measured = context.bool_option("bf16_storage");
      if (m.storage_measured) {
        m.activation_sets = find_activation_storage_candidates(graph, sites, context.float_option("storage_min_elements"));
        m.storage = plan_storage(m.activation_sets, candidates, sites, switches);
      }
      LOKA_ASSIGN_OR_RETURN(CandidateMeter meter,
                            CandidateMeter::create(graph, switches, context.settings().calibration_data, budget.metric,
                                                   gpu_available() ? Device::kCuda : Device::kCpu));
      m.data_sets = meter.data_sets();
      m.switches = switches.size();
      LOKA_RETURN_IF_ERROR(select_measured(meter, candidates, sites, model, total, m));
      measured = m;
    } else {
      select_greedy(candidates, sites, model, total);
    }
    return write_decisions(graph, context, document, before, candidates, sites, budget, model, total, measured,
                           unmatched_pins);
  }

 private:
  /// BF16 storage the measured selection adds after the FP8 sites: a set of activations
  /// (store_activations_bf16.h) or the table of a lookup left out of FP8. Each turns on the
  /// bf16 switches at `entries` of the switched model's Mode, after the sites' own.
  struct StorageChoice {
    std::vector<size_t> entries;
    std::optional<size_t> set;  ///< an activation set (its index in activation_sets), or
    size_t lookup = 0;          ///< the lookup site's index (no set)
    bool chosen = false;
    std::string reason;  ///< why not chosen
  };

  /// What the measured selection found (document["model"]["precision"]).
  struct Measurement {
    double margin = 1.0;
    std::vector<ActivationStorageCandidate> activation_sets;
    std::vector<StorageChoice> storage;  ///< activation sets (largest first), then tables
    size_t switches = 0;                 ///< entries of Mode: sites, then storage switches
    size_t storage_evaluations = 0;      ///< of `evaluations`, those that tried BF16 storage
    bool storage_measured = false;       ///< option bf16_storage: BF16 storage was open to the selection
    size_t max_evaluations = 256;
    size_t evaluations = 0;
    size_t data_sets = 0;
    SelectionError selected;  ///< what the calibration data gave for the selected set (its bound:
                              ///< ErrorModel::measured_bound)
  };

  static bool gpu_available() { return dispatch::gpu_unavailable_reason().empty(); }

  /// Switches for every storage choice (appended to `switches`): BF16 rounding where each
  /// activation set is computed, and on each lookup's gathered rows (the table in BF16). No
  /// taps: a storage switch has no local error to report.
  static std::vector<StorageChoice> plan_storage(const std::vector<ActivationStorageCandidate>& sets,
                                                 const std::vector<Candidate>& candidates,
                                                 const std::vector<probe::Site>& sites,
                                                 std::vector<probe::SiteSwitches>& switches) {
    const FakeQuantRecipe none{};
    const FakeQuantRecipe bf16{FakeQuantForm::kBFloat16, false, 1.0f};
    const auto add_switch = [&](const std::string& node) {
      switches.push_back(probe::SiteSwitches{node, {{probe::OperandSwitch::kOutput, {bf16, none, none}}}, false});
      return switches.size() - 1;
    };
    std::vector<StorageChoice> storage;
    for (size_t i = 0; i < sets.size(); ++i) {
      StorageChoice choice;
      choice.set = i;
      for (const std::string& source : sets[i].sources) choice.entries.push_back(add_switch(source));
      storage.push_back(std::move(choice));
    }
    std::vector<size_t> lookups;
    for (size_t i = 0; i < sites.size(); ++i)
      if (is_embedding(sites[i])) lookups.push_back(i);
    std::stable_sort(lookups.begin(), lookups.end(),
                     [&](size_t x, size_t y) { return goes_first_among_equals(candidates[x], candidates[y]); });
    for (size_t i : lookups) {
      StorageChoice choice;
      choice.lookup = i;
      choice.entries.push_back(add_switch(sites[i].node));
      storage.push_back(std::move(choice));
    }
    return storage;
  }

  /// Option `measure`: auto (on when --calib is given and this machine has a GPU, where an
  /// evaluation costs milliseconds), true or false.
  static Result<bool> measure_requested(const PassContext& context) {
    const std::string& value = context.string_option("measure");
    const bool have_data = !context.settings().calibration_data.empty();
    if (value == "auto") return have_data && gpu_available();
    if (value == "false" || value == "0") return false;
    if (value != "true" && value != "1") return Status::error("option measure='" + value + "': expected auto, true or false");
    if (!have_data) return Status::error("option measure=true needs calibration data (--calib)");
    return true;
  }

  static bool is_embedding(const probe::Site& site) { return site.kind == probe::SiteKind::kEmbedding; }

  /// Pinned fp8 sites go first, whatever their error: the user decided.
  static void select_pinned(std::vector<Candidate>& candidates, const std::vector<probe::Site>& sites,
                            const ErrorModel& model, SiteError& total) {
    for (size_t i = 0; i < candidates.size(); ++i) {
      Candidate& c = candidates[i];
      if (!c.pin || c.pin->precision != "fp8_e4m3") continue;
      if (!c.obstacle.empty()) {
        c.reason = "pinned fp8 but no FP8 lowering: " + c.obstacle;
        continue;
      }
      const bool tensor_ok = c.error[kTensor] && (is_embedding(sites[i]) || c.has_static_scale);
      // The tensor recipe when it fits, else the measured recipe with the smaller
      // error; an unmeasured site takes e4m3_row, which needs no calibration.
      if (tensor_ok && model.fits(total + *c.error[kTensor]))
        c.recipe = kTensor;
      else if (c.error[kRow] && (!tensor_ok || model.predicted(*c.error[kRow]) < model.predicted(*c.error[kTensor])))
        c.recipe = kRow;
      else
        c.recipe = tensor_ok ? kTensor : kRow;
      if (c.error[*c.recipe]) total = total + *c.error[*c.recipe];
    }
  }

  /// The unpinned sites open to selection; the others get their reason.
  static std::vector<size_t> open_sites(std::vector<Candidate>& candidates, const std::vector<probe::Site>& sites) {
    std::vector<size_t> open;
    for (size_t i = 0; i < candidates.size(); ++i) {
      Candidate& c = candidates[i];
      if (c.pin) continue;
      if (!c.obstacle.empty())
        c.reason = "no FP8 lowering: " + c.obstacle;
      else if (!c.error[kTensor] && !c.error[kRow])
        c.reason = "not measured";
      else if (c.unsafe)
        c.reason = "unsafe";
      else if (!recipe_usable(c, kTensor, is_embedding(sites[i])) && !recipe_usable(c, kRow, is_embedding(sites[i])))
        c.reason = "unsafe";
      else
        open.push_back(i);
    }
    return open;
  }

  /// Greedy by FLOPs per unit of predicted error among the unpinned sites.
  static void select_greedy(std::vector<Candidate>& candidates, const std::vector<probe::Site>& sites,
                            const ErrorModel& model, SiteError& total) {
    std::vector<size_t> open = open_sites(candidates, sites);
    while (!open.empty()) {
      std::optional<size_t> best;  // a candidate index, once one is usable
      size_t best_recipe = kTensor;
      double best_ratio = -1;
      std::vector<size_t> still_open;
      for (size_t slot = 0; slot < open.size(); ++slot) {
        Candidate& c = candidates[open[slot]];
        std::optional<size_t> recipe;
        for (size_t r : {kTensor, kRow})
          if (!recipe && recipe_usable(c, r, is_embedding(sites[open[slot]])) &&
              model.fits(total + *c.error[r]))
            recipe = r;
        if (!recipe) {  // the total only grows: it will never fit
          c.reason = "over budget";
          continue;
        }
        still_open.push_back(open[slot]);
        // Marginal cost: the growth of the predicted error if the site joins.
        const double cost = model.predicted(total + *c.error[*recipe]) - model.predicted(total);
        const double ratio = cost > 0 ? c.flops / cost : std::numeric_limits<double>::infinity();
        if (!best || ratio > best_ratio || (ratio == best_ratio && goes_first_among_equals(c, candidates[*best]))) {
          best = open[slot];
          best_recipe = *recipe;
          best_ratio = ratio;
        }
      }
      if (!best) break;  // nothing fits any more
      candidates[*best].recipe = best_recipe;
      total = total + *candidates[*best].error[best_recipe];
      still_open.erase(std::find(still_open.begin(), still_open.end(), *best));
      open = std::move(still_open);
    }
  }

  /// Measured greedy: in order of FLOPs per unit of predicted error, each open
  /// site joins the selection when the lowered model with it still measures
  /// within margin x budget on the calibration data.
  static Status select_measured(CandidateMeter& meter, std::vector<Candidate>& candidates,
                                const std::vector<probe::Site>& sites, const ErrorModel& model, SiteError& total,
                                Measurement& m) {
    const double limit = m.margin * model.limit;
    struct Entry {
      size_t index, recipe;
      double ratio;
    };
    std::vector<Entry> order;
    for (size_t i : open_sites(candidates, sites)) {
      const Candidate& c = candidates[i];
      const size_t r = recipe_usable(c, kTensor, is_embedding(sites[i])) ? kTensor : kRow;
      const double cost = model.predicted(*c.error[r]);
      // Sites without GEMM FLOPs (embedding gathers) go last: an unmeasurably
      // small predicted error must not let them spend the budget first.
      const double ratio = c.flops <= 0 ? 0.0 : cost > 0 ? c.flops / cost : std::numeric_limits<double>::infinity();
      order.push_back({i, r, ratio});
    }
    std::stable_sort(order.begin(), order.end(), [&](const Entry& x, const Entry& y) {
      if (x.ratio != y.ratio) return x.ratio > y.ratio;
      return goes_first_among_equals(candidates[x.index], candidates[y.index]);
    });
    const auto evaluate = [&]() -> Result<SelectionError> {
      ++m.evaluations;
      return measure_selection(meter, candidates, m);
    };
    const auto over_budget = [&](const SelectionError& last) {
      char text[96];
      std::snprintf(text, sizeof text, "over budget (measured %.3g > %.3g)", model.measured_bound(last), limit);
      return std::string(text);
    };
    // Pinned FP8 sites are in the selection from the start: measure them once.
    if (std::any_of(candidates.begin(), candidates.end(), [](const Candidate& c) { return c.recipe.has_value(); })) {
      if (m.evaluations >= m.max_evaluations) {
        for (const Entry& e : order) candidates[e.index].reason = "evaluation limit";
        return Status::ok();
      }
      LOKA_ASSIGN_OR_RETURN(m.selected, evaluate());
    }
    const auto try_site = [&](const Entry& e) -> Status {
      Candidate& c = candidates[e.index];
      // The recipe preferred by the prediction first; the row recipe as a
      // second chance when its predicted error is smaller.
      std::vector<size_t> recipes = {e.recipe};
      if (e.recipe == kTensor && recipe_usable(c, kRow, is_embedding(sites[e.index])) &&
          model.predicted(*c.error[kRow]) < model.predicted(*c.error[kTensor]))
        recipes.push_back(kRow);
      SelectionError last;
      bool tried = false;
      for (size_t r : recipes) {
        if (m.evaluations >= m.max_evaluations) break;
        c.recipe = r;
        LOKA_ASSIGN_OR_RETURN(last, evaluate());
        tried = true;
        if (model.measured_bound(last) <= limit) break;
        c.recipe.reset();
      }
      if (c.recipe) {
        m.selected = last;
        total = total + *c.error[*c.recipe];
      } else {
        c.reason = tried ? over_budget(last) : "evaluation limit";
      }
      return Status::ok();
    };
    std::map<std::string, size_t> index_of;
    for (size_t i = 0; i < candidates.size(); ++i) index_of[candidates[i].name] = i;
    const auto try_storage = [&](StorageChoice& choice) -> Status {
      if (choice.set) {
        for (const std::string& gemm : m.activation_sets[*choice.set].gemm_sites)
          if (const auto it = index_of.find(gemm); it == index_of.end() || !candidates[it->second].recipe) {
            choice.reason = "GEMM '" + gemm + "' stays out of FP8 (its fused kernel is what writes or reads BF16)";
            return Status::ok();
          }
      } else if (const Candidate& c = candidates[choice.lookup]; c.recipe || c.pin) {
        return Status::ok();  // an FP8 table, or a pin decided (store-tables-bf16 stores bf16 pins)
      }
      if (m.evaluations >= m.max_evaluations) {
        choice.reason = "evaluation limit";
        return Status::ok();
      }
      choice.chosen = true;
      ++m.storage_evaluations;
      LOKA_ASSIGN_OR_RETURN(const SelectionError last, evaluate());
      if (model.measured_bound(last) <= limit) {
        m.selected = last;
        if (!choice.set) candidates[choice.lookup].bf16_table = true;
      } else {
        choice.chosen = false;
        choice.reason = over_budget(last);
      }
      return Status::ok();
    };
    // GEMM sites first (FLOPs in FP8 are the time saved); then BF16 activation sets (bytes moved
    // at every run, and the arena); then lookups (a table's bytes at rest, few gathered); then
    // BF16 tables for the lookups left out of FP8.
    for (const Entry& e : order)
      if (candidates[e.index].flops > 0) LOKA_RETURN_IF_ERROR(try_site(e));
    for (StorageChoice& choice : m.storage)
      if (choice.set) LOKA_RETURN_IF_ERROR(try_storage(choice));
    for (const Entry& e : order)
      if (candidates[e.index].flops <= 0) LOKA_RETURN_IF_ERROR(try_site(e));
    for (StorageChoice& choice : m.storage)
      if (!choice.set) LOKA_RETURN_IF_ERROR(try_storage(choice));
    return Status::ok();
  }

  /// The calibration-data error of the model with the sites in `candidates` that carry a
  /// recipe in FP8: one Mode vector for the meter's switched model (recipe r is Mode r + 1,
  /// kRecipes being the Probe's first recipes in its order).
  static Result<SelectionError> measure_selection(CandidateMeter& meter, const std::vector<Candidate>& candidates,
                                                  const Measurement& m) {
    std::vector<int32_t> mode(m.switches, 0);  // the sites' entries first, then the storage switches'
    for (size_t i = 0; i < candidates.size(); ++i)
      if (candidates[i].recipe) mode[i] = static_cast<int32_t>(*candidates[i].recipe) + 1;
    for (const StorageChoice& choice : m.storage)
      if (choice.chosen)
        for (size_t entry : choice.entries) mode[entry] = 1;  // recipe 0 of a storage switch: bf16
    return meter.measure(mode);
  }

  /// Writes one site's decision into its annotation; returns its precision.
  static std::string mark_node(json& node, const Candidate& c, const probe::Site& site) {
    if (!node.is_object()) node = json{{"name", c.name}, {"op", site.op}, {"flops", c.flops}};
    node.erase("pinned_by");
    node.erase("precision_reason");
    node.erase("table_storage_by");
    node.erase("storage_reason");
    std::string precision = "fp32";
    if (c.recipe) {
      precision = "fp8_e4m3";
      const char* recipe = kRecipes[*c.recipe];
      node["recipe"] = recipe;
      // "error" is the figure of the recipe the site uses (ARCHITECTURE.md).
      if (node.contains("recipes") && node["recipes"].contains(recipe)) {
        const json& measured = node["recipes"][recipe];
        if (measured.contains("error")) node["error"] = measured["error"];
        if (measured.contains("local_error")) node["local_error"] = measured["local_error"];
      }
    } else if (c.pin && c.pin->precision == "bf16") {
      precision = "bf16";
    } else if (c.bf16_table) {
      // store-tables-bf16 stores it; the measured selection already holds its error.
      precision = "bf16";
      node["table_storage"] = "bf16";
      node["table_storage_by"] = "pin-precision";
    }
    if (c.pin) node["pinned_by"] = c.pin->text;
    if (!c.reason.empty())
      node["precision_reason"] = c.reason;
    else if (c.pin && !c.recipe)
      node["precision_reason"] = "pinned";
    node["precision"] = precision;
    return precision;
  }

  static Result<bool> write_decisions(ir::Graph& graph, PassContext& context, json& document, const std::string& before,
                                      const std::vector<Candidate>& candidates, const std::vector<probe::Site>& sites,
                                      const probe::Budget& budget, const ErrorModel& model, const SiteError& total,
                                      const std::optional<Measurement>& measured, const json& unmatched_pins) {
    json& nodes = document["nodes"];
    double site_flops = 0, fp8_flops = 0;
    size_t fp8 = 0, bf16 = 0, pinned = 0;
    json fp8_names = json::array();
    for (size_t i = 0; i < candidates.size(); ++i) {
      const Candidate& c = candidates[i];
      const std::string precision = mark_node(nodes[c.name], c, sites[i]);
      pinned += c.pin != nullptr;
      site_flops += c.flops;
      if (c.recipe) {
        fp8_flops += c.flops;
        ++fp8;
        fp8_names.push_back(c.name);
      }
      bf16 += precision == "bf16";
    }
    // Why a lookup left out of FP8 did not get a BF16 table either (store-tables-bf16 keeps it).
    if (measured)
      for (const StorageChoice& choice : measured->storage)
        if (!choice.set && !choice.chosen && !choice.reason.empty()) {
          json& lookup = nodes[candidates[choice.lookup].name];
          if (lookup.is_object()) lookup["storage_reason"] = choice.reason;
        }
    const double share = site_flops > 0 ? fp8_flops / site_flops : 0.0;
    const double predicted = model.predicted(total);
    const double measured_error = measured ? model.measured_bound(measured->selected) : 0.0;
    json& summary = document["model"]["precision"];
    summary = {{"budget", budget.to_string()},
                                      {"predicted_error", predicted},
                                      {"predicted_metric", budget.metric_name()},
                                      {"within_budget", measured ? measured_error <= budget.limit : predicted <= budget.limit},
                                      {"fp8_flop_share", share},
                                      {"fp8_flops", fp8_flops},
                                      {"site_flops", site_flops},
                                      {"fp8_sites", fp8},
                                      {"sites", candidates.size()},
                                      {"sites_in_fp8", fp8_names},
                                      {"pinned_sites", pinned},
                                      {"reserve", model.reserve},
                                      {"selection_limit", model.limit},
                                      {"measured", measured.has_value()}};
    if (!unmatched_pins.empty()) summary["pins_matching_no_site"] = unmatched_pins;
    if (measured) {
      summary["measured_error"] = measured_error;
      summary["measured_calibration_error"] = measured->selected.value;
      if (measured->selected.samples > 0) {
        summary["measured_sample_noise"] = measured->selected.sample_noise;
        summary["measured_samples"] = measured->selected.samples;
        summary["noise_sigmas"] = model.noise_sigmas;
        summary["judged_samples"] = model.judged_samples;
      }
      summary["measured_on"] = "calibration";
      summary["calibration_data_sets"] = measured->data_sets;
      summary["margin"] = measured->margin;
      summary["evaluations"] = measured->evaluations;
      context.add_statistic("evaluations", static_cast<double>(measured->evaluations));
      context.add_statistic("measured-error", measured_error);
    }
    if (measured && measured->storage_measured) {
      json sets = json::array(), declined = json::array();
      size_t tables = 0;
      for (const StorageChoice& choice : measured->storage) {
        if (!choice.set) {
          tables += choice.chosen;
          continue;
        }
        const ActivationStorageCandidate& set = measured->activation_sets[*choice.set];
        json entry = {{"values", set.values}, {"sources", set.sources}, {"elements_per_sample", set.elements_per_sample}};
        if (choice.chosen) {
          sets.push_back(std::move(entry));
        } else {
          entry["reason"] = choice.reason;
          declined.push_back(std::move(entry));
        }
      }
      summary["bf16_activations"] = sets;
      summary["bf16_activations_declined"] = declined;
      summary["bf16_tables"] = tables;
      summary["storage_evaluations"] = measured->storage_evaluations;
      context.add_statistic("bf16-activation-sets", static_cast<double>(sets.size()));
      context.add_statistic("bf16-tables", static_cast<double>(tables));
    }
    context.add_statistic("fp8-sites", static_cast<double>(fp8));
    context.add_statistic("bf16-sites", static_cast<double>(bf16));
    context.add_statistic("fp32-sites", static_cast<double>(candidates.size() - fp8 - bf16));
    context.add_statistic("pinned-sites", static_cast<double>(pinned));
    context.add_statistic("fp8-flop-share", share);
    context.add_statistic("predicted-error", predicted);
    if (document.dump() == before) return false;
    write_annotations(graph, document);
    return true;
  }
};

}  // namespace

PassInfo pin_precision_pass_info() {
  return PassInfo{"pin-precision",
                  "choose each FP8 candidate site's precision and recipe under --budget, honouring --pin rules",
                  // auto measures only with a GPU: on the CPU an evaluation is a whole model run per
                  // calibration set (seconds on full-size models), on the GPU a CUDA graph replay. The
                  // prediction alone let full-size Wukong drift +0.035% on eval under a 0.02% budget.
                  {{"measure", OptionType::kString, "auto",
                    "verify each added site by running the Probe's switched model with the selection on the "
                    "calibration data: auto (when --calib is given and there is a GPU), true (on the CPU without "
                    "one) or false (predict only)",
                    {"auto", "true", "false", "1", "0"}},
                   // 1: the noise bound is the room for eval data (ErrorModel::measured_bound). With
                   // it, margin 0.85 left the GEMMs of four tiny zoo models all in FP32; 1.0 kept all
                   // five within a 0.02% eval budget on the CPU runtime (2026-11-26).
                   {"margin", OptionType::kFloat, "1.0",
                    "the measured bound (calibration error, plus for logloss noise_sigmas standard deviations of "
                    "eval-set noise) must stay within margin x the selection limit"},
                   {"max_evaluations", OptionType::kInt, "256",
                    "most measured evaluations; later sites stay fp32 ('evaluation limit')"},
                   // 2%: dispatch's TF32/BF16 for FP32 nodes add the sites' FP8 error times (r/r_fp8)^2
                   // for a logloss budget, (0.0032/0.051)^2 ~ 0.4% of it for BF16: all of them fit.
                   {"reserve", OptionType::kFloat, "0.02",
                    "share of the budget kept for dispatch's TF32/BF16 kernels on FP32 nodes (0: sites may "
                    "spend it all, as before)"},
                   // Measured only: BF16 storage is one more switch of the same run, so its error
                   // combines with the sites' as it really does (store-tables-bf16's separate trials
                   // add a second noise bound, which a full-size model's 2% reserve never covers).
                   // On by default since its CUDA side (BF16 epilogue terms and Y, BF16 bags, FusedGemm's
                   // BF16 X, cuBLASLt's FP8 kernels and split-weight BF16 on BF16 activations) passed
                   // its GPU tests and the zoo ran with every set stored (H100, 2026-12-07,
                   // scripts/storage-gpu-check.sh). Only a measuring selection stores anything: on a
                   // CPU without measure=true the option changes nothing.
                   {"bf16_storage", OptionType::kBool, "true",
                    "when measuring: after the FP8 sites, hold activation sets (store-activations-bf16) and "
                    "the tables of lookups left out of FP8 in BF16 where the model still fits"},
                   {"storage_min_elements", OptionType::kFloat, "256",
                    "smallest activation set (elements per sample) worth a measured evaluation"}},
                  {"fp8-sites", "bf16-sites", "fp32-sites", "pinned-sites", "fp8-flop-share", "predicted-error",
                   "evaluations", "measured-error", "bf16-activation-sets", "bf16-tables"},
                  /*result_cacheable=*/true};
}

Status check_pin_rules(const std::vector<std::string>& rules) { return parse_rules(rules).status(); }

std::unique_ptr<Pass> make_pin_precision_pass() { return std::make_unique<PinPrecisionPass>(); }

}  // namespace loka
