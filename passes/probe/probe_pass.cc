// ============================================================================
// passes/probe/probe_pass.cc — the Probe: calibration and per-site FP8 error.
// ============================================================================
#include "passes/probe/probe_pass.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <optional>
#include <thread>
#include <unordered_map>

#include "kernels/cpu/fp8_quantize.h"
#include "kernels/cpu/parallel_rows.h"
#include "loka/engine.h"
#include "loka/session.h"
#include "passes/dispatch/gpu_timer.h"
#include "passes/onnx/onnx_export.h"
#include "passes/probe/annotations.h"
#include "passes/probe/budget.h"
#include "passes/probe/drawn_labels.h"
#include "passes/probe/fake_quantize.h"
#include "passes/probe/metrics.h"
#include "passes/probe/probe_model.h"
#include "passes/probe/sites.h"
#include "passes/probe/statistics.h"
#include "passes/probe/tapped_run.h"
#include "runtime/test_data.h"

namespace loka {
namespace {

using probe::BatchMeans;
using probe::quantize_rows;
using probe::quantize_tensor;
using probe::quantize_weight_channels;
using probe::logloss;
using probe::Site;
using probe::SiteKind;
using probe::ValueStatistics;
using cpu::Fp8Format;

/// e5m2_tensor (static per-tensor E5M2 scales on both operands) is measured only
/// where it matters: MatMuls between two activations (interactions, attention
/// scores), whose operands can span more range than E4M3's 18 binades.
enum class Recipe { kE4M3Tensor, kE4M3Row, kE5M2Tensor };
constexpr size_t kRecipeCount = 3;

const char* recipe_name(Recipe recipe) {
  switch (recipe) {
    case Recipe::kE4M3Tensor: return "e4m3_tensor";
    case Recipe::kE4M3Row: return "e4m3_row";
    case Recipe::kE5M2Tensor: return "e5m2_tensor";
  }
  return "?";
}

/// The recipes measured for a kind of site, cheapest first.
std::vector<Recipe> recipes_for(SiteKind kind) {
  if (kind == SiteKind::kActivationMatMul) return {Recipe::kE4M3Tensor, Recipe::kE4M3Row, Recipe::kE5M2Tensor};
  return {Recipe::kE4M3Tensor, Recipe::kE4M3Row};
}

// ---------------------------------------------------------------- errors ----

/// One batch's comparison of a result against its FP32 reference.
struct ErrorSample {
  double rel_l2 = 0, sqnr_db = 0, max_abs = 0, cosine = 1;
};

ErrorSample compare(std::span<const float> reference, std::span<const float> test) {
  double ref2 = 0, diff2 = 0, test2 = 0, dot = 0, max_abs = 0;
  for (size_t i = 0; i < reference.size() && i < test.size(); ++i) {
    const double r = reference[i], t = test[i], d = t - r;
    ref2 += r * r;
    test2 += t * t;
    diff2 += d * d;
    dot += r * t;
    max_abs = std::max(max_abs, std::fabs(d));
  }
  ErrorSample sample;
  sample.rel_l2 = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  sample.sqnr_db = diff2 > 0 ? 10.0 * std::log10(ref2 / diff2) : 200.0;
  sample.max_abs = max_abs;
  sample.cosine = (ref2 > 0 && test2 > 0) ? dot / std::sqrt(ref2 * test2) : 1.0;
  return sample;
}

struct ErrorEstimate {
  BatchMeans rel_l2, sqnr_db, max_abs, cosine;
  // Relative to the reference logloss, per batch (see probe::LoglossShift).
  BatchMeans logloss_drift, logloss_expected, logloss_second_moment;
  /// What the verdict judges under a logloss budget, on an eval set the size
  /// of the calibration data: the site's risk in units of its share of the
  /// budget (probe::logloss_site_risk), and its risk alone.
  BatchMeans logloss_share_risk, logloss_alone_risk;

