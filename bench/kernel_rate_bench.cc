// ============================================================================
// bench/kernel_rate_bench.cc — LoKA's GPU kernels against the rate of the
// library path they stand in for, on the same shapes (device events, warm-up,
// median of 50, inputs rotated through more memory than the 50 MB L2).
//
//   fp8-gemm      LoKA's QuantizedGemm as the runtime runs it (the registry's
//                 fp8_e4m3 kernel: E4M3 input, per-tensor x scale, per-channel w
//                 scales, bias, ReLU, FP32 out)  vs  cuBLASLt's FP8 GEMM alone
//                 with per-tensor scales, BF16 out and its own bias+ReLU epilogue.
//   fp8-gemm-row  as above with per-row dynamic quantization of an FP32 input in front.
//   bf16-gemm     LoKA's Gemm (cuBLASLt BF16, bias+ReLU), TFLOP/s.
//   tf32-vs-bf16  LoKA's Gemm on FP32 operands with TF32 tensor cores vs the BF16 GEMM.
//   layernorm-fp8 LayerNorm FP32 -> E4M3 with amax (y_scale 0.01, and a power of
//                 two: "pow2 scale")  vs  a device-to-device copy
//                 of the same bytes (the bandwidth floor: read 4 B, write 1 B per element).
//   quantize-rows per-row FP8 quantization vs the same copy floor.
//   binary, unary-relu, dequant-epi, quantize-fp8, softmax: the memory-bound
//                 kernels at the zoo's batch-4096 shapes (same shape, row, column,
//                 scalar and attention-mask broadcasts; odd widths; short softmax
//                 rows) vs a copy of the bytes each must read and write.
//   attention     ai.loka Attention at the zoo's full-size shapes (ranker: 40 tokens,
//                 8 heads of 16, packed QKV; DHEN: one head of 128) vs a copy of
//                 Q, K, V and Y once.
//
// Prints one table: LoKA median µs, reference median µs, and LoKA's rate as a
// share of the reference's (issue 6 asks >= 70% at large sizes).
// ============================================================================
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/dequant_epilogue.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/fp8_convert.h"
#include "kernels/cuda/fp8_gemm.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_candidate.h"
#include "kernels/cuda/layer_norm.h"
#include "kernels/cuda/quantize_rows.h"
#include "kernels/cuda/shape_plan.h"
#include "kernels/cuda/softmax.h"

namespace {

using namespace loka;

void check_cuda(cudaError_t error, const char* what) {
  if (error != cudaSuccess) {
    std::fprintf(stderr, "kernel_rate_bench: %s: %s\n", what, cudaGetErrorString(error));
    std::exit(1);
  }
}

void check_status(const Status& status, const std::string& what) {
  if (!status) {
    std::fprintf(stderr, "kernel_rate_bench: %s: %s\n", what.c_str(), status.message().c_str());
    std::exit(1);
  }
}

/// Device buffers rotated so that consecutive timed runs miss in L2.
class Rotation {
 public:
  explicit Rotation(size_t bytes_per_copy) : bytes_(std::max<size_t>(bytes_per_copy, 256)) {
    const size_t copies = std::clamp<size_t>((256u << 20) / bytes_, 2, 64);
    for (size_t c = 0; c < copies; ++c) {
      void* p = nullptr;
      check_cuda(cudaMalloc(&p, bytes_), "cudaMalloc");
      check_cuda(cudaMemset(p, 0x38, bytes_), "cudaMemset");  // 0x38 = 1.0 in E4M3, small in FP32/BF16
      copies_.push_back(p);
    }
  }
  ~Rotation() {
    for (void* p : copies_) cudaFree(p);
  }
  void* at(int iteration) const { return copies_[static_cast<size_t>(iteration) % copies_.size()]; }

