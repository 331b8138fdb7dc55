// ============================================================================
// tests/cuda/cudnn_layer_norm_test.cc — the cuDNN LayerNorm graph
// (kernels/cuda/cudnn_layer_norm.h) against the CPU reference
// (kernels/cpu/layer_norm.h, the arithmetic of LoKA's LayerNormalization,
// ResidualLayerNorm and LayerNormQuant) on fresh random operands: one row,
// three rows and 65536 rows; widths 1, 7, 127, 128, 1536 and 4099; with and
// without bias; epsilons small and large; FP32 output, and the residual added
// in the graph. A graph cuDNN does not build here is recorded and printed,
// never passed over silently: the plain FP32 graph must build on a Hopper
// GPU, and a variant that builds nowhere skips with cuDNN's reason. Also:
// invalid problems (an E4M3 output among them) and an engine beyond the
// heuristic's count are one-line errors, run() refuses arguments other than
// the problem's, and a CUDA graph replays what an eager run writes. Skips
// visibly without a GPU or without cuDNN.
// ============================================================================
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "kernels/cpu/layer_norm.h"
#include "kernels/cuda/cudnn_fp8_gemm.h"
#include "kernels/cuda/cudnn_layer_norm.h"
#include "kernels/cuda/gemm_types.h"
#include "loka/float8.h"

