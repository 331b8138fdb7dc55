// ============================================================================
// runtime/cuda/ops/output_pitch.cc — which steps will write pitched rows.
// ============================================================================
#include "runtime/cuda/ops/output_pitch.h"

#include <string>

namespace loka::cuda {

bool gemm_writes_pitched_rows(const PlanStep& step, const BucketShapes& shapes) {
  const auto present = [&](size_t i) { return i < step.inputs.size() && step.inputs[i] != kNoValue; };
  const auto shape = [&](size_t i) -> const Shape& { return shapes.shapes[static_cast<size_t>(step.inputs[i])]; };
  const auto exact_gelu = [&] {
    const Result<std::string> activation = step.attributes.get_string("activation", std::string("none"));
    return !activation || *activation == "gelu";
  };
  if (step.domain.empty() || step.domain == "ai.onnx") {
    if (step.op_type == "Gemm") {
      if (!present(2)) return true;
      const Shape& c = shape(2);  // a bias [N] or [1, N] rides in the GEMM; another C is added after it
      const int64_t n = step.outputs.empty() || step.outputs[0] == kNoValue
                            ? -1
                            : shapes.shapes[static_cast<size_t>(step.outputs[0])].back();
      return element_count(c) == n && (c.size() == 1 || (c.size() == 2 && c[0] == 1));
    }
    if (step.op_type == "MatMul") {
      if (!present(1)) return false;
      const Shape& b = shape(1);  // one weight for every row, not a strided batch
      return b.size() == 2 || (b.size() > 2 && element_count(b) == b[b.size() - 2] * b.back());
    }
    return false;
  }
  if (step.domain != "ai.loka") return false;
  if (step.op_type == "FusedGemm") return !present(3) && !exact_gelu();
  if (step.op_type == "QuantizedGemm") return !present(5) && !present(6) && !exact_gelu();
  return false;
}

int64_t pitched_row_width(const PlanStep& step, const BucketShapes& shapes) {
  if (step.outputs.empty() || step.outputs[0] == kNoValue) return 0;
  const Shape& out = shapes.shapes[static_cast<size_t>(step.outputs[0])];
  if (out.empty()) return 0;
  if (step.domain == "ai.loka" && step.op_type == "EmbeddingBags")
    return out.size() == 3 ? out[1] * out[2] : 0;
  return gemm_writes_pitched_rows(step, shapes) ? out.back() : 0;
}

}  // namespace loka::cuda
