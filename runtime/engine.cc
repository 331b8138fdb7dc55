// ============================================================================
// runtime/engine.cc — loading a model into an immutable, shareable plan.
// ============================================================================
#include "loka/engine.h"

#include <onnx/onnx_pb.h>

#include "loka/session.h"
#include "runtime/device_backend.h"
#include "runtime/error_text.h"
#include "runtime/execution_plan.h"
#include "runtime/file_io.h"

namespace loka {

Engine::Engine(std::unique_ptr<ExecutionPlan> plan, EngineOptions options)
    : plan_(std::move(plan)), options_(options) {}
Engine::~Engine() = default;

// Errors leave through one_line(): they quote names from the model, which may hold any byte.
Result<std::shared_ptr<const Engine>> Engine::load_file(const std::filesystem::path& path, EngineOptions options) {
  auto bytes = read_file(path);
  if (!bytes) return one_line(bytes.status());
  return load_bytes(*bytes, options, path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path(),
                    path.string());
}

Result<std::shared_ptr<const Engine>> Engine::load_bytes(std::span<const std::byte> bytes, EngineOptions options,
                                                         const std::filesystem::path& external_data_dir,
                                                         const std::string& source_name) {
  auto model = parse_model_bytes(bytes, source_name);
  if (!model) return one_line(model.status());
  auto plan = ExecutionPlan::build(**model, external_data_dir, source_name);
  if (!plan) return one_line(plan.status());
  std::shared_ptr<Engine> engine(new Engine(std::move(plan).value(), options));
  if (options.device == Device::kCuda) {
    auto device_model = create_device_model(*engine);
    if (!device_model) return one_line(device_model.status().with_context(source_name + ": "));
    engine->device_model_ = std::move(device_model).value();
  }
  return std::shared_ptr<const Engine>(std::move(engine));
}

const std::vector<TensorInfo>& Engine::inputs() const { return plan_->inputs(); }
const std::vector<TensorInfo>& Engine::outputs() const { return plan_->outputs(); }
size_t Engine::node_count() const { return plan_->steps().size(); }
std::unique_ptr<Session> Engine::new_session() const { return std::make_unique<Session>(*this); }

}  // namespace loka
