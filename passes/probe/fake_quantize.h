// ============================================================================
// passes/probe/fake_quantize.h — FP8 recipes applied to whole tensors on the
// CPU, as the Probe measures them (and Dispatch re-measures them on the same
// calibration inputs, passes/dispatch/calibration_errors.h).
//
// Each returns a quantized-and-decoded FP32 copy (kernels/cpu/fp8_quantize.h:
// bit-exact ONNX QuantizeLinear/DequantizeLinear).
// ============================================================================
#pragma once

#include "kernels/cpu/fp8_quantize.h"
#include "loka/tensor.h"

namespace loka::probe {

/// Each row of the last dim with its own dynamic E4M3 scale (its amax / 448).
Tensor quantize_rows(const Tensor& x);

/// One static scale for every value.
Tensor quantize_tensor(const Tensor& x, float scale, cpu::Fp8Format format = cpu::Fp8Format::kE4M3FN);

/// Per-output-channel E4M3 weights: channels are the columns of each trailing [K, N] matrix, or
/// the rows when stored transposed ([N, K], Gemm transB=1).
Tensor quantize_weight_channels(const Tensor& w, bool transposed);

}  // namespace loka::probe