  void add(const ErrorSample& sample) {
    rel_l2.add(sample.rel_l2);
    sqnr_db.add(sample.sqnr_db);
    max_abs.add(sample.max_abs);
    cosine.add(sample.cosine);
  }
  void add(const probe::LoglossShift& shift, double reference_logloss, double judged_samples, size_t sites,
           double noise_sigmas) {
    const double expected = shift.expected / reference_logloss;
    const double second_moment = shift.second_moment / (reference_logloss * reference_logloss);
    logloss_drift.add(shift.drift / reference_logloss);
    logloss_expected.add(expected);
    logloss_second_moment.add(second_moment);
    logloss_share_risk.add(probe::logloss_site_risk(expected, second_moment, judged_samples, sites, noise_sigmas));
    logloss_alone_risk.add(probe::logloss_site_risk(expected, second_moment, judged_samples, 1, noise_sigmas));
  }
  /// The estimate judged against the site's share of the budget.
  const BatchMeans& share_metric(probe::BudgetMetric which) const {
    return which == probe::BudgetMetric::kLogloss ? logloss_share_risk : alone_metric(which);
  }
  /// The estimate judged against the whole budget (the site alone in FP8).
  const BatchMeans& alone_metric(probe::BudgetMetric which) const {
    switch (which) {
      case probe::BudgetMetric::kMaxAbs: return max_abs;
      case probe::BudgetMetric::kLogloss: return logloss_alone_risk;
      default: return rel_l2;
    }
  }
};

nlohmann::json finite_or_null(double value) { return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(); }

nlohmann::json error_json(const ErrorEstimate& estimate, bool with_logloss) {
  const auto [lo, hi] = estimate.rel_l2.ci95();
  nlohmann::json out = {{"rel_l2_mean", estimate.rel_l2.mean()},
                        {"rel_l2_ci95", {finite_or_null(std::max(0.0, lo)), finite_or_null(hi)}},
                        {"sqnr_db", estimate.sqnr_db.mean()},
                        {"max_abs", estimate.max_abs.mean()},
                        {"cosine", estimate.cosine.mean()},
                        {"batches", estimate.rel_l2.count()}};
  if (with_logloss) {
    const auto [llo, lhi] = estimate.logloss_drift.ci95();
    out["logloss_drift_mean"] = estimate.logloss_drift.mean();
    out["logloss_drift_ci95"] = {finite_or_null(llo), finite_or_null(lhi)};
    out["logloss_expected_mean"] = estimate.logloss_expected.mean();
    out["logloss_second_moment_mean"] = estimate.logloss_second_moment.mean();
    const auto [rlo, rhi] = estimate.logloss_alone_risk.ci95();
    out["logloss_risk_mean"] = estimate.logloss_alone_risk.mean();
    out["logloss_risk_ci95"] = {finite_or_null(std::max(0.0, rlo)), finite_or_null(rhi)};
  }
  return out;
}

// ------------------------------------------------------------- observing ----

struct SiteState {
  Site site;
  ValueStatistics activation;   ///< first operand (or the table, for embeddings)
  ValueStatistics second;       ///< weight, or the second activation
  float static_scale_a = 1.0f;  ///< e4m3_tensor scale of the activation
  float static_scale_b = 1.0f;  ///< e4m3_tensor scale of a second activation
  float e5m2_scale_a = 1.0f;    ///< e5m2_tensor scales (activation MatMuls)
  float e5m2_scale_b = 1.0f;
  Tensor weight_quantized[kRecipeCount];  ///< per recipe, computed once (weights are constant)
  Tensor reference_output;      ///< this batch's FP32 output of the node
  size_t step = SIZE_MAX;       ///< the node's position in the execution order (seen in the reference run)
  ErrorEstimate end_to_end[kRecipeCount];
  ErrorEstimate local[kRecipeCount];
};

/// Every node's outputs in this batch's reference run, by position in the execution order. A
/// quantized run of a site replays the nodes before the site from here (they would compute the
/// same values from the same inputs), so it costs only the part of the model from the site on.
/// Written by the main Session's reference run, read by every worker; cleared after the batch.
using ReferenceOutputs = std::vector<std::vector<Tensor>>;

class ProbeObserver final : public Observer {
 public:
  enum class Mode { kReference, kQuantize };

  ProbeObserver(std::vector<SiteState>& sites, ReferenceOutputs& reference) : sites_(sites), reference_(reference) {
    for (size_t i = 0; i < sites.size(); ++i) index_[sites[i].site.node] = i;
  }
  void set_mode(Mode mode, size_t site = 0, Recipe recipe = Recipe::kE4M3Tensor) {
    mode_ = mode;
    target_ = site;
    recipe_ = recipe;
  }

  void before_node(const NodeInfo& node, std::span<Tensor> inputs) override {
    auto it = index_.find(std::string(node.name));
    if (it == index_.end()) return;
    SiteState& state = sites_[it->second];
    const Site& site = state.site;
    if (inputs.size() <= std::max(site.activation_input, site.weight_input)) return;
    Tensor& a = inputs[site.activation_input];
    Tensor& b = inputs[site.weight_input];
    if (mode_ != Mode::kQuantize || it->second != target_) return;
    if (a.dtype() != DType::kFloat32 && site.kind != SiteKind::kEmbedding) return;
    if (b.dtype() != DType::kFloat32) return;
    const size_t r = static_cast<size_t>(recipe_);
    switch (site.kind) {
      case SiteKind::kWeightGemm:
        a = (recipe_ == Recipe::kE4M3Row && !site.activation_transposed) ? quantize_rows(a)
                                                                           : quantize_tensor(a, state.static_scale_a);
        if (!state.weight_quantized[r].defined()) state.weight_quantized[r] = quantize_weight_channels(b, site.weight_transposed);
        b = state.weight_quantized[r];
        break;
      case SiteKind::kActivationMatMul:
        if (recipe_ == Recipe::kE5M2Tensor) {
          a = quantize_tensor(a, state.e5m2_scale_a, Fp8Format::kE5M2);
          b = quantize_tensor(b, state.e5m2_scale_b, Fp8Format::kE5M2);
        } else if (recipe_ == Recipe::kE4M3Row) {
          a = quantize_rows(a);
          b = quantize_weight_channels(b, false);  // per output column, dynamic
        } else {
          a = quantize_tensor(a, state.static_scale_a);
          b = quantize_tensor(b, state.static_scale_b);
        }
        break;
      case SiteKind::kEmbedding:
        if (!state.weight_quantized[r].defined())
          state.weight_quantized[r] = recipe_ == Recipe::kE4M3Row
                                          ? quantize_rows(b)
                                          : quantize_tensor(b, cpu::fp8_scale_for_amax(state.activation.amax(), Fp8Format::kE4M3FN));
        b = state.weight_quantized[r];
        break;
    }
  }

  bool replay_node(const NodeInfo& node, std::span<Tensor> outputs) override {
    if (mode_ != Mode::kQuantize || node.index >= sites_[target_].step || node.index >= reference_.size()) return false;
    const std::vector<Tensor>& cached = reference_[node.index];
    if (cached.size() != outputs.size()) return false;
    std::copy(cached.begin(), cached.end(), outputs.begin());
    return true;
  }

