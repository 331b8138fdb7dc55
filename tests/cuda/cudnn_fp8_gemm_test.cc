// ============================================================================
// tests/cuda/cudnn_fp8_gemm_test.cc — the cuDNN FP8 graph candidates
// (cudnn.fp8.e4m3.tensor.engineN, kernels/cuda/cudnn_fp8_gemm.h) through
// GemmKernel, as Dispatch and the runtime run them: against the CPU
// reference with every fused step (scales, bias, ReLU, residual; E4M3 and
// quantized FP32 activations), on one row, awkward sizes and M = 4096;
// inside a CUDA graph; and a configuration cuDNN does not have is a one-line
// error. Threads, as the runtime uses kernels: planned on one thread and run
// on another (eagerly, and captured into a CUDA graph as its first run) a
// kernel gives the reference's bytes; 8 sessions plan, capture and run at
// once; every live kernel holds a cuDNN handle of its own. Skips visibly
// without a GPU or without cuDNN; a graph this cuDNN cannot build skips with
// cuDNN's reason (the candidate is then not offered).
// ============================================================================
#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "cuda/fp8_candidate_util.h"
#include "gemm_test_keys.h"
#include "kernels/cuda/cudnn_fp8_gemm.h"
#include "kernels/cuda/gemm_candidate.h"
#include "loka/float8.h"

namespace loka::testing {
namespace {

using kernels::GemmCandidate;
using kernels::GemmKey;
using kernels::GemmShape;

class CudnnFp8GemmTest : public CudnnTest {};

GemmCandidate cudnn_engine(int engine) {
  GemmCandidate c{kernels::GemmPrecision::kFp8E4M3, kernels::ScaleGranularity::kTensor, engine, false};
  c.library = kernels::GemmLibrary::kCudnn;
  return c;
}

/// A QuantizedGemm key: E4M3 or FP32 (per-tensor scale) activation, bias, ReLU, residual as asked.
GemmKey key_with(DType input, bool bias, bool relu, bool residual) {
  GemmKey key = quantized_gemm_key(kernels::ScaleGranularity::kTensor, input);
  key.bias = bias;
  key.epilogue = relu ? cuda::GemmEpilogue::kRelu : cuda::GemmEpilogue::kNone;
  key.residual = residual;
  return key;
}

/// Whether engine 0 plans here; a refusal must be one line naming cuDNN (what create() promises).
bool plans_here(const GemmKey& key, const GemmShape& shape, std::string& refusals) {
  auto planned = cuda::GemmKernel::create(cudnn_engine(0), key, shape, {});
  if (planned) return true;
  const std::string message = planned.status().message();
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_NE(message.find("cuDNN"), std::string::npos) << message;
  refusals += "\n  " + key.to_string() + " " + shape.to_string() + ": " + message;
  return false;
}

TEST_F(CudnnFp8GemmTest, MatchesTheReferenceWithEveryFusedStep) {
  const std::vector<GemmKey> keys = {
      key_with(DType::kFloat8E4M3FN, true, true, false),  // LayerNormQuant -> QuantizedGemm + bias + ReLU
      key_with(DType::kFloat32, true, true, false),       // quantized first (per-tensor static scale)
      key_with(DType::kFloat32, false, false, true),      // scales and a residual only
      key_with(DType::kFloat8E4M3FN, true, false, true),  // bias and residual, no activation
  };
  int planned = 0;
  std::string refusals;
  for (const GemmKey& key : keys)
    for (const GemmShape shape : {GemmShape{1, 256, 48, 1}, GemmShape{40, 272, 80, 1}, GemmShape{4096, 128, 256, 1}}) {
      SCOPED_TRACE(key.to_string() + " " + shape.to_string());
      if (!plans_here(key, shape, refusals)) continue;
      ++planned;
      EXPECT_EQ(fp8_candidate_mismatches(cudnn_engine(0), key, shape), 0u);
    }
  if (planned == 0) GTEST_SKIP() << "this cuDNN builds no FP8 matmul graph here:" << refusals;
  if (!refusals.empty()) std::printf("[ info ] cuDNN graphs refused here:%s\n", refusals.c_str());
}

/// Device operands of a QuantizedGemm with bias, shared read-only by every run of a test. X is
/// E4M3 codes, or for an FP32 activation (quantized by the kernel's own sequence first) their
/// values times a power of two, so that the quantize kernel's division is exact.
struct Operands {
  static constexpr float kXScale = 1.0f / 32;