namespace loka::testing {
namespace {

using cuda::CudnnLayerNorm;
using cuda::CudnnLayerNormProblem;

class CudnnLayerNormTest : public CudnnTest {};

/// The current device's compute capability as 90 for sm_90.
int sm_version() {
  int device = 0, major = 0, minor = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  return major * 10 + minor;
}

std::string label(const CudnnLayerNormProblem& p) {
  char text[160];
  std::snprintf(text, sizeof text, "rows=%lld cols=%lld%s%s%s epsilon=%g", static_cast<long long>(p.rows),
                static_cast<long long>(p.cols), p.has_bias ? " bias" : "", p.has_residual ? " residual" : "",
                p.fp8_output ? " e4m3" : " f32", p.epsilon);
  return text;
}

/// The shapes every variant is checked on: one and three rows at every width (a single row is
/// its own batch; 4099 is prime and past 4096), and 65536 rows up to 128 columns (the many-rows
/// launch; wider rows at that count would take gigabytes for no new path).
std::vector<std::pair<int64_t, int64_t>> shapes() {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const int64_t rows : {1, 3})
    for (const int64_t cols : {1, 7, 127, 128, 1536, 4099}) out.emplace_back(rows, cols);
  for (const int64_t cols : {1, 7, 127, 128}) out.emplace_back(65536, cols);
  return out;
}

/// Host operands of one problem: rows around an offset of their own (so the mean matters) with
/// standard deviation 2, scale around 1, a small bias, a unit-normal residual; the optional ones
/// empty when the problem has none.
struct Operands {
  std::vector<float> x, residual, scale, bias;
};

Operands random_operands(const CudnnLayerNormProblem& p) {
  std::mt19937 rng(static_cast<unsigned>(p.rows * 7919 + p.cols * 31 + p.has_bias + 2 * p.has_residual + 4 * p.fp8_output));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> offset(-10.0f, 10.0f);
  const size_t cols = static_cast<size_t>(p.cols);
  Operands in;
  in.x.resize(static_cast<size_t>(p.rows) * cols);
  for (size_t r = 0; r < static_cast<size_t>(p.rows); ++r) {
    const float row_offset = offset(rng);
    for (size_t j = 0; j < cols; ++j) in.x[r * cols + j] = row_offset + 2.0f * normal(rng);
  }
  for (size_t j = 0; j < cols; ++j) in.scale.push_back(1.0f + 0.5f * normal(rng));
  for (size_t j = 0; p.has_bias && j < cols; ++j) in.bias.push_back(0.1f * normal(rng));
  for (size_t i = 0; p.has_residual && i < in.x.size(); ++i) in.residual.push_back(normal(rng));
  return in;
}

/// cuDNN accumulates each row's statistics in float in an order of its own, LoKA's reference in
/// double rounded once. With these operands (offsets up to ±10, deviation 2, rows up to 4099
/// wide) a float mean is typically off by |offset| · 2^-24 · sqrt(cols) ≈ 4e-5, i.e. 2e-5
/// deviations, and 1/sqrt(var + epsilon) by a few 1e-6 relative. So an element may differ by
/// kStatisticsError deviations of its row, times |scale| and (1 + its normalized magnitude), plus
/// 1e-6 of itself for a differently rounded multiply-add: a margin of about 5 that still
/// catches a lost epsilon (0.5 on a variance of 4 moves every value 6%), the sample variance
/// (8% at 7 columns) or a lost bias.
constexpr double kStatisticsError = 1e-4;

/// The reference's values v (x, plus the residual as ONNX's float Add gives it, normalized,
/// scaled and biased) and how far cuDNN's may be from each.
struct Reference {
  std::vector<float> values, tolerances;
};

Reference reference(const CudnnLayerNormProblem& p, const Operands& in) {
  const size_t cols = static_cast<size_t>(p.cols);
  Reference ref;
  std::vector<float> row(cols);
  for (size_t r = 0; r < static_cast<size_t>(p.rows); ++r) {
    for (size_t j = 0; j < cols; ++j) {
      row[j] = in.x[r * cols + j];
      if (p.has_residual) row[j] += in.residual[r * cols + j];
    }
    const cpu::LayerNormRowStats stats = cpu::layer_norm_row_stats(row.data(), p.cols, p.epsilon);
    for (size_t j = 0; j < cols; ++j) {
      float v = cpu::layer_norm_element(row[j], stats, in.scale[j]);
      if (p.has_bias) v += in.bias[j];
      const double normalized = (static_cast<double>(row[j]) - stats.mean) * stats.inv_std;
      ref.values.push_back(v);
      ref.tolerances.push_back(static_cast<float>(kStatisticsError * std::fabs(in.scale[j]) * (1.0 + std::fabs(normalized)) +
                                                  1e-6 * std::fabs(v)));
    }
  }
  return ref;
}

/// The operands on the device, the workspace `kernel` needs, and the arguments naming them. Y
/// starts as NaN (bytes 0xFF), so an element a run does not write fails the comparison; all is
/// written before a run on any stream starts.
struct DeviceOperands {
  DeviceOperands(const CudnnLayerNorm& kernel, const Operands& in)
      : x(in.x), residual(in.residual), scale(in.scale), bias(in.bias), y(in.x.size() * sizeof(float)),
        workspace(kernel.workspace_bytes()) {
    const CudnnLayerNormProblem& p = kernel.problem();
    EXPECT_EQ(cudaMemset(y.get(), 0xFF, in.x.size() * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    args.x = x.as<float>();
    args.residual = p.has_residual ? residual.as<float>() : nullptr;
    args.scale = scale.as<float>();
    args.bias = p.has_bias ? bias.as<float>() : nullptr;
    args.rows = p.rows;
    args.cols = p.cols;
    args.epsilon = p.epsilon;
    args.y = y.as<float>();
  }

  DeviceBytes x, residual, scale, bias, y, workspace;
  cuda::LayerNormArgs args;
};

void expect_values_close(const std::vector<float>& y, const Reference& ref) {
  size_t bad = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    if (std::fabs(y[i] - ref.values[i]) <= ref.tolerances[i]) continue;  // NaN (unwritten) fails
    if (bad++ < 5)
      ADD_FAILURE() << "y[" << i << "] = " << y[i] << ", expected " << ref.values[i] << " within " << ref.tolerances[i];
  }
  EXPECT_EQ(bad, 0u) << "of " << y.size() << " values";
}

/// Which configurations of one variant cuDNN built here, printed by each test.
struct Outcome {
  explicit Outcome(const char* variant) : variant(variant) {}

  const char* variant;
  int built = 0;
  std::vector<std::string> refusals;

