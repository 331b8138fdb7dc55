// ============================================================================
// passes/mods/rewrite_helpers.h — small matching and constant-rewriting helpers
// shared by the Mods passes (center-norm-weights, migrate-outliers,
// fuse-layernorm-quant, share-activation-quantize, fuse-residual-layernorm,
// fuse-epilogue-quantize, fuse-concat-quantize, fold-transposes, reassociate-matmuls,
// fuse-gemm-epilogue, fuse-embedding-bags, fuse-attention).
//
// The Mods rewrite constant weights in place and match short producer ->
// consumer chains; each needs the same three questions answered the same way
// ("is this a constant the pass may rewrite?", "is this value read by exactly
// one node?", "does this LayerNormalization normalize the last axis only?")
// and the same copy-on-write rule for initializers, so they live here once.
// ============================================================================
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "loka/tensor.h"
#include "passes/ir/graph.h"

namespace loka::mods {

/// The domain of LoKA's own ops (docs/loka_ops.md), which the Mods' fusions create.
inline constexpr const char* kLokaDomain = "ai.loka";

/// Imports the ai.loka domain (version 1) into `graph` unless it already does: what a pass that
/// creates an ai.loka node does once, so the exported model declares the ops it uses.
void import_loka_domain(ir::Graph& graph);

/// The float32 data behind `value` when it is an initializer a pass may rewrite
/// (not also a graph input, which a caller could override); null otherwise.
const Tensor* float_constant(const ir::Value* value);

/// The one node reading `value` (once, at one slot), or null when the value has
/// no reader, several readers, or is a graph output (a rewrite would change what
/// the caller sees).
ir::Node* sole_reader(const ir::Value* value);

/// A Gemm or MatMul multiplying an activation (input 0) by a 2-D float32
/// constant weight (input 1), as the Mods see it.
struct WeightGemm {
  const Tensor* weight = nullptr;
  bool transposed = false;  ///< Gemm transB: weight stored [N, K]
  int64_t k = 0;            ///< input features (the activation's last dim)
  int64_t n = 0;            ///< output features
};

/// `node` as a WeightGemm; nothing for other ops, a non-constant or non-2-D
/// weight, a malformed transB, or (with `require_untransposed_activation`) a
/// Gemm with transA set.
std::optional<WeightGemm> as_weight_gemm(const ir::Node& node, bool require_untransposed_activation = false);

/// The value of `value` when it is a constant float32 scalar ([] or [1]) that is finite and
/// positive: a static scale quantization may divide by. Nothing otherwise.
std::optional<float> positive_scalar_scale(const ir::Value* value);

/// The static X_scale of the ai.loka QuantizedGemm reading a value at `use` as its X (input 0)
/// with the "tensor" recipe: a constant, finite, positive scalar. Nothing for any other reader.
std::optional<float> tensor_recipe_x_scale(const ir::Use& use);

/// The scale of a standard QuantizeLinear that writes E4M3FN codes of its input exactly as
/// QuantizedGemm's Yq and ConcatQuant define them: a constant finite positive scalar scale, a
/// constant E4M3FN zero point of 0 and saturation (the default), its codes no graph output (that
/// name is the model's interface). Nothing for another node or form.
std::optional<float> e4m3_quantize_scale(const ir::Node& node);

/// The readers of a value that encode it to E4M3 per tensor, all at one scale: QuantizedGemms at
/// input 0 with a tensor_recipe_x_scale and W on the FP8 tensor cores, and QuantizeLinears with an
/// e4m3_quantize_scale. What a producer writing those codes itself (fuse-epilogue-quantize,
/// fuse-concat-quantize) serves.
struct QuantizingReaders {
  float scale = 0.0f;
  std::vector<ir::Node*> gemms;      ///< QuantizedGemm readers (input 0)
  std::vector<ir::Node*> quantizes;  ///< QuantizeLinear readers
  bool others = false;               ///< some reader does not quantize it (an FP32 reader)
};
/// `value`'s quantizing readers; nothing when none quantizes or two use different scales (bit for
/// bit: codes at one scale cannot serve both).
std::optional<QuantizingReaders> quantizing_readers(const ir::Value& value);

/// Points `readers` at `codes`, E4M3 codes of the value they read at readers.scale: the
/// QuantizedGemms read them as their X (their X_scale is that scale already); a QuantizeLinear's
/// readers read them instead of its output, and the QuantizeLinear leaves the graph, with its
/// entry in the annotation `document` and the constants nothing else reads.
void move_to_codes(ir::Graph& graph, const QuantizingReaders& readers, ir::Value* codes, nlohmann::json& document);

/// Whether the QuantizedGemm's W [N, K] fits the FP8 tensor cores (K and N multiples of 16, the
/// rule of kernels/registry/gemm_kernel_key.cc's can_implement). Others run emulated or in BF16,
/// which read a float X as cheaply as codes; an FP8 X would take the BF16 fallback away from them.
bool runs_on_fp8_tensor_cores(const ir::Node& gemm);

/// True when `node` is an ONNX LayerNormalization normalizing its input over the
/// last axis only (axis -1, or rank-1 when the input rank is known), the form
/// every Mods rewrite relies on.
bool normalizes_last_axis_only(const ir::Node& node);

/// True when the LayerNormalization `norm`'s Scale (input 1) and B (input 2, when given) are
/// float32 vectors of exactly the normalized dim's known size: what LoKA's fused norms take
/// (LayerNormalization itself also broadcasts, e.g. a Scale of shape [1]).
bool norm_affine_is_per_channel(const ir::Node& norm);

/// True when both dims are provably the same size: equal known sizes or the same symbol (an
/// unknown dim may differ from anything, itself included).
bool same_dim(const ir::Dim& a, const ir::Dim& b);

/// True when `node` is a default-domain Transpose swapping exactly the last two of `rank` dims
/// (perm 0, 1, ..., rank-3, rank-1, rank-2): each matrix of a batch transposed, what a GEMM can
/// read in place.
bool swaps_last_two_dims(const ir::Node& node, int rank);

/// Makes input `slot` of `node` (an initializer) hold `tensor`. Initializer
/// storage is shared and immutable, so the data is always replaced, never
/// written through; when other nodes read the same initializer, a new one named
/// `<old name><suffix>` is created for `node` alone and the others keep theirs.
void replace_constant(ir::Graph& graph, ir::Node* node, size_t slot, Tensor tensor, const std::string& suffix);

}  // namespace loka::mods
