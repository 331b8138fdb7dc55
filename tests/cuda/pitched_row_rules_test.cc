// ============================================================================
// tests/cuda/pitched_row_rules_test.cc — which steps the CUDA backend expects
// to write pitched rows, and rows of what (each op family's PitchedRowRule,
// registered with its factory: runtime/cuda/device_op.h), at a bucket's shapes.
//
// Host logic (no GPU needed): a Gemm with a bias or no C, a MatMul of a
// weight, a FusedGemm with ReLU and a QuantizedGemm (float32 or BF16 X and Y) do, in rows of
// their last dim; EmbeddingBags does (float32 or BF16), in rows of a sample's [T, D], and so does a MatMul of one small matrix
// on the left of every sample (LoKA's shared-left kernel), in rows of a
// sample's [M, N]; a Gemm whose C is added after it, a strided-batch MatMul,
// a left matrix with K beyond the kernel's 64, a FusedGemm with a residual or
// the exact GELU, and a Relu do not.
// ============================================================================
#include "runtime/cuda/device_op.h"

#include <gtest/gtest.h>

#include <string>

#include "model_builder.h"

namespace loka {
namespace {

Tensor zeros(const Shape& shape) { return Tensor::zeros(DType::kFloat32, shape); }

TEST(PitchedRowRules, TheStepsWhoseOpsWillWritePitchedRowsAndTheirWidth) {
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
  b.initializer("mix", zeros({6, 16})).initializer("wide_mix", zeros({6, 65}));
  b.input("v", DType::kFloat32, {-1, 65, 32});
  b.node("MatMul", {"mix", "u"}, {"shared_left"}, {}, "shared_left");            // [6,16] x [B,16,32]
  b.node("MatMul", {"wide_mix", "v"}, {"wide_shared_left"}, {}, "wide_shared_left");  // K = 65: cuBLASLt
  b.node("FusedGemm", {"x", "w", "bias"}, {"fused_relu"}, {{"activation", std::string("relu")}}, "fused_relu", "ai.loka");
  b.node("FusedGemm", {"x", "w", "bias"}, {"fused_gelu"}, {{"activation", std::string("gelu")}}, "fused_gelu", "ai.loka");
  b.node("FusedGemm", {"x", "w", "bias", "with_bias"}, {"fused_residual"}, {}, "fused_residual", "ai.loka");
  b.node("Relu", {"x"}, {"relu"}, {}, "relu");
  b.input("ids", DType::kInt64, {-1, 3});
  b.initializer("table", zeros({10, 8}));
  b.node("EmbeddingBags", {"ids", "table", "", "table"}, {"bags"}, {{"offsets", std::vector<int64_t>{0, 1, 3}}}, "bags",
         "ai.loka");
  b.output("bags", DType::kFloat32, {-1, 2, 8});
  b.node("EmbeddingBags", {"ids", "table", "", "table"}, {"bf16_bags"},
         {{"offsets", std::vector<int64_t>{0, 1, 3}}, {"output_dtype", int64_t{16}}}, "bf16_bags", "ai.loka");
  b.output("bf16_bags", DType::kBFloat16, {-1, 2, 8});
  // QuantizedGemm: the registry's FP8 kernel writes rows with a pitch, float32 or BF16 (its D),
  // reading X in either dtype.
  b.input("x_bf16", DType::kBFloat16, {-1, 16});
  b.initializer("w_fp8", Tensor::zeros(DType::kFloat8E4M3FN, {32, 16})).initializer("w_scale", zeros({32}));
  b.initializer("x_scale", Tensor::scalar_float(1.0f));
  b.node("QuantizedGemm", {"x", "w_fp8", "w_scale", "bias", "x_scale"}, {"quantized"}, {}, "quantized", "ai.loka");
  b.node("QuantizedGemm", {"x_bf16", "w_fp8", "w_scale", "bias", "x_scale"}, {"quantized_bf16_x"}, {},
         "quantized_bf16_x", "ai.loka");
  b.node("QuantizedGemm", {"x", "w_fp8", "w_scale", "bias", "x_scale"}, {"quantized_bf16_y"},
         {{"output_dtype", int64_t{16}}}, "quantized_bf16_y", "ai.loka");
  b.output("quantized_bf16_y", DType::kBFloat16, {-1, 32});
  for (const char* out : {"no_c", "with_bias", "with_row_bias", "with_addend", "fused_relu", "fused_gelu", "fused_residual",
                          "quantized", "quantized_bf16_x"})
    b.output(out, DType::kFloat32, {-1, 32});
  b.output("weight_matmul", DType::kFloat32, {-1, 4, 32});
  b.output("batched_matmul", DType::kFloat32, {-1, 4, 32});
  b.output("shared_left", DType::kFloat32, {-1, 6, 32});
  b.output("wide_shared_left", DType::kFloat32, {-1, 6, 32});
  b.output("relu", DType::kFloat32, {-1, 16});
  auto engine = b.build_engine();
  ASSERT_TRUE(engine) << engine.status().message();
  auto traced = BatchShapeModel::trace(**engine);
  ASSERT_TRUE(traced) << traced.status().message();
  auto shapes = traced->at(64);
  ASSERT_TRUE(shapes) << shapes.status().message();
  // Name, then the widths of the rows it can write with a pitch (none: packed rows only). The
  // shared-left MatMul writes samples [M, N] (a Concat along the tokens) or rows of N (along the
  // features).
  using Widths = std::vector<int64_t>;
  const std::vector<std::pair<std::string, Widths>> expected = {
      {"no_c", {32}},          {"with_bias", {32}},          {"with_row_bias", {32}},
      {"with_addend", {}},     {"weight_matmul", {32}},      {"batched_matmul", {}},
      {"fused_relu", {32}},    {"fused_gelu", {}},           {"fused_residual", {}},
      {"relu", {}},            {"bags", {16}},               {"shared_left", {6 * 32, 32}},
      {"wide_shared_left", {}}, {"bf16_bags", {16}},        {"quantized", {32}},
      {"quantized_bf16_x", {32}}, {"quantized_bf16_y", {32}}};
  size_t checked = 0;
  for (const PlanStep& step : (*engine)->plan().steps())
    for (const auto& [name, widths] : expected)
      if (step.name == name) {
        EXPECT_EQ(cuda::DeviceOpRegistry::builtin().pitched_row_widths(step, *shapes), widths) << name;
        ++checked;
      }
  EXPECT_EQ(checked, expected.size());
}

}  // namespace
}  // namespace loka
