// ============================================================================
// passes/onnx/onnx_export.h — LoKA IR -> ONNX ModelProto.
//
// Writes nodes in topological order, initializers as raw_data, inputs,
// outputs and value_info with the inferred types (symbolic dims by name), the
// opset imports and metadata_props. Re-importing the result gives the same IR
// (the round-trip golden tests check the printed form).
// ============================================================================
#pragma once

#include <filesystem>

#include "loka/status.h"
#include "passes/ir/graph.h"

namespace onnx {
class ModelProto;
}

namespace loka::onnx_io {

/// Fills `model`; errors only for cyclic graphs or unrepresentable attributes.
Status export_model(const ir::Graph& graph, onnx::ModelProto& model);
/// Serialized model bytes.
Result<std::string> export_model_bytes(const ir::Graph& graph);
/// Writes the model file (all tensors inline), naming the path in errors.
Status write_model_file(const ir::Graph& graph, const std::filesystem::path& path);

}  // namespace loka::onnx_io
