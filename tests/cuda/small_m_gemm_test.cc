// ============================================================================
// tests/cuda/small_m_gemm_test.cc — LoKA's small-M FP8 GEMM
// (kernels/cuda/small_m_gemm.h, the registry's loka.fp8.e4m3.*.small_m) against
// a CPU reference on fresh random inputs, against the cuBLASLt FP8 candidate
// where both run, inside a CUDA graph, and its refusals. GPU tests skip
// visibly without a GPU; the refusals need none.
//
// The reference quantizes the activation on the CPU as each recipe defines it:
// the row recipe with kernels/cpu (fp8_scale_for_amax of the row's finite_amax,
// then quantize_e4m3fn, a division), the tensor recipe as x · (1 / X_scale)
// (the reciprocal, rounded once, that the GPU's quantize multiplies by:
// fp8_convert.h), an E4M3 activation's codes as they are. It then sums
// D(x)·D(w) in double (exact: a product has 8 significant bits), and scales,
// adds the bias, activates and adds the residual in double.
//
// Tolerance: the kernel computes the same exact products, so only its FP32
// arithmetic differs. Summing K products in any order errs by at most
// (K - 1)·2^-24 of Σ|products|; the two scale multiplies and the bias add by
// 2^-24 each of base = Σ|products|·xs·ws + |B|; the GELU's slope is below 1.13
// and erff's few-ulp error on its value (up to base) is below 2^-21·base; the
// residual add and the store round once more (2^-22 of |Y| and |R|). Hence
// (1.13·(K + 8)·2^-24 + 2^-21)·base + 2^-22·(|Y| + |R|): at K = 1 and 17
// a single activation code off by one step is far outside it.
// ============================================================================
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "cuda/fp8_candidate_util.h"
#include "gemm_test_keys.h"
#include "kernels/cpu/fp8_quantize.h"
#include "kernels/cuda/gemm_candidate.h"
#include "kernels/cuda/small_m_gemm.h"
#include "loka/float8.h"