  void after_node(const NodeInfo& node, std::span<Tensor> outputs) override {
    if (mode_ == Mode::kReference) {  // shares storage; the pool will not reuse it while held
      if (reference_.size() <= node.index) reference_.resize(node.index + 1);
      reference_[node.index].assign(outputs.begin(), outputs.end());
    }
    if (outputs.empty()) return;
    auto it = index_.find(std::string(node.name));
    if (it == index_.end()) return;
    SiteState& state = sites_[it->second];
    if (mode_ == Mode::kReference) state.step = node.index;
    if (outputs[0].dtype() != DType::kFloat32) return;
    if (mode_ == Mode::kReference) {
      state.reference_output = outputs[0];
    } else if (it->second == target_ && state.reference_output.defined()) {
      state.local[static_cast<size_t>(recipe_)].add(
          compare(state.reference_output.values<float>(), outputs[0].values<float>()));
    }
  }

 private:
  std::vector<SiteState>& sites_;
  ReferenceOutputs& reference_;
  std::unordered_map<std::string, size_t> index_;
  Mode mode_ = Mode::kReference;
  size_t target_ = 0;
  Recipe recipe_ = Recipe::kE4M3Tensor;
};

// ----------------------------------------------------------------- data -----

/// The float outputs (the first `count` of them) as one vector, for comparison.
std::vector<float> flatten_outputs(std::span<const Tensor> outputs, size_t count = SIZE_MAX) {
  std::vector<float> all;
  for (const Tensor& t : outputs.first(std::min(count, outputs.size())))
    if (dtype_is_float(t.dtype())) {
      const std::vector<float> values = t.to_floats();
      all.insert(all.end(), values.begin(), values.end());
    }
  return all;
}

/// One calibration batch's FP32 reference, what every quantized run of it is compared with.
struct BatchReference {
  std::vector<float> flat;      ///< every float model output, flattened
  Tensor first_output;          ///< the probability output the logloss reads
  std::vector<float> labels;    ///< labels.pb's, or drawn from first_output; empty without either
  std::optional<uint64_t> draw_seed;  ///< no labels.pb: draw them from first_output (drawn_labels.h)
  double logloss = 0;
  double judged_samples = 0;
  size_t sites = 0;
  double noise_sigmas = 1;

  /// Takes the FP32 run's first output: the labels drawn from it when asked, and its logloss.
  void set_first_output(Tensor output) {
    first_output = std::move(output);
    if (draw_seed) labels = probe::draw_labels(first_output, *draw_seed);
    logloss = labels.empty() ? 0.0 : probe::logloss(first_output, labels);
  }
};

/// Adds one quantized run's end-to-end error (and logloss shift) to a site's estimate.
void record_end_to_end(ErrorEstimate& estimate, const BatchReference& reference, std::span<const Tensor> outputs,
                       size_t model_outputs) {
  estimate.add(compare(reference.flat, flatten_outputs(outputs, model_outputs)));
  if (!reference.labels.empty() && reference.logloss > 0)
    estimate.add(probe::logloss_shift(reference.first_output, outputs[0], reference.labels), reference.logloss,
                 reference.judged_samples, reference.sites, reference.noise_sigmas);
}

/// The operands each recipe of a site quantizes, as the CPU path's observer does
/// (ProbeObserver::before_node), for the switched model.
probe::SiteSwitches switches_for(const SiteState& state) {
  const float table_scale = cpu::fp8_scale_for_amax(state.activation.amax(), Fp8Format::kE4M3FN);
  return probe::switches_for(state.site, {state.site.kind == SiteKind::kEmbedding ? table_scale : state.static_scale_a,
                                          state.static_scale_b, state.e5m2_scale_a, state.e5m2_scale_b});
}

/// Where and how the error runs execute, from the options device (auto|cpu|cuda: auto is
/// cuda when this build and machine have a GPU) and method (auto|hooks|switches: auto is
/// switches on the GPU, hooks on the CPU).
struct ProbeMethod {
  Device device = Device::kCpu;
  bool switches = false;
};

Result<ProbeMethod> probe_method(const std::string& device, const std::string& method) {
  LOKA_ASSIGN_OR_RETURN(const bool use_gpu, dispatch::resolve_device_option(device));
  if (method != "auto" && method != "hooks" && method != "switches")
    return Status::error("option method='" + method + "': expected auto, hooks or switches");
  ProbeMethod chosen;
  if (use_gpu) chosen.device = Device::kCuda;
  if (chosen.device == Device::kCuda && method == "hooks")
    return Status::error("method=hooks runs on the CPU only (a GPU run has no per-node host hooks): use device=cpu");
  chosen.switches = chosen.device == Device::kCuda || method == "switches";
  return chosen;
}

using cpu::usable_cores;

// ------------------------------------------------------ switched model ----

/// The Probe's error runs through the switched model (probe_model.h): one Engine (on the GPU
/// with a single batch bucket, or on the CPU, where it must agree bit for bit with the hooks),
/// a reference run with Mode all zeros, then a run per site and recipe with that site's Mode
/// entry set; only the model outputs and the site's tap come back to the host.
class SwitchedModelProbe {
 public:
  static Result<SwitchedModelProbe> create(const ir::Graph& graph, const std::vector<SiteState>& sites, int64_t rows,
                                           Device device) {
    std::vector<probe::SiteSwitches> switches;
    for (const SiteState& state : sites) switches.push_back(switches_for(state));
    LOKA_ASSIGN_OR_RETURN(probe::ProbeModel model, probe::build_probe_model(graph, switches));
    LOKA_ASSIGN_OR_RETURN(auto engine, probe::load_for_rows(model.bytes, device, rows, "switched probe model"));
    return SwitchedModelProbe(std::move(model), std::move(engine));
  }

