// ============================================================================
// tests/dispatch/calibration_errors_test.cc — GEMM errors per arithmetic on a
// node's calibration inputs (passes/dispatch/calibration_errors.h), and the
// dispatch pass pricing upgrades with them.
//
// The errors are checked bit for bit against a plain reference written here
// (rounding by the codecs, quantization by kernels/cpu/fp8_quantize.h, double
// sums in row order: the same figure on any thread count), on random operands
// of awkward sizes, in each layout; operands exactly
// representable give zero (the negative twin); an outlier channel raises
// FP8's error and barely moves BF16's (why the ratio is measured on the data).
// ============================================================================
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "kernels/cpu/fp8_quantize.h"
#include "loka/bfloat16.h"
#include "passes/dispatch/calibration_errors.h"
#include "passes/dispatch/dispatch_pass.h"
#include "passes/dispatch/gemm_timer.h"
#include "passes/ir/shape_inference.h"
#include "passes/ir/text_format.h"
#include "passes/probe/annotations.h"
#include "runtime/tensor_proto.h"
#include "gemm_test_keys.h"
#include "test_support.h"

namespace loka::dispatch {
namespace {

namespace fs = std::filesystem;
using kernels::GemmLayout;
using nlohmann::json;

float bf16(float v) { return bf16_to_float(float_to_bf16(v)); }
float tf32(float v) {
  const uint32_t bits = float_bits(v);
  return float_from_bits((bits + 0xFFFu + ((bits >> 13) & 1u)) & ~0x1FFFu);
}

/// rel_l2 of X' W' against X W, X [rows, K], W [N, K] (row-major), summed in double: each row's
/// squares over its outputs, then the rows in order (the order the implementation promises, so
/// its figure is the same bit for bit whatever its thread count).
double reference_error(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& xq,
                       const std::vector<float>& wq, int64_t rows, int64_t k, int64_t n) {
  double diff = 0, ref = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double row_diff = 0, row_ref = 0;
    for (int64_t j = 0; j < n; ++j) {
      double exact = 0, test = 0;
      for (int64_t i = 0; i < k; ++i) {
        exact += static_cast<double>(x[r * k + i]) * w[j * k + i];
        test += static_cast<double>(xq[r * k + i]) * wq[j * k + i];
      }
      row_diff += (test - exact) * (test - exact);
      row_ref += exact * exact;
    }
    diff += row_diff;
    ref += row_ref;
  }
  return std::sqrt(diff / ref);
}

template <typename Round>
std::vector<float> rounded(std::vector<float> values, Round round) {
  for (float& v : values) v = round(v);
  return values;
}

std::vector<float> transposed(const std::vector<float>& w, int64_t rows, int64_t cols) {
  std::vector<float> out(w.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = w[r * cols + c];
  return out;
}

TEST(GemmFamilyErrors, MatchAPlainReferenceInEveryLayout) {
  std::mt19937 rng(20261127);
  // The last shape spans several threads' row ranges (at least 4096 / N rows each).
  for (const auto& [rows, k, n] :
       {std::tuple{1, 7, 3}, std::tuple{37, 33, 17}, std::tuple{64, 130, 9}, std::tuple{200, 40, 130}}) {
    SCOPED_TRACE("rows " + std::to_string(rows) + " k " + std::to_string(k) + " n " + std::to_string(n));
    const Tensor x = testing::random_tensor(rng, {rows, k});
    const Tensor w_nk = testing::random_tensor(rng, {n, k}, -0.3f, 0.3f);
    const std::vector<float> xv = x.to_floats(), wv = w_nk.to_floats();
    const float scale = cpu::fp8_scale_for_amax(cpu::finite_amax(xv), cpu::Fp8Format::kE4M3FN);
    // FP8 e4m3_tensor: X per tensor, W per output channel (rows of [N, K]).
    std::vector<float> x8 = xv, w8 = wv;
    cpu::fake_quantize_per_tensor(x8, scale, cpu::Fp8Format::kE4M3FN);
    cpu::fake_quantize_per_row(w8, n, k, cpu::Fp8Format::kE4M3FN);
    const double fp8 = reference_error(xv, wv, x8, w8, rows, k, n);
    const double b16 = reference_error(xv, wv, rounded(xv, bf16), rounded(wv, bf16), rows, k, n);
    const double t32 = reference_error(xv, wv, rounded(xv, tf32), rounded(wv, tf32), rows, k, n);
    EXPECT_GT(fp8, b16);
    EXPECT_GT(b16, t32);
    EXPECT_GT(t32, 0);

    const Fp8RecipeSpec recipe{Fp8RecipeSpec::Kind::kE4M3Tensor, false, scale, 1.0f};
    const Tensor w_kn = Tensor::from_floats({k, n}, transposed(wv, n, k));
    for (const auto& [layout, w] : {std::pair{GemmLayout::kNT, w_nk}, std::pair{GemmLayout::kNN, w_kn}}) {
      auto errors = gemm_family_errors("fc", x, w, layout, recipe, 1024);
      ASSERT_TRUE(errors) << errors.status().message();
      EXPECT_EQ(errors->fp8, fp8);
      EXPECT_EQ(errors->bf16, b16);
      EXPECT_EQ(errors->tf32, t32);
      EXPECT_EQ(errors->rows, rows);
    }
  }
}

TEST(GemmFamilyErrors, ABf16XIsMeasuredAsItsWidenedValues) {
  // A FusedGemm reading BF16 activation storage: every family reads the widened X, so the figures
  // are its FP32 twin's bit for bit, and BF16's own rounding of X adds nothing (only W rounds).
  std::mt19937 rng(20261206);
  const int64_t rows = 37, k = 33, n = 17;
  const std::vector<float> xv = rounded(testing::random_tensor(rng, {rows, k}).to_floats(), bf16);
  Tensor x_bf16 = Tensor::zeros(DType::kBFloat16, {rows, k});
  for (size_t i = 0; i < xv.size(); ++i) x_bf16.data<uint16_t>()[i] = float_to_bf16(xv[i]);
  const Tensor x_widened = Tensor::from_floats({rows, k}, xv);
  const Tensor w = testing::random_tensor(rng, {n, k}, -0.3f, 0.3f);
  const Fp8RecipeSpec recipe{Fp8RecipeSpec::Kind::kE4M3Tensor, false,
                             cpu::fp8_scale_for_amax(cpu::finite_amax(xv), cpu::Fp8Format::kE4M3FN), 1.0f};
  auto from_bf16 = gemm_family_errors("fc", x_bf16, w, GemmLayout::kNT, recipe, 1024);
  auto from_float = gemm_family_errors("fc", x_widened, w, GemmLayout::kNT, recipe, 1024);
  ASSERT_TRUE(from_bf16 && from_float) << (from_bf16 ? from_float.status().message() : from_bf16.status().message());
  EXPECT_EQ(from_bf16->bf16, from_float->bf16);
  EXPECT_EQ(from_bf16->tf32, from_float->tf32);
  EXPECT_EQ(from_bf16->fp8, from_float->fp8);
  const std::vector<float> wv = w.to_floats();
  EXPECT_EQ(from_bf16->bf16, reference_error(xv, wv, xv, rounded(wv, bf16), rows, k, n)) << "X exact in BF16";
  // The synthetic figure (no calibration data) prices the same: W's rounding alone.
  kernels::GemmCandidate bf16_candidate;
  bf16_candidate.precision = kernels::GemmPrecision::kBf16;
  const kernels::GemmKey float_key = testing::fp32_gemm_key(), bf16_key = testing::bf16_activation_gemm_key();
  EXPECT_NEAR(expected_rel_error(bf16_candidate, bf16_key), expected_rel_error(bf16_candidate, float_key) / std::sqrt(2.0),
              1e-12);
}

TEST(GemmFamilyErrors, RowRecipeAndBatchedActivationMatMuls) {
  std::mt19937 rng(7);
  const int64_t batches = 5, m = 6, k = 9, n = 4;
  const Tensor x = testing::random_tensor(rng, {batches, m, k});
  const Tensor w = testing::random_tensor(rng, {batches, k, n});
  // e5m2_tensor on both activations: one batch of 6 rows covers max_rows 4.
  const Fp8RecipeSpec e5m2{Fp8RecipeSpec::Kind::kE5M2Tensor, true, 0.01f, 0.02f};
  auto one = gemm_family_errors("mm", x, w, GemmLayout::kBatched, e5m2, 4);
  ASSERT_TRUE(one) << one.status().message();
  EXPECT_EQ(one->rows, m);
  std::vector<float> xv = x.to_floats(), wv = w.to_floats();
  std::vector<float> x8 = xv, w8 = wv;
  cpu::fake_quantize_per_tensor(x8, 0.01f, cpu::Fp8Format::kE5M2);
  cpu::fake_quantize_per_tensor(w8, 0.02f, cpu::Fp8Format::kE5M2);
  const auto first_batch = [&](const std::vector<float>& v, int64_t size) { return std::vector<float>(v.begin(), v.begin() + size); };
  const std::vector<float> w0 = transposed(first_batch(wv, k * n), k, n), w80 = transposed(first_batch(w8, k * n), k, n);
  EXPECT_NEAR(one->fp8, reference_error(first_batch(xv, m * k), w0, first_batch(x8, m * k), w80, m, k, n), 1e-12);
  // Every batch when asked for more rows than there are.
  auto all = gemm_family_errors("mm", x, w, GemmLayout::kBatched, e5m2, 1000);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->rows, batches * m);
  // e4m3_row of a weight GEMM: X per row, whatever its static scale says.
  const Tensor x2 = testing::random_tensor(rng, {8, k});
  const Tensor w2 = testing::random_tensor(rng, {n, k});
  auto row = gemm_family_errors("fc", x2, w2, GemmLayout::kNT, Fp8RecipeSpec{Fp8RecipeSpec::Kind::kE4M3Row, false, 1e-9f, 1}, 8);
  ASSERT_TRUE(row) << row.status().message();
  std::vector<float> xr = x2.to_floats(), wr = w2.to_floats();
  cpu::fake_quantize_per_row(xr, 8, k, cpu::Fp8Format::kE4M3FN);
  cpu::fake_quantize_per_row(wr, n, k, cpu::Fp8Format::kE4M3FN);
  EXPECT_NEAR(row->fp8, reference_error(x2.to_floats(), w2.to_floats(), xr, wr, 8, k, n), 1e-12);
}

TEST(GemmFamilyErrors, NegativeTwinRepresentableOperandsHaveNoError) {
  // Small integers and halves: exact in BF16, TF32 and E4M3 (scale 1, per-channel amax 4 -> scale 4/448).
  const Tensor x = Tensor::from_floats({2, 4}, std::vector<float>{1, -2, 0.5, 3, 0, 1, -1, 2});
  const Tensor w = Tensor::from_floats({2, 4}, std::vector<float>{1, 2, -1, 0.5, 0, -1, 1, 1});
  auto errors = gemm_family_errors("fc", x, w, GemmLayout::kNT, Fp8RecipeSpec{Fp8RecipeSpec::Kind::kE4M3Tensor, false, 1, 1}, 16);
  ASSERT_TRUE(errors) << errors.status().message();
  EXPECT_EQ(errors->bf16, 0.0);
  EXPECT_EQ(errors->tf32, 0.0);
  EXPECT_EQ(errors->fp8, 0.0);
}

TEST(GemmFamilyErrors, AnOutlierChannelRaisesFp8sErrorNotBf16s) {
  std::mt19937 rng(11);
  const int64_t rows = 128, k = 64, n = 32;
  Tensor x = testing::random_tensor(rng, {rows, k});
  Tensor w = testing::random_tensor(rng, {n, k}, -0.2f, 0.2f);
  // The outlier channel's weights are as much smaller (as SmoothQuant-style models have it):
  // the output stays the other channels' sum, which a per-tensor scale now crushes.
  for (int64_t j = 0; j < n; ++j) w.data<float>()[j * k + 5] /= 1e5f;
  const auto errors_of = [&](const Tensor& input) {
    const float scale = cpu::fp8_scale_for_amax(cpu::finite_amax(input.to_floats()), cpu::Fp8Format::kE4M3FN);
    return gemm_family_errors("fc", input, w, GemmLayout::kNT,
                              Fp8RecipeSpec{Fp8RecipeSpec::Kind::kE4M3Tensor, false, scale, 1}, rows).value();
  };
  const FamilyErrors plain = errors_of(x);
  // One channel 1e5x larger: E4M3 spans 18 binades, so the others fall to its subnormals.
  for (int64_t r = 0; r < rows; ++r) x.data<float>()[r * k + 5] *= 1e5f;
  const FamilyErrors outlier = errors_of(x);
  EXPECT_GT(outlier.fp8 / outlier.bf16, 2.0 * plain.fp8 / plain.bf16)
      << "plain fp8 " << plain.fp8 << " bf16 " << plain.bf16 << "; outlier fp8 " << outlier.fp8 << " bf16 " << outlier.bf16;
}

TEST(GemmFamilyErrors, BadOperandsAreRefusedNamingTheNode) {
  const Tensor x = Tensor::zeros(DType::kFloat32, {4, 8});
  const Fp8RecipeSpec recipe;
  auto mismatch = gemm_family_errors("fc7", x, Tensor::zeros(DType::kFloat32, {3, 9}), GemmLayout::kNT, recipe, 8);
  ASSERT_FALSE(mismatch);
  EXPECT_NE(mismatch.status().message().find("node 'fc7'"), std::string::npos) << mismatch.status().message();
  EXPECT_FALSE(gemm_family_errors("fc7", x, Tensor::zeros(DType::kInt64, {8, 3}), GemmLayout::kNN, recipe, 8));
  auto e5m2 = gemm_family_errors("fc7", x, Tensor::zeros(DType::kFloat32, {8, 3}), GemmLayout::kNN,
                                 Fp8RecipeSpec{Fp8RecipeSpec::Kind::kE5M2Tensor, false, 1, 1}, 8);
  ASSERT_FALSE(e5m2);
  EXPECT_NE(e5m2.status().message().find("activation MatMuls"), std::string::npos);
  // No rows: nothing measured (NaN), no error.
  auto empty = gemm_family_errors("fc7", Tensor::zeros(DType::kFloat32, {0, 8}), Tensor::zeros(DType::kFloat32, {3, 8}),
                                  GemmLayout::kNT, recipe, 8);
  ASSERT_TRUE(empty) << empty.status().message();
  EXPECT_EQ(empty->rows, 0);
  EXPECT_TRUE(std::isnan(empty->fp8));
  auto empty_batched = gemm_family_errors("mm", Tensor::zeros(DType::kFloat32, {0, 4, 8}),
                                          Tensor::zeros(DType::kFloat32, {0, 8, 3}), GemmLayout::kBatched, recipe, 8);
  ASSERT_TRUE(empty_batched) << empty_batched.status().message();
  EXPECT_EQ(empty_batched->rows, 0);
  EXPECT_FALSE(parse_fp8_recipe("e4m3"));
  EXPECT_EQ(parse_fp8_recipe("e4m3_row").value(), Fp8RecipeSpec::Kind::kE4M3Row);
}

// ------------------------------------------------ the pass, end to end ----

constexpr const char* kModel = R"(graph "one" {
  opset "" 17
  input %x : f32[batch,48]
  input %w : f32[64,48]
  %y = Gemm(%x, %w) {transB = 1} @"fc"
  output %y
})";