namespace loka::testing {
namespace {

using kernels::GemmCandidate;
using kernels::GemmKey;
using kernels::GemmShape;
using kernels::ScaleGranularity;

class SmallMGemmTest : public CudaTest {};

/// The activation recipes: FP32 with a tensor or row scale, or E4M3 codes with their scale.
enum class Recipe { kTensor, kRow, kE4M3 };

const char* recipe_name(Recipe recipe) {
  return recipe == Recipe::kTensor ? "tensor" : recipe == Recipe::kRow ? "row" : "e4m3";
}

GemmKey key_for(Recipe recipe, bool bias, cuda::GemmEpilogue epilogue, bool residual) {
  GemmKey key = quantized_gemm_key(recipe == Recipe::kRow ? ScaleGranularity::kRow : ScaleGranularity::kTensor,
                                   recipe == Recipe::kE4M3 ? DType::kFloat8E4M3FN : DType::kFloat32);
  key.bias = bias;
  key.epilogue = epilogue;
  key.residual = residual;
  return key;
}

GemmCandidate small_m_candidate(const GemmKey& key) {
  GemmCandidate c;
  c.library = kernels::GemmLibrary::kLoka;
  c.precision = kernels::GemmPrecision::kFp8E4M3;
  c.granularity = key.input == DType::kFloat8E4M3FN ? ScaleGranularity::kTensor : key.activation_scale;
  return c;
}

/// One problem's host operands, drawn fresh; x_codes are the activation's codes as the recipe
/// defines them, x_scales the scale each row is de-quantized with.
struct Operands : Fp8GemmOperands {
  std::vector<float> x_scales;
};

Operands draw_operands(const GemmKey& key, const GemmShape& shape, unsigned seed) {
  const int64_t m = shape.m, n = shape.n, k = shape.k;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> scale_draw(0.001f, 0.01f);
  Operands o;
  o.w_codes.resize(static_cast<size_t>(n * k));
  for (uint8_t& code : o.w_codes) code = float_to_fp8e4m3fn(60.0f * normal(rng));
  o.w_scale.resize(static_cast<size_t>(n));
  for (float& s : o.w_scale) s = scale_draw(rng);
  o.bias.resize(static_cast<size_t>(n));
  for (float& b : o.bias) b = normal(rng);
  o.residual.resize(static_cast<size_t>(m * n));
  for (float& r : o.residual) r = normal(rng);
  o.x_codes.resize(static_cast<size_t>(m * k));
  o.x_scales.assign(static_cast<size_t>(m), 1.0f);
  if (key.input == DType::kFloat8E4M3FN) {
    for (uint8_t& code : o.x_codes) code = float_to_fp8e4m3fn(60.0f * normal(rng));
    o.x_scale = scale_draw(rng);
    std::fill(o.x_scales.begin(), o.x_scales.end(), o.x_scale);
    return o;
  }
  // Normal values with a few large ones (a row's amax sets its scale); row 1 all zeros (scale 1).
  o.x.resize(static_cast<size_t>(m * k));
  for (float& v : o.x) v = normal(rng) * (rng() % 64 == 0 ? 40.0f : 2.0f);
  if (m >= 3) std::fill_n(o.x.begin() + k, k, 0.0f);
  if (key.activation_scale == ScaleGranularity::kRow) {
    for (int64_t r = 0; r < m; ++r) {
      const std::span<const float> row(o.x.data() + r * k, static_cast<size_t>(k));
      const float scale = cpu::fp8_scale_for_amax(cpu::finite_amax(row), cpu::Fp8Format::kE4M3FN);
      o.x_scales[static_cast<size_t>(r)] = scale;
      cpu::quantize_e4m3fn(row, scale, o.x_codes.data() + r * k);
    }
    return o;
  }
  // The tensor recipe: a calibrated-looking scale that is not a power of two and saturates the
  // largest values (above 0.8 of the amax).
  o.x_scale = 0.8f * cpu::finite_amax(o.x) / 448.0f;
  std::fill(o.x_scales.begin(), o.x_scales.end(), o.x_scale);
  const float inverse = 1.0f / o.x_scale;
  for (size_t i = 0; i < o.x.size(); ++i) o.x_codes[i] = float_to_fp8e4m3fn(o.x[i] * inverse);
  return o;
}

/// Expects `y` within the file banner's bound of the double reference; returns the mismatches.
size_t count_mismatches(const std::vector<float>& y, const GemmKey& key, const GemmShape& shape, const Operands& o,
                        const std::string& what) {
  const int64_t m = shape.m, n = shape.n, k = shape.k;
  if (y.size() != static_cast<size_t>(m * n)) {
    ADD_FAILURE() << what << ": no output";
    return 1;
  }
  const double slope = key.epilogue == cuda::GemmEpilogue::kGelu ? 1.13 : 1.0;
  const double per_base = slope * static_cast<double>(k + 8) * std::ldexp(1.0, -24) + std::ldexp(1.0, -21);
  const auto decode = [](const std::vector<uint8_t>& codes) {
    std::vector<double> values(codes.size());
    for (size_t i = 0; i < codes.size(); ++i) values[i] = fp8e4m3fn_to_float(codes[i]);
    return values;
  };
  const std::vector<double> x = decode(o.x_codes), w = decode(o.w_codes);
  size_t bad = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double product = x[static_cast<size_t>(i * k + p)] * w[static_cast<size_t>(j * k + p)];
        sum += product;
        magnitude += std::fabs(product);
      }
      const double scale = double(o.x_scales[static_cast<size_t>(i)]) * o.w_scale[static_cast<size_t>(j)];
      const double b = key.bias ? o.bias[static_cast<size_t>(j)] : 0.0;
      double expected = sum * scale + b;
      if (key.epilogue == cuda::GemmEpilogue::kRelu) expected = std::max(0.0, expected);
      if (key.epilogue == cuda::GemmEpilogue::kGelu) expected = 0.5 * expected * (1.0 + std::erf(expected / std::sqrt(2.0)));
      const double r = key.residual ? o.residual[static_cast<size_t>(i * n + j)] : 0.0;
      expected += r;
      const double got = y[static_cast<size_t>(i * n + j)];
      const double tolerance =
          per_base * (magnitude * scale + std::fabs(b)) + std::ldexp(1.0, -22) * (std::fabs(expected) + std::fabs(r));
      if (!(std::fabs(got - expected) <= tolerance) && bad++ < 5)
        ADD_FAILURE() << what << ": Y[" << i << "," << j << "] = " << got << ", expected " << expected << " (tolerance "
                      << tolerance << ")";
    }
  return bad;
}

TEST_F(SmallMGemmTest, MatchesTheCpuReferenceOnFreshInputs) {
  // Every recipe at every size; per recipe, bias, activation and residual cycle through their 12
  // combinations.
  const cuda::GemmEpilogue epilogues[] = {cuda::GemmEpilogue::kNone, cuda::GemmEpilogue::kRelu, cuda::GemmEpilogue::kGelu};
  unsigned case_index = 0;
  // 2: the two-row CTA; 100: a partial 16-row tile.
  for (const int64_t m : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{64}, int64_t{100}, cuda::kSmallMMaxRows})
    for (const int64_t k : {1, 17, 100, 512, 1000})
      for (const int64_t n : {1, 24, 129, 512})
        for (const Recipe recipe : {Recipe::kTensor, Recipe::kRow, Recipe::kE4M3}) {
          const unsigned i = case_index++, combination = i / 3;  // recipes take turns
          const GemmKey key =
              key_for(recipe, combination % 2 == 0, epilogues[(combination / 2) % 3], (combination / 6) % 2 == 0);
          const GemmShape shape{m, n, k, 1};
          const std::string what = std::string(recipe_name(recipe)) + " " + key.to_string() + " " + shape.to_string();
          SCOPED_TRACE(what);
          const Operands operands = draw_operands(key, shape, 1000 + i);
          const std::vector<float> y = run_fp8_candidate(small_m_candidate(key), key, shape, operands);
          EXPECT_EQ(count_mismatches(y, key, shape, operands, what), 0u);
        }
}