  static std::vector<uint8_t> codes(int64_t count, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 60.0f);
    std::vector<uint8_t> values(static_cast<size_t>(count));
    for (uint8_t& v : values) v = float_to_fp8e4m3fn(normal(rng));
    return values;
  }
  static std::vector<float> x_values(const GemmShape& shape) {
    std::vector<float> values;
    for (const uint8_t code : codes(shape.m * shape.k, 11)) values.push_back(fp8e4m3fn_to_float(code) * kXScale);
    return values;
  }
  static std::vector<float> biases(const GemmShape& shape) {
    std::vector<float> values(static_cast<size_t>(shape.n));
    for (size_t j = 0; j < values.size(); ++j) values[j] = 0.125f * static_cast<float>(j % 9) - 0.5f;
    return values;
  }

  Operands(const GemmKey& key, const GemmShape& shape)
      : shape(shape),
        x(key.input == DType::kFloat32 ? DeviceBytes(x_values(shape)) : DeviceBytes(codes(shape.m * shape.k, 11))),
        w(codes(shape.n * shape.k, 12)),
        w_scale(std::vector<float>(static_cast<size_t>(shape.n), 0.004f)),
        bias(biases(shape)),
        x_scale(std::vector<float>{kXScale}) {}

  size_t y_count() const { return static_cast<size_t>(shape.m * shape.n); }
  cuda::GemmCandidateArgs args(float* y) const {
    cuda::GemmCandidateArgs a;
    a.x = x.get();
    a.w = w.get();
    a.w_scale = w_scale.as<float>();
    a.x_scale = x_scale.as<float>();
    a.bias = bias.as<float>();
    a.y = y;
    return a;
  }

  GemmShape shape;
  DeviceBytes x, w, w_scale, bias, x_scale;
};

/// What a session lends a run besides the operands: Y, a workspace and a stream of its own.
/// Allocated up front, on the test's thread.
struct RunResources {
  explicit RunResources(size_t y_count) : y(y_count * sizeof(float)), workspace(cuda::kGemmWorkspaceBytes) {
    EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  }
  ~RunResources() {
    if (stream) cudaStreamDestroy(stream);
  }
  RunResources(const RunResources&) = delete;
  RunResources& operator=(const RunResources&) = delete;