 private:
  size_t bytes_;
  std::vector<void*> copies_;
};

void* device_alloc(size_t bytes, int fill = 0) {
  void* p = nullptr;
  check_cuda(cudaMalloc(&p, std::max<size_t>(bytes, 256)), "cudaMalloc");
  check_cuda(cudaMemset(p, fill, std::max<size_t>(bytes, 256)), "cudaMemset");
  return p;
}

/// Median milliseconds of `run(iteration)` over 50 timed runs after 10 warm-up runs.
double median_ms(const std::function<void(int)>& run) {
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "event");
  check_cuda(cudaEventCreate(&stop), "event");
  std::vector<float> times;
  for (int it = 0; it < 60; ++it) {
    check_cuda(cudaEventRecord(start), "record");
    run(it);
    check_cuda(cudaEventRecord(stop), "record");
    check_cuda(cudaEventSynchronize(stop), "sync");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    if (it >= 10) times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void print_row(const std::string& kernel, const std::string& shape, double loka_ms, double reference_ms,
               const std::string& rate) {
  std::printf("%-14s %-22s %10.1f %10.1f %8.0f%%  %s\n", kernel.c_str(), shape.c_str(), loka_ms * 1e3,
              reference_ms * 1e3, 100.0 * reference_ms / loka_ms, rate.c_str());
}

std::string shape3(int64_t m, int64_t n, int64_t k) {
  return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
}

std::string tflops(int64_t m, int64_t n, int64_t k, double ms) {
  char text[64];
  std::snprintf(text, sizeof text, "%.0f TFLOP/s", 2.0 * m * n * k / (ms * 1e-3) / 1e12);
  return text;
}

void bench_fp8_gemm(int64_t m, int64_t n, int64_t k, bool row_quantize, void* workspace) {
  const kernels::ScaleGranularity granularity = row_quantize ? kernels::ScaleGranularity::kRow : kernels::ScaleGranularity::kTensor;
  const kernels::GemmKey key{"QuantizedGemm", row_quantize ? DType::kFloat32 : DType::kFloat8E4M3FN, DType::kFloat8E4M3FN,
                             DType::kFloat32, granularity, kernels::GemmLayout::kNT, true, true, cuda::GemmEpilogue::kRelu};
  kernels::GemmCandidate candidate;
  candidate.precision = kernels::GemmPrecision::kFp8E4M3;
  candidate.granularity = granularity;
  const Tensor host_bias = Tensor::from_floats({n}, std::vector<float>(static_cast<size_t>(n), 0.0f));
  cuda::GemmCandidatePlanInputs inputs;
  inputs.host_bias = &host_bias;
  inputs.x_scale = 0.01f;
  auto loka_kernel = cuda::GemmKernel::create(candidate, key, {m, n, k, 1}, inputs);
  auto fused = cuda::Fp8Gemm::create({m, n, k, false, false, DType::kBFloat16, true, cuda::GemmEpilogue::kRelu});
  check_status(loka_kernel.status(), "FP8 GEMM " + shape3(m, n, k));
  check_status(fused.status(), "FP8 GEMM with bias " + shape3(m, n, k));
  Rotation x(static_cast<size_t>(m * k) * (row_quantize ? 4 : 1)), w(static_cast<size_t>(n * k));
  auto* y = static_cast<float*>(device_alloc(static_cast<size_t>(m * n) * 4));
  auto* x_scale = static_cast<float*>(device_alloc(static_cast<size_t>(m) * 4));
  auto* w_scale = static_cast<float*>(device_alloc(static_cast<size_t>(n) * 4));
  void* bias = device_alloc(static_cast<size_t>(n) * 4);
  void* y_bf16 = device_alloc(static_cast<size_t>(m * n) * 2);

  const double loka = median_ms([&](int it) {
    cuda::GemmCandidateArgs args;
    args.x = x.at(it);
    args.w = w.at(it);
    args.w_scale = w_scale;
    args.x_scale = x_scale;
    args.bias = static_cast<const float*>(bias);
    args.y = y;
    check_status((*loka_kernel)->run(args, workspace, nullptr), "LoKA FP8 GEMM");
  });
  const double reference = median_ms([&](int it) {
    check_status((*fused)->run({static_cast<const uint8_t*>(x.at(it)), static_cast<const uint8_t*>(w.at(it)), x_scale,
                                w_scale, bias, y_bf16}, workspace, nullptr), "cuBLASLt FP8 GEMM");
  });
  print_row(row_quantize ? "fp8-gemm-row" : "fp8-gemm", shape3(m, n, k), loka, reference, tflops(m, n, k, loka));
  for (void* p : {static_cast<void*>(y), static_cast<void*>(x_scale), static_cast<void*>(w_scale), bias, y_bf16}) cudaFree(p);
}

void bench_bf16_gemm(int64_t m, int64_t n, int64_t k, void* workspace) {
  cuda::GemmProblem problem{m, n, k, 1, false, DType::kBFloat16, DType::kBFloat16, true, true, cuda::GemmEpilogue::kRelu};
  auto gemm = cuda::Gemm::create(problem);
  check_status(gemm.status(), "BF16 GEMM " + shape3(m, n, k));
  Rotation x(static_cast<size_t>(m * k) * 2), w(static_cast<size_t>(n * k) * 2);
  void* bias = device_alloc(static_cast<size_t>(n) * 2);
  void* y = device_alloc(static_cast<size_t>(m * n) * 2);
  const double ms = median_ms([&](int it) {
    check_status((*gemm)->run({x.at(it), w.at(it), bias, y}, workspace, nullptr), "BF16 GEMM");
  });
  print_row("bf16-gemm", shape3(m, n, k), ms, ms, tflops(m, n, k, ms) + " (is cuBLASLt)");
  cudaFree(bias);
  cudaFree(y);
}

/// FP32 operands on the TF32 tensor cores, against the same GEMM in BF16 (what a BF16 PyTorch path runs).
void bench_tf32_gemm(int64_t m, int64_t n, int64_t k, void* workspace) {
  cuda::GemmOptions options;
  options.tf32 = true;
  auto tf32 = cuda::Gemm::create({m, n, k, 1, false, DType::kFloat32, DType::kFloat32, true, true, cuda::GemmEpilogue::kRelu}, options);
  auto bf16 = cuda::Gemm::create({m, n, k, 1, false, DType::kBFloat16, DType::kBFloat16, true, true, cuda::GemmEpilogue::kRelu});
  check_status(tf32.status(), "TF32 GEMM " + shape3(m, n, k));
  check_status(bf16.status(), "BF16 GEMM " + shape3(m, n, k));
  Rotation x(static_cast<size_t>(m * k) * 4), w(static_cast<size_t>(n * k) * 4);
  void* bias = device_alloc(static_cast<size_t>(n) * 4);
  void* y = device_alloc(static_cast<size_t>(m * n) * 4);
  const double tf32_ms = median_ms([&](int it) {
    check_status((*tf32)->run({x.at(it), w.at(it), bias, y}, workspace, nullptr), "TF32 GEMM");
  });
  const double bf16_ms = median_ms([&](int it) {
    check_status((*bf16)->run({x.at(it), w.at(it), bias, y}, workspace, nullptr), "BF16 GEMM");
  });
  print_row("tf32-vs-bf16", shape3(m, n, k), tf32_ms, bf16_ms, tflops(m, n, k, tf32_ms));
  cudaFree(bias);
  cudaFree(y);
}

/// A device-to-device copy moving the same bytes as a kernel that reads `read` and writes `written` bytes.
double copy_floor_ms(size_t read, size_t written) {
  const size_t half = (read + written) / 2;
  Rotation source(half), target(half);
  return median_ms([&](int it) {
    check_cuda(cudaMemcpyAsync(target.at(it), source.at(it), half, cudaMemcpyDeviceToDevice, nullptr), "copy");
  });
}

std::string bandwidth(size_t bytes, double ms) {
  char text[64];
  std::snprintf(text, sizeof text, "%.2f TB/s", bytes / (ms * 1e-3) / 1e12);
  return text;
}

/// y_scale 0.01: a product with 1/y_scale, checked against E4M3 rounding boundaries; a power of two: an exact product.
void bench_layer_norm(int64_t rows, int64_t cols, float y_scale) {
  const size_t elements = static_cast<size_t>(rows * cols);
  Rotation x(elements * 4);
  void* scale = device_alloc(static_cast<size_t>(cols) * 4);
  void* bias = device_alloc(static_cast<size_t>(cols) * 4);
  void* codes = device_alloc(elements);
  void* amax = device_alloc(4);
  const double ms = median_ms([&](int it) {
    cuda::LayerNormArgs args;
    args.x = static_cast<const float*>(x.at(it));
    args.scale = static_cast<const float*>(scale);
    args.bias = static_cast<const float*>(bias);
    args.rows = rows;
    args.cols = cols;
    args.y_codes = static_cast<uint8_t*>(codes);
    args.y_scale = y_scale;
    args.amax = static_cast<float*>(amax);
    check_status(cuda::launch_layer_norm(args, nullptr), "layer_norm");
  });
  const std::string shape = std::to_string(rows) + "x" + std::to_string(cols) + (y_scale == 0.01f ? "" : " pow2 scale");
  print_row("layernorm-fp8", shape, ms, copy_floor_ms(elements * 4, elements),
            bandwidth(elements * 5, ms));
  for (void* p : {scale, bias, codes, amax}) cudaFree(p);
}

void bench_quantize_rows(int64_t rows, int64_t cols) {
  const size_t elements = static_cast<size_t>(rows * cols);
  Rotation x(elements * 4);
  void* codes = device_alloc(elements);
  void* scales = device_alloc(static_cast<size_t>(rows) * 4);
  const double ms = median_ms([&](int it) {
    check_status(cuda::launch_quantize_rows(x.at(it), DType::kFloat32, rows, cols, static_cast<uint8_t*>(codes),
                                            static_cast<float*>(scales), nullptr), "quantize_rows");
  });
  print_row("quantize-rows", std::to_string(rows) + "x" + std::to_string(cols), ms,
            copy_floor_ms(elements * 4, elements), bandwidth(elements * 5, ms));
  cudaFree(codes);
  cudaFree(scales);
}

/// A memory-bound kernel against a copy of the bytes it must move (reads `read`, writes `written`).
void bench_memory_bound(const std::string& kernel, const std::string& shape, size_t read, size_t written,
                        const std::function<void(int)>& run) {
  const double ms = median_ms(run);
  print_row(kernel, shape, ms, copy_floor_ms(read, written), bandwidth(read + written, ms));
}

int64_t elements_of(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  return count;
}

/// FP32 a op b (broadcast) as the runtime launches it; a is rotated, b (often small) is not.
void bench_binary(cuda::BinaryOp op, const std::vector<int64_t>& a_shape, const std::vector<int64_t>& b_shape) {
  const int64_t out_count = elements_of(cuda::broadcast_shape(a_shape, b_shape).value());
  const size_t a_bytes = static_cast<size_t>(elements_of(a_shape)) * 4, b_bytes = static_cast<size_t>(elements_of(b_shape)) * 4;
  Rotation a(a_bytes), out(static_cast<size_t>(out_count) * 4);
  void* b = device_alloc(b_bytes);
  bench_memory_bound("binary", cuda::dims_to_string(a_shape) + cuda::dims_to_string(b_shape), a_bytes + b_bytes,
                     static_cast<size_t>(out_count) * 4, [&](int it) {
                       check_status(cuda::launch_binary(op, a.at(it), a_shape, b, b_shape, DType::kFloat32, out.at(it),
                                                        nullptr), "binary");
                     });
  cudaFree(b);
}

void bench_unary(int64_t rows, int64_t cols) {
  const size_t bytes = static_cast<size_t>(rows * cols) * 4;
  Rotation x(bytes), y(bytes);
  bench_memory_bound("unary-relu", std::to_string(rows) + "x" + std::to_string(cols), bytes, bytes, [&](int it) {
    check_status(cuda::launch_unary(cuda::UnaryOp::kRelu, x.at(it), DType::kFloat32, y.at(it), DType::kFloat32,
                                    rows * cols, nullptr), "unary");
  });
}

/// The QuantizedGemm scale epilogue alone (per-row x scale, per-channel w scale, bias, ReLU), in place.
void bench_dequant_epilogue(int64_t rows, int64_t cols) {
  const size_t bytes = static_cast<size_t>(rows * cols) * 4;
  Rotation acc(bytes);
  void* x_scale = device_alloc(static_cast<size_t>(rows) * 4);
  void* w_scale = device_alloc(static_cast<size_t>(cols) * 4);
  void* bias = device_alloc(static_cast<size_t>(cols) * 4);
  bench_memory_bound("dequant-epi", std::to_string(rows) + "x" + std::to_string(cols), bytes, bytes, [&](int it) {
    cuda::DequantEpilogueArgs args;
    args.acc = static_cast<const float*>(acc.at(it));
    args.x_scale = static_cast<const float*>(x_scale);
    args.per_row_x_scale = true;
    args.w_scale = static_cast<const float*>(w_scale);
    args.bias = static_cast<const float*>(bias);
    args.activation = cuda::GemmEpilogue::kRelu;
    args.y = static_cast<float*>(acc.at(it));
    args.rows = rows;
    args.cols = cols;
    check_status(cuda::launch_dequant_epilogue(args, nullptr), "dequant epilogue");
  });
  for (void* p : {x_scale, w_scale, bias}) cudaFree(p);
}

void bench_quantize_tensor(int64_t rows, int64_t cols) {
  const size_t elements = static_cast<size_t>(rows * cols);
  Rotation x(elements * 4), codes(elements);
  bench_memory_bound("quantize-fp8", std::to_string(rows) + "x" + std::to_string(cols), elements * 4, elements,
                     [&](int it) {
                       check_cuda(cuda::launch_quantize_fp8(static_cast<const float*>(x.at(it)),
                                                            static_cast<uint8_t*>(codes.at(it)), rows * cols, 0.01f,
                                                            cuda::Fp8Kind::kE4M3FN, nullptr), "quantize");
                     });
}

/// Softmax over the last axis of [rows, n] (attention scores: rows = batch·heads·queries).
void bench_softmax(int64_t rows, int64_t n) {
  const size_t bytes = static_cast<size_t>(rows * n) * 4;
  Rotation x(bytes), y(bytes);
  bench_memory_bound("softmax", std::to_string(rows) + "x" + std::to_string(n), bytes, bytes, [&](int it) {
    check_status(cuda::launch_softmax(static_cast<const float*>(x.at(it)), static_cast<float*>(y.at(it)), rows, n, 1,
                                      false, nullptr), "softmax");
  });
}

/// Batch 4096 shapes of the model zoo's memory-bound kernels (docs/benchmarks.md traces).
/// ai.loka Attention on a packed [b, n, 3·h·d + pad] QKV (a fresh buffer per run) into [b, n, h·d];
/// an odd `pad` leaves rows unaligned, which the kernel stages one float at a time.
void bench_attention(int64_t b, int64_t n, int64_t heads, int64_t d, int64_t pad = 0) {
  const size_t in_bytes = static_cast<size_t>(b * n * (3 * heads * d + pad)) * 4;
  const size_t out_bytes = static_cast<size_t>(b * n * heads * d) * 4;
  Rotation qkv(in_bytes), y(out_bytes);
  cuda::AttentionArgs args;
  args.batch = b, args.nq = args.nk = n, args.heads = heads, args.head_dim = d;
  args.q_stride = args.k_stride = args.v_stride = 3 * heads * d + pad;
  args.q_offset = 0, args.k_offset = heads * d, args.v_offset = 2 * heads * d;
  args.scale = 0.25f;
  bench_memory_bound("attention", std::to_string(b) + "x" + std::to_string(n) + " " + std::to_string(heads) + "x" +
                                      std::to_string(d) + (pad ? " unaligned" : ""),
                     in_bytes, out_bytes, [&](int it) {
                       args.q = args.k = args.v = static_cast<const float*>(qkv.at(it));
                       args.y = static_cast<float*>(y.at(it));
                       check_status(cuda::launch_attention(args, nullptr), "attention");
                     });
}

void bench_memory_bound_kernels() {
  using cuda::BinaryOp;
  const int64_t b = 4096;
  bench_binary(BinaryOp::kAdd, {b, 1024}, {b, 1024});            // residual add
  bench_binary(BinaryOp::kAdd, {b, 3456}, {3456});               // bias row vector
  bench_binary(BinaryOp::kMul, {b, 256}, {b, 1});                // per-row column
  bench_binary(BinaryOp::kMul, {b, 1027}, {});                   // scalar, odd width
  bench_binary(BinaryOp::kMul, {b * 4, 40, 40}, {});             // attention scale
  bench_binary(BinaryOp::kAdd, {b, 4, 27, 27}, {b, 1, 1, 27});   // key-padding mask, odd width
  bench_binary(BinaryOp::kAdd, {b, 4, 40, 40}, {40, 40});        // shared attention mask
  bench_unary(b, 1024);
  bench_unary(b, 1027);
  for (int64_t cols : {256, 1024, 3456, 37}) bench_dequant_epilogue(b, cols);
  for (int64_t cols : {256, 1024, 3456}) bench_quantize_tensor(b, cols);
  for (int64_t n : {27, 40, 64}) bench_softmax(b * 4 * n, n);  // 4 heads, n queries over n keys
  for (int64_t n : {200, 1024}) bench_softmax(b * 16, n);
  bench_attention(b, 40, 8, 16);   // attention ranker
  bench_attention(b, 40, 8, 16, 1);
  bench_attention(b, 35, 1, 128);  // DHEN
  bench_attention(b, 40, 2, 64);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) {
    std::printf("usage: kernel_rate_bench\n  times LoKA's GPU kernels against cuBLASLt / copy bandwidth (see the file banner)\n");
    return std::string(argv[1]) == "--help" ? 0 : 2;
  }
  if (const std::string reason = cuda::device_unavailable_reason(); !reason.empty()) {
    std::fprintf(stderr, "kernel_rate_bench: %s\n", reason.c_str());
    return 1;
  }
  std::printf("device: %s\n%-14s %-22s %10s %10s %9s  %s\n", cuda::device_description().c_str(), "kernel", "shape",
              "LoKA us", "ref us", "rate", "LoKA's throughput");
  void* workspace = device_alloc(cuda::kGemmWorkspaceBytes);
  for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{
           {8192, 8192, 8192}, {16384, 4096, 4096}, {16384, 1024, 1024}, {4096, 1024, 1024}, {4096, 512, 256}}) {
    bench_fp8_gemm(m, n, k, false, workspace);
    bench_fp8_gemm(m, n, k, true, workspace);
    bench_bf16_gemm(m, n, k, workspace);
    bench_tf32_gemm(m, n, k, workspace);
  }
  for (const auto& [rows, cols] : std::vector<std::array<int64_t, 2>>{{65536, 1024}, {16384, 4096}, {4096, 256}, {512, 16384}}) {
    bench_layer_norm(rows, cols, 0.01f);
    bench_layer_norm(rows, cols, 0.0078125f);
    bench_quantize_rows(rows, cols);
  }
  bench_memory_bound_kernels();
  cudaFree(workspace);
  return 0;
}