TEST_F(SmallMGemmTest, AgreesWithTheCublasLtFp8Candidate) {
  // A shape both run (K and N multiples of 16). cuBLASLt's FP8 tensor cores keep about 14
  // significant bits in their sums (2e-3 of Σ|x·w|, fp8_candidate_util.h) and read the bias as
  // BF16 (half an ulp: up to 2^-8 of it; a row of zero codes shows exactly that); the same codes
  // go in, so nothing else differs.
  const GemmShape shape{64, 256, 512, 1};
  for (const Recipe recipe : {Recipe::kTensor, Recipe::kRow, Recipe::kE4M3}) {
    for (const bool residual : {false, true}) {
      const GemmKey key = key_for(recipe, true, cuda::GemmEpilogue::kRelu, residual);
      SCOPED_TRACE(std::string(recipe_name(recipe)) + " " + key.to_string());
      const Operands o = draw_operands(key, shape, 7 + static_cast<unsigned>(recipe));
      GemmCandidate cublaslt;
      cublaslt.precision = kernels::GemmPrecision::kFp8E4M3;
      cublaslt.granularity = small_m_candidate(key).granularity;
      const std::vector<float> ours = run_fp8_candidate(small_m_candidate(key), key, shape, o);
      const std::vector<float> theirs = run_fp8_candidate(cublaslt, key, shape, o);
      ASSERT_EQ(ours.size(), theirs.size());
      size_t bad = 0;
      for (int64_t i = 0; i < shape.m; ++i)
        for (int64_t j = 0; j < shape.n; ++j) {
          double magnitude = 0, exact = 0;
          for (int64_t p = 0; p < shape.k; ++p) {
            const double product = double(fp8e4m3fn_to_float(o.x_codes[static_cast<size_t>(i * shape.k + p)])) *
                                   fp8e4m3fn_to_float(o.w_codes[static_cast<size_t>(j * shape.k + p)]);
            magnitude += std::fabs(product);
            exact += product;
          }
          const double scale = double(o.x_scales[static_cast<size_t>(i)]) * o.w_scale[static_cast<size_t>(j)];
          const size_t at = static_cast<size_t>(i * shape.n + j);
          const double tolerance = 2e-3 * magnitude * scale + std::ldexp(1.0, -8) * std::fabs(o.bias[static_cast<size_t>(j)]) +
                                   1e-6 * (1.0 + std::fabs(ours[at]));
          if (!(std::fabs(double(ours[at]) - theirs[at]) <= tolerance) && bad++ < 5)
            ADD_FAILURE() << "Y[" << i << "," << j << "]: small_m " << ours[at] << ", cuBLASLt " << theirs[at]
                          << ", exact sum x scales " << exact * double(o.x_scales[static_cast<size_t>(i)]) * o.w_scale[static_cast<size_t>(j)]
                          << " + bias " << o.bias[static_cast<size_t>(j)];
        }
      EXPECT_EQ(bad, 0u);
    }
  }
}

TEST_F(SmallMGemmTest, PassesTheSharedFp8CandidateCheckOnAwkwardShapes) {
  // The harness every FP8 candidate passes (fp8_candidate_util.h), at shapes cuBLASLt's FP8 refuses.
  for (const DType input : {DType::kFloat32, DType::kFloat8E4M3FN}) {
    GemmKey key = quantized_gemm_key(ScaleGranularity::kTensor, input);
    key.bias = true;
    key.residual = input == DType::kFloat32;
    for (const GemmShape shape : {GemmShape{1, 1, 17, 1}, GemmShape{3, 24, 100, 1}, GemmShape{40, 129, 1000, 1}})
      EXPECT_EQ(fp8_candidate_mismatches(small_m_candidate(key), key, shape), 0u) << key.to_string() << " " << shape.to_string();
  }
}

