// ============================================================================
// tests/cuda/gemm_pitch_test.cc — which GEMM steps the CUDA backend expects to
// write pitched rows (runtime/cuda/ops/gemm_pitch.h), at a bucket's shapes.
//
// Host logic (no GPU needed): a Gemm with a bias or no C, a MatMul of a
// weight, a FusedGemm with ReLU do; a Gemm whose C is added after it, a
// strided-batch MatMul, a FusedGemm with a residual or the exact GELU, and a
// Relu do not.
// ============================================================================
#include "runtime/cuda/ops/gemm_pitch.h"

#include <gtest/gtest.h>

#include <string>

#include "model_builder.h"

namespace loka {
namespace {

Tensor zeros(const Shape& shape) { return Tensor::zeros(DType::kFloat32, shape); }

TEST(GemmPitch, TheStepsWhoseOpsWillWritePitchedRows) {
  testing::ModelBuilder b(17);
  b.opset("ai.loka", 1);
  b.input("x", DType::kFloat32, {-1, 16});
  b.input("t", DType::kFloat32, {-1, 4, 16});
  b.input("u", DType::kFloat32, {-1, 16, 32});
  b.initializer("w", zeros({16, 32})).initializer("bias", zeros({32})).initializer("row_bias", zeros({1, 32}));
  b.initializer("scalar_c", zeros({1, 1}));
  b.node("Gemm", {"x", "w"}, {"no_c"}, {}, "no_c");
  b.node("Gemm", {"x", "w", "bias"}, {"with_bias"}, {}, "with_bias");
  b.node("Gemm", {"x", "w", "row_bias"}, {"with_row_bias"}, {}, "with_row_bias");
  b.node("Gemm", {"x", "w", "scalar_c"}, {"with_addend"}, {}, "with_addend");
  b.node("MatMul", {"t", "w"}, {"weight_matmul"}, {}, "weight_matmul");
  b.node("MatMul", {"t", "u"}, {"batched_matmul"}, {}, "batched_matmul");  // one product a sample
  b.node("FusedGemm", {"x", "w", "bias"}, {"fused_relu"}, {{"activation", std::string("relu")}}, "fused_relu", "ai.loka");
  b.node("FusedGemm", {"x", "w", "bias"}, {"fused_gelu"}, {{"activation", std::string("gelu")}}, "fused_gelu", "ai.loka");
  b.node("FusedGemm", {"x", "w", "bias", "with_bias"}, {"fused_residual"}, {}, "fused_residual", "ai.loka");
  b.node("Relu", {"x"}, {"relu"}, {}, "relu");
  for (const char* out : {"no_c", "with_bias", "with_row_bias", "with_addend", "fused_relu", "fused_gelu", "fused_residual"})
    b.output(out, DType::kFloat32, {-1, 32});
  b.output("weight_matmul", DType::kFloat32, {-1, 4, 32});
  b.output("batched_matmul", DType::kFloat32, {-1, 4, 32});
  b.output("relu", DType::kFloat32, {-1, 16});
  auto engine = b.build_engine();
  ASSERT_TRUE(engine) << engine.status().message();
  auto traced = BatchShapeModel::trace(**engine);
  ASSERT_TRUE(traced) << traced.status().message();
  auto shapes = traced->at(64);
  ASSERT_TRUE(shapes) << shapes.status().message();
  const std::vector<std::pair<std::string, bool>> expected = {
      {"no_c", true},           {"with_bias", true},       {"with_row_bias", true}, {"with_addend", false},
      {"weight_matmul", true},  {"batched_matmul", false}, {"fused_relu", true},    {"fused_gelu", false},
      {"fused_residual", false}, {"relu", false}};
  size_t checked = 0;
  for (const PlanStep& step : (*engine)->plan().steps())
    for (const auto& [name, pitched] : expected)
      if (step.name == name) {
        EXPECT_EQ(cuda::gemm_writes_pitched_rows(step, *shapes), pitched) << name;
        ++checked;
      }
  EXPECT_EQ(checked, expected.size());
}

}  // namespace
}  // namespace loka