  void print() const {
    std::printf("[ info ] cuDNN LayerNorm %s: %d of %zu configurations built here\n", variant, built,
                static_cast<size_t>(built) + refusals.size());
    for (const std::string& refusal : refusals) std::printf("[ info ]   refused: %s\n", refusal.c_str());
  }
  std::string first_refusal() const { return refusals.empty() ? std::string() : refusals.front(); }
};

/// Plans `p` (engine 0) and, where cuDNN builds it, runs it once on fresh random operands and
/// compares with the CPU reference. A refusal is recorded; it must be one line naming cuDNN.
void check(const CudnnLayerNormProblem& p, Outcome& outcome) {
  SCOPED_TRACE(label(p));
  auto kernel = CudnnLayerNorm::create(p, 0);
  if (!kernel) {
    const std::string message = kernel.status().message();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_NE(message.find("cuDNN"), std::string::npos) << message;
    outcome.refusals.push_back(message);
    return;
  }
  ++outcome.built;
  EXPECT_LE((*kernel)->workspace_bytes(), cuda::kGemmWorkspaceBytes);
  const Operands in = random_operands(p);
  const Reference ref = reference(p, in);
  DeviceOperands device(**kernel, in);
  const Status ran = (*kernel)->run(device.args, device.workspace.get(), nullptr);
  ASSERT_TRUE(ran) << ran.message();
  expect_values_close(device.y.download_vector<float>(in.x.size()), ref);
}

TEST_F(CudnnLayerNormTest, PlainFp32GraphBuildsOnHopper) {
  if (sm_version() < 90) GTEST_SKIP() << "cuDNN's LayerNorm engines are required here on sm_90 and newer; this GPU is sm_" << sm_version();
  for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{3, 128}, {65536, 128}, {3, 1536}}) {
    const CudnnLayerNormProblem p{rows, cols, false, false, false, 1e-5f};
    auto kernel = CudnnLayerNorm::create(p, 0);
    EXPECT_TRUE(kernel.is_ok()) << label(p) << ": " << kernel.status().message();
  }
}

TEST_F(CudnnLayerNormTest, Fp32OutputMatchesTheCpuReferenceWhereItBuilds) {
  Outcome outcome{"FP32 output"};
  for (const auto& [rows, cols] : shapes())
    for (const bool bias : {false, true})
      for (const float epsilon : {1e-5f, 1e-2f, 0.5f}) check({rows, cols, bias, false, false, epsilon}, outcome);
  outcome.print();
  if (outcome.built > 0) return;
  ASSERT_LT(sm_version(), 90) << "cuDNN builds no FP32 LayerNorm graph on this Hopper GPU: " << outcome.first_refusal();
  GTEST_SKIP() << "this cuDNN builds no FP32 LayerNorm graph on sm_" << sm_version() << ": " << outcome.first_refusal();
}

TEST_F(CudnnLayerNormTest, ResidualAddedInTheGraphMatchesTheCpuReferenceWhereItBuilds) {
  Outcome outcome{"residual, FP32 output"};
  for (const auto& [rows, cols] : shapes())
    for (const bool bias : {false, true}) check({rows, cols, bias, true, false, 1e-5f}, outcome);
  outcome.print();
  if (outcome.built == 0) GTEST_SKIP() << "this cuDNN builds no residual LayerNorm graph here: " << outcome.first_refusal();
}

TEST(CudnnLayerNormProblems, InvalidProblemsAreOneLineErrors) {
  const std::vector<std::pair<CudnnLayerNormProblem, std::string>> cases = {
      {{4, 0}, "positive rows and cols"},
      {{-1, 128}, "positive rows and cols"},
      {{4, 128, false, false, false, -1.0f}, "epsilon"},
      {{4, 128, false, false, false, std::numeric_limits<float>::quiet_NaN()}, "epsilon"},
      // LayerNormQuant's E4M3 output faulted on an H100 (the header says so): refused, not offered.
      {{4, 128, true, false, true, 1e-5f}, "E4M3 output is not offered"},
  };
  for (const auto& [p, reason] : cases) {
    SCOPED_TRACE(label(p));
    const Status status = CudnnLayerNorm::can_implement(p);
    ASSERT_FALSE(status);
    EXPECT_NE(status.message().find(reason), std::string::npos) << status.message();
    EXPECT_NE(status.message().find("cuDNN LayerNorm"), std::string::npos) << status.message();
    EXPECT_EQ(status.message().find('\n'), std::string::npos) << status.message();
    // create() checks the static rules first, with or without cuDNN and a GPU.
    auto created = CudnnLayerNorm::create(p, 0);
    ASSERT_FALSE(created.is_ok());
    EXPECT_EQ(created.status().message(), status.message());
  }
}

