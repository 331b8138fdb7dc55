// ============================================================================
// tests/passes/canonicalize_lower_einsum_test.cc — `lower-einsum`: the golden
// forms (a batched contraction, token mixing and a projection with a
// symbolic batch are each one MatMul named after the Einsum; sums and
// transposes of one operand), numerics against a naive einsum on fresh random inputs for every
// letter class (batch, left, right, contract, summed, outer product, implicit
// output), the equation parser's refusals, and the negative twins that stay
// Einsum (ellipsis, diagonal, three operands, two unknown merged sizes).
// ============================================================================
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "canonicalize_test_util.h"
#include "mods_test_util.h"
#include "passes/canonicalize/lower_einsum.h"
#include "test_support.h"

namespace loka {
namespace {

using testing::check_lines;

testing::Rewrite lower(const std::string& text) {
  return testing::apply_pass_or_fail(text, lower_einsum_pass_info(), make_lower_einsum_pass());
}

std::string dims_text(const Shape& shape) {
  std::string out;
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out;
}

/// A graph computing Einsum(equation) of inputs with the given static shapes.
std::string einsum_graph(const std::string& equation, const std::vector<Shape>& shapes, int opset = 17) {
  std::string text = "graph \"t\" {\n  opset \"\" " + std::to_string(opset) + "\n";
  std::string operands;
  for (size_t i = 0; i < shapes.size(); ++i) {
    text += "  input %x" + std::to_string(i) + " : f32[" + dims_text(shapes[i]) + "]\n";
    operands += (i ? ", %x" : "%x") + std::to_string(i);
  }
  return text + "  %y = Einsum(" + operands + ") {equation = \"" + equation + "\"} @\"mix\"\n  output %y\n}\n";
}

/// The einsum by definition: every assignment of the letters, products summed into the output.
Tensor naive_einsum(const EinsumEquation& eq, const std::vector<Tensor>& inputs) {
  std::map<char, int64_t> size;
  for (size_t i = 0; i < inputs.size(); ++i)
    for (size_t a = 0; a < eq.inputs[i].size(); ++a) size[eq.inputs[i][a]] = inputs[i].dim(static_cast<int>(a));
  std::string letters;
  for (const auto& [c, s] : size) letters += c;
  Shape out_shape;
  for (char c : eq.output) out_shape.push_back(size[c]);
  std::vector<double> sums(static_cast<size_t>(element_count(out_shape)), 0.0);
  std::map<char, int64_t> at;
  for (char c : letters) at[c] = 0;
  const auto offset = [&](const std::string& term, const Shape& shape) {
    int64_t o = 0;
    for (size_t a = 0; a < term.size(); ++a) o = o * shape[a] + at[term[a]];
    return o;
  };
  while (true) {
    double product = 1.0;
    for (size_t i = 0; i < inputs.size(); ++i)
      product *= inputs[i].data<float>()[offset(eq.inputs[i], inputs[i].shape())];
    sums[static_cast<size_t>(offset(eq.output, out_shape))] += product;
    size_t d = letters.size();
    while (d-- > 0) {
      if (++at[letters[d]] < size[letters[d]]) break;
      at[letters[d]] = 0;
    }
    if (d == static_cast<size_t>(-1)) break;
  }
  std::vector<float> values(sums.begin(), sums.end());
  return Tensor::from_floats(out_shape, values);
}

/// Lowers Einsum(equation) over fresh random inputs of `shapes`; expects it lowered and the
/// CPU runtime's result of the lowered graph within FP32 summation error of the naive einsum.
void expect_lowered_and_exact(const std::string& equation, const std::vector<Shape>& shapes, unsigned seed,
                              const std::string& graph_text = "") {
  SCOPED_TRACE(equation);
  auto r = lower(graph_text.empty() ? einsum_graph(equation, shapes) : graph_text);
  ASSERT_TRUE(r.run.changed);
  EXPECT_EQ(r.run.statistics["einsum-lowered"], 1);
  EXPECT_EQ(check_lines(r.printed, "CHECK-NOT: Einsum"), "");
  std::mt19937 rng(seed);
  std::vector<Tensor> inputs;
  for (const Shape& shape : shapes) inputs.push_back(testing::random_tensor(rng, shape));
  auto outputs = testing::run_graph(*r.after, inputs);
  ASSERT_TRUE(outputs) << outputs.status().message();
  const Tensor expected = naive_einsum(*parse_einsum_equation(equation, shapes.size()), inputs);
  ASSERT_EQ((*outputs)[0].shape(), expected.shape());
  EXPECT_LE(testing::max_abs_difference((*outputs)[0], expected), 1e-5f);
}

TEST(LowerEinsum, ABatchedContractionIsOneMatMulNamedAfterTheEinsum) {
  auto r = lower(einsum_graph("bij,bjk->bik", {{5, 3, 4}, {5, 4, 2}}));
  EXPECT_TRUE(r.run.changed);
  EXPECT_EQ(check_lines(r.printed, "CHECK: MatMul(%x0, %x1) : undefined[*] @\"mix\"\nCHECK-NOT: Transpose\n"
                                   "CHECK-NOT: Reshape\nCHECK-NOT: Einsum"),
            "");
}

TEST(LowerEinsum, TokenMixingIsOneMatMulOfTheMatrixOnTheLeft) {
  // Wukong's W·X written as einsum, "nm,bmd->bnd": MatMul broadcasts W over the samples (the
  // CUDA runtime's shared-left kernel), with no Transpose or Reshape around it.
  auto r = lower(einsum_graph("nm,bmd->bnd", {{6, 4}, {3, 4, 8}}));
  EXPECT_TRUE(r.run.changed);
  EXPECT_EQ(check_lines(r.printed, "CHECK: MatMul(%x0, %x1) : undefined[*] @\"mix\"\nCHECK-NOT: Transpose\n"
                                   "CHECK-NOT: Reshape\nCHECK-NOT: Einsum"),
            "");
}

TEST(LowerEinsum, AProjectionWithASymbolicBatchKeepsItsLeadingDims) {
  const std::string text = R"(graph "t" {
  opset "" 17
  input %x0 : f32[batch,7,16]
  input %x1 : f32[16,5]
  %y = Einsum(%x0, %x1) {equation = "bnd,dk->bnk"} @"proj"
  output %y
})";
  auto r = lower(text);
  EXPECT_TRUE(r.run.changed);
  // [batch, 7, 16] x [16, 5] is already a MatMul: no Reshape hides the symbolic batch.
  EXPECT_EQ(check_lines(r.printed, "CHECK: MatMul(%x0, %x1) : undefined[*] @\"proj\"\nCHECK-NOT: Reshape"), "");
  for (int64_t batch : {1, 3}) expect_lowered_and_exact("bnd,dk->bnk", {{batch, 7, 16}, {16, 5}}, 9, text);
}