  /// Measures every site (where `measured` says so) and recipe on one batch, filling `reference`
  /// and those sites' estimates.
  Status measure(const std::vector<Tensor>& batch_inputs, std::vector<SiteState>& sites, const std::vector<bool>& measured,
                 BatchReference& reference) {
    std::vector<Tensor> inputs = batch_inputs;
    inputs.push_back(Tensor::zeros(DType::kInt32, {static_cast<int64_t>(sites.size())}));
    int32_t* mode = inputs.back().data<int32_t>();
    LOKA_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, session_->run_selected(inputs, reference_outputs_));
    reference.flat = flatten_outputs(outputs, model_.model_outputs);
    reference.set_first_output(outputs[0]);
    std::vector<Tensor> reference_taps(sites.size());
    for (size_t s = 0; s < sites.size(); ++s)
      if (model_.site_output[s] >= 0) reference_taps[s] = outputs[reference_slot_.at(static_cast<size_t>(model_.site_output[s]))];
    std::vector<size_t> wanted(model_.model_outputs);
    for (size_t o = 0; o < wanted.size(); ++o) wanted[o] = o;
    for (size_t s = 0; s < sites.size(); ++s) {
      if (!measured[s]) continue;
      const long tap = model_.site_output[s];
      std::vector<size_t> selected = wanted;
      if (tap >= 0) selected.push_back(static_cast<size_t>(tap));
      for (Recipe recipe : recipes_for(sites[s].site.kind)) {
        mode[s] = static_cast<int32_t>(recipe) + 1;
        auto quantized = session_->run_selected(inputs, selected);
        mode[s] = 0;
        if (!quantized) return quantized.status().with_context("site '" + sites[s].site.node + "': ");
        const size_t r = static_cast<size_t>(recipe);
        record_end_to_end(sites[s].end_to_end[r], reference, *quantized, model_.model_outputs);
        if (tap >= 0 && reference_taps[s].defined())
          sites[s].local[r].add(compare(reference_taps[s].values<float>(), quantized->back().values<float>()));
      }
    }
    return Status::ok();
  }

 private:
  SwitchedModelProbe(probe::ProbeModel model, std::shared_ptr<const Engine> engine)
      : model_(std::move(model)), engine_(std::move(engine)), session_(engine_->new_session()) {
    // The reference run brings back the model outputs and every tap, each once.
    for (size_t o = 0; o < model_.model_outputs; ++o) reference_outputs_.push_back(o);
    for (long tap : model_.site_output)
      if (tap >= 0 && std::find(reference_outputs_.begin(), reference_outputs_.end(), static_cast<size_t>(tap)) ==
                          reference_outputs_.end())
        reference_outputs_.push_back(static_cast<size_t>(tap));
    for (size_t i = 0; i < reference_outputs_.size(); ++i) reference_slot_[reference_outputs_[i]] = i;
  }
  probe::ProbeModel model_;
  std::vector<size_t> reference_outputs_;           ///< output positions the reference run reads
  std::unordered_map<size_t, size_t> reference_slot_;  ///< output position -> index in those
  std::shared_ptr<const Engine> engine_;
  std::unique_ptr<Session> session_;
};

// ------------------------------------------------------ amax calibration ----

/// One operand a site's statistics fold in: a value the tapped run brings back (`tap`, its
/// position in the run's value list), or an initializer read from the graph (`constant`).
struct CalibratedOperand {
  size_t site = 0;
  bool second = false;     ///< into SiteState::second, else SiteState::activation
  bool once = false;       ///< a weight or table: the same every batch, folded on the first only
  bool any_dtype = false;  ///< an embedding table: read as floats whatever its dtype
  const Tensor* constant = nullptr;
  size_t tap = 0;
};

/// Phase 1: every site's operands folded into its statistics over the first `batches`
/// calibration batches: activations every batch, a weight or an embedding table once, operands
/// of another dtype than float32 skipped (a table is read as floats whatever its dtype).
/// Computed operands come from one tapped run of the FP32 model on `device` (tapped_run.h), so
/// the GPU does the model's arithmetic; initializers are read from the graph. Each site's
/// accumulators see its values in batch order, on one thread, whatever the thread count.
Status calibrate_amax(const ir::Graph& graph, const DataSetReader& reader, size_t batches, Device device,
                      std::vector<SiteState>& sites) {
  std::vector<CalibratedOperand> operands;
  std::vector<size_t> first_operand;  ///< per site, its first entry in `operands` (they come in site order)
  std::vector<std::string> taps;
  for (size_t s = 0; s < sites.size(); ++s) {
    const Site& site = sites[s].site;
    const ir::Node* node = graph.find_node(site.node);
    assert(node != nullptr && "sites are found in this graph");
    first_operand.push_back(operands.size());
    const auto add = [&](size_t slot, bool second, bool once, bool any_dtype) {
      const ir::Value* value = node->input(slot);
      CalibratedOperand operand{s, second, once, any_dtype};
      if (value->is_initializer()) {
        operand.constant = &*value->initializer();
      } else {
        operand.tap = taps.size();
        taps.push_back(value->name());
      }
      operands.push_back(operand);
    };
    if (site.kind == SiteKind::kEmbedding) {
      add(site.weight_input, false, true, true);
    } else {
      add(site.activation_input, false, false, false);
      add(site.weight_input, true, site.kind != SiteKind::kActivationMatMul, false);
    }
  }
  first_operand.push_back(operands.size());
  probe::TappedRunOptions options;
  options.device = device;
  options.refuse_non_finite_inputs = true;
  options.model_name = "probe calibration model";
  return probe::run_tapped(graph, taps, reader, batches, options, [&](const probe::TappedBatch& batch) {
    // Sites differ in size by orders of magnitude (a table against a GEMM input): each thread
    // takes the next site when done with one.
    cpu::parallel_for_each_index(sites.size(), [&](size_t s) {
      for (size_t o = first_operand[s]; o < first_operand[s + 1]; ++o) {
        const CalibratedOperand& operand = operands[o];
        if (operand.once && batch.index > 0) continue;
        const Tensor& value = operand.constant != nullptr ? *operand.constant : batch.values[operand.tap];
        ValueStatistics& statistics = operand.second ? sites[s].second : sites[s].activation;
        if (operand.any_dtype) statistics.add(value.to_floats());
        else if (value.dtype() == DType::kFloat32) statistics.add(value.values<float>());
      }
    });
    return Status::ok();
  });
}

// ------------------------------------------------------------ CPU hooks ----

/// The CPU hooks method's runtime: one Engine shared by the workers, each with its own Session
/// and observer (worker 0 also runs the reference).
struct HookWorkers {
  struct Worker {
    std::unique_ptr<Session> session;
    std::unique_ptr<ProbeObserver> observer;
  };
  std::shared_ptr<const Engine> engine;
  std::vector<Worker> workers;

