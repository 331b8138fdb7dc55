// ============================================================================
// tests/model_builder.h — builds small ONNX ModelProtos in tests.
//
//   ModelBuilder b(17);
//   b.input("x", DType::kFloat32, {-1, 4});          // -1: symbolic dim "batch"
//   b.initializer("w", weights);                      // a loka::Tensor
//   b.node("Gemm", {"x", "w"}, {"y"}, {{"transB", int64_t{1}}});
//   b.output("y", DType::kFloat32, {-1, 3});
//   std::string bytes = b.serialize();
// ============================================================================
#pragma once

#include <onnx/onnx_pb.h>

#include <cstddef>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "loka/engine.h"
#include "loka/tensor.h"

namespace loka::testing {

using TestAttribute = std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>, Tensor>;

class ModelBuilder {
 public:
  explicit ModelBuilder(int opset = 17, const std::string& domain = "");
  /// Declares a graph input; dims of -1 become the symbolic dim "batch".
  ModelBuilder& input(const std::string& name, DType dtype, const Shape& dims);
  ModelBuilder& output(const std::string& name, DType dtype, const Shape& dims);
  /// An output with no declared shape.
  ModelBuilder& output_unshaped(const std::string& name, DType dtype);
  ModelBuilder& initializer(const std::string& name, const Tensor& tensor);
  ModelBuilder& node(const std::string& op_type, const std::vector<std::string>& inputs,
                     const std::vector<std::string>& outputs,
                     const std::vector<std::pair<std::string, TestAttribute>>& attributes = {},
                     const std::string& name = "", const std::string& domain = "");
  ModelBuilder& opset(const std::string& domain, int version);

  onnx::ModelProto& proto() { return model_; }
  std::string serialize() const;
  /// Loads the model into a CPU Engine (fails the calling test on error via the Result).
  Result<std::shared_ptr<const Engine>> build_engine(EngineOptions options = {}) const;

 private:
  onnx::ModelProto model_;
};

/// Runs `engine` on `inputs` in a fresh Session.
Result<std::vector<Tensor>> run_once(const Engine& engine, const std::vector<Tensor>& inputs);

/// A chain of `nodes` unary nodes x -> n0 -> n1 -> ... -> y (opset 17; node n is Neg when
/// n % 3 == 2, else Relu; value n is "v<n>"; x and y float32 of `shape`): very deep graphs.
ModelBuilder chain_model(int nodes, const Shape& shape);

}  // namespace loka::testing
