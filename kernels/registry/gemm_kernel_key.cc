// ============================================================================
// kernels/registry/gemm_kernel_key.cc — GEMM keys, candidate names and the
// static can_implement rules (mirroring what kernels/cuda's planners accept).
// ============================================================================
#include "kernels/registry/gemm_kernel_key.h"

#include <charconv>
#include <vector>

namespace loka::kernels {
namespace {

const char* layout_name(GemmLayout layout) {
  switch (layout) {
    case GemmLayout::kNT: return "nt";
    case GemmLayout::kNN: return "nn";
    case GemmLayout::kBatched: return "batched";
    case GemmLayout::kBatchedNT: return "batched_nt";
  }
  return "?";
}

const char* epilogue_name(cuda::GemmEpilogue epilogue) {
  switch (epilogue) {
    case cuda::GemmEpilogue::kNone: return "none";
    case cuda::GemmEpilogue::kRelu: return "relu";
    case cuda::GemmEpilogue::kGelu: return "gelu";
  }
  return "?";
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

/// "<prefix><N>" -> N when N >= minimum.
std::optional<int> parse_numbered(const std::string& part, const std::string& prefix, int minimum) {
  if (part.rfind(prefix, 0) != 0 || part.size() == prefix.size()) return std::nullopt;
  int value = -1;
  const char* first = part.data() + prefix.size();
  const char* last = part.data() + part.size();
  const auto [end, error] = std::from_chars(first, last, value);
  if (error != std::errc() || end != last || value < minimum) return std::nullopt;
  return value;
}

bool starts_with(const std::string& text, const char* prefix) { return text.rfind(prefix, 0) == 0; }

}  // namespace

const char* precision_name(GemmPrecision precision) {
  switch (precision) {
    case GemmPrecision::kFp32: return "fp32";
    case GemmPrecision::kTf32: return "tf32";
    case GemmPrecision::kBf16: return "bf16";
    case GemmPrecision::kFp8E4M3: return "fp8_e4m3";
    case GemmPrecision::kFp8Emulated: return "fp8_emulated";
    case GemmPrecision::kBf16x2: return "bf16x2";
  }
  return "?";
}

const char* granularity_name(ScaleGranularity granularity) {
  switch (granularity) {
    case ScaleGranularity::kNone: return "none";
    case ScaleGranularity::kTensor: return "tensor";
    case ScaleGranularity::kRow: return "row";
  }
  return "?";
}

std::string GemmKey::to_string() const {
  std::string text = op + ":" + std::string(dtype_short_name(input)) + "*" + std::string(dtype_short_name(weight)) +
                     "->" + std::string(dtype_short_name(output)) + ":" + granularity_name(activation_scale) + ":" +
                     layout_name(layout) + (constant_weight ? "" : "~act") + ":";
  text += bias ? "bias+" : "nobias+";
  text += epilogue_name(epilogue);
  if (residual) text += "+residual";
  return text;
}

std::string GemmShape::to_string() const {
  std::string text = "m=" + std::to_string(m) + ",n=" + std::to_string(n) + ",k=" + std::to_string(k);
  if (batch != 1) text += ",batch=" + std::to_string(batch);
  return text;
}

std::string GemmCandidate::name() const {
  if (library == GemmLibrary::kCudnn)
    return std::string("cudnn.fp8.e4m3.") + granularity_name(granularity) + ".engine" + std::to_string(algorithm);
  if (library == GemmLibrary::kLoka) return std::string("loka.fp8.e4m3.") + granularity_name(granularity) + ".small_m";
  std::string algo = std::string(tanh_gelu ? ".tanh_gelu" : "") + ".algo" + std::to_string(algorithm);
  if (split_k > 0) algo += ".splitk" + std::to_string(split_k);
  if (tile > 0) algo += ".tile" + std::to_string(tile);
  if (stages > 0) algo += ".stages" + std::to_string(stages);
  switch (precision) {
    case GemmPrecision::kFp32: return "cublaslt.fp32" + algo;
    case GemmPrecision::kTf32: return "cublaslt.tf32" + algo;
    case GemmPrecision::kBf16: return "cublaslt.bf16" + algo;
    case GemmPrecision::kBf16x2: return "cublaslt.bf16x2" + algo;
    case GemmPrecision::kFp8E4M3:
      return std::string("cublaslt.fp8.e4m3.") + granularity_name(granularity) + (fast_accum ? ".fast_accum" : "") + algo;
    case GemmPrecision::kFp8Emulated: return "loka.fp8_emulated_fp32";
  }
  return "?";
}

GemmCandidate GemmCandidate::family_default() const {
  GemmCandidate copy = *this;
  copy.algorithm = 0;
  copy.split_k = 0;
  copy.tile = 0;
  copy.stages = 0;
  return copy;  // tanh_gelu stays: it changes what is computed, not which configuration; a small_m is itself
}

Result<GemmCandidate> parse_gemm_candidate(const std::string& name) {
  const auto bad = [&](const std::string& why) {
    return Status::error("kernel name '" + name + "': " + why);
  };
  GemmCandidate c;
  if (name == "loka.fp8_emulated_fp32") {
    c.precision = GemmPrecision::kFp8Emulated;
    c.granularity = ScaleGranularity::kNone;
    return c;
  }
  std::vector<std::string> parts = split(name, '.');
  if (!parts.empty() && parts[0] == "loka") {
    // loka.fp8.e4m3.<tensor|row>.small_m: LoKA's small-M kernel, one configuration.
    if (parts.size() != 5 || parts[1] != "fp8" || parts[2] != "e4m3" || parts[4] != "small_m" ||
        (parts[3] != "tensor" && parts[3] != "row"))
      return bad("LoKA's kernels are loka.fp8_emulated_fp32 and loka.fp8.e4m3.{tensor,row}.small_m");
    c.library = GemmLibrary::kLoka;
    c.precision = GemmPrecision::kFp8E4M3;
    c.granularity = parts[3] == "tensor" ? ScaleGranularity::kTensor : ScaleGranularity::kRow;
    return c;
  }
  if (!parts.empty() && parts[0] == "cudnn") {
    // cudnn.fp8.e4m3.tensor.engine<N>: the one cuDNN family.
    const std::optional<int> engine = parts.size() == 5 ? parse_numbered(parts[4], "engine", 0) : std::nullopt;
    if (parts.size() != 5 || parts[1] != "fp8" || parts[2] != "e4m3" || parts[3] != "tensor" || !engine)
      return bad("cuDNN candidates are cudnn.fp8.e4m3.tensor.engine<N>");
    c.library = GemmLibrary::kCudnn;
    c.precision = GemmPrecision::kFp8E4M3;
    c.granularity = ScaleGranularity::kTensor;
    c.algorithm = *engine;
    return c;
  }
  if (parts.size() < 3 || parts[0] != "cublaslt")
    return bad("expected cublaslt.<precision>...algo<N>, cudnn...engine<N>, loka.fp8_emulated_fp32 or loka...small_m");
  // An explicit configuration follows the algorithm: splitk<N>, or tile<T> with optional stages<S>.
  if (starts_with(parts.back(), "stages")) {
    const std::optional<int> stages = parse_numbered(parts.back(), "stages", 1);
    if (!stages) return bad("stages must be stages<S> with S >= 1");
    c.stages = *stages;
    parts.pop_back();
    if (!starts_with(parts.back(), "tile")) return bad("stages<S> follows tile<T>");
  }
  if (starts_with(parts.back(), "tile")) {
    const std::optional<int> tile = parse_numbered(parts.back(), "tile", 1);
    if (!tile) return bad("a tile must be tile<T> with T >= 1 (a cublasLtMatmulTile_t value)");
    c.tile = *tile;
    parts.pop_back();
  } else if (starts_with(parts.back(), "splitk")) {
    const std::optional<int> split_k = parse_numbered(parts.back(), "splitk", 2);
    if (!split_k) return bad("split-K must be splitk<N> with N >= 2");
    c.split_k = *split_k;
    parts.pop_back();
  }
  const std::optional<int> algorithm = parse_numbered(parts.back(), "algo", 0);
  if (!algorithm) return bad("the last part must be algo<N>, optionally followed by splitk<N> or tile<T>[.stages<S>]");
  c.algorithm = *algorithm;
  parts.pop_back();
  if (parts.back() == "tanh_gelu") {
    c.tanh_gelu = true;
    parts.pop_back();
  }
  if (parts.size() < 2) return bad("expected cublaslt.<precision>[...].algo<N>");
  for (const GemmPrecision plain :
       {GemmPrecision::kFp32, GemmPrecision::kTf32, GemmPrecision::kBf16, GemmPrecision::kBf16x2}) {
    if (parts[1] != precision_name(plain)) continue;
    if (parts.size() != 2) return bad("fp32/tf32/bf16/bf16x2 names are cublaslt.<precision>[.tanh_gelu].algo<N>");
    c.precision = plain;
    return c;
  }
  if (parts[1] != "fp8" || parts.size() < 4 || parts[2] != "e4m3") return bad("unknown precision '" + parts[1] + "'");
  c.precision = GemmPrecision::kFp8E4M3;
  if (parts[3] == "tensor")
    c.granularity = ScaleGranularity::kTensor;
  else if (parts[3] == "row")
    c.granularity = ScaleGranularity::kRow;
  else
    return bad("unknown scale granularity '" + parts[3] + "'");
  if (parts.size() == 5) {
    if (parts[4] != "fast_accum") return bad("unknown modifier '" + parts[4] + "'");
    c.fast_accum = true;
  } else if (parts.size() != 4) {
    return bad("too many parts");
  }
  return c;
}

Status can_implement(const GemmCandidate& c, const GemmKey& key, const GemmShape& shape) {
  if (shape.m <= 0 || shape.n <= 0 || shape.k <= 0 || shape.batch <= 0)
    return Status::error("needs positive sizes, got " + shape.to_string());
  if (c.algorithm < 0) return Status::error("negative algorithm index");
  if (c.split_k < 0 || c.split_k == 1) return Status::error("split-K must be 0 (the heuristic's) or >= 2");
  if (c.tile < 0 || c.stages < 0) return Status::error("tile and stage ids are cuBLASLt enum values (>= 1), or 0");
  if (c.stages > 0 && c.tile == 0) return Status::error("stages are forced together with a tile");
  if (c.tile > 0 && c.split_k > 0) return Status::error("a tile configuration keeps the heuristic's split-K");
  if ((c.split_k > 0 || c.tile > 0) && c.precision == GemmPrecision::kFp8Emulated)
    return Status::error("split-K and tiles are cuBLASLt configurations");
  if (c.fast_accum && c.precision != GemmPrecision::kFp8E4M3) return Status::error("fast accumulation is FP8-only");
  if (c.tanh_gelu && key.epilogue != cuda::GemmEpilogue::kGelu)
    return Status::error("tanh_gelu replaces a GELU epilogue; this node has none");
  if (c.tanh_gelu && (c.library != GemmLibrary::kCublasLt || c.precision == GemmPrecision::kFp8Emulated))
    return Status::error("tanh_gelu is cuBLASLt's GELU epilogue");
  const bool cublaslt_fp8 = c.precision == GemmPrecision::kFp8E4M3 && c.library == GemmLibrary::kCublasLt;
  if (key.input == DType::kBFloat16 && key.weight == DType::kFloat8E4M3FN) {
    // QuantizedGemm's X held in BF16 (BF16 activation storage): cuBLASLt's FP8 family quantizes it
    // as it quantizes an FP32 one. The other families read FP32 or E4M3 activations.
    if (!cublaslt_fp8) return Status::error(c.name() + " reads no BF16 activation: cuBLASLt's FP8 kernels quantize it");
  } else if (key.input == DType::kBFloat16) {
    // A BF16 activation (BF16 activation storage: FusedGemm) is an FP32 op's X in half the bytes:
    // the FP32 and TF32 families widen it exactly, the BF16 family reads it as it is. Quantizing it
    // to E4M3 would be another op's arithmetic, and E4M3 weights belong to QuantizedGemm.
    if (c.precision == GemmPrecision::kFp8E4M3 || c.precision == GemmPrecision::kFp8Emulated)
      return Status::error(c.name() + " reads no BF16 activation: an FP32 op's X runs in FP32, TF32, BF16 or BF16x2");
    if (key.weight != DType::kFloat32) return Status::error("a BF16 activation is read with FP32 weights only");
  }
  if (key.output != DType::kFloat32) {
    // A QuantizedGemm's Y held in BF16: cuBLASLt's FP8 GEMM writes it as D (its scales, bias and
    // ReLU in the GEMM), or its scale epilogue does (the exact GELU); the others write FP32.
    if (key.output != DType::kBFloat16 || key.weight != DType::kFloat8E4M3FN)
      return Status::error("only QuantizedGemm's Y may be BF16 (got " + key.to_string() + ")");
    if (!cublaslt_fp8) return Status::error(c.name() + " writes FP32: cuBLASLt's FP8 kernels write a BF16 Y");
    // Where cuBLASLt cannot apply everything itself (the exact GELU; a residual after an
    // activation, which an add after a BF16 D would round twice), its unit-scale path sums into
    // FP32 and a pass rewrites them: the node's own op does the same with BF16 sums, in fewer bytes.
    const bool exact_gelu = key.epilogue == cuda::GemmEpilogue::kGelu && !c.tanh_gelu;
    if (exact_gelu || (key.residual && key.epilogue != cuda::GemmEpilogue::kNone))
      return Status::error(c.name() + ": a BF16 Y after the exact GELU or with a residual after its activation is the "
                                      "node's own op's (BF16 sums, one epilogue pass)");
  }
  if (c.library == GemmLibrary::kCudnn) {
    // The graph of kernels/cuda/cudnn_fp8_gemm.h: E4M3 operands, scales, bias, ReLU and residual.
    if (c.precision != GemmPrecision::kFp8E4M3) return Status::error("the cuDNN candidates are FP8 graphs");
    if (c.fast_accum || c.split_k > 0 || c.tile > 0) return Status::error("fast accumulation, split-K and tiles are cuBLASLt's");
    if (c.granularity != ScaleGranularity::kTensor) return Status::error("the cuDNN graph takes a per-tensor activation scale");
    if (key.epilogue == cuda::GemmEpilogue::kGelu) return Status::error("the cuDNN graph fuses bias and ReLU, not GELU");
  }
  if (c.library == GemmLibrary::kLoka) {
    // LoKA's small-M kernel (kernels/cuda/small_m_gemm.h): quantize and E4M3 GEMM in one launch,
    // scales, FP32 bias, ReLU or exact GELU and the residual in it; any K and N, few rows.
    if (c.precision != GemmPrecision::kFp8E4M3) return Status::error("LoKA's small-M kernel is an FP8 E4M3 GEMM");
    if (c.algorithm != 0 || c.fast_accum || c.split_k > 0 || c.tile > 0)
      return Status::error("LoKA's small-M kernel has one configuration (no algorithm index, FAST_ACCUM, split-K or tile)");
    if (key.input != DType::kFloat32 && key.input != DType::kFloat8E4M3FN)
      return Status::error("LoKA's small-M kernel reads FP32 or E4M3 activations");
    if (shape.rows() > cuda::kSmallMMaxRows)
      return Status::error("LoKA's small-M kernel takes up to " + std::to_string(cuda::kSmallMMaxRows) + " rows (" +
                           shape.to_string() + ")");
  }
  const bool fp8_weights = key.weight == DType::kFloat8E4M3FN;
  const bool float_input = key.input == DType::kFloat32 || key.input == DType::kBFloat16;
  switch (c.precision) {
    case GemmPrecision::kFp32:
      // A BF16 activation is widened to FP32 first (run scratch): the same GEMM on the same values.
      if (fp8_weights || !float_input) return Status::error("FP32 GEMMs take FP32 operands");
      return Status::ok();
    case GemmPrecision::kTf32:
      // The same cuBLASLt GEMM with CUBLAS_COMPUTE_32F_FAST_TF32: any layout, batched or not, any K.
      // E4M3 weights gain nothing from it: BF16 holds E4M3 values exactly, at twice the rate.
      if (fp8_weights || !float_input)
        return Status::error("TF32 GEMMs take FP32 operands (E4M3 weights run exactly in BF16)");
      return Status::ok();
    case GemmPrecision::kBf16:
      // Activations are cast to BF16 on the device (a BF16 one is read as it is); constant weights
      // converted once when planned, computed ones (activation x activation) cast on the device too.
      if (!float_input) return Status::error("the BF16 path casts FP32 activations or reads BF16 ones");
      if (!key.constant_weight && fp8_weights) return Status::error("E4M3 weights must be constant for the BF16 path");
      return Status::ok();
    case GemmPrecision::kFp8E4M3:
      if (!fp8_weights) return Status::error("FP8 GEMMs need E4M3 weights (insert-scales makes them)");
      if (key.layout != GemmLayout::kNT || shape.batch != 1) return Status::error("FP8 GEMMs are TN ([N,K] weights), unbatched");
      if (c.library != GemmLibrary::kLoka) {  // the tensor-core kernels' rule; LoKA's small-M kernel takes any K and N
        if (shape.k % 16 != 0) return Status::error("FP8 GEMM needs K a multiple of 16 (K=" + std::to_string(shape.k) + ")");
        if (shape.n % 16 != 0) return Status::error("FP8 GEMM needs N a multiple of 16 (N=" + std::to_string(shape.n) + ")");
      }
      if (key.input != DType::kFloat8E4M3FN && c.granularity != key.activation_scale)
        return Status::error(std::string("the node's activation scale is per ") + granularity_name(key.activation_scale));
      if (key.input == DType::kFloat8E4M3FN && c.granularity != ScaleGranularity::kTensor)
        return Status::error("an FP8 activation carries a per-tensor scale");
      return Status::ok();
    case GemmPrecision::kBf16x2:
      // Only a BF16 X is exact in BF16 (an FP32 one would need splitting too); the weights are
      // split once, when planned, from their host copy.
      if (key.input != DType::kBFloat16) return Status::error("the split-weight BF16 path reads a BF16 activation");
      if (fp8_weights || !key.constant_weight) return Status::error("the split-weight BF16 path needs constant FP32 weights");
      return Status::ok();
    case GemmPrecision::kFp8Emulated:
      if (!fp8_weights || !key.constant_weight) return Status::error("FP8 emulation needs constant E4M3 weights");
      if (c.algorithm != 0) return Status::error("the emulated path has one configuration");
      return Status::ok();
  }
  return Status::error("unknown precision");
}

}  // namespace loka::kernels