/// A Gemm over calibration data whose channel 3 carries outliers, annotated as the Probe and
/// pin-precision leave an FP32 node (rel_l2 budget 0.01 with room to spare).
struct Fixture {
  std::unique_ptr<ir::Graph> graph;
  fs::path calib;
  float scale = 1;
};

Fixture make_fixture() {
  std::mt19937 rng(3);
  Fixture f;
  f.graph = ir::parse_graph(kModel).value();
  ir::Value* w = f.graph->find_value("w");
  f.graph->remove_input(w);
  Tensor weights = testing::random_tensor(rng, {64, 48}, -0.2f, 0.2f);
  for (int64_t j = 0; j < 64; ++j) weights.data<float>()[j * 48 + 3] /= 1e5f;  // see AnOutlierChannel...
  f.graph->set_initializer(w, std::move(weights));
  EXPECT_TRUE(ir::infer_shapes(*f.graph).is_ok());
  Tensor x = testing::random_tensor(rng, {300, 48});
  for (int64_t r = 0; r < 300; ++r) x.data<float>()[r * 48 + 3] *= 1e5f;
  f.scale = cpu::fp8_scale_for_amax(cpu::finite_amax(x.to_floats()), cpu::Fp8Format::kE4M3FN);
  f.calib = testing::make_temp_dir("loka-calibration-errors");
  fs::create_directories(f.calib / "test_data_set_0");
  EXPECT_TRUE(write_tensor_file(f.calib / "test_data_set_0" / "input_0.pb", "x", x));
  json document = {{"version", 1}, {"model", {{"precision", {{"budget", "rel_l2=0.01"}, {"predicted_error", 0.0}}}}}};
  document["nodes"]["fc"] = {{"name", "fc"},
                             {"op", "Gemm"},
                             {"precision", "fp32"},
                             {"recipes", {{"e4m3_tensor", {{"error", {{"rel_l2_mean", 0.05}}}}}}},
                             {"stats", {{"activation", {{"scale_e4m3", f.scale}, {"amax", f.scale * 448}}},
                                        {"weight", {{"scale_e4m3", 1.0}, {"amax", 448.0}}}}}};
  write_annotations(*f.graph, document);
  return f;
}