  static Result<HookWorkers> create(const ir::Graph& graph, size_t count, std::vector<SiteState>& sites,
                                    ReferenceOutputs& reference_outputs) {
    LOKA_ASSIGN_OR_RETURN(const std::string bytes, onnx_io::export_model_bytes(graph));
    HookWorkers hooks;
    LOKA_ASSIGN_OR_RETURN(hooks.engine, Engine::load_bytes(std::as_bytes(std::span(bytes.data(), bytes.size())), {},
                                                           {}, "probe model"));
    hooks.workers.resize(count);
    for (Worker& worker : hooks.workers) {
      worker.session = hooks.engine->new_session();
      worker.observer = std::make_unique<ProbeObserver>(sites, reference_outputs);
      worker.session->set_observer(worker.observer.get());
    }
    return hooks;
  }
};

// ------------------------------------------------------------------ pass ----

class ProbePass final : public Pass {
 public:
  Result<bool> run(ir::Graph& graph, PassContext& context) override {
    const CompileSettings& settings = context.settings();
    if (settings.calibration_data.empty())
      return Status::error("needs calibration data: pass --calib DATA (a folder of test_data_set_<k>/ or .npz)");
    LOKA_ASSIGN_OR_RETURN(const probe::Budget requested, probe::parse_budget(settings.budget));
    LOKA_ASSIGN_OR_RETURN(const DataSetReader reader, DataSetReader::open(settings.calibration_data));
    if (reader.size() == 0) return Status::error("no data sets in " + settings.calibration_data.string());
    const size_t max_batches = std::min<size_t>(reader.size(), static_cast<size_t>(context.int_option("batches")));
    const size_t min_batches = std::min<size_t>(max_batches, static_cast<size_t>(std::max<int64_t>(2, context.int_option("min_batches"))));
    const size_t amax_batches = std::min<size_t>(reader.size(), static_cast<size_t>(std::max<int64_t>(1, context.int_option("amax_batches"))));
    const bool early_stop = context.bool_option("early_stop");
    const double noise_sigmas = context.float_option("noise_sigmas");
    if (!(noise_sigmas >= 0) || !std::isfinite(noise_sigmas))
      return Status::error("option noise_sigmas must be a finite number >= 0");

    std::vector<SiteState> sites;
    for (Site& site : probe::find_sites(graph)) {
      sites.emplace_back();
      sites.back().site = std::move(site);
    }

    LOKA_ASSIGN_OR_RETURN(const ProbeMethod method,
                          probe_method(context.string_option("device"), context.string_option("method")));
    const std::vector<std::string> input_names = probe::data_input_names(graph);
    const auto load = [&](size_t index) {
      return probe::read_calibration_batch(reader, index, input_names, /*refuse_non_finite=*/true);
    };

    // Phase 1: amax calibration, on the device the error runs use.
    const auto calibration_start = std::chrono::steady_clock::now();
    LOKA_RETURN_IF_ERROR(calibrate_amax(graph, reader, amax_batches, method.device, sites));
    const double calibration_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - calibration_start).count();
    context.add_statistic("calibration-seconds", calibration_seconds);
    for (SiteState& state : sites) {
      state.static_scale_a = cpu::fp8_scale_for_amax(state.activation.amax(), Fp8Format::kE4M3FN);
      state.static_scale_b = cpu::fp8_scale_for_amax(state.second.amax(), Fp8Format::kE4M3FN);
      state.e5m2_scale_a = cpu::fp8_scale_for_amax(state.activation.amax(), Fp8Format::kE5M2);
      state.e5m2_scale_b = cpu::fp8_scale_for_amax(state.second.amax(), Fp8Format::kE5M2);
    }

