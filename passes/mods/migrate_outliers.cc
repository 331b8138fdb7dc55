// ============================================================================
// passes/mods/migrate_outliers.cc — `migrate-outliers`.
// ============================================================================
#include "passes/mods/migrate_outliers.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "passes/dispatch/gpu_timer.h"
#include "passes/mods/rewrite_helpers.h"
#include "passes/pass_cache.h"
#include "passes/probe/annotations.h"
#include "passes/probe/tapped_run.h"

namespace loka {
namespace {

using mods::float_constant;

/// Factors are kept within 2^±64: beyond that gamma or W would leave FP32's
/// comfortable range, and no sane calibration asks for it.
constexpr double kMaxFactorLog2 = 64.0;

/// A consumer GEMM, the producer its activation comes from, and what
/// calibration learned about the activation's channels.
struct Site {
  ir::Node* consumer = nullptr;
  bool weight_transposed = false;  ///< consumer W stored [N, K]
  ir::Node* producer = nullptr;    ///< LayerNormalization or Gemm
  int64_t k = 0;                   ///< activation channels (rows of W)
  std::vector<float> weight_amax;  ///< max |W_k| over outputs, from the weights before any rewrite
  std::vector<float> activation_amax;
  bool non_finite = false;         ///< NaN/Inf seen: statistics unusable, site left alone
};

/// Output channels of a producer Gemm equal `k`, and its constants can absorb 1/s.
bool gemm_producer_fits(const ir::Node& producer, int64_t k) {
  const std::optional<mods::WeightGemm> gemm = mods::as_weight_gemm(producer);
  if (!gemm || gemm->n != k) return false;
  const ir::Value* bias = producer.input(2);
  if (bias == nullptr) return true;
  const Tensor* c = float_constant(bias);
  return c != nullptr && (c->rank() == 0 || c->dim(c->rank() - 1) == 1 || c->dim(c->rank() - 1) == k);
}

bool layer_norm_producer_fits(const ir::Node& producer, int64_t k) {
  if (!mods::normalizes_last_axis_only(producer)) return false;
  const Tensor* gamma = float_constant(producer.input(1));
  if (gamma == nullptr || gamma->rank() != 1 || gamma->dim(0) != k) return false;
  if (producer.input(2) == nullptr) return true;
  const Tensor* beta = float_constant(producer.input(2));
  return beta != nullptr && beta->rank() == 1 && beta->dim(0) == k;
}

std::optional<Site> match(ir::Node* node) {
  // transA would make the channels x's first dim, not its last.
  const std::optional<mods::WeightGemm> gemm = mods::as_weight_gemm(*node, /*require_untransposed_activation=*/true);
  if (!gemm) return std::nullopt;
  Site site;
  site.consumer = node;
  site.weight_transposed = gemm->transposed;
  site.k = gemm->k;
  const ir::Value* x = node->input(0);
  if (mods::sole_reader(x) != node || x->uses()[0].input_index != 0) return std::nullopt;
  ir::Node* producer = x->producer();
  if (producer == nullptr || x->producer_output_index() != 0) return std::nullopt;
  const bool fits = producer->is("Gemm") ? gemm_producer_fits(*producer, site.k)
                                         : layer_norm_producer_fits(*producer, site.k);
  if (!fits) return std::nullopt;
  site.producer = producer;
  const int64_t n = gemm->n;
  const float* values = gemm->weight->data<float>();
  site.weight_amax.assign(static_cast<size_t>(site.k), 0.0f);
  for (int64_t row = 0; row < site.k; ++row)
    for (int64_t col = 0; col < n; ++col) {
      const float v = site.weight_transposed ? values[col * site.k + row] : values[row * n + col];
      site.weight_amax[static_cast<size_t>(row)] = std::max(site.weight_amax[static_cast<size_t>(row)], std::fabs(v));
    }
  site.activation_amax.assign(static_cast<size_t>(site.k), 0.0f);
  return site;
}

// ------------------------------------------------------------ calibration --

/// Folds one batch of a site's activation into its per-channel max |x| (channels: the last dim).
void fold_channel_amax(const Tensor& x, Site& site) {
  if (x.dtype() != DType::kFloat32 || x.rank() < 1 || x.dim(x.rank() - 1) != site.k) {
    site.non_finite = true;  // not what the IR promised: do not trust the site
    return;
  }
  const float* values = x.data<float>();
  const int64_t rows = site.k ? x.element_count() / site.k : 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < site.k; ++c) {
      const float v = std::fabs(values[r * site.k + c]);
      if (!std::isfinite(v)) site.non_finite = true;
      else site.activation_amax[static_cast<size_t>(c)] = std::max(site.activation_amax[static_cast<size_t>(c)], v);
    }
}

/// The FP32 model over the first `batches` calibration sets on `device`, every site's
/// activation tapped as a model output (passes/probe/tapped_run.h).
Status calibrate(const ir::Graph& graph, std::vector<Site>& sites, const CompileSettings& settings, int64_t batches,
                 Device device) {
  if (settings.calibration_data.empty())
    return Status::error("needs calibration data: pass --calib DATA (a folder of test_data_set_<k>/ or .npz)");
  LOKA_ASSIGN_OR_RETURN(const DataSetReader reader, DataSetReader::open(settings.calibration_data));
  if (reader.size() == 0) return Status::error("no data sets in " + settings.calibration_data.string());
  std::vector<std::string> activations;
  for (const Site& site : sites) activations.push_back(site.consumer->input(0)->name());
  probe::TappedRunOptions options;
  options.device = device;
  options.model_name = "migrate-outliers model";
  return probe::run_tapped(graph, activations, reader, static_cast<size_t>(std::max<int64_t>(1, batches)), options,
                           [&](const probe::TappedBatch& batch) {
                             for (size_t s = 0; s < sites.size(); ++s) fold_channel_amax(batch.values[s], sites[s]);
                             return Status::ok();
                           });
}

/// The per-site calibration as JSON (sites in match order) and back; false when `stored` does not
/// describe these sites.
nlohmann::json calibration_payload(const std::vector<Site>& sites) {
  nlohmann::json payload = nlohmann::json::array();
  for (const Site& site : sites)
    payload.push_back({{"consumer", site.consumer->name()},
                       {"activation_amax", site.activation_amax},
                       {"non_finite", site.non_finite}});
  return payload;
}

bool restore_calibration(const nlohmann::json& stored, std::vector<Site>& sites) {
  if (!stored.is_array() || stored.size() != sites.size()) return false;
  for (size_t i = 0; i < sites.size(); ++i) {
    const nlohmann::json& entry = stored[i];
    if (!entry.is_object() || entry.value("consumer", std::string()) != sites[i].consumer->name() ||
        !entry.contains("activation_amax") || !entry["activation_amax"].is_array() ||
        entry["activation_amax"].size() != static_cast<size_t>(sites[i].k) ||
        !std::all_of(entry["activation_amax"].begin(), entry["activation_amax"].end(),
                     [](const nlohmann::json& amax) { return amax.is_number(); }))
      return false;
  }
  for (size_t i = 0; i < sites.size(); ++i) {
    sites[i].activation_amax = stored[i]["activation_amax"].get<std::vector<float>>();
    sites[i].non_finite = stored[i].value("non_finite", false);
  }
  return true;
}

/// The calibration run, or its stored result: a run over the calibration batches (11-13 s of a
/// full-size model's loka-opt on the GPU machine when it ran on the CPU) that a second loka-opt of
/// the same model, data and build need not repeat (passes/pass_cache.h keys it).
Status calibrate_or_restore(const ir::Graph& graph, std::vector<Site>& sites, PassContext& context) {
  LOKA_ASSIGN_OR_RETURN(const bool use_gpu, dispatch::resolve_device_option(context.string_option("device")));
  std::optional<std::string> key;
  if (const PassCache* cache = context.cache()) {
    LOKA_ASSIGN_OR_RETURN(key, cache->key_text("migrate-outliers-calibration", context.options(),
                                               context.settings(), graph));
    if (auto stored = cache->load_payload("migrate-outliers-calibration", *key); stored && restore_calibration(*stored, sites)) {
      context.add_statistic("calibration-restored");
      return Status::ok();
    }
  }
  const auto start = std::chrono::steady_clock::now();
  LOKA_RETURN_IF_ERROR(calibrate(graph, sites, context.settings(), context.int_option("batches"),
                                 use_gpu ? Device::kCuda : Device::kCpu));
  context.add_statistic("calibration-seconds",
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  // A store that cannot be written costs a second run next time, nothing more.
  if (key) (void)context.cache()->store_payload("migrate-outliers-calibration", *key, calibration_payload(sites));
  return Status::ok();
}

// --------------------------------------------------------------- factors --

/// max / median of the channel amax (infinite when the median is 0 and the max is not).
double skew(std::vector<float> amax) {
  if (amax.empty()) return 0.0;
  const float top = *std::max_element(amax.begin(), amax.end());
  auto middle = amax.begin() + static_cast<std::ptrdiff_t>(amax.size() / 2);
  std::nth_element(amax.begin(), middle, amax.end());
  if (*middle > 0.0f) return static_cast<double>(top) / static_cast<double>(*middle);
  return top > 0.0f ? INFINITY : 0.0;
}

std::vector<float> factors(const Site& site, double alpha, bool pow2) {
  std::vector<float> s(static_cast<size_t>(site.k), 1.0f);
  for (size_t c = 0; c < s.size(); ++c) {
    const double a = site.activation_amax[c], w = site.weight_amax[c];
    if (!(a > 0.0) || !(w > 0.0)) continue;  // a dead channel or row: nothing to balance
    double log2_s = alpha * std::log2(a) - (1.0 - alpha) * std::log2(w);
    if (!std::isfinite(log2_s)) continue;
    log2_s = std::clamp(log2_s, -kMaxFactorLog2, kMaxFactorLog2);
    s[c] = static_cast<float>(std::exp2(pow2 ? std::round(log2_s) : log2_s));
  }
  return s;
}

// --------------------------------------------------------------- folding --

/// `data` seen as [outer, channels, inner]: element (o, c, i) is multiplied by
/// factor[c] (or divided, with `divide`).
Tensor scaled(const Tensor& data, int64_t outer, int64_t channels, int64_t inner, const std::vector<float>& factor,
              bool divide) {
  Tensor out = data.clone();
  float* values = out.data<float>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t i = 0; i < inner; ++i) {
        float& v = values[(o * channels + c) * inner + i];
        v = divide ? v / factor[static_cast<size_t>(c)] : v * factor[static_cast<size_t>(c)];
      }
  return out;
}

/// A per-output bias broadcast over the channels (scalar or last dim 1),
/// expanded so each channel can carry its own factor.
Tensor expanded_to_channels(const Tensor& bias, int64_t k) {
  if (bias.rank() > 0 && bias.dim(bias.rank() - 1) == k) return bias;
  Shape shape = bias.shape();
  if (shape.empty()) shape.push_back(k);
  else shape.back() = k;
  Tensor out = Tensor::zeros(DType::kFloat32, shape);
  const int64_t rows = bias.element_count();
  for (int64_t r = 0; r < rows; ++r)
    std::fill_n(out.data<float>() + r * k, k, bias.data<float>()[r]);
  return out;
}

/// x / s folded into the producer; x·W == (x/s)·(s·W) folded into the consumer.
void fold(ir::Graph& graph, const Site& site, const std::vector<float>& s) {
  ir::Node* producer = site.producer;
  const int64_t k = site.k;
  if (producer->is("LayerNormalization")) {
    mods::replace_constant(graph, producer, 1, scaled(*float_constant(producer->input(1)), 1, k, 1, s, true), "_migrated");
    if (producer->input(2) != nullptr)
      mods::replace_constant(graph, producer, 2, scaled(*float_constant(producer->input(2)), 1, k, 1, s, true),
                             "_migrated");
  } else {
    const mods::WeightGemm gemm = *mods::as_weight_gemm(*producer);  // matched as one; its n is k
    const Tensor& w = *gemm.weight;
    mods::replace_constant(graph, producer, 1,
                           gemm.transposed ? scaled(w, 1, k, gemm.k, s, true) : scaled(w, gemm.k, k, 1, s, true),
                           "_migrated");
    if (producer->input(2) != nullptr) {
      const Tensor bias = expanded_to_channels(*float_constant(producer->input(2)), k);
      mods::replace_constant(graph, producer, 2, scaled(bias, bias.element_count() / k, k, 1, s, true), "_migrated");
    }
  }
  const Tensor& w = *float_constant(site.consumer->input(1));
  mods::replace_constant(graph, site.consumer, 1,
                         site.weight_transposed ? scaled(w, w.dim(0), k, 1, s, false) : scaled(w, 1, k, w.dim(1), s, false),
                         "_migrated");
}

class MigrateOutliersPass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    const double alpha = context.float_option("alpha");
    const double min_ratio = context.float_option("min_ratio");
    if (!(alpha >= 0.0 && alpha <= 1.0)) return Status::error("option alpha must be in [0, 1], got " + std::to_string(alpha));
    std::vector<Site> sites;
    for (ir::Node* node : graph.nodes())
      if (auto site = match(node)) sites.push_back(std::move(*site));
    context.add_statistic("sites-considered", static_cast<double>(sites.size()));
    if (sites.empty()) return false;
    LOKA_RETURN_IF_ERROR(calibrate_or_restore(graph, sites, context));

