// ============================================================================
// tests/fuzz/fuzz_einsum.cc — libFuzzer harness: an Einsum's equation and
// operand shapes -> parse_einsum_equation and `lower-einsum`.
//
// The equation is a string from the model file, parsed by hand-written code;
// the lowering then indexes operand dims by its letters. Any equation must be
// refused with a reason or lowered into a graph the verifier accepts, whatever
// the operands' ranks (which a hostile model need not make match the terms).
// Input: byte 0 = operand count (1 or 2), byte 1 / 2 = the operands' ranks
// (0-5), one byte per dim (size 1-8, or 0 for a symbolic dim), then the
// equation text.
// ============================================================================
#include <string>
#include <string_view>

#include "passes/canonicalize/lower_einsum.h"
#include "passes/ir/graph.h"
#include "passes/ir/verifier.h"
#include "passes/pass.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loka;
  size_t at = 0;
  const auto next = [&]() -> int { return at < size ? data[at++] : -1; };
  const int count_byte = next();
  if (count_byte < 0) return 0;
  const size_t operands = 1 + static_cast<size_t>(count_byte % 2);
  ir::Graph graph;
  graph.opsets[""] = 17;
  std::vector<ir::Value*> inputs;
  for (size_t i = 0; i < operands; ++i) {
    const int rank_byte = next();
    if (rank_byte < 0) return 0;
    ir::TensorType type;
    type.dtype = DType::kFloat32;
    type.shape.emplace();
    for (int d = 0; d < rank_byte % 6; ++d) {
      const int dim = next();
      if (dim < 0) return 0;
      ir::Dim value;
      if (dim % 9 == 0) value.symbol = "batch";
      else value.value = dim % 9;
      type.shape->push_back(value);
    }
    ir::Value* input = graph.add_value("x" + std::to_string(i), type);
    graph.add_input(input);
    inputs.push_back(input);
  }
  const std::string equation(reinterpret_cast<const char*>(data) + at, size - at);
  auto parsed = parse_einsum_equation(equation, operands);
  if (!parsed) fuzz::check_refusal(parsed.status(), /*one_line=*/false);

  ir::Node* einsum = graph.add_node("Einsum", inputs, 1, "einsum");
  einsum->mutable_attributes().set("equation", equation);
  graph.add_output(einsum->output(0));
  static const CompileSettings settings;
  PassContext context(settings, {});
  auto changed = make_lower_einsum_pass()->run(graph, context);
  if (!changed) fuzz::fail("lower-einsum failed instead of keeping the Einsum", changed.status().message());
  if (*changed && !parsed) fuzz::fail("an equation the parser refuses was lowered", equation);
  const Status valid = ir::verify_graph(graph);
  if (!valid) fuzz::fail("lower-einsum left an invalid graph", valid.message());
  return 0;
}
