// ============================================================================
// passes/pass_manager.cc — pipeline execution, verification, timing, reproducers.
// ============================================================================
#include "passes/pass_manager.h"

#include <chrono>
#include <fstream>
#include <iostream>
#include <optional>

#include "passes/ir/text_format.h"
#include "passes/pass_cache.h"
#include "passes/pass_registry.h"
#include "passes/ir/verifier.h"

namespace loka {

Status PassManager::save_reproducer(const ir::Graph& input, const Pipeline& pipeline,
                                    const Status& failure) const {
  const auto stamp = std::chrono::system_clock::now().time_since_epoch().count();
  const auto base = options_.reproducer_dir / ("loka-repro-" + std::to_string(stamp));
  std::ofstream(base.string() + ".ir") << ir::print_graph(input);
  std::ofstream(base.string() + ".pipeline") << print_pipeline(pipeline, registry_, true) << "\n";
  return Status::error(failure.message() + " (reproducer: " + base.string() + ".ir and .pipeline)");
}

Result<bool> PassManager::run_or_restore(Pass& pass, const PipelineEntry& entry, ir::Graph& graph,
                                         PassContext& context, bool& cached) {
  cached = false;
  const PassInfo* info = registry_.find(entry.pass);
  if (context.cache() == nullptr || info == nullptr || !info->result_cacheable) return pass.run(graph, context);
  const PassCache& cache = *context.cache();
  LOKA_ASSIGN_OR_RETURN(const std::string key, cache.key_text(entry.pass, entry.options, context.settings(), graph));
  if (std::optional<CachedPassResult> stored = cache.load(entry.pass, key)) {
    graph.metadata = std::move(stored->metadata);
    for (const auto& [name, amount] : stored->statistics) context.add_statistic(name, amount);
    cached = true;
    if (options_.log)
      *options_.log << entry.pass << ": reused the stored result " << cache.entry_path(entry.pass, key).string()
                    << " (same model, options, calibration data, GPU and build)\n";
    return stored->changed;
  }
  LOKA_ASSIGN_OR_RETURN(const bool changed, pass.run(graph, context));
  const Status stored = cache.store(entry.pass, key, CachedPassResult{graph.metadata, context.statistics(), changed});
  if (!stored && options_.log) *options_.log << entry.pass << ": result not stored: " << stored.message() << "\n";
  return changed;
}

Result<std::vector<PassRunRecord>> PassManager::run(ir::Graph& graph, const Pipeline& pipeline,
                                                     const CompileSettings& settings) {
  std::vector<PassRunRecord> records;
  std::ostream& ir_out = options_.ir_stream ? *options_.ir_stream : std::cerr;
  // The pipeline's input, for a reproducer: a clone shares the initializers' storage (passes
  // replace initializer data, never write through it), so keeping it costs the node and value
  // tables only; it is printed as text only on failure. (Printing it up front cost a 768 MB
  // model 40 s and several GB of text on every run.)
  const std::unique_ptr<ir::Graph> input = graph.clone();
  // One store per run: what its keys hash (the model's initializers, the calibration files) is
  // remembered from one stored pass to the next (passes/pass_cache_fingerprints.h).
  const std::optional<PassCache> cache =
      options_.cache_dir.empty() ? std::nullopt : std::optional<PassCache>(PassCache(options_.cache_dir));
  for (const PipelineEntry& entry : pipeline) {
    std::unique_ptr<Pass> pass = registry_.create(entry.pass);
    if (!pass) return Status::error("pipeline: unknown pass '" + entry.pass + "'");
    PassContext context(settings, entry.options, cache ? &*cache : nullptr);
    const auto start = std::chrono::steady_clock::now();
    bool cached = false;
    Result<bool> changed = run_or_restore(*pass, entry, graph, context, cached);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!changed) return save_reproducer(*input, pipeline, changed.status().with_context("pass '" + entry.pass + "': "));
    if (options_.verify_each) {
      if (Status status = ir::verify_graph(graph); !status)
        return save_reproducer(*input, pipeline,
                               status.with_context("after pass '" + entry.pass + "', the IR is invalid: "));
    }
    records.push_back(PassRunRecord{entry.pass, *changed, seconds, context.statistics(), cached});
    if (options_.print_ir_after == entry.pass || (options_.print_ir_after_change && *changed))
      ir_out << "// ----- IR after " << entry.pass << (*changed ? " (changed)" : " (unchanged)") << " -----\n"
             << ir::print_graph(graph);
  }
  return records;
}

}  // namespace loka