TEST(LowerEinsum, EveryLetterClassMatchesTheNaiveEinsum) {
  unsigned seed = 1;
  for (const auto& [equation, shapes] : std::vector<std::pair<std::string, std::vector<Shape>>>{
           {"bij,bjk->bik", {{3, 4, 5}, {3, 5, 2}}},
           {"bnd,bmd->bnm", {{2, 4, 6}, {2, 3, 6}}},     // the second operand transposed
           {"nm,bmd->bnd", {{5, 4}, {3, 4, 7}}},         // a matrix on the left
           {"bnd,dk->bnk", {{2, 3, 4}, {4, 5}}},         // a projection
           {"bhqd,bhkd->bhqk", {{2, 3, 4, 5}, {2, 3, 6, 5}}},  // two batch letters
           {"bij,bjk->bki", {{2, 3, 4}, {2, 4, 5}}},     // a transposed output
           {"abc,cd->dba", {{2, 3, 4}, {4, 5}}},         // left letters split around the result
           {"ijk,jkl->il", {{3, 4, 2}, {4, 2, 5}}},      // two contracted letters (one K)
           {"bi,bj->bij", {{3, 4}, {3, 5}}},             // an outer product per sample
           {"bmn,bk->bmnk", {{2, 3, 4}, {2, 5}}},        // two left letters merged into M
           {"mn,bnk->bmk", {{4, 6}, {3, 6, 5}}},         // a matrix on the left, B's letters lead
           {"ab,bcd->acd", {{3, 4}, {4, 2, 5}}},         // two right letters merged into N
           {"i,i->", {{7}, {7}}},                        // a dot product
           {"ij,jk", {{3, 4}, {4, 2}}},                  // implicit output "ik"
           {"bij,bk->bj", {{2, 3, 4}, {2, 5}}},          // letters summed in each operand first
           {"bij->bji", {{2, 3, 4}}},                    // one operand: a transpose
           {"bij->b", {{2, 3, 4}}},                      // one operand: sums
           {"ij->", {{3, 4}}}}) {
    expect_lowered_and_exact(equation, shapes, seed++);
  }
}

