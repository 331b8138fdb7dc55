// ============================================================================
// passes/pipelines.cc — every built-in pass, and all ordering, in one place.
//
// Default pipeline and why each constraint holds:
//   canonicalize          first: folds constants and shape chains, removes
//                         Identity/Dropout, fuses MatMul+Add, decomposed
//                         LayerNorms and GELUs, stores weights [N,K]
//                         (transB=1) — every later pass matches these
//                         canonical forms.
//   infer-shapes          after any rewrite, before passes that read types
//                         (sites, FLOPs, layouts).
//   reassociate-matmuls   before the Probe, which then measures the sites that will run
//                         (X·Xᵀ and a GEMM by P, not Xᵀ·P); after infer-shapes (it
//                         weighs the two forms' multiply-adds by their dims).
//   center-norm-weights   before the Probe: it changes the weights the Probe
//                         measures (exact in FP32, removes the common mode).
//   migrate-outliers      before the Probe for the same reason; after
//                         centring, whose per-row means it would otherwise scale.
//   probe                 measures the model that will be quantized.
//   pin-precision         needs the Probe's verdicts and errors.
//   insert-scales         needs the chosen precisions; creates the ai.loka ops.
//   fuse-layernorm-quant  needs QuantizedGemm consumers to exist.
//   fuse-gemm-epilogue    needs QuantizedGemm nodes; after fuse-layernorm-quant,
//                         which only rewires GEMM inputs 0 and 4 (this pass sets
//                         3, 5, 6 and the activation).
//   fuse-embedding-bags   after insert-scales, so FP8 tables arrive as
//                         QuantizedGather (the fused op takes both kinds).
//   store-tables-bf16     after fuse-embedding-bags, whose fused op is what reads BF16 tables
//                         (a plain Gather would make a BF16 output); after pin-precision,
//                         whose headroom it spends; before dispatch, which gets the rest.
//   fuse-attention        after pin-precision and insert-scales: it fuses only
//                         chains whose MatMuls stayed FP32 (the Probe measured
//                         them as sites; an FP8 or BF16 choice keeps its ops);
//                         before dispatch, which then has no MatMuls to time there.
//   fuse-residual-layernorm  after fuse-gemm-epilogue, which takes the Adds whose term is a
//                         GEMM output into that GEMM's epilogue (free there), and after
//                         fuse-layernorm-quant, whose FP8 norms keep their Add.
//   share-activation-quantize  after every pass that creates or rewires QuantizedGemms
//                         (insert-scales, fuse-layernorm-quant, which turns a LayerNorm
//                         read only by them into FP8 codes itself); before dispatch,
//                         which keys their GEMMs on the FP8 input.
//   fuse-concat-quantize  after share-activation-quantize, whose QuantizeLinear of a Concat
//                         read by several GEMMs it takes over; before dispatch, which keys
//                         the readers' GEMMs on their now FP8 input.
//   fuse-epilogue-quantize  after share-activation-quantize, whose QuantizeLinear of a
//                         DCN layer's output it takes over, and after fuse-gemm-epilogue,
//                         which makes the cross layers (a Multiplier); before dispatch,
//                         which keys the readers' GEMMs on their now FP8 input.
//   fold-transposes       after fuse-attention, which matches MatMul(Q, Transpose(K)) itself
//                         (it would find a FusedGemm there); before dispatch, which times
//                         the FusedGemm's batched_nt key instead of a MatMul and a Transpose.
//   store-activations-bf16  after every fusion that decides which ai.loka op writes or reads
//                         an activation (fuse-gemm-epilogue, fuse-embedding-bags, the
//                         quantize fusions: a QuantizeLinear reader keeps a set FP32); after
//                         pin-precision, which chose the sets; before infer-shapes and dispatch
//                         (it retypes activations and makes float Gemm/MatMul readers FusedGemms,
//                         whose kernels Dispatch keys on their BF16 X).
//   dispatch              after every rewrite that changes a GEMM's key (precision,
//                         FP8 input from LayerNormQuant) and after infer-shapes.
//   lower-qdq             last, and only for --format qdq: replaces ai.loka ops.
// ============================================================================
#include "passes/pipelines.h"

