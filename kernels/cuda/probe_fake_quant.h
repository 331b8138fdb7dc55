// ============================================================================
// kernels/cuda/probe_fake_quant.h — the device side of ai.loka.ProbeFakeQuant.
//
// Y = X with the recipe Mode[site] selects applied (quantized to FP8 and
// decoded back), or a copy when it is 0. Mode is read on the device, so one
// captured CUDA graph serves every (site, recipe) the Probe measures; the
// result is bit-identical to the CPU kernel (runtime/ops/probe_ops.cc):
// scales are divided by, as there, and a dynamic scale is amax / max finite.
// ============================================================================
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace loka::cuda {

struct FakeQuantRecipeArgs {
  int form = 0;        ///< FakeQuantForm: 0 identity, 1 tensor, 2 rows, 3 columns, 4 bf16
  bool e5m2 = false;
  float scale = 1.0f;  ///< tensor form
};

struct ProbeFakeQuantArgs {
  const float* x = nullptr;
  float* y = nullptr;
  int64_t count = 0;     ///< elements of X
  int64_t cols = 1;      ///< last dim (rows form: row length; columns form: N)
  int64_t k = 1;         ///< second-to-last dim (columns form: a matrix's rows)
  const int32_t* mode = nullptr;  ///< device, one entry per site
  int64_t site = 0;
  int* error_flag = nullptr;      ///< set to 1 when Mode[site] is outside 0..3
  FakeQuantRecipeArgs recipes[3];
};

cudaError_t launch_probe_fake_quant(const ProbeFakeQuantArgs& args, cudaStream_t stream);

}  // namespace loka::cuda