json dispatch_on(Fixture& f, int64_t calibration_rows) {
  CompileSettings settings;
  settings.calibration_data = f.calib;
  std::map<std::string, std::string> defaults;
  for (const PassOption& option : dispatch_pass_info().options) defaults[option.name] = option.default_value;
  PassContext context(settings, defaults);
  auto timer = make_cost_model_timer();
  auto norm_timer = make_cost_model_norm_timer();
  DispatchOptions options;
  options.calibration_rows = calibration_rows;
  auto changed = dispatch_kernels(*f.graph, context, *timer, *norm_timer, options);
  EXPECT_TRUE(changed) << changed.status().message();
  return read_annotations(*f.graph).value();
}

TEST(DispatchCalibrationErrors, UpgradesArePricedWithTheNodesOwnInputs) {
  Fixture f = make_fixture();
  const json document = dispatch_on(f, 256);
  const json& fc = document["nodes"]["fc"];
  ASSERT_TRUE(fc.contains("calibration_errors")) << fc.dump();
  const json& measured = fc["calibration_errors"];
  EXPECT_EQ(measured["rows"], 256);
  EXPECT_EQ(measured["fp8_recipe"], "e4m3_tensor");
  // The node's own numbers: what gemm_family_errors gives on the first 256 calibration rows.
  const DataSetReader reader = DataSetReader::open(f.calib).value();
  const Tensor x = reader.read(0).value().inputs.at(0).tensor;
  const std::vector<float> values = x.to_floats();
  const Tensor first = Tensor::from_floats({256, 48}, std::vector<float>(values.begin(), values.begin() + 256 * 48));
  const FamilyErrors expected = gemm_family_errors("fc", first, *f.graph->find_value("w")->initializer(), GemmLayout::kNT,
                                                   Fp8RecipeSpec{Fp8RecipeSpec::Kind::kE4M3Tensor, false, f.scale, 1}, 256)
                                    .value();
  EXPECT_DOUBLE_EQ(measured["fp8"].get<double>(), expected.fp8);
  EXPECT_DOUBLE_EQ(measured["bf16"].get<double>(), expected.bf16);
  // A granted upgrade adds the site's FP8 error times its arithmetic's calibration error over FP8's
  // (rel_l2 budget: first order).
  const std::string precision = fc["kernel_precision"];
  ASSERT_TRUE(precision == "tf32" || precision == "bf16") << fc.dump();
  const double ratio = measured[precision].get<double>() / measured["fp8"].get<double>();
  EXPECT_NEAR(fc["kernel_extra_error"].get<double>(), 0.05 * ratio, 1e-12);
  EXPECT_EQ(document["model"]["dispatch"]["within_budget"], true);
}

TEST(DispatchCalibrationErrors, NegativeTwinNoRowsOrNoDataKeepsTheSyntheticRatio) {
  Fixture f = make_fixture();
  const json without = dispatch_on(f, 0);
  EXPECT_FALSE(without["nodes"]["fc"].contains("calibration_errors"));
  Fixture g = make_fixture();
  const json with = dispatch_on(g, 256);
  // The outliers make FP8 worse on this data than on synthetic operands, so the same upgrade
  // costs less here than the synthetic ratio says.
  EXPECT_LT(with["nodes"]["fc"]["kernel_extra_error"].get<double>(), without["nodes"]["fc"]["kernel_extra_error"].get<double>());
}

}  // namespace
}  // namespace loka::dispatch
