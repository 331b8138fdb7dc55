// ============================================================================
// runtime/ops/register_all.h — the one list of op families the runtime knows.
//
// Registration is explicit (no static initializers) so nothing is dropped by
// the linker from a static library and the order is visible in one place.
// ============================================================================
#pragma once

namespace loka {

class OpRegistry;

void register_elementwise_ops(OpRegistry& registry);     // ops/elementwise.cc
void register_matmul_ops(OpRegistry& registry);          // ops/matmul.cc
void register_normalization_ops(OpRegistry& registry);   // ops/normalization.cc
void register_reduction_ops(OpRegistry& registry);       // ops/reduction.cc
void register_shape_ops(OpRegistry& registry);           // ops/shape_ops.cc
void register_data_movement_ops(OpRegistry& registry);   // ops/data_movement.cc
void register_quantization_ops(OpRegistry& registry);    // ops/quantization.cc
void register_loka_ops(OpRegistry& registry);            // ops/loka_ops.cc (domain ai.loka, docs/loka_ops.md)
void register_probe_ops(OpRegistry& registry);           // ops/probe_ops.cc (ai.loka.ProbeFakeQuant)
void register_attention_ops(OpRegistry& registry);       // ops/attention.cc (ai.loka.Attention)

/// Registers every family above.
void register_all_ops(OpRegistry& registry);

}  // namespace loka
