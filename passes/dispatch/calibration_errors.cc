// ============================================================================
// passes/dispatch/calibration_errors.cc — GEMM errors per arithmetic on the
// node's calibration inputs.
// ============================================================================
#include "passes/dispatch/calibration_errors.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <vector>

#include "kernels/cpu/parallel_rows.h"
#include "loka/bfloat16.h"
#include "passes/probe/fake_quantize.h"
#include "passes/probe/tapped_run.h"

namespace loka::dispatch {
namespace {

using kernels::GemmLayout;

float round_bf16(float v) { return bf16_to_float(float_to_bf16(v)); }

/// TF32: float32 with 10 stored mantissa bits, rounded to nearest even.
float round_tf32(float v) {
  if (!std::isfinite(v)) return v;
  const uint32_t bits = float_bits(v);
  const uint32_t rounded = (bits + 0xFFFu + ((bits >> 13) & 1u)) & ~0x1FFFu;
  return float_from_bits(rounded);
}

/// The four operand versions of one product, W laid out [N, K] per batch (dot products run along K).
struct Operands {
  std::vector<float> exact, fp8, bf16, tf32;
};

/// Σ (y - r)² and Σ r² of one arithmetic.
struct SquaredSums {
  double diff = 0, reference = 0;
  double rel_l2() const { return reference > 0 ? std::sqrt(diff / reference) : std::sqrt(diff); }
};

/// The first `rows` rows of row-major [*, cols] `values` with `round` applied.
template <typename Round>
std::vector<float> first_rows(std::span<const float> values, int64_t rows, int64_t cols, Round round) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < out.size(); ++i) out[i] = round(values[i]);
  return out;
}

/// W of batch `p` as [N, K] (transposing a [K, N] layout), with `round` applied.
template <typename Round>
std::vector<float> weight_nk(std::span<const float> w, int64_t p, int64_t k, int64_t n, bool stored_nk, Round round) {
  std::vector<float> out(static_cast<size_t>(n * k));
  const std::span<const float> matrix = w.subspan(static_cast<size_t>(p * k * n), static_cast<size_t>(k * n));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < k; ++i)
      out[static_cast<size_t>(j * k + i)] = round(stored_nk ? matrix[static_cast<size_t>(j * k + i)]
                                                            : matrix[static_cast<size_t>(i * n + j)]);
  return out;
}

}  // namespace

Result<Fp8RecipeSpec::Kind> parse_fp8_recipe(const std::string& name) {
  if (name == "e4m3_tensor") return Fp8RecipeSpec::Kind::kE4M3Tensor;
  if (name == "e4m3_row") return Fp8RecipeSpec::Kind::kE4M3Row;
  if (name == "e5m2_tensor") return Fp8RecipeSpec::Kind::kE5M2Tensor;
  return Status::error("unknown FP8 recipe '" + name + "' (expected e4m3_tensor, e4m3_row or e5m2_tensor)");
}

