// ============================================================================
// passes/dispatch/gemm_problems.cc — keys and per-bucket shapes of GEMM nodes.
// ============================================================================
#include "passes/dispatch/gemm_problems.h"

#include <cctype>
#include <charconv>

#include "kernels/registry/kernel_registry.h"

namespace loka::dispatch {
namespace {

using kernels::GemmKey;
using kernels::GemmLayout;
using kernels::GemmShape;

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? "," : "") + std::to_string(dims[i]);
  return text + "]";
}

int64_t int_attribute(const ir::Node& node, const char* name);

using ShapeFn = std::optional<GemmShape> (*)(const ir::Node&, int64_t);

std::optional<GemmShape> gemm_shape(const ir::Node& node, int64_t bucket) {
  const auto x = dims_at_bucket(node.input(0), bucket);
  const auto w = dims_at_bucket(node.input(1), bucket);
  if (!x || !w || x->size() != 2 || w->size() != 2) return std::nullopt;
  const bool trans_b = int_attribute(node, "transB") != 0;
  return GemmShape{(*x)[0], trans_b ? (*w)[0] : (*w)[1], (*x)[1], 1};
}

/// X [..., M, K] times op(W) (W, or Wᵀ stored [N, K] when `trans_b`) at one bucket: a 2-D W is one
/// GEMM over X's flattened leading rows; a W with X's rank and leading dims a strided batch of
/// [M,K] x op(W[b]) (MatMul of two activations, a batched FusedGemm: docs/loka_ops.md).
std::optional<GemmShape> product_shape(const ir::Node& node, int64_t bucket, bool trans_b) {
  const auto x = dims_at_bucket(node.input(0), bucket);
  const auto w = dims_at_bucket(node.input(1), bucket);
  if (!x || !w || x->size() < 2 || w->size() < 2) return std::nullopt;
  const int64_t k = x->back(), n = trans_b ? (*w)[w->size() - 2] : w->back();
  if ((trans_b ? w->back() : (*w)[w->size() - 2]) != k) return std::nullopt;
  if (w->size() == 2) return GemmShape{dims_product(*x, 0, x->size() - 1), n, k, 1};
  if (x->size() != w->size() || !std::equal(x->begin(), x->end() - 2, w->begin())) return std::nullopt;
  return GemmShape{(*x)[x->size() - 2], n, k, dims_product(*x, 0, x->size() - 2)};
}

std::optional<GemmShape> matmul_shape(const ir::Node& node, int64_t bucket) { return product_shape(node, bucket, false); }

std::optional<GemmShape> fused_gemm_shape(const ir::Node& node, int64_t bucket) {
  return product_shape(node, bucket, int_attribute(node, "transB") != 0);
}

std::optional<GemmShape> quantized_gemm_shape(const ir::Node& node, int64_t bucket) {
  const auto x = dims_at_bucket(node.input(0), bucket);
  const auto w = dims_at_bucket(node.input(1), bucket);
  if (!x || !w || w->size() != 2 || x->empty() || (*w)[1] <= 0) return std::nullopt;
  return GemmShape{dims_product(*x, 0, x->size()) / (*w)[1], (*w)[0], (*w)[1], 1};
}

int64_t int_attribute(const ir::Node& node, const char* name) {
  const Result<int64_t> value = node.attributes().get_int(name, 0);
  return value.is_ok() ? value.value() : 0;
}

std::string string_attribute(const ir::Node& node, const char* name, const char* fallback) {
  const Result<std::string> value = node.attributes().get_string(name, std::string(fallback));
  return value.is_ok() ? value.value() : fallback;
}

DType dtype_of(const ir::Value* value) { return value ? value->type().dtype : DType::kUndefined; }

cuda::GemmEpilogue activation_of(const ir::Node& node) {
  const std::string activation = string_attribute(node, "activation", "none");
  return activation == "relu" ? cuda::GemmEpilogue::kRelu
         : activation == "gelu" ? cuda::GemmEpilogue::kGelu
                                : cuda::GemmEpilogue::kNone;
}

}  // namespace

