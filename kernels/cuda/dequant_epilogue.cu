// ============================================================================
// kernels/cuda/dequant_epilogue.cu — one thread per output element.
// ============================================================================
#include "kernels/cuda/dequant_epilogue.h"

#include <string>

namespace loka::cuda {
namespace {

__global__ void dequant_epilogue_kernel(DequantEpilogueArgs args) {
  const int64_t total = args.rows * args.cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / args.cols, n = i - r * args.cols;
    const float xs = args.x_scale[args.per_row_x_scale ? r : 0];
    float v = __fmul_rn(__fmul_rn(args.acc[i], xs), args.w_scale[n]);
    if (args.bias) v = __fadd_rn(v, args.bias[n]);
    if (args.activation == GemmEpilogue::kRelu) {
      v = v > 0.0f ? v : (v != v ? v : 0.0f);  // NaN stays NaN, as ONNX Relu
    } else if (args.activation == GemmEpilogue::kGelu) {
      v = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    }
    if (args.multiplier) v = __fmul_rn(v, args.multiplier[i]);
    if (args.residual) v = __fadd_rn(v, args.residual[i]);
    args.y[i] = v;
  }
}

}  // namespace

Status launch_dequant_epilogue(const DequantEpilogueArgs& args, cudaStream_t stream) {
  if (args.rows < 0 || args.cols < 0) return Status::error("dequant epilogue: negative shape");
  if (args.rows == 0 || args.cols == 0) return Status::ok();
  if (!args.acc || !args.x_scale || !args.w_scale || !args.y) return Status::error("dequant epilogue: null pointer");
  const int64_t total = args.rows * args.cols;
  constexpr int kThreads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((total + kThreads - 1) / kThreads, 65535 * 4));
  dequant_epilogue_kernel<<<blocks, kThreads, 0, stream>>>(args);
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) return Status::error(std::string("dequant epilogue launch: ") + cudaGetErrorString(error));
  return Status::ok();
}

}  // namespace loka::cuda