Result<FamilyErrors> gemm_family_errors(const std::string& node, const Tensor& stored_x, const Tensor& w,
                                        GemmLayout layout, const Fp8RecipeSpec& recipe, int64_t max_rows) {
  const std::string where = "node '" + node + "': ";
  // A BF16 X (held so by store-activations-bf16) is what every family reads, widened exactly;
  // the BF16 family's own rounding of it then changes nothing.
  const Tensor x = stored_x.dtype() == DType::kBFloat16 ? Tensor::from_floats(stored_x.shape(), stored_x.to_floats())
                                                        : stored_x;
  if (x.dtype() != DType::kFloat32 || w.dtype() != DType::kFloat32)
    return Status::error(where + "calibration errors need FP32 operands");
  if (x.rank() < 2 || w.rank() < 2)
    return Status::error(where + "calibration errors need matrices, got " + shape_to_string(x.shape()) + " x " +
                         shape_to_string(w.shape()));
  const int64_t k = x.dim(x.rank() - 1);
  const int64_t m = x.dim(x.rank() - 2);
  const bool stored_nk = stores_w_transposed(layout);
  const int64_t w_k = stored_nk ? w.dim(w.rank() - 1) : w.dim(w.rank() - 2);
  const int64_t n = stored_nk ? w.dim(w.rank() - 2) : w.dim(w.rank() - 1);
  const int64_t batches = is_batched(layout) && m > 0 ? x.element_count() / (m * k) : 1;
  const int64_t w_batches = w.element_count() / std::max<int64_t>(1, w_k * n);
  if (w_k != k || (is_batched(layout) ? w_batches != batches : w_batches != 1))
    return Status::error(where + "operands " + shape_to_string(x.shape()) + " and " + shape_to_string(w.shape()) +
                         " do not multiply as its GEMM");

  if (x.element_count() == 0 || w.element_count() == 0) return FamilyErrors{};  // nothing to measure

  // The FP8 operands, quantized over the whole tensors as the Probe quantizes them.
  using Kind = Fp8RecipeSpec::Kind;
  Tensor x8, w8;
  if (!recipe.activation_matmul) {
    if (recipe.kind == Kind::kE5M2Tensor) return Status::error(where + "e5m2_tensor is a recipe of activation MatMuls");
    x8 = recipe.kind == Kind::kE4M3Row ? probe::quantize_rows(x) : probe::quantize_tensor(x, recipe.scale_a);
    w8 = probe::quantize_weight_channels(w, stored_nk);
  } else if (recipe.kind == Kind::kE5M2Tensor) {
    x8 = probe::quantize_tensor(x, recipe.scale_a, cpu::Fp8Format::kE5M2);
    w8 = probe::quantize_tensor(w, recipe.scale_b, cpu::Fp8Format::kE5M2);
  } else if (recipe.kind == Kind::kE4M3Row) {
    x8 = probe::quantize_rows(x);
    w8 = probe::quantize_weight_channels(w, stored_nk);
  } else {
    x8 = probe::quantize_tensor(x, recipe.scale_a);
    w8 = probe::quantize_tensor(w, recipe.scale_b);
  }

  // The sample: leading rows of X; whole batches of a batched MatMul.
  const int64_t all_rows = x.element_count() / std::max<int64_t>(1, k);  // rows over every leading dim
  const bool batched = is_batched(layout);
  const int64_t wanted = std::max<int64_t>(1, max_rows);
  const int64_t used_batches =
      batched ? std::clamp<int64_t>((wanted + m - 1) / std::max<int64_t>(1, m), 1, batches) : 1;
  const int64_t rows = batched ? used_batches * m : std::min(all_rows, wanted);
  const auto keep = [](float v) { return v; };
  Operands xs{first_rows(x.values<float>(), rows, k, keep), first_rows(x8.values<float>(), rows, k, keep),
              first_rows(x.values<float>(), rows, k, round_bf16), first_rows(x.values<float>(), rows, k, round_tf32)};
  std::vector<Operands> ws;
  for (int64_t p = 0; p < used_batches; ++p)
    ws.push_back(Operands{weight_nk(w.values<float>(), p, k, n, stored_nk, keep),
                          weight_nk(w8.values<float>(), p, k, n, stored_nk, keep),
                          weight_nk(w.values<float>(), p, k, n, stored_nk, round_bf16),
                          weight_nk(w.values<float>(), p, k, n, stored_nk, round_tf32)});

  // Each row's sums are kept and added in row order once all rows are done: the same figures
  // whatever the thread count or which thread finishes first, so the plan stays byte-identical.
  std::vector<std::array<SquaredSums, 3>> per_row(static_cast<size_t>(rows));  // fp8, bf16, tf32
  cpu::parallel_rows(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, n)), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const Operands& wp = ws[static_cast<size_t>(batched ? r / m : 0)];
      const size_t xo = static_cast<size_t>(r * k);
      std::array<SquaredSums, 3>& sums = per_row[static_cast<size_t>(r)];
      for (int64_t j = 0; j < n; ++j) {
        const size_t wo = static_cast<size_t>(j * k);
        double exact = 0, q8 = 0, q16 = 0, q32 = 0;
        for (int64_t i = 0; i < k; ++i) {
          exact += static_cast<double>(xs.exact[xo + i]) * wp.exact[wo + i];
          q8 += static_cast<double>(xs.fp8[xo + i]) * wp.fp8[wo + i];
          q16 += static_cast<double>(xs.bf16[xo + i]) * wp.bf16[wo + i];
          q32 += static_cast<double>(xs.tf32[xo + i]) * wp.tf32[wo + i];
        }
        const double tested[3] = {q8, q16, q32};
        for (size_t f = 0; f < 3; ++f) {
          sums[f].diff += (tested[f] - exact) * (tested[f] - exact);
          sums[f].reference += exact * exact;
        }
      }
    }
  });
  std::array<SquaredSums, 3> total;
  for (const std::array<SquaredSums, 3>& row : per_row)
    for (size_t f = 0; f < 3; ++f) {
      total[f].diff += row[f].diff;
      total[f].reference += row[f].reference;
    }
  const SquaredSums &fp8 = total[0], &bf16 = total[1], &tf32 = total[2];
  FamilyErrors errors;
  errors.fp8 = fp8.rel_l2();
  errors.bf16 = bf16.rel_l2();
  errors.tf32 = tf32.rel_l2();
  errors.rows = rows;
  return errors;
}

Result<ErrorsByNode> measure_calibration_errors(const ir::Graph& graph, std::span<const CalibrationGemm> gemms,
                                                const DataSetReader& reader, const CalibrationErrorOptions& options) {
  ErrorsByNode errors;
  if (gemms.empty() || reader.size() == 0) return errors;
  // Every operand that is not a constant is tapped; slot -1 marks an initializer.
  std::vector<std::string> tapped;
  std::vector<std::pair<int, int>> slots;  ///< per gemm: (X, W) positions in `tapped`
  const auto tap = [&](const ir::Value* value) {
    if (value->is_initializer()) return -1;
    tapped.push_back(value->name());
    return static_cast<int>(tapped.size() - 1);
  };
  for (const CalibrationGemm& gemm : gemms) {
    if (gemm.node->inputs().size() < 2 || gemm.node->input(0) == nullptr || gemm.node->input(1) == nullptr)
      return Status::error("node '" + gemm.node->name() + "': a GEMM needs inputs X and W");
    const int x = tap(gemm.node->input(0));
    slots.emplace_back(x, tap(gemm.node->input(1)));
  }
  probe::TappedRunOptions run;
  run.device = options.device;
  run.max_rows = options.max_rows;
  run.model_name = "dispatch calibration model";
  LOKA_RETURN_IF_ERROR(probe::run_tapped(
      graph, tapped, reader, /*batches=*/1, run, [&](const probe::TappedBatch& batch) -> Status {
        for (size_t g = 0; g < gemms.size(); ++g) {
          const ir::Node& node = *gemms[g].node;
          const auto operand = [&](int slot, int input) -> const Tensor& {
            return slot >= 0 ? batch.values[static_cast<size_t>(slot)] : *node.input(input)->initializer();
          };
          LOKA_ASSIGN_OR_RETURN(FamilyErrors measured,
                                gemm_family_errors(node.name(), operand(slots[g].first, 0), operand(slots[g].second, 1),
                                                   gemms[g].layout, gemms[g].recipe, options.max_rows));
          errors[node.name()] = measured;
        }
        return Status::ok();
      }));
  return errors;
}

}  // namespace loka::dispatch
