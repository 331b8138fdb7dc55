// ============================================================================
// passes/pass_manager.cc — pipeline execution, verification, timing, reproducers.
// ============================================================================
#include "passes/pass_manager.h"

#include <chrono>
#include <fstream>
#include <iostream>

#include "passes/ir/text_format.h"
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

Result<std::vector<PassRunRecord>> PassManager::run(ir::Graph& graph, const Pipeline& pipeline,
                                                     const CompileSettings& settings) {
  std::vector<PassRunRecord> records;
  std::ostream& ir_out = options_.ir_stream ? *options_.ir_stream : std::cerr;
  // The pipeline's input, for a reproducer: a clone shares the initializers' storage (passes
  // replace initializer data, never write through it), so keeping it costs the node and value
  // tables only; it is printed as text only on failure. (Printing it up front cost a 768 MB
  // model 40 s and several GB of text on every run.)
  const std::unique_ptr<ir::Graph> input = graph.clone();
  for (const PipelineEntry& entry : pipeline) {
    std::unique_ptr<Pass> pass = registry_.create(entry.pass);
    if (!pass) return Status::error("pipeline: unknown pass '" + entry.pass + "'");
    PassContext context(settings, entry.options);
    const auto start = std::chrono::steady_clock::now();
    Result<bool> changed = pass->run(graph, context);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!changed) return save_reproducer(*input, pipeline, changed.status().with_context("pass '" + entry.pass + "': "));
    if (options_.verify_each) {
      if (Status status = ir::verify_graph(graph); !status)
        return save_reproducer(*input, pipeline,
                               status.with_context("after pass '" + entry.pass + "', the IR is invalid: "));
    }
    records.push_back(PassRunRecord{entry.pass, *changed, seconds, context.statistics()});
    if (options_.print_ir_after == entry.pass || (options_.print_ir_after_change && *changed))
      ir_out << "// ----- IR after " << entry.pass << (*changed ? " (changed)" : " (unchanged)") << " -----\n"
             << ir::print_graph(graph);
  }
  return records;
}

}  // namespace loka
