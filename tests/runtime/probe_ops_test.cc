// ============================================================================
// tests/runtime/probe_ops_test.cc — ai.loka.ProbeFakeQuant on the CPU.
//
// Each form against the FP8 emulation it names (kernels/cpu/fp8_quantize.h),
// Mode 0 as a copy, and bad Mode values and attributes as errors naming them.
// ============================================================================
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>

#include "kernels/cpu/fp8_quantize.h"
#include "loka/engine.h"
#include "model_builder.h"

namespace loka {
namespace {

using testing::ModelBuilder;
using testing::TestAttribute;
using Attrs = std::vector<std::pair<std::string, TestAttribute>>;

/// Runs one ProbeFakeQuant node on X and Mode (both graph inputs).
Result<std::vector<Tensor>> run_switch(const Tensor& x, const Tensor& mode, const Attrs& attributes) {
  ModelBuilder builder(17);
  builder.opset("ai.loka", 1);
  builder.input("x", x.dtype(), x.shape()).input("mode", mode.dtype(), mode.shape());
  builder.node("ProbeFakeQuant", {"x", "mode"}, {"y"}, attributes, "switch", "ai.loka").output_unshaped("y", DType::kFloat32);
  LOKA_ASSIGN_OR_RETURN(auto engine, builder.build_engine());
  return testing::run_once(*engine, {x, mode});
}

Tensor random_floats(std::mt19937& rng, const Shape& shape) {
  Tensor t = Tensor::zeros(DType::kFloat32, shape);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (float& v : t.values<float>()) v = normal(rng);
  return t;
}

Tensor mode_tensor(std::vector<int32_t> values) {
  Tensor t = Tensor::zeros(DType::kInt32, {static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), t.data<int32_t>());
  return t;
}

Attrs attributes(int64_t site, std::vector<int64_t> forms, std::vector<int64_t> formats, std::vector<float> scales) {
  return {{"site", site}, {"forms", forms}, {"formats", formats}, {"scales", scales}};
}

const Attrs kAllForms = attributes(1, {1, 2, 3}, {1, 0, 0}, {0.25f, 1.0f, 1.0f});

std::vector<float> values_of(const Tensor& t) { return {t.values<float>().begin(), t.values<float>().end()}; }

TEST(ProbeFakeQuant, EachModeAppliesItsRecipeBitForBit) {
  std::mt19937 rng(7);
  const Shape shape{3, 5, 17};  // K = 5 rows per matrix, 17 columns: odd sizes on purpose
  const Tensor x = random_floats(rng, shape);
  for (int32_t mode = 0; mode <= 3; ++mode) {
    auto y = run_switch(x, mode_tensor({0, mode}), kAllForms);
    ASSERT_TRUE(y) << y.status().message();
    std::vector<float> expected = values_of(x);
    if (mode == 1) cpu::fake_quantize_per_tensor(expected, 0.25f, cpu::Fp8Format::kE5M2);
    if (mode == 2) cpu::fake_quantize_per_row(expected, 15, 17, cpu::Fp8Format::kE4M3FN);
    if (mode == 3)
      for (int m = 0; m < 3; ++m)
        cpu::fake_quantize_per_column(std::span(expected).subspan(static_cast<size_t>(m * 85), 85), 5, 17,
                                      cpu::Fp8Format::kE4M3FN);
    const std::vector<float> got = values_of((*y)[0]);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(expected[i])) << "mode " << mode << " at " << i;
    if (mode == 0) EXPECT_EQ(got, values_of(x));
  }
}

TEST(ProbeFakeQuant, Bf16FormRoundsToNearestEvenAndWidensBack) {
  Tensor x = Tensor::zeros(DType::kFloat32, {1, 8});
  const std::vector<float> values = {
      std::bit_cast<float>(0x3F808000u),  // halfway between two BF16 values, even below: rounds down
      std::bit_cast<float>(0x3F818000u),  // halfway, odd below: rounds up
      std::bit_cast<float>(0x3F808001u),  // just above halfway: up
      -0.0f, std::bit_cast<float>(0x00000001u),  // the smallest subnormal rounds to +0
      std::bit_cast<float>(0x7F7FFFFFu),  // FLT_MAX is past BF16's largest finite value: inf
      NAN, -INFINITY};
  std::copy(values.begin(), values.end(), x.values<float>().begin());
  auto y = run_switch(x, mode_tensor({0, 1}), attributes(1, {4, 0, 0}, {0, 0, 0}, {1, 1, 1}));
  ASSERT_TRUE(y) << y.status().message();
  const std::vector<float> got = values_of((*y)[0]);
  const std::vector<uint32_t> expected = {0x3F800000u, 0x3F820000u, 0x3F810000u, 0x80000000u,
                                          0x00000000u, 0x7F800000u, 0u, 0xFF800000u};
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(values[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
      continue;
    }
    EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), expected[i]) << "at " << i;
  }
}

TEST(ProbeFakeQuant, RejectsBadModesAndAttributesNamingThem) {
  std::mt19937 rng(8);
  const Tensor x = random_floats(rng, {2, 4});
  auto bad_mode = run_switch(x, mode_tensor({0, 4}), kAllForms);
  ASSERT_FALSE(bad_mode);
  EXPECT_NE(bad_mode.status().message().find("Mode[1] = 4"), std::string::npos) << bad_mode.status().message();
  auto short_mode = run_switch(x, mode_tensor({0}), kAllForms);
  ASSERT_FALSE(short_mode);
  EXPECT_NE(short_mode.status().message().find("site"), std::string::npos) << short_mode.status().message();
  auto bad_form = run_switch(x, mode_tensor({0, 1}),
                                  attributes(1, {1, 9, 0}, {0, 0, 0}, {1, 1, 1}));
  ASSERT_FALSE(bad_form);
  EXPECT_NE(bad_form.status().message().find("forms"), std::string::npos) << bad_form.status().message();
  auto bad_scale = run_switch(x, mode_tensor({0, 1}),
                                  attributes(1, {1, 0, 0}, {0, 0, 0}, {0, 1, 1}));
  ASSERT_FALSE(bad_scale);
  EXPECT_NE(bad_scale.status().message().find("scales"), std::string::npos) << bad_scale.status().message();
}

}  // namespace
}  // namespace loka