    // Phase 2: error measurement with early stopping, on the GPU model (one run per site and
    // recipe, the CUDA graph replayed with a new Mode) or on the CPU workers (hooks, prefix replay).
    std::optional<SwitchedModelProbe> switched;
    ReferenceOutputs reference_outputs;
    std::optional<HookWorkers> hooks;
    if (!method.switches) {
      const int64_t requested_threads = context.int_option("threads");
      const size_t thread_count = std::max<size_t>(
          1, std::min<size_t>(sites.size(), requested_threads > 0 ? static_cast<size_t>(requested_threads)
                                                                  : usable_cores()));
      LOKA_ASSIGN_OR_RETURN(hooks, HookWorkers::create(graph, thread_count, sites, reference_outputs));
    }
    bool have_labels = false;  ///< labels.pb, or labels drawn from a Sigmoid output
    bool draw_labels = false;
    probe::Budget budget = requested.resolve(false);
    size_t batches_used = 0;
    size_t judged_samples = 0;  ///< the eval-set size a logloss verdict judges: all calibration samples
    bool stopped_early = false;
    size_t site_batches_skipped = 0;  ///< (site, batch) pairs not measured: the site's verdict was settled
    std::vector<bool> measured(sites.size(), true);
    const auto start = std::chrono::steady_clock::now();
    for (size_t b = 0; b < max_batches; ++b) {
      // Early stopping per site: from min_batches on, a settled site (safe, or no 95% interval
      // straddling its threshold or the budget) is measured no more; its estimates keep the
      // batches it had. More batches could still move a settled verdict, rarely: the risk the
      // pass already took when it stopped once every site was settled. On DHEN and the
      // ranker most sites settle within min_batches, and each (site, recipe, batch) is a run of
      // the whole model: the error phase was most of the Probe's 50-65 s (H200, 2026-11-28).
      if (early_stop && b >= min_batches) {
        const double threshold = budget.site_threshold(sites.size());
        for (size_t s = 0; s < sites.size(); ++s) {
          measured[s] = measured[s] && !site_settled(sites[s], budget, threshold);
          site_batches_skipped += !measured[s];
        }
      }
      LOKA_ASSIGN_OR_RETURN(auto batch, load(b));
      const DataSet& data = batch.first;
      if (b == 0) {
        draw_labels = !data.labels.has_value() && probe::first_output_is_probability(graph);
        have_labels = data.labels.has_value() || draw_labels;
        const int64_t rows = batch.second.empty() || batch.second[0].rank() == 0 ? 1 : batch.second[0].dim(0);
        if (have_labels)
          judged_samples = static_cast<size_t>(data.labels ? data.labels->element_count() : rows) * max_batches;
        budget = requested.resolve(have_labels);
        if (budget.metric == probe::BudgetMetric::kLogloss && !have_labels)
          return Status::error("--budget " + budget.to_string() +
                               " needs labels.pb in the calibration data, or a Sigmoid probability as the model's "
                               "first output to draw labels from");
      }
      BatchReference reference;
      reference.labels = data.labels ? data.labels->to_floats() : std::vector<float>{};
      if (draw_labels) reference.draw_seed = probe::drawn_label_seed(b);
      reference.judged_samples = static_cast<double>(judged_samples);
      reference.sites = sites.size();
      reference.noise_sigmas = noise_sigmas;
      if (method.switches) {
        if (!switched) {
          const int64_t rows = batch.second.empty() || batch.second[0].rank() == 0 ? 1 : batch.second[0].dim(0);
          LOKA_ASSIGN_OR_RETURN(switched, SwitchedModelProbe::create(graph, sites, rows, method.device));
        }
        LOKA_RETURN_IF_ERROR(switched->measure(batch.second, sites, measured, reference)
                                 .with_context("calibration batch " + data.location.string() + ": "));
      } else {
        std::vector<HookWorkers::Worker>& workers = hooks->workers;
        workers[0].observer->set_mode(ProbeObserver::Mode::kReference);
        auto outputs = workers[0].session->run(batch.second);
        if (!outputs) return outputs.status().with_context("calibration batch " + data.location.string() + ": ");
        reference.flat = flatten_outputs(*outputs);
        reference.set_first_output((*outputs)[0]);
        // One run per site and recipe, spread over worker Sessions (the Engine is
        // shared and immutable; each site's accumulators belong to one worker).
        const auto measure_sites = [&](size_t worker, Session& worker_session, ProbeObserver& worker_observer) -> Status {
          for (size_t s = worker; s < sites.size(); s += workers.size()) {
            if (!measured[s]) continue;
            for (Recipe recipe : recipes_for(sites[s].site.kind)) {
              worker_observer.set_mode(ProbeObserver::Mode::kQuantize, s, recipe);
              auto quantized = worker_session.run(batch.second);
              if (!quantized) return quantized.status().with_context("site '" + sites[s].site.node + "': ");
              record_end_to_end(sites[s].end_to_end[static_cast<size_t>(recipe)], reference, *quantized, SIZE_MAX);
            }
          }
          return Status::ok();
        };
        std::vector<Status> worker_status(workers.size());
        std::vector<std::thread> threads;
        for (size_t w = 1; w < workers.size(); ++w)
          threads.emplace_back([&, w] { worker_status[w] = measure_sites(w, *workers[w].session, *workers[w].observer); });
        worker_status[0] = measure_sites(0, *workers[0].session, *workers[0].observer);
        for (std::thread& thread : threads) thread.join();
        for (const Status& status : worker_status) LOKA_RETURN_IF_ERROR(status);
        for (SiteState& state : sites) state.reference_output = Tensor();
        reference_outputs.clear();  // after the workers joined: the last references drop on this thread
      }
      batches_used = b + 1;
      const size_t unsettled_sites = count_unsettled(sites, budget);
      if (settings.show_progress)
        std::fprintf(stderr, "\rprobe: batch %zu/%zu, %zu sites, %zu unsettled   ", batches_used, max_batches,
                     sites.size(), unsettled_sites);
      if (early_stop && batches_used >= min_batches && unsettled_sites == 0 && batches_used < max_batches) {
        stopped_early = true;
        break;
      }
    }
    if (settings.show_progress) std::fprintf(stderr, "\n");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    LOKA_ASSIGN_OR_RETURN(nlohmann::json document, read_annotations(graph));
    document["model"]["probe"] = {{"budget", budget.to_string()},
                                  {"site_threshold", budget.site_threshold(sites.size())},
                                  {"sites", sites.size()},
                                  {"batches_used", batches_used},
                                  {"batches_available", reader.size()},
                                  {"batches_limit", max_batches},
                                  {"amax_batches", amax_batches},
                                  {"early_stopped", stopped_early},
                                  {"batches_saved", max_batches - batches_used},
                                  {"site_batches_skipped", site_batches_skipped},
                                  {"seconds", seconds},
                                  {"calibration_seconds", calibration_seconds},
                                  {"device", method.device == Device::kCuda ? "cuda" : "cpu"},
                                  {"method", method.switches ? "switches" : "hooks"},
                                  {"calibration", settings.calibration_data.string()}};
    document["model"]["probe"]["labels"] =
        draw_labels ? "drawn from the FP32 model's Sigmoid output" : (have_labels ? "labels.pb" : "none");
    if (have_labels) {
      document["model"]["probe"]["logloss_judged_samples"] = judged_samples;
      document["model"]["probe"]["noise_sigmas"] = noise_sigmas;
    }
    size_t safe = 0;
    for (const SiteState& state : sites) {
      nlohmann::json& node = document["nodes"][state.site.node];
      annotate_site(state, budget, sites.size(), have_labels, node);
      safe += node["verdict"] == "safe";
    }
    context.add_statistic("sites", static_cast<double>(sites.size()));
    context.add_statistic("safe-sites", static_cast<double>(safe));
    context.add_statistic("batches", static_cast<double>(batches_used));
    context.add_statistic("site-batches-skipped", static_cast<double>(site_batches_skipped));
    write_annotations(graph, document);
    return false;  // annotations only: the computation is unchanged
  }

