// ============================================================================
// tests/passes/ir_test.cc — IR mutation API, ordering, verifier, text round trip.
// ============================================================================
#include <gtest/gtest.h>

#include "passes/ir/graph.h"
#include "passes/ir/graph_algorithms.h"
#include "passes/ir/text_format.h"
#include "passes/ir/verifier.h"

namespace loka::ir {
namespace {

constexpr const char* kSmallGraph = R"(graph "small" {
  opset "" 17
  opset "ai.loka" 1
  meta "loka.note" "a \"quoted\" value"
  input %x : f32[batch,4]
  init %w : f32[3,4] = [0.5, -1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0.100000001]
  init %b : f32[3] = [1, 2, 3]
  init %q : f8e4m3fn[2] = [0x7e, 0x01]
  %h = Gemm(%x, %w, %b) {alpha = 1f, transB = 1} : f32[batch,3] @"gemm_0"
  %"odd name/0" = Relu(%h) : f32[batch,3] @"relu_0"
  %y, %mask = Dropout(%"odd name/0", _) {ratio = 0.5f} : f32[batch,3], bool[batch,3] @"drop"
  %z = ai.loka::Custom(%y) {axes = ints[1, -1], names = strings["a"], scales = floats[], t = tensor<i64[2]>[3, 4]} : f32[?,3] @"custom"
  output %z
}
)";

TEST(IrText, PrintParsePrintIsIdentical) {
  auto graph = parse_graph(kSmallGraph);
  ASSERT_TRUE(graph) << graph.status().message();
  ASSERT_TRUE(verify_graph(**graph)) << verify_graph(**graph).message();
  EXPECT_EQ(print_graph(**graph), kSmallGraph);
  auto again = parse_graph(print_graph(**graph));
  ASSERT_TRUE(again);
  EXPECT_EQ(print_graph(**again), print_graph(**graph));
}

TEST(IrText, ErrorsGiveLineAndReason) {
  auto bad = parse_graph("graph \"g\" {\n  input %x : f99[2]\n}\n");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos) << bad.status().message();
  auto undefined = parse_graph("graph \"g\" {\n  %y = Relu(%nope) : f32[2]\n  output %y\n}\n");
  ASSERT_FALSE(undefined);
  EXPECT_NE(undefined.status().message().find("nope"), std::string::npos);
  auto twice = parse_graph("graph \"g\" {\n input %x : f32[2]\n %y = Relu(%x) : f32[2]\n %y = Neg(%x) : f32[2]\n}\n");
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.status().message().find("twice"), std::string::npos);
}

TEST(IrGraph, ReplaceAllUsesAndEraseKeepUseListsExact) {
  auto parsed = parse_graph(R"(graph "g" {
  input %x : f32[2]
  %a = Relu(%x) : f32[2] @"r"
  %b = Neg(%a) : f32[2] @"n1"
  %c = Add(%a, %b) : f32[2] @"add"
  output %c
})");
  ASSERT_TRUE(parsed);
  Graph& g = **parsed;
  Value* x = g.find_value("x");
  Value* a = g.find_value("a");
  EXPECT_EQ(a->uses().size(), 2u);
  g.replace_all_uses_with(a, x);
  EXPECT_FALSE(a->has_uses());
  EXPECT_EQ(x->uses().size(), 3u);
  g.erase_node(g.find_node("r"));
  EXPECT_EQ(g.find_value("a"), nullptr);
  EXPECT_EQ(g.node_count(), 2u);
  ASSERT_TRUE(verify_graph(g)) << verify_graph(g).message();
  // Ids are never reused.
  Node* added = g.add_node("Relu", {x}, 1);
  EXPECT_EQ(added->id(), 3u);
  // A clone prints the same and is independent.
  auto copy = g.clone();
  EXPECT_EQ(print_graph(*copy), print_graph(g));
  copy->erase_node(copy->find_node(added->name()));
  EXPECT_NE(print_graph(*copy), print_graph(g));
  ASSERT_TRUE(verify_graph(*copy));
}

TEST(IrGraph, ReplacingAGraphOutputMovesTheOutput) {
  auto parsed = parse_graph(R"(graph "g" {
  input %x : f32[2]
  %a = Relu(%x) : f32[2] @"r"
  output %a
})");
  ASSERT_TRUE(parsed);
  Graph& g = **parsed;
  g.replace_all_uses_with(g.find_value("a"), g.find_value("x"));
  EXPECT_EQ(g.outputs()[0], g.find_value("x"));
  g.erase_node(g.find_node("r"));
  EXPECT_TRUE(verify_graph(g));
}