TEST_F(SmallMGemmTest, UnalignedWeightsTakeNarrowerLoads) {
  // K = 512 would take 16-byte loads; W 4 bytes and 1 byte past an alignment takes 4- and 1-byte ones.
  const GemmShape shape{5, 33, 512, 1};
  const GemmKey key = key_for(Recipe::kRow, true, cuda::GemmEpilogue::kGelu, true);
  const Operands o = draw_operands(key, shape, 99);
  for (const size_t offset : {size_t{0}, size_t{4}, size_t{1}}) {
    SCOPED_TRACE("W at +" + std::to_string(offset) + " bytes");
    DeviceBytes x(o.x), w_scale(o.w_scale), bias(o.bias), residual(o.residual), y(o.residual.size() * sizeof(float));
    DeviceBytes shifted_w(o.w_codes.size() + offset);
    ASSERT_EQ(cudaMemcpy(static_cast<uint8_t*>(shifted_w.get()) + offset, o.w_codes.data(), o.w_codes.size(),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
    cuda::SmallMGemmArgs args;
    args.x = x.get();
    args.input = cuda::SmallMInput::kFloatRowScale;
    args.w = static_cast<const uint8_t*>(shifted_w.get()) + offset;
    args.w_scale = w_scale.as<float>();
    args.bias = bias.as<float>();
    args.epilogue = key.epilogue;
    args.residual = residual.as<float>();
    args.y = y.as<float>();
    args.m = shape.m;
    args.n = shape.n;
    args.k = shape.k;
    const Status status = cuda::launch_small_m_gemm(args, nullptr);
    ASSERT_TRUE(status) << status.message();
    EXPECT_EQ(count_mismatches(y.download_vector<float>(o.residual.size()), key, shape, o, "offset " + std::to_string(offset)),
              0u);
  }
}

TEST_F(SmallMGemmTest, ReplaysFromACudaGraph) {
  // Enqueue only: captured once and replayed, it writes what a direct run writes (the scale is read at replay).
  for (const Recipe recipe : {Recipe::kTensor, Recipe::kRow, Recipe::kE4M3}) {
    const GemmShape shape{8, 40, 96, 1};
    const GemmKey key = key_for(recipe, true, cuda::GemmEpilogue::kGelu, true);
    const Operands o = draw_operands(key, shape, 5);
    const std::vector<float> direct = run_fp8_candidate(small_m_candidate(key), key, shape, o);
    EXPECT_EQ(run_fp8_candidate(small_m_candidate(key), key, shape, o, /*in_graph=*/true), direct) << recipe_name(recipe);
  }
}

// Refusals happen before anything touches the device: no GPU needed.

TEST(SmallMGemmRefusals, PlanningAboveTheRowLimitSaysWhy) {
  const GemmKey key = key_for(Recipe::kTensor, true, cuda::GemmEpilogue::kRelu, false);
  const GemmCandidate candidate = small_m_candidate(key);
  auto kernel = cuda::GemmKernel::create(candidate, key, {cuda::kSmallMMaxRows + 1, 64, 64, 1}, {});
  ASSERT_FALSE(kernel.is_ok());
  const std::string message = kernel.status().message();
  EXPECT_NE(message.find(candidate.name()), std::string::npos) << message;
  EXPECT_NE(message.find("up to " + std::to_string(cuda::kSmallMMaxRows) + " rows"), std::string::npos) << message;
  EXPECT_NE(message.find("m=" + std::to_string(cuda::kSmallMMaxRows + 1)), std::string::npos) << message;
}

TEST(SmallMGemmRefusals, TheLauncherChecksItsArguments) {
  float y = 0, scale = 1;
  uint8_t code = 0;
  cuda::SmallMGemmArgs good;
  good.x = &y;  // never read: every case below is refused or empty before a launch
  good.w = &code;
  good.w_scale = &scale;
  good.x_scale = &scale;
  good.y = &y;
  good.m = good.n = good.k = 1;
  const auto refused = [](cuda::SmallMGemmArgs args, const std::string& needle) {
    const Status status = cuda::launch_small_m_gemm(args, nullptr);
    EXPECT_FALSE(status.is_ok()) << needle;
    EXPECT_NE(status.message().find(needle), std::string::npos) << status.message();
  };
  cuda::SmallMGemmArgs args = good;
  args.m = cuda::kSmallMMaxRows + 1;
  refused(args, "at most " + std::to_string(cuda::kSmallMMaxRows) + " rows");
  args = good;
  args.k = 0;
  refused(args, "k >= 1");
  args = good;
  args.w = nullptr;
  refused(args, "W");
  args = good;
  args.x_scale = nullptr;
  refused(args, "X_scale");
  args.input = cuda::SmallMInput::kFloatRowScale;  // the row recipe finds its own scales
  args.m = 0;
  EXPECT_TRUE(cuda::launch_small_m_gemm(args, nullptr).is_ok());
  args = good;
  args.n = 0;
  EXPECT_TRUE(cuda::launch_small_m_gemm(args, nullptr).is_ok());
}

}  // namespace
}  // namespace loka::testing