TEST(LowerEinsum, ReduceSumTakesItsAxesAsAnAttributeBeforeOpset13) {
  auto r = lower(einsum_graph("bij->b", {{2, 3, 4}}, 12));
  EXPECT_TRUE(r.run.changed);
  EXPECT_EQ(check_lines(r.printed, "CHECK: ReduceSum(%x0) {axes = ints[1, 2], keepdims = 0}"), "");
}

TEST(LowerEinsum, TheParserMakesTheImplicitOutputExplicitAndNamesWhatItRefuses) {
  auto implicit = parse_einsum_equation("ba, ac", 2);
  ASSERT_TRUE(implicit) << implicit.status().message();
  EXPECT_EQ(implicit->output, "bc");
  EXPECT_EQ(implicit->inputs, (std::vector<std::string>{"ba", "ac"}));
  const auto refused = [](const std::string& equation, size_t operands, const std::string& needle) {
    auto parsed = parse_einsum_equation(equation, operands);
    ASSERT_FALSE(parsed) << equation;
    EXPECT_NE(parsed.status().message().find(needle), std::string::npos) << parsed.status().message();
  };
  refused("...ij,jk->...ik", 2, "ellipsis");
  refused("ii->i", 1, "repeats");
  refused("ij,jk->ik", 1, "2 terms for 1 operands");
  refused("ij,jk->iz", 2, "'z' is in no operand");
  refused("i1,jk->ik", 2, "not a letter");
}

TEST(LowerEinsum, NegativeTwinsStayEinsumAndAreCounted) {
  for (const auto& [equation, shapes] : std::vector<std::pair<std::string, std::vector<Shape>>>{
           {"bii->bi", {{2, 3, 3}}},                      // a diagonal
           {"...ij,...jk->...ik", {{2, 3, 4}, {2, 4, 5}}},  // an ellipsis
           {"ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 5}}}}) {   // three operands
    SCOPED_TRACE(equation);
    auto r = lower(einsum_graph(equation, shapes));
    EXPECT_FALSE(r.run.changed);
    EXPECT_EQ(r.run.statistics["einsum-kept"], 1);
    EXPECT_EQ(check_lines(r.printed, "CHECK: Einsum"), "");
  }
  // Two letters of unknown size merged into M: splitting them again takes two -1s.
  auto unknown = lower(R"(graph "t" {
  opset "" 17
  input %x : f32[batch,seq,len]
  input %w : f32[batch,4]
  %y = Einsum(%x, %w) {equation = "bmn,bk->bmnk"} @"outer"
  output %y
})");
  EXPECT_FALSE(unknown.run.changed);
  EXPECT_EQ(check_lines(unknown.printed, "CHECK: Einsum"), "");
}

}  // namespace
}  // namespace loka