 private:
  enum class Verdict { kSafe, kUnsafe, kUndecided };

  /// safe: within its share of the budget (budget / sqrt(sites)), so any
  /// selection of such sites fits; unsafe: the site alone in FP8 breaks the
  /// whole budget, so no selection can hold it; undecided: in between (it may
  /// join a selection that pin-precision accounts for) or not yet resolved by
  /// the confidence intervals. Both bounds are judged at 95% confidence.
  static Verdict judge(const ErrorEstimate& estimate, const probe::Budget& budget, double threshold) {
    if (estimate.share_metric(budget.metric).ci95().second < threshold) return Verdict::kSafe;
    if (estimate.alone_metric(budget.metric).ci95().first > budget.limit) return Verdict::kUnsafe;
    return Verdict::kUndecided;
  }

  /// Whether more batches could still change the verdict: an interval
  /// straddles the share threshold or the budget.
  static bool unsettled(const ErrorEstimate& estimate, const probe::Budget& budget, double threshold) {
    const auto [share_lo, share_hi] = estimate.share_metric(budget.metric).ci95();
    const auto [alone_lo, alone_hi] = estimate.alone_metric(budget.metric).ci95();
    return (share_lo <= threshold && threshold <= share_hi) || (alone_lo <= budget.limit && budget.limit <= alone_hi);
  }

  /// The recipe a site would use: the first safe one (static per-tensor is
  /// cheapest), else the one with the smaller error.
  static Recipe preferred_recipe(const SiteState& state, const probe::Budget& budget, double threshold) {
    const std::vector<Recipe> recipes = recipes_for(state.site.kind);
    for (Recipe recipe : recipes)
      if (judge(state.end_to_end[static_cast<size_t>(recipe)], budget, threshold) == Verdict::kSafe) return recipe;
    Recipe best = recipes.front();
    for (Recipe recipe : recipes)
      if (state.end_to_end[static_cast<size_t>(recipe)].alone_metric(budget.metric).mean() <
          state.end_to_end[static_cast<size_t>(best)].alone_metric(budget.metric).mean())
        best = recipe;
    return best;
  }

  static Verdict site_verdict(const SiteState& state, const probe::Budget& budget, double threshold) {
    bool all_unsafe = true;
    for (Recipe recipe : recipes_for(state.site.kind)) {
      const Verdict v = judge(state.end_to_end[static_cast<size_t>(recipe)], budget, threshold);
      if (v == Verdict::kSafe) return Verdict::kSafe;
      all_unsafe &= v == Verdict::kUnsafe;
    }
    return all_unsafe ? Verdict::kUnsafe : Verdict::kUndecided;
  }

  /// Settled: safe already, or no recipe's interval straddles a threshold (more batches could
  /// still move the verdict, but rarely).
  static bool site_settled(const SiteState& state, const probe::Budget& budget, double threshold) {
    if (site_verdict(state, budget, threshold) == Verdict::kSafe) return true;
    const std::vector<Recipe> recipes = recipes_for(state.site.kind);
    return std::none_of(recipes.begin(), recipes.end(), [&](Recipe recipe) {
      return unsettled(state.end_to_end[static_cast<size_t>(recipe)], budget, threshold);
    });
  }

  static size_t count_unsettled(const std::vector<SiteState>& sites, const probe::Budget& budget) {
    const double threshold = budget.site_threshold(sites.size());
    return static_cast<size_t>(std::count_if(sites.begin(), sites.end(), [&](const SiteState& state) {
      return !site_settled(state, budget, threshold);
    }));
  }

