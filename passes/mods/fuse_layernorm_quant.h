// ============================================================================
// passes/mods/fuse_layernorm_quant.h — `fuse-layernorm-quant`: LayerNorm emits
// FP8 for the QuantizedGemms that read it (no separate quantize kernel).
//
// What: a LayerNormalization over the last axis whose readers are all
// ai.loka::QuantizedGemm nodes with act_recipe "tensor", each reading it as X,
// becomes one ai.loka::LayerNormQuant (docs/loka_ops.md) that writes the
// normalized tensor as FLOAT8E4M3FN codes with a static Y_scale; the GEMMs read
// those codes directly and use Y_scale as their X_scale.
//
//        X ──▶ LayerNormalization(axis=-1) ──y:f32──┬──▶ QuantizedGemm{tensor}(y, W0, Ws0, B0, xs0)
//                                                   └──▶ QuantizedGemm{tensor}(y, W1, Ws1, B1, xs1)
//      becomes
//        X ──▶ ai.loka::LayerNormQuant(X, gamma, beta, ys) ──yq:f8e4m3fn──┬──▶ QuantizedGemm(yq, W0, Ws0, B0, ys)
//                                                                        └──▶ QuantizedGemm(yq, W1, Ws1, B1, ys)
//        ys = max(xs0, xs1, ...)
//
// Why one shared scale, and why the max: the FP8 tensor is written once, so it
// has one scale, and every reader must dequantize it with that same scale.
// Each consumer's X_scale was calibrated on this same tensor (amax / 448), so
// they normally agree; where they differ (another calibration, a clipped amax)
// the largest one is the only choice that saturates no consumer's calibrated
// range: a smaller one would clip values some consumer was calibrated to keep,
// while the largest costs the others at most a little resolution. With equal
// scales the fused graph computes bit for bit what the unfused one did.
//
// Requires: LayerNormalization (ONNX domain, last axis only, stash_type 1,
// float32 X, Scale and B of exactly [C]: LayerNormQuant does not broadcast
// them) whose only used output is Y, Y not a graph output; every reader a
// QuantizedGemm with act_recipe "tensor" reading Y at input 0 only, with an
// initializer X_scale of one finite positive float32 element.
// Guarantees: the fused node takes the LayerNorm's name (so annotations and
// reports keep pointing at it) and its annotation entry gets "op":
// "LayerNormQuant", "precision": "fp8_e4m3", "y_scale" and "from": [the
// LayerNorm's name]; readers' old X_scale initializers are dropped when
// nothing else reads them; opset ai.loka 1 is imported.
// Does not: fuse when any reader is not such a QuantizedGemm (a float reader
// would need a second, unquantized output), calibrate scales (the Probe and
// the quantization pass do), or fuse other norms (RMSNorm, BatchNorm).
// ============================================================================
#pragma once

#include <memory>

#include "passes/pass.h"

namespace loka {

/// Name, summary, options and statistics of `fuse-layernorm-quant`.
PassInfo fuse_layernorm_quant_pass_info();
/// A fresh `fuse-layernorm-quant` pass.
std::unique_ptr<Pass> make_fuse_layernorm_quant_pass();

}  // namespace loka