std::optional<int64_t> dim_at_bucket(const ir::Dim& dim, int64_t bucket) {
  if (dim.is_known()) return dim.value;
  if (dim.symbol.empty()) return std::nullopt;
  // A product of symbols and integers ("batch", "batch*26", "2*batch").
  int64_t size = 1;
  size_t start = 0;
  while (start <= dim.symbol.size()) {
    size_t end = dim.symbol.find('*', start);
    if (end == std::string::npos) end = dim.symbol.size();
    const std::string factor = dim.symbol.substr(start, end - start);
    if (factor.empty()) return std::nullopt;
    if (std::isdigit(static_cast<unsigned char>(factor[0]))) {
      int64_t value = 0;
      const auto [stop, error] = std::from_chars(factor.data(), factor.data() + factor.size(), value);
      if (error != std::errc() || stop != factor.data() + factor.size()) return std::nullopt;
      size *= value;
    } else {
      for (char c : factor)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return std::nullopt;
      size *= bucket;
    }
    start = end + 1;
  }
  return size;
}

int64_t dims_product(const std::vector<int64_t>& dims, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= dims[i];
  return p;
}

std::optional<std::vector<int64_t>> dims_at_bucket(const ir::Value* value, int64_t bucket) {
  if (value == nullptr || !value->type().has_rank()) return std::nullopt;
  std::vector<int64_t> dims;
  for (const ir::Dim& dim : *value->type().shape) {
    const std::optional<int64_t> size = dim_at_bucket(dim, bucket);
    if (!size) return std::nullopt;
    dims.push_back(*size);
  }
  return dims;
}

