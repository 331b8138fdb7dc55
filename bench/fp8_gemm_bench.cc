// ============================================================================
// bench/fp8_gemm_bench.cc — FP8 GEMM throughput on the GPU (device events, median).
//
// For each shape: warm-up, then 50 timed launches with inputs rotated through
// more memory than L2, median latency and TFLOP/s. Prints one table.
// ============================================================================
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <string>
#include <cstdio>
#include <vector>

#include "kernels/cuda/device.h"
#include "kernels/cuda/fp8_gemm.h"

int main() {
  using namespace loka;
  if (const std::string reason = cuda::device_unavailable_reason(); !reason.empty()) {
    std::printf("fp8_gemm_bench: %s\n", reason.c_str());
    return 1;
  }
  std::printf("device: %s\n%-24s %12s %10s\n", cuda::device_description().c_str(), "M x N x K", "median us", "TFLOP/s");
  const std::vector<std::array<int64_t, 3>> shapes = {{8192, 8192, 8192}, {4096, 1024, 1024}, {2048, 1024, 1024},
                                                      {16384, 512, 512},   {4096, 256, 512},   {512, 1024, 1024}};
  void* workspace = nullptr;
  cudaMalloc(&workspace, cuda::kGemmWorkspaceBytes);
  for (const auto& [m, n, k] : shapes) {
    auto gemm = cuda::Fp8Gemm::create({m, n, k, false, false, DType::kBFloat16, false, cuda::GemmEpilogue::kNone});
    if (!gemm) {
      std::printf("%lldx%lldx%lld: %s\n", (long long)m, (long long)n, (long long)k, gemm.status().message().c_str());
      continue;
    }
    // Rotate through enough copies to exceed the 50 MB L2.
    const size_t bytes = static_cast<size_t>(m * k + n * k);
    const int copies = static_cast<int>(std::max<size_t>(1, (200u << 20) / bytes));
    std::vector<uint8_t*> x(copies), w(copies);
    for (int c = 0; c < copies; ++c) {
      cudaMalloc(reinterpret_cast<void**>(&x[c]), static_cast<size_t>(m * k));
      cudaMalloc(reinterpret_cast<void**>(&w[c]), static_cast<size_t>(n * k));
      cudaMemset(x[c], 0x38, static_cast<size_t>(m * k));
      cudaMemset(w[c], 0x38, static_cast<size_t>(n * k));
    }
    float *xs, *ws;
    void* y;
    cudaMalloc(reinterpret_cast<void**>(&xs), sizeof(float));
    cudaMalloc(reinterpret_cast<void**>(&ws), sizeof(float) * n);
    cudaMalloc(&y, static_cast<size_t>(m * n) * 2);
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    std::vector<float> times;
    for (int it = 0; it < 60; ++it) {
      const int c = it % copies;
      cudaEventRecord(start);
      (void)(*gemm)->run({x[c], w[c], xs, ws, nullptr, y}, workspace, nullptr);
      cudaEventRecord(stop);
      cudaEventSynchronize(stop);
      float ms = 0;
      cudaEventElapsedTime(&ms, start, stop);
      if (it >= 10) times.push_back(ms);
    }
    std::sort(times.begin(), times.end());
    const double median_ms = times[times.size() / 2];
    std::printf("%-24s %12.1f %10.1f\n", (std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k)).c_str(),
                median_ms * 1000, 2.0 * m * n * k / (median_ms * 1e-3) / 1e12);
    for (int c = 0; c < copies; ++c) {
      cudaFree(x[c]);
      cudaFree(w[c]);
    }
    cudaFree(xs);
    cudaFree(ws);
    cudaFree(y);
  }
  return 0;
}