#include "passes/canonicalize/canonicalize.h"
#include "passes/canonicalize/decompose_ops.h"
#include "passes/canonicalize/eliminate_dead_code.h"
#include "passes/canonicalize/fold_constants.h"
#include "passes/canonicalize/lower_einsum.h"
#include "passes/canonicalize/fold_shape_chains.h"
#include "passes/canonicalize/fuse_decomposed_gelu.h"
#include "passes/canonicalize/fuse_decomposed_layernorm.h"
#include "passes/canonicalize/fuse_matmul_add.h"
#include "passes/canonicalize/normalize_gemm.h"
#include "passes/canonicalize/remove_identities.h"
#include "passes/canonicalize/upgrade_opset.h"
#include "passes/dispatch/dispatch_pass.h"
#include "passes/infer_shapes_pass.h"
#include "passes/mods/center_norm_weights.h"
#include "passes/mods/fold_transposes.h"
#include "passes/mods/fuse_attention.h"
#include "passes/mods/fuse_embedding_bags.h"
#include "passes/mods/fuse_concat_quantize.h"
#include "passes/mods/fuse_epilogue_quantize.h"
#include "passes/mods/fuse_gemm_epilogue.h"
#include "passes/mods/fuse_layernorm_quant.h"
#include "passes/mods/fuse_residual_layernorm.h"
#include "passes/mods/insert_scales.h"
#include "passes/mods/migrate_outliers.h"
#include "passes/mods/pin_precision.h"
#include "passes/mods/reassociate_matmuls.h"
#include "passes/mods/share_activation_quantize.h"
#include "passes/mods/store_activations_bf16.h"
#include "passes/mods/store_tables_bf16.h"
#include "passes/onnx/qdq_lowering.h"
#include "passes/pass_registry.h"
#include "passes/probe/probe_pass.h"

namespace loka {

void register_builtin_passes(PassRegistry& registry) {
  // Canonicalization (canonicalize runs the others to a fixpoint).
  registry.add(canonicalize_pass_info(), make_canonicalize_pass);
  registry.add(fold_constants_pass_info(), make_fold_constants_pass);
  registry.add(fold_shape_chains_pass_info(), make_fold_shape_chains_pass);
  registry.add(remove_identities_pass_info(), make_remove_identities_pass);
  registry.add(fuse_matmul_add_pass_info(), make_fuse_matmul_add_pass);
  registry.add(lower_einsum_pass_info(), make_lower_einsum_pass);
  registry.add(decompose_ops_pass_info(), make_decompose_ops_pass);
  registry.add(normalize_gemm_pass_info(), make_normalize_gemm_pass);
  registry.add(fuse_decomposed_layernorm_pass_info(), make_fuse_decomposed_layernorm_pass);
  registry.add(fuse_decomposed_gelu_pass_info(), make_fuse_decomposed_gelu_pass);
  registry.add(eliminate_dead_code_pass_info(), make_eliminate_dead_code_pass);
  registry.add(upgrade_opset_pass_info(), make_upgrade_opset_pass);
  registry.add(infer_shapes_pass_info(), make_infer_shapes_pass);
  // A cheaper association of a product chain (exact in real arithmetic, not in FP32 rounding).
  registry.add(reassociate_matmuls_pass_info(), make_reassociate_matmuls_pass);
  // FP8-expanding rewrites (exact in FP32).
  registry.add(center_norm_weights_pass_info(), make_center_norm_weights_pass);
  registry.add(migrate_outliers_pass_info(), make_migrate_outliers_pass);
  // Probe and the Mods that act on it.
  registry.add(probe_pass_info(), make_probe_pass);
  registry.add(pin_precision_pass_info(), make_pin_precision_pass);
  registry.add(insert_scales_pass_info(), make_insert_scales_pass);
  registry.add(fuse_layernorm_quant_pass_info(), make_fuse_layernorm_quant_pass);
  registry.add(fuse_gemm_epilogue_pass_info(), make_fuse_gemm_epilogue_pass);
  registry.add(fuse_embedding_bags_pass_info(), make_fuse_embedding_bags_pass);
  registry.add(store_tables_bf16_pass_info(), make_store_tables_bf16_pass);
  registry.add(fuse_attention_pass_info(), make_fuse_attention_pass);
  registry.add(fuse_residual_layernorm_pass_info(), make_fuse_residual_layernorm_pass);
  registry.add(share_activation_quantize_pass_info(), make_share_activation_quantize_pass);
  registry.add(fuse_concat_quantize_pass_info(), make_fuse_concat_quantize_pass);
  registry.add(fuse_epilogue_quantize_pass_info(), make_fuse_epilogue_quantize_pass);
  registry.add(fold_transposes_pass_info(), make_fold_transposes_pass);
  registry.add(store_activations_bf16_pass_info(), make_store_activations_bf16_pass);
  registry.add(dispatch_pass_info(), make_dispatch_pass);
  registry.add(lower_qdq_pass_info(), make_lower_qdq_pass);
}

std::string default_pipeline() {
  return "canonicalize,infer-shapes,reassociate-matmuls,center-norm-weights,migrate-outliers,infer-shapes,probe,pin-precision,"
         "insert-scales,fuse-layernorm-quant,fuse-gemm-epilogue,fuse-embedding-bags,store-tables-bf16,fuse-attention,"
         "fuse-residual-layernorm,share-activation-quantize,fuse-concat-quantize,fuse-epilogue-quantize,fold-transposes,"
         "store-activations-bf16,infer-shapes,dispatch";
}

}  // namespace loka