std::optional<GemmProblem> describe_gemm(const ir::Node& node, const std::vector<int64_t>& buckets) {
  GemmProblem problem;
  problem.node = &node;
  GemmKey& key = problem.key;
  ShapeFn shape_fn = nullptr;
  key.op = node.op_type();
  key.output = DType::kFloat32;
  if (node.is("Gemm")) {
    if (dtype_of(node.input(0)) != DType::kFloat32 || dtype_of(node.input(1)) != DType::kFloat32) return std::nullopt;
    if (int_attribute(node, "transA") != 0) return std::nullopt;
    key.layout = int_attribute(node, "transB") != 0 ? GemmLayout::kNT : GemmLayout::kNN;
    shape_fn = gemm_shape;
  } else if (node.is("MatMul")) {
    if (dtype_of(node.input(0)) != DType::kFloat32 || dtype_of(node.input(1)) != DType::kFloat32) return std::nullopt;
    const ir::Value* w = node.input(1);
    key.layout = w && w->type().rank() == 2 ? GemmLayout::kNN : GemmLayout::kBatched;
    shape_fn = matmul_shape;
  } else if (node.is("FusedGemm", "ai.loka")) {
    // X may be BF16 (store-activations-bf16): the BF16 candidates read it as it is, the FP32 and
    // TF32 ones after widening it (kernels/registry/gemm_kernel_key.h).
    const DType x = dtype_of(node.input(0));
    if ((x != DType::kFloat32 && x != DType::kBFloat16) || dtype_of(node.input(1)) != DType::kFloat32) return std::nullopt;
    key.input = x;
    const ir::Value* w = node.input(1);
    key.layout = kernels::gemm_layout(w && w->type().rank() > 2, int_attribute(node, "transB") != 0);
    key.bias = node.input(2) != nullptr;
    key.epilogue = activation_of(node);
    key.residual = node.input(3) != nullptr;
    shape_fn = fused_gemm_shape;
  } else if (node.is("QuantizedGemm", "ai.loka")) {
    if (dtype_of(node.input(1)) != DType::kFloat8E4M3FN) return std::nullopt;
    // BF16 activation storage (store-activations-bf16): cuBLASLt's FP8 candidates quantize a BF16
    // X and write a BF16 Y, with a residual in Y's dtype. A BF16 Multiplier (the DCN cross), or a
    // residual held in the other dtype, is the node's own op's: the runtime runs it whatever a
    // choice here would say.
    const auto bf16 = [](const ir::Value* value) { return dtype_of(value) == DType::kBFloat16; };
    const bool bf16_y = node.outputs().size() > 0 && node.output(0) != nullptr && bf16(node.output(0));
    if (bf16(node.input(5)) || (node.input(6) != nullptr && bf16(node.input(6)) != bf16_y)) {
      problem.reason = "BF16 activation storage with a BF16 Multiplier or a Residual held in another dtype than Y: "
                       "the CUDA runtime runs QuantizedGemm's own FP8 GEMM and epilogue";
      return problem;
    }
    const DType x = dtype_of(node.input(0));
    key.input = x == DType::kFloat8E4M3FN || x == DType::kBFloat16 ? x : DType::kFloat32;
    key.output = bf16_y ? DType::kBFloat16 : DType::kFloat32;
    key.weight = DType::kFloat8E4M3FN;
    const std::string recipe = string_attribute(node, "act_recipe", "tensor");
    key.activation_scale = key.input == DType::kFloat8E4M3FN || recipe != "row" ? kernels::ScaleGranularity::kTensor
                                                                                : kernels::ScaleGranularity::kRow;
    key.layout = GemmLayout::kNT;
    key.bias = node.input(3) != nullptr;
    key.epilogue = activation_of(node);
    // A Residual alone rides in the candidates; with a Multiplier (the DCN cross) the runtime keeps
    // its own op and the choice only ranks the GEMM.
    key.residual = node.input(6) != nullptr && node.input(5) == nullptr;
    shape_fn = quantized_gemm_shape;
  } else {
    return std::nullopt;
  }
  key.constant_weight = node.input(1) != nullptr && node.input(1)->is_initializer();
  if (key.op == "Gemm" && node.input(2) != nullptr) {
    // C as a bias [N] / [1,N] is fused; any other C is a separate broadcast add.
    const auto shape = gemm_shape(node, buckets.empty() ? 1 : buckets.front());
    const auto c = dims_at_bucket(node.input(2), buckets.empty() ? 1 : buckets.front());
    key.bias = shape && c && dims_product(*c, 0, c->size()) == shape->n && (c->size() == 1 || (c->size() == 2 && (*c)[0] == 1));
  }
  for (int64_t bucket : buckets) {
    const std::optional<GemmShape> shape = shape_fn(node, bucket);
    if (!shape || shape->m <= 0 || shape->n <= 0 || shape->k <= 0) {
      problem.shapes.clear();
      const auto x = dims_at_bucket(node.input(0), bucket), w = dims_at_bucket(node.input(1), bucket);
      const bool shared_left = node.is("MatMul") && x && w && x->size() == 2 && w->size() > 2;
      problem.reason = !x || !w ? "shapes unknown at batch " + std::to_string(bucket) + " (run infer-shapes first)"
                       : shared_left
                           ? "a matrix on the left of every sample (" + dims_text(*x) + " x " + dims_text(*w) +
                                 "): no candidates to choose from; the CUDA runtime runs it in FP32 (LoKA's "
                                 "shared-left kernel for K <= 64, else a strided-batched cuBLASLt GEMM)"
                           : "no GEMM kernel for this operand form (" + dims_text(*x) + " x " + dims_text(*w) +
                                 ": e.g. broadcast batch dims)";
      return problem;
    }
    problem.shapes.emplace_back(bucket, *shape);
  }
  // BF16 storage that cuBLASLt's FP8 kernels do not take (K or N not a multiple of 16: the runtime
  // runs the node's FP32 fallback; a BF16 Y after the exact GELU, or with a residual after its
  // activation: its own op): no candidate, and the reason their rule gives. (K and N do not change
  // with the bucket: one shape tells.)
  const bool bf16_storage = key.input == DType::kBFloat16 || key.output == DType::kBFloat16;
  if (key.weight == DType::kFloat8E4M3FN && bf16_storage && !problem.shapes.empty()) {
    const kernels::GemmShape shape = problem.shapes.front().second;
    if (!kernels::has_gemm_candidate(key, shape)) {
      kernels::GemmCandidate fp8;
      fp8.precision = kernels::GemmPrecision::kFp8E4M3;
      fp8.granularity = key.input == DType::kFloat8E4M3FN ? kernels::ScaleGranularity::kTensor : key.activation_scale;
      problem.shapes.clear();
      problem.reason = "BF16 activation storage that cuBLASLt's FP8 kernels do not take (" +
                       kernels::can_implement(fp8, key, shape).message() +
                       "): the CUDA runtime runs QuantizedGemm's own op or its FP32 fallback";
    }
  }
  return problem;
}

}  // namespace loka::dispatch
