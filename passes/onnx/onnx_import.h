// ============================================================================
// passes/onnx/onnx_import.h — ONNX ModelProto -> LoKA IR.
//
// Accepts what PyTorch's TorchScript (opsets 13-17) and dynamo (18+) exporters
// write: Constant nodes, initializers in raw or typed fields or external files
// next to the model, symbolic batch dims, value_info, metadata. Checks
// structure as it goes (undefined reads, two producers, duplicate names) and
// reports the first defect in one line naming the node or value. Model-local
// functions are refused with a hint to inline them. Shapes are not inferred
// here; run infer_shapes (passes/ir/shape_inference.h) after importing.
// ============================================================================
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "loka/status.h"
#include "passes/ir/graph.h"
#include "runtime/initializer_payloads.h"

namespace onnx {
class ModelProto;
}

namespace loka::onnx_io {

/// Reads and imports a model file (external data resolved inside its folder). Large
/// initializers are copied from the mapped file into their tensors once, never through
/// protobuf (runtime/initializer_payloads.h).
Result<std::unique_ptr<ir::Graph>> import_model_file(const std::filesystem::path& path);
/// Imports a parsed model; `source` names it in errors. `payloads` holds raw_data the model was
/// parsed without, by initializer position (split_initializer_payloads).
Result<std::unique_ptr<ir::Graph>> import_model(const onnx::ModelProto& model,
                                                const std::filesystem::path& external_data_dir,
                                                const std::string& source,
                                                const InitializerPayloads& payloads = {});

}  // namespace loka::onnx_io