TEST(IrGraph, RenamingANodeMovesItsNameAndRefusesATakenOne) {
  auto parsed = parse_graph(R"(graph "g" {
  input %x : f32[2]
  %a = Relu(%x) : f32[2] @"r"
  %b = Neg(%a) : f32[2] @"n"
  output %b
})");
  ASSERT_TRUE(parsed);
  Graph& g = **parsed;
  Node* relu = g.find_node("r");
  EXPECT_FALSE(g.rename_node(relu, "n"));  // taken: nothing changes
  EXPECT_EQ(relu->name(), "r");
  EXPECT_FALSE(g.rename_node(relu, ""));
  EXPECT_TRUE(g.rename_node(relu, "activation"));
  EXPECT_EQ(g.find_node("activation"), relu);
  EXPECT_EQ(g.find_node("r"), nullptr);
  // The freed name can be taken again, and erasing the renamed node frees its new name.
  EXPECT_TRUE(g.rename_node(g.find_node("n"), "r"));
  g.replace_all_uses_with(relu->output(0), g.find_value("x"));
  g.erase_node(relu);
  EXPECT_EQ(g.find_node("activation"), nullptr);
  EXPECT_TRUE(verify_graph(g));
}

TEST(IrVerifier, ANodeInADomainTheModelDoesNotImportIsAnErrorNamingIt) {
  const std::string body = R"(
  input %x : f32[2,2]
  init %w : f32[2,2] = [1, 0, 0, 1]
  %y = ai.loka::FusedGemm(%x, %w) : f32[2,2] @"fused"
  %z = Relu(%y) : f32[2,2] @"r"
  output %z
})";
  auto missing = parse_graph("graph \"g\" {\n  opset \"\" 17" + body);
  ASSERT_TRUE(missing) << missing.status().message();
  const Status status = verify_graph(**missing);
  EXPECT_FALSE(status);
  EXPECT_NE(status.message().find("node 'fused' (FusedGemm): its domain 'ai.loka' has no opset import"),
            std::string::npos)
      << status.message();
  // Twins: the domain imported; a graph that imports nothing at all (bare test graphs).
  auto imported = parse_graph("graph \"g\" {\n  opset \"\" 17\n  opset \"ai.loka\" 1" + body);
  ASSERT_TRUE(imported) << imported.status().message();
  EXPECT_TRUE(verify_graph(**imported)) << verify_graph(**imported).message();
  auto bare = parse_graph("graph \"g\" {" + body);
  ASSERT_TRUE(bare) << bare.status().message();
  EXPECT_TRUE(verify_graph(**bare)) << verify_graph(**bare).message();
  // The default domain needs its import too, once the graph imports any.
  auto only_loka = parse_graph("graph \"g\" {\n  opset \"ai.loka\" 1" + body);
  ASSERT_TRUE(only_loka) << only_loka.status().message();
  EXPECT_NE(verify_graph(**only_loka).message().find("node 'r' (Relu): its domain 'ai.onnx' has no opset import"),
            std::string::npos);
}

TEST(IrGraph, TopologicalOrderIsStableAndFindsCycles) {
  auto parsed = parse_graph(R"(graph "g" {
  input %x : f32[2]
  %c = Add(%a, %b) : f32[2] @"add"
  %a = Relu(%x) : f32[2] @"r"
  %b = Neg(%x) : f32[2] @"n"
  output %c
})");
  ASSERT_TRUE(parsed) << parsed.status().message();
  auto order = topological_order(**parsed);
  ASSERT_TRUE(order);
  std::vector<std::string> names;
  for (Node* node : *order) names.push_back(node->name());
  EXPECT_EQ(names, (std::vector<std::string>{"r", "n", "add"}));
  EXPECT_FALSE(has_cycle(**parsed));

  auto cyclic = parse_graph(R"(graph "g" {
  input %x : f32[2]
  %a = Add(%x, %b) : f32[2] @"first"
  %b = Relu(%a) : f32[2] @"second"
  output %b
})");
  ASSERT_TRUE(cyclic);
  EXPECT_TRUE(has_cycle(**cyclic));
  const Status status = verify_graph(**cyclic);
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("cycle"), std::string::npos);
}

TEST(IrGraph, DeepChainOrdersWithoutRecursion) {
  Graph g;
  Value* x = g.add_value("x", TensorType::of(DType::kFloat32, {4}));
  g.add_input(x);
  Value* current = x;
  constexpr int kDepth = 200000;
  for (int i = 0; i < kDepth; ++i) current = g.add_node(i % 2 ? "Relu" : "Neg", {current}, 1)->output(0);
  g.add_output(current);
  auto order = topological_order(g);
  ASSERT_TRUE(order);
  EXPECT_EQ(order->size(), static_cast<size_t>(kDepth));
  EXPECT_FALSE(has_cycle(g));
  EXPECT_TRUE(verify_graph(g));
  auto reparsed = parse_graph(print_graph(g));
  ASSERT_TRUE(reparsed);
  EXPECT_EQ((*reparsed)->node_count(), static_cast<size_t>(kDepth));
}

}  // namespace
}  // namespace loka::ir
