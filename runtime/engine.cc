// ============================================================================
// runtime/engine.cc — loading a model into an immutable, shareable plan.
// ============================================================================
#include "loka/engine.h"

#include <onnx/onnx_pb.h>

#include "loka/session.h"
#include "runtime/execution_plan.h"
#include "runtime/file_io.h"

namespace loka {

Engine::Engine(std::unique_ptr<ExecutionPlan> plan, EngineOptions options)
    : plan_(std::move(plan)), options_(options) {}
Engine::~Engine() = default;

Result<std::shared_ptr<const Engine>> Engine::load_file(const std::filesystem::path& path, EngineOptions options) {
  LOKA_ASSIGN_OR_RETURN(const std::vector<std::byte> bytes, read_file(path));
  return load_bytes(bytes, options, path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path(),
                    path.string());
}

Result<std::shared_ptr<const Engine>> Engine::load_bytes(std::span<const std::byte> bytes, EngineOptions options,
                                                         const std::filesystem::path& external_data_dir,
                                                         const std::string& source_name) {
  if (options.device != Device::kCpu)
    return Status::error(source_name + ": the CUDA device is not available in this build; use --device cpu");
  LOKA_ASSIGN_OR_RETURN(auto model, parse_model_bytes(bytes, source_name));
  LOKA_ASSIGN_OR_RETURN(auto plan, ExecutionPlan::build(*model, external_data_dir, source_name));
  return std::shared_ptr<const Engine>(new Engine(std::move(plan), options));
}

const std::vector<TensorInfo>& Engine::inputs() const { return plan_->inputs(); }
const std::vector<TensorInfo>& Engine::outputs() const { return plan_->outputs(); }
size_t Engine::node_count() const { return plan_->steps().size(); }
std::unique_ptr<Session> Engine::new_session() const { return std::make_unique<Session>(*this); }

}  // namespace loka