  static nlohmann::json stats_json(const ValueStatistics& stats, float scale) {
    return {{"amax", stats.amax()},
            {"mean", stats.mean()},
            {"std", stats.stddev()},
            {"kurtosis", stats.kurtosis()},
            {"p50", stats.magnitude_percentile(0.5)},
            {"p99", stats.magnitude_percentile(0.99)},
            {"p999", stats.magnitude_percentile(0.999)},
            {"dynamic_range_log2", stats.dynamic_range_log2()},
            {"zero_fraction", stats.count() ? static_cast<double>(stats.zeros()) / static_cast<double>(stats.count()) : 0.0},
            {"underflow_fraction_e4m3", stats.underflow_fraction(scale, Fp8Format::kE4M3FN)},
            {"subnormal_fraction_e4m3", stats.subnormal_fraction(scale, Fp8Format::kE4M3FN)},
            {"saturation_fraction_e4m3", stats.saturation_fraction(scale, Fp8Format::kE4M3FN)},
            {"underflow_fraction_e5m2", stats.underflow_fraction(cpu::fp8_scale_for_amax(stats.amax(), Fp8Format::kE5M2), Fp8Format::kE5M2)},
            {"amax_drift_cv", stats.batch_amax_drift()},
            {"scale_e4m3", scale},
            {"values", stats.count()},
            {"zeros", stats.zeros()},
            {"log2_histogram", log2_histogram_json(stats)}};
  }

  /// [[e, count], ...]: count values with 2^e <= |v| < 2^(e+1), non-empty octaves only.
  static nlohmann::json log2_histogram_json(const ValueStatistics& stats) {
    nlohmann::json bins = nlohmann::json::array();
    for (const auto& [exponent, count] : stats.octave_histogram()) bins.push_back({exponent, count});
    return bins;
  }

  static void annotate_site(const SiteState& state, const probe::Budget& budget, size_t site_count, bool have_labels,
                            nlohmann::json& node) {
    const double threshold = budget.site_threshold(site_count);
    const Recipe recipe = preferred_recipe(state, budget, threshold);
    const size_t r = static_cast<size_t>(recipe);
    const Verdict verdict = site_verdict(state, budget, threshold);
    node["name"] = state.site.node;
    node["op"] = state.site.op;
    node["site"] = probe::site_kind_name(state.site.kind);
    node["shape"] = state.site.shape;
    node["flops"] = state.site.flops_per_sample;
    if (!node.contains("precision")) node["precision"] = "fp32";
    node["verdict"] = verdict == Verdict::kSafe ? "safe" : verdict == Verdict::kUnsafe ? "unsafe" : "undecided";
    node["recipe"] = recipe_name(recipe);
    node["threshold"] = threshold;
    node["error"] = error_json(state.end_to_end[r], have_labels);
    node["local_error"] = error_json(state.local[r], false);
    nlohmann::json recipes = nlohmann::json::object();
    for (Recipe each : recipes_for(state.site.kind)) {
      const size_t i = static_cast<size_t>(each);
      const Verdict v = judge(state.end_to_end[i], budget, threshold);
      recipes[recipe_name(each)] = {{"error", error_json(state.end_to_end[i], have_labels)},
                                    {"local_error", error_json(state.local[i], false)},
                                    {"verdict", v == Verdict::kSafe ? "safe" : v == Verdict::kUnsafe ? "unsafe" : "undecided"}};
    }
    node["recipes"] = recipes;
    node["stats"] = {{"activation", stats_json(state.activation, state.static_scale_a)}};
    if (state.site.kind != SiteKind::kEmbedding)
      node["stats"][state.site.kind == SiteKind::kActivationMatMul ? "activation_b" : "weight"] =
          stats_json(state.second, state.static_scale_b);
    if (!node.contains("kernel")) node["kernel"] = nullptr;
  }
};

}  // namespace

PassInfo probe_pass_info() {
  return PassInfo{"probe",
                  "calibrate on --calib data and measure, per FP8 candidate site, its local and end-to-end FP8 error",
                  {{"batches", OptionType::kInt, "64", "most calibration batches to measure errors on"},
                   {"min_batches", OptionType::kInt, "3", "batches before early stopping may stop"},
                   {"amax_batches", OptionType::kInt, "8", "batches used to calibrate static scales (amax)"},
                   {"early_stop", OptionType::kBool, "true",
                    "from min_batches on, measure a site no more once it is settled (safe, or no 95% interval "
                    "straddling its threshold or the budget), and stop once every site is"},
                   {"noise_sigmas", OptionType::kFloat, "1",
                    "logloss budgets: standard deviations of eval-set noise allowed for (more: fewer FP8 sites, "
                    "less risk)"},
                   {"threads", OptionType::kInt, "0", "CPU worker threads measuring sites (0: one per core the process may use)"},
                   {"device", OptionType::kString, "auto",
                    "where the model runs: cuda (amax calibration through one model with the site operands as "
                    "outputs; errors through one model with switches on the operands, a run per site and recipe), "
                    "cpu (the CPU runtime), auto (cuda when this build and machine have a GPU)",
                    {"auto", "cpu", "cuda"}},
                   {"method", OptionType::kString, "auto",
                    "hooks (observer hooks, replaying each site's prefix; CPU only) or switches (ai.loka.ProbeFakeQuant on "
                    "the operands, a Mode input per run; the only way on the GPU, bit-identical to hooks on the CPU); "
                    "auto: switches on the GPU, hooks on the CPU",
                    {"auto", "hooks", "switches"}}},
                  {"sites", "safe-sites", "batches", "site-batches-skipped", "calibration-seconds"},
                  /*result_cacheable=*/true};
}

std::unique_ptr<Pass> make_probe_pass() { return std::make_unique<ProbePass>(); }

}  // namespace loka