TEST_F(CudnnLayerNormTest, AnEngineBeyondTheHeuristicsCountIsAnErrorNamingTheCount) {
  const CudnnLayerNormProblem p{3, 128, true, false, false, 1e-5f};
  auto kernel = CudnnLayerNorm::create(p, 0);
  if (!kernel) GTEST_SKIP() << "this cuDNN builds no FP32 LayerNorm graph here: " << kernel.status().message();
  const int count = (*kernel)->engine_count();
  EXPECT_GE(count, 1);
  std::printf("[ info ] cuDNN offers %d LayerNorm engine configuration(s) for %s\n", count, label(p).c_str());
  auto beyond = CudnnLayerNorm::create(p, count);
  ASSERT_FALSE(beyond.is_ok());
  const std::string message = beyond.status().message();
  EXPECT_NE(message.find("offers " + std::to_string(count) + " engine configuration(s)"), std::string::npos) << message;
  EXPECT_NE(message.find("(engine " + std::to_string(count) + ")"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_FALSE(CudnnLayerNorm::create(p, -1).is_ok());
}

TEST_F(CudnnLayerNormTest, RunRefusesArgumentsOtherThanTheProblems) {
  const CudnnLayerNormProblem p{4, 128, false, false, false, 1e-5f};
  auto kernel = CudnnLayerNorm::create(p, 0);
  if (!kernel) GTEST_SKIP() << "this cuDNN builds no FP32 LayerNorm graph here: " << kernel.status().message();
  const Operands in = random_operands(p);
  DeviceOperands device(**kernel, in);
  DeviceBytes amax(sizeof(float));
  const auto refuses = [&](const char* what, const auto& change) {
    cuda::LayerNormArgs args = device.args;
    change(args);
    const Status status = (*kernel)->run(args, device.workspace.get(), nullptr);
    EXPECT_FALSE(status) << what;
    EXPECT_EQ(status.message().find('\n'), std::string::npos) << status.message();
  };
  refuses("other rows", [](cuda::LayerNormArgs& a) { a.rows = 5; });
  refuses("other cols", [](cuda::LayerNormArgs& a) { a.cols = 127; });
  refuses("other epsilon", [](cuda::LayerNormArgs& a) { a.epsilon = 1e-3f; });
  refuses("a bias the problem has not", [](cuda::LayerNormArgs& a) { a.bias = a.scale; });
  refuses("a residual the problem has not", [](cuda::LayerNormArgs& a) { a.residual = a.x; });
  refuses("an amax", [&](cuda::LayerNormArgs& a) { a.amax = amax.as<float>(); });
  refuses("codes for an FP32 output", [](cuda::LayerNormArgs& a) { a.y_codes = reinterpret_cast<uint8_t*>(a.y); });
  refuses("no output", [](cuda::LayerNormArgs& a) { a.y = nullptr; });
  refuses("a misaligned X", [](cuda::LayerNormArgs& a) { a.x += 1; });
  const Status ran = (*kernel)->run(device.args, device.workspace.get(), nullptr);
  EXPECT_TRUE(ran) << ran.message();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST_F(CudnnLayerNormTest, ReplaysInsideACudaGraphAsItRunsEagerly) {
  const CudnnLayerNormProblem p{512, 1536, true, false, false, 1e-5f};
  auto eager_kernel = CudnnLayerNorm::create(p, 0), captured_kernel = CudnnLayerNorm::create(p, 0);
  if (!eager_kernel) GTEST_SKIP() << "this cuDNN builds no FP32 LayerNorm graph here: " << eager_kernel.status().message();
  ASSERT_TRUE(captured_kernel.is_ok()) << captured_kernel.status().message();
  const Operands in = random_operands(p);
  DeviceOperands eager(**eager_kernel, in), captured(**captured_kernel, in);
  const Status ran = (*eager_kernel)->run(eager.args, eager.workspace.get(), nullptr);
  ASSERT_TRUE(ran) << ran.message();

  // The captured kernel's first run is the capture, as a runtime bucket's is.
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const Status enqueued = (*captured_kernel)->run(captured.args, captured.workspace.get(), stream);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  ASSERT_TRUE(enqueued) << enqueued.message();
  ASSERT_EQ(ended, cudaSuccess) << cudaGetErrorString(ended);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 2; ++replay) EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);

  const size_t count = in.x.size();
  const std::vector<float> eager_y = eager.y.download_vector<float>(count), replayed_y = captured.y.download_vector<float>(count);
  expect_same_bytes(replayed_y.data(), eager_y.data(), count, sizeof(float));
  expect_values_close(eager_y, reference(p, in));
}

}  // namespace
}  // namespace loka::testing