    LOKA_ASSIGN_OR_RETURN(nlohmann::json document, read_annotations(graph));
    bool changed = false;
    for (const Site& site : sites) {
      const double before = skew(site.activation_amax);
      if (site.non_finite) {
        context.add_statistic("sites-skipped-non-finite");
        continue;
      }
      if (!(before > min_ratio)) continue;
      const std::vector<float> s = factors(site, alpha, context.bool_option("pow2"));
      if (std::all_of(s.begin(), s.end(), [](float f) { return f == 1.0f; })) continue;
      std::vector<float> after_amax(s.size());
      for (size_t c = 0; c < s.size(); ++c) after_amax[c] = site.activation_amax[c] / s[c];
      fold(graph, site, s);
      document["nodes"][site.consumer->name()]["migrated_outliers"] = {
          {"producer", site.producer->name()}, {"alpha", alpha}, {"skew_before", before}, {"skew_after", skew(after_amax)}};
      context.add_statistic("sites-migrated");
      changed = true;
    }
    if (changed) write_annotations(graph, document);
    return changed;
  }
};

}  // namespace

PassInfo migrate_outliers_pass_info() {
  return PassInfo{"migrate-outliers",
                  "move activation outlier channels into the weights (SmoothQuant), folding 1/s exactly into the "
                  "producing LayerNorm or Gemm; needs --calib",
                  {{"alpha", OptionType::kFloat, "0.5", "migration strength: s_k = max|X_k|^alpha / max|W_k|^(1-alpha)"},
                   {"min_ratio", OptionType::kFloat, "8", "migrate only where max/median channel amax exceeds this"},
                   {"batches", OptionType::kInt, "8", "calibration batches for the per-channel activation amax"},
                   {"pow2", OptionType::kBool, "true", "round factors to powers of two (bit-exact folds)"},
                   {"device", OptionType::kString, "auto",
                    "where the calibration run executes: cuda (one model with the site activations as outputs), cpu "
                    "(the CPU runtime), auto (cuda when this build and machine have a GPU)",
                    {"auto", "cpu", "cuda"}}},
                  {"sites-considered", "sites-migrated", "sites-skipped-non-finite", "calibration-restored",
                   "calibration-seconds"}};
}

std::unique_ptr<Pass> make_migrate_outliers_pass() { return std::make_unique<MigrateOutliersPass>(); }

}  // namespace loka
