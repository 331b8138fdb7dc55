// ============================================================================
// runtime/ops/probe_ops.cc — ai.loka.ProbeFakeQuant on the CPU (docs/loka_ops.md).
//
// The reference the CUDA kernel is checked against: the same emulation
// routines (kernels/cpu/fp8_quantize.h) the Probe's CPU path applies through
// its observer, so both paths quantize an operand to the same bits.
// ============================================================================
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/fp8_quantize.h"
#include "loka/bfloat16.h"
#include "runtime/op_kernel.h"
#include "runtime/ops/op_helpers.h"
#include "runtime/ops/probe_fake_quant_spec.h"
#include "runtime/ops/register_all.h"

namespace loka {

Result<ProbeFakeQuantSpec> parse_probe_fake_quant(const Attributes& attributes) {
  ProbeFakeQuantSpec spec;
  LOKA_ASSIGN_OR_RETURN(spec.site, attributes.get_int("site"));
  if (spec.site < 0) return Status::error("attribute 'site' must be >= 0, got " + std::to_string(spec.site));
  LOKA_ASSIGN_OR_RETURN(const std::vector<int64_t> forms, attributes.get_ints("forms"));
  LOKA_ASSIGN_OR_RETURN(const std::vector<int64_t> formats, attributes.get_ints("formats"));
  LOKA_ASSIGN_OR_RETURN(const std::vector<float> scales, attributes.get_floats("scales"));
  if (forms.size() != kProbeRecipes || formats.size() != kProbeRecipes || scales.size() != kProbeRecipes)
    return Status::error("attributes 'forms', 'formats' and 'scales' must have " + std::to_string(kProbeRecipes) +
                         " entries each (one per recipe)");
  for (size_t r = 0; r < kProbeRecipes; ++r) {
    if (forms[r] < 0 || forms[r] > static_cast<int64_t>(FakeQuantForm::kBFloat16))
      return Status::error("attribute 'forms'[" + std::to_string(r) + "] = " + std::to_string(forms[r]) +
                           ": expected 0 (identity), 1 (tensor), 2 (rows), 3 (columns) or 4 (bf16)");
    if (formats[r] != 0 && formats[r] != 1)
      return Status::error("attribute 'formats'[" + std::to_string(r) + "] = " + std::to_string(formats[r]) +
                           ": expected 0 (E4M3FN) or 1 (E5M2)");
    FakeQuantRecipe& recipe = spec.recipes[r];
    recipe.form = static_cast<FakeQuantForm>(forms[r]);
    recipe.e5m2 = formats[r] == 1;
    recipe.scale = scales[r];
    if (recipe.form == FakeQuantForm::kTensor && !(recipe.scale > 0.0f && std::isfinite(recipe.scale)))
      return Status::error("attribute 'scales'[" + std::to_string(r) + "] must be finite and > 0 for a tensor recipe");
  }
  return spec;
}

namespace {

Status run_probe_fake_quant(const ProbeFakeQuantSpec& spec, std::span<const Tensor> in, std::span<Tensor> out,
                            KernelContext& context) {
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 0, "X"));
  LOKA_RETURN_IF_ERROR(ops::require_input(in, 1, "Mode"));
  const Tensor& x = in[0];
  const Tensor& mode = in[1];
  LOKA_RETURN_IF_ERROR(ops::require_float32(x, "X"));
  if (mode.dtype() != DType::kInt32 || mode.rank() != 1)
    return Status::error("Mode must be a 1-D INT32 tensor, got " + std::string(dtype_name(mode.dtype())) + " " +
                         shape_to_string(mode.shape()));
  if (spec.site >= mode.dim(0))
    return Status::error("attribute 'site' = " + std::to_string(spec.site) + " is outside Mode's " +
                         std::to_string(mode.dim(0)) + " entries");
  const int32_t selected = mode.data<int32_t>()[spec.site];
  if (selected < 0 || selected > static_cast<int32_t>(kProbeRecipes))
    return Status::error("Mode[" + std::to_string(spec.site) + "] = " + std::to_string(selected) + ": expected 0.." +
                         std::to_string(kProbeRecipes));
  LOKA_ASSIGN_OR_RETURN(out[0], context.allocate(DType::kFloat32, x.shape()));
  std::span<float> y = out[0].values<float>();
  std::copy(x.values<float>().begin(), x.values<float>().end(), y.begin());
  if (selected == 0) return Status::ok();
  const FakeQuantRecipe& recipe = spec.recipes[static_cast<size_t>(selected - 1)];
  const cpu::Fp8Format format = recipe.e5m2 ? cpu::Fp8Format::kE5M2 : cpu::Fp8Format::kE4M3FN;
  const int64_t cols = x.rank() ? x.dim(x.rank() - 1) : 1;
  switch (recipe.form) {
    case FakeQuantForm::kIdentity: break;
    case FakeQuantForm::kTensor: cpu::fake_quantize_per_tensor(y, recipe.scale, format); break;
    case FakeQuantForm::kRows:
      if (cols > 0) cpu::fake_quantize_per_row(y, x.element_count() / cols, cols, format);
      break;
    case FakeQuantForm::kColumns: {
      if (x.rank() < 2) return Status::error("a columns recipe needs X of rank >= 2, got " + shape_to_string(x.shape()));
      const int64_t k = x.dim(x.rank() - 2);
      const int64_t matrix = k * cols;
      for (int64_t start = 0; matrix > 0 && start < x.element_count(); start += matrix)
        cpu::fake_quantize_per_column(y.subspan(static_cast<size_t>(start), static_cast<size_t>(matrix)), k, cols, format);
      break;
    }
    case FakeQuantForm::kBFloat16:
      for (float& v : y) v = bf16_to_float(float_to_bf16(v));
      break;
  }
  return Status::ok();
}

Result<std::unique_ptr<OpKernel>> make_probe_fake_quant(const KernelInit& init) {
  if (init.input_count != 2 || init.output_count != 1) return Status::error("takes X and Mode, and has one output");
  LOKA_ASSIGN_OR_RETURN(const ProbeFakeQuantSpec spec, parse_probe_fake_quant(init.attributes));
  return make_function_kernel([spec](std::span<const Tensor> in, std::span<Tensor> out, KernelContext& context) {
    return run_probe_fake_quant(spec, in, out, context);
  });
}

}  // namespace

void register_probe_ops(OpRegistry& registry) { registry.add("ai.loka", "ProbeFakeQuant", 1, 1, make_probe_fake_quant); }

}  // namespace loka