  DeviceBytes y, workspace;
  cudaStream_t stream = nullptr;
};

/// A CUDA call's error as a Status naming the step.
Status cuda_step(cudaError_t error, const char* what) {
  return error == cudaSuccess ? Status::ok() : Status::error(std::string(what) + ": " + cudaGetErrorString(error));
}

/// Fills Y with NaN, runs what `enqueue` enqueues on `r.stream` and copies Y back; an element
/// left NaN (finite operands give none) is an error: the run did not write it.
Status run_into(RunResources& r, size_t y_count, std::vector<float>& y, const std::function<Status()>& enqueue) {
  LOKA_RETURN_IF_ERROR(cuda_step(cudaMemsetAsync(r.y.get(), 0xFF, y_count * sizeof(float), r.stream), "poisoning Y"));
  LOKA_RETURN_IF_ERROR(enqueue());
  y.assign(y_count, 0.0f);
  LOKA_RETURN_IF_ERROR(cuda_step(cudaMemcpyAsync(y.data(), r.y.get(), y_count * sizeof(float), cudaMemcpyDeviceToHost, r.stream),
                                 "downloading Y"));
  LOKA_RETURN_IF_ERROR(cuda_step(cudaStreamSynchronize(r.stream), "running the kernel"));
  const auto unwritten = std::count_if(y.begin(), y.end(), [](float v) { return std::isnan(v); });
  if (unwritten > 0) return Status::error(std::to_string(unwritten) + " elements of Y were not written");
  return Status::ok();
}

/// `runs` eager runs of `kernel` on `r.stream`; Y afterwards.
Status run_eagerly(const cuda::GemmKernel& kernel, const Operands& operands, RunResources& r, int runs, std::vector<float>& y) {
  return run_into(r, operands.y_count(), y, [&] {
    for (int i = 0; i < runs; ++i)
      LOKA_RETURN_IF_ERROR(kernel.run(operands.args(r.y.as<float>()), r.workspace.get(), r.stream));
    return Status::ok();
  });
}

/// One run of `kernel` captured on `r.stream` into a CUDA graph as the runtime captures a bucket
/// (thread-local mode; the kernel's first run when nothing ran it before), replayed `replays`
/// times; Y afterwards.
Status run_captured(const cuda::GemmKernel& kernel, const Operands& operands, RunResources& r, int replays,
                    std::vector<float>& y) {
  return run_into(r, operands.y_count(), y, [&] {
    LOKA_RETURN_IF_ERROR(cuda_step(cudaStreamBeginCapture(r.stream, cudaStreamCaptureModeThreadLocal), "beginning the capture"));
    const Status enqueued = kernel.run(operands.args(r.y.as<float>()), r.workspace.get(), r.stream);
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(r.stream, &graph);
    LOKA_RETURN_IF_ERROR(enqueued.with_context("in capture: "));
    LOKA_RETURN_IF_ERROR(cuda_step(ended, "ending the capture (a call inside it broke it)"));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    LOKA_RETURN_IF_ERROR(cuda_step(instantiated, "instantiating the graph"));
    Status launched = Status::ok();
    for (int i = 0; i < replays && launched; ++i) launched = cuda_step(cudaGraphLaunch(exec, r.stream), "launching the graph");
    if (launched) launched = cuda_step(cudaStreamSynchronize(r.stream), "replaying the graph");
    cudaGraphExecDestroy(exec);
    return launched;
  });
}

/// Runs `work` on a thread of its own (on this thread's device) and returns its Status once the
/// thread has ended.
Status on_new_thread(const std::function<Status()>& work) {
  int device = 0;
  LOKA_RETURN_IF_ERROR(cuda_step(cudaGetDevice(&device), "cudaGetDevice"));
  Status status = Status::ok();
  std::thread([&] {
    status = cuda_step(cudaSetDevice(device), "cudaSetDevice");
    if (status) status = work();
  }).join();
  return status;
}

/// Engine 0 planned for `key` at `shape` with the operands' activation scale.
Result<std::unique_ptr<cuda::GemmKernel>> plan(const GemmKey& key, const GemmShape& shape) {
  return cuda::GemmKernel::create(cudnn_engine(0), key, shape, {nullptr, nullptr, nullptr, Operands::kXScale, 8});
}

TEST_F(CudnnFp8GemmTest, ReplaysInsideACudaGraphAsItRunsEagerly) {
  const GemmKey key = key_with(DType::kFloat8E4M3FN, true, true, false);
  const GemmShape shape{512, 256, 512, 1};
  std::string refusals;
  if (!plans_here(key, shape, refusals)) GTEST_SKIP() << "this cuDNN builds no FP8 matmul graph here:" << refusals;
  auto kernel = plan(key, shape);
  ASSERT_TRUE(kernel.is_ok()) << kernel.status().message();
  const Operands operands(key, shape);
  RunResources eager_run(operands.y_count()), captured_run(operands.y_count());
  std::vector<float> eager, replayed;
  const Status ran = run_eagerly(**kernel, operands, eager_run, 1, eager);
  ASSERT_TRUE(ran) << ran.message();
  const Status captured = run_captured(**kernel, operands, captured_run, 3, replayed);
  ASSERT_TRUE(captured) << captured.message();
  expect_same_bytes(replayed.data(), eager.data(), operands.y_count(), sizeof(float));
}

TEST_F(CudnnFp8GemmTest, AnEngineTheHeuristicDoesNotOfferIsAOneLineError) {
  const GemmKey key = key_with(DType::kFloat8E4M3FN, true, true, false);
  const GemmShape shape{512, 256, 512, 1};
  std::string refusals;
  if (!plans_here(key, shape, refusals)) GTEST_SKIP() << "this cuDNN builds no FP8 matmul graph here:" << refusals;
  auto refused = cuda::GemmKernel::create(cudnn_engine(9999), key, shape, {});
  ASSERT_FALSE(refused.is_ok());
  const std::string message = refused.status().message();
  EXPECT_NE(message.find("cudnn.fp8.e4m3.tensor.engine9999"), std::string::npos) << message;
  EXPECT_NE(message.find("engine configuration(s)"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

const GemmKey kThreadedKey = key_with(DType::kFloat32, true, true, false);
const GemmShape kThreadedShape{256, 256, 512, 1};

Result<std::unique_ptr<cuda::GemmKernel>> plan_threaded() { return plan(kThreadedKey, kThreadedShape); }

TEST_F(CudnnFp8GemmTest, PlannedOnOneThreadRunsOnAnotherEagerlyAndCapturedAsTheReferenceDoes) {
  std::string refusals;
  if (!plans_here(kThreadedKey, kThreadedShape, refusals)) GTEST_SKIP() << "this cuDNN builds no FP8 matmul graph here:" << refusals;
  const Operands operands(kThreadedKey, kThreadedShape);
  const size_t count = operands.y_count();
  RunResources reference_run(count), eager_run(count), eager_rerun(count), captured_run(count);

  // The reference: planned and run eagerly on this thread.
  auto reference_kernel = plan_threaded();
  ASSERT_TRUE(reference_kernel.is_ok()) << reference_kernel.status().message();
  std::vector<float> reference;
  const Status referenced = run_eagerly(**reference_kernel, operands, reference_run, 1, reference);
  ASSERT_TRUE(referenced) << referenced.message();

  // Two kernels planned on a thread that has ended before either runs.
  std::unique_ptr<cuda::GemmKernel> eager_kernel, captured_kernel;
  const Status planned = on_new_thread([&]() -> Status {
    LOKA_ASSIGN_OR_RETURN(eager_kernel, plan_threaded());
    LOKA_ASSIGN_OR_RETURN(captured_kernel, plan_threaded());
    return Status::ok();
  });
  ASSERT_TRUE(planned) << planned.message();

  // Eagerly on another thread: twice with the same operands, then with another Y and workspace.
  std::vector<float> eager, rerun;
  const Status ran = on_new_thread([&] {
    LOKA_RETURN_IF_ERROR(run_eagerly(*eager_kernel, operands, eager_run, 2, eager));
    return run_eagerly(*eager_kernel, operands, eager_rerun, 1, rerun);
  });
  ASSERT_TRUE(ran) << ran.message();
  expect_same_bytes(eager.data(), reference.data(), count, sizeof(float));
  expect_same_bytes(rerun.data(), reference.data(), count, sizeof(float));

  // Captured on a third thread, the capture being the kernel's first run (as a bucket's is).
  std::vector<float> replayed;
  const Status captured = on_new_thread([&] { return run_captured(*captured_kernel, operands, captured_run, 3, replayed); });
  ASSERT_TRUE(captured) << captured.message();
  expect_same_bytes(replayed.data(), reference.data(), count, sizeof(float));
}

TEST_F(CudnnFp8GemmTest, EightSessionsPlanCaptureAndRunAtOnce) {
  constexpr int kSessions = 8;
  std::string refusals;
  if (!plans_here(kThreadedKey, kThreadedShape, refusals)) GTEST_SKIP() << "this cuDNN builds no FP8 matmul graph here:" << refusals;
  const Operands operands(kThreadedKey, kThreadedShape);
  const size_t count = operands.y_count();
  RunResources reference_run(count);
  auto reference_kernel = plan_threaded();
  ASSERT_TRUE(reference_kernel.is_ok()) << reference_kernel.status().message();
  std::vector<float> reference;
  const Status referenced = run_eagerly(**reference_kernel, operands, reference_run, 1, reference);
  ASSERT_TRUE(referenced) << referenced.message();

  // Each session: its own stream, Y and workspace (allocated here), its own kernel (planned on
  // its thread, all at once), captured as its first run, replayed, then run eagerly.
  std::vector<std::unique_ptr<RunResources>> captured_runs, eager_runs;
  for (int s = 0; s < kSessions; ++s) {
    captured_runs.push_back(std::make_unique<RunResources>(count));
    eager_runs.push_back(std::make_unique<RunResources>(count));
  }
  std::vector<std::unique_ptr<cuda::GemmKernel>> kernels(kSessions);
  std::vector<Status> statuses(kSessions);
  std::vector<std::vector<float>> replayed(kSessions), eager(kSessions);
  int device = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  const cuda::CudnnHandleCounts before = cuda::cudnn_handle_counts();
  std::barrier phase(kSessions + 1);
  std::vector<std::thread> threads;
  for (int s = 0; s < kSessions; ++s)
    threads.emplace_back([&, s] {
      statuses[s] = cuda_step(cudaSetDevice(device), "cudaSetDevice");
      if (statuses[s]) {
        auto kernel = plan_threaded();
        statuses[s] = kernel.status();
        if (kernel) kernels[s] = std::move(kernel).value();
      }
      phase.arrive_and_wait();  // all planned: the test counts the handles they hold
      phase.arrive_and_wait();
      if (!kernels[s]) return;
      Status status = run_captured(*kernels[s], operands, *captured_runs[s], 3, replayed[s]);
      if (status) status = run_eagerly(*kernels[s], operands, *eager_runs[s], 2, eager[s]);
      statuses[s] = status;
    });
  phase.arrive_and_wait();
  const cuda::CudnnHandleCounts planned = cuda::cudnn_handle_counts();
  phase.arrive_and_wait();
  for (std::thread& thread : threads) thread.join();

  EXPECT_EQ(planned.leased - before.leased, kSessions) << "every live kernel holds a handle of its own";
  for (int s = 0; s < kSessions; ++s) {
    SCOPED_TRACE("session " + std::to_string(s));
    ASSERT_TRUE(statuses[s]) << statuses[s].message();
    expect_same_bytes(replayed[s].data(), reference.data(), count, sizeof(float));
    expect_same_bytes(eager[s].data(), reference.data(), count, sizeof(float));
  }
  kernels.clear();
  EXPECT_EQ(cuda::cudnn_handle_counts().leased, before.leased) << "destroyed kernels give their handles back";
}

TEST_F(CudnnFp8GemmTest, EachKernelHoldsItsOwnHandleAndGivenBackOnesAreReused) {
  std::string refusals;
  if (!plans_here(kThreadedKey, kThreadedShape, refusals)) GTEST_SKIP() << "this cuDNN builds no FP8 matmul graph here:" << refusals;
  const cuda::CudnnHandleCounts before = cuda::cudnn_handle_counts();
  {
    auto first = plan_threaded(), second = plan_threaded();
    ASSERT_TRUE(first.is_ok() && second.is_ok()) << first.status().message() << second.status().message();
    EXPECT_EQ(cuda::cudnn_handle_counts().leased, before.leased + 2);
  }
  const cuda::CudnnHandleCounts returned = cuda::cudnn_handle_counts();
  EXPECT_EQ(returned.leased, before.leased);
  auto again = plan_threaded();
  ASSERT_TRUE(again.is_ok()) << again.status().message();
  const cuda::CudnnHandleCounts reused = cuda::cudnn_handle_counts();
  EXPECT_EQ(reused.created, returned.created) << "planning after kernels were destroyed creates no handle";
  EXPECT_EQ(reused.leased, before.leased + 1);
  // What cudnnCreate costs here (the reason handles are pooled, kernels/cuda/cudnn_util.h).
  std::printf("[ info ] cuDNN handles created in this process: %d; the first cudnnCreate took %.1f ms, the others %.2f ms each on average\n",
              reused.created, reused.first_create_ms,
              reused.created > 1 ? (reused.create_ms - reused.first_create_ms) / (reused.created - 1) : 0.0);
}

}  // namespace
}  // namespace loka::testing
