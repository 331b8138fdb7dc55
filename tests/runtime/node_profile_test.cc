// ============================================================================
// tests/runtime/node_profile_test.cc — Session::profile_nodes on the CPU
// runtime and the median it takes of each step (the CUDA path:
// tests/cuda/cuda_runtime_test.cc).
// ============================================================================
#include <gtest/gtest.h>

#include <random>

#include "loka/session.h"
#include "model_builder.h"
#include "runtime/node_profile.h"
#include "test_support.h"

namespace loka {
namespace {

using testing::ModelBuilder;

TEST(NodeProfile, EachStepsMedianIsItsMiddleSampleUnmovedByOneSlowRun) {
  // samples[run][step]: step 0's slow run (9) and step 1's fast one (0.1) are outliers.
  EXPECT_EQ(median_per_step({{1, 2}, {9, 0.1}, {2, 3}}), (std::vector<double>{2, 2}));
  // An even count takes the upper median: a sample that was measured, not an average of two.
  EXPECT_EQ(median_per_step({{4}, {1}, {3}, {2}}), (std::vector<double>{3}));
  EXPECT_EQ(median_per_step({{5, 6, 7}}), (std::vector<double>{5, 6, 7}));
  EXPECT_TRUE(median_per_step({}).empty());
}

TEST(NodeProfile, ReadersListTheSlowestFirstTiesInExecutionOrderWithTheSum) {
  const SlowestNodes slowest = slowest_first({{"a", "Relu", "", 1.0}, {"b", "FusedGemm", "ai.loka", 3.0},
                                              {"c", "Neg", "", 1.0}, {"d", "Add", "", 0.5}});
  std::vector<std::string> order;
  for (const NodeTiming& node : slowest.nodes) order.push_back(node.name);
  EXPECT_EQ(order, (std::vector<std::string>{"b", "a", "c", "d"}));
  EXPECT_EQ(slowest.total_ms, 5.5);
  EXPECT_EQ(slowest.nodes[0].qualified_op(), "ai.loka::FusedGemm");
  EXPECT_EQ(slowest.nodes[1].qualified_op(), "Relu");
}

/// Counts the hooks it sees: profile_nodes must not call a Session's observer.
class CountingObserver final : public Observer {
 public:
  void before_node(const NodeInfo&, std::span<Tensor>) override { ++calls; }
  void after_node(const NodeInfo&, std::span<Tensor>) override { ++calls; }
  int calls = 0;
};

/// A large MatMul between two elementwise ops on few values: the MatMul's time dominates.
Result<std::shared_ptr<const Engine>> matmul_between_cheap_ops(std::mt19937& rng) {
  ModelBuilder builder(17);
  builder.input("x", DType::kFloat32, {-1, 256})
      .initializer("w", testing::random_tensor(rng, {256, 256}))
      .node("Neg", {"x"}, {"a"}, {}, "negate")
      .node("MatMul", {"a", "w"}, {"b"}, {}, "project")
      .node("Relu", {"b"}, {"y"}, {}, "rectify")
      .output("y", DType::kFloat32, {-1, 256});
  return builder.build_engine();
}

TEST(Session, ProfileNodesTimesEveryNodeInExecutionOrder) {
  std::mt19937 rng(23);
  auto engine = matmul_between_cheap_ops(rng);
  ASSERT_TRUE(engine) << engine.status().message();
  auto session = (*engine)->new_session();
  CountingObserver observer;
  session->set_observer(&observer);
  const std::vector<Tensor> inputs = {testing::random_tensor(rng, {128, 256})};
  auto profile = session->profile_nodes(inputs, 7);
  ASSERT_TRUE(profile) << profile.status().message();
  ASSERT_EQ(profile->size(), 3u);
  const std::vector<std::string> names = {(*profile)[0].name, (*profile)[1].name, (*profile)[2].name};
  EXPECT_EQ(names, (std::vector<std::string>{"negate", "project", "rectify"}));
  EXPECT_EQ((*profile)[1].op_type, "MatMul");
  EXPECT_EQ((*profile)[1].domain, "");
  for (const NodeTiming& node : *profile) EXPECT_GE(node.median_ms, 0.0) << node.name;
  // 128 x 256 x 256 multiply-adds against 32768 negations: the MatMul takes the most, by far.
  EXPECT_GT((*profile)[1].median_ms, (*profile)[0].median_ms);
  EXPECT_GT((*profile)[1].median_ms, (*profile)[2].median_ms);
  EXPECT_EQ(observer.calls, 0);

  // The Session still runs as before, with its observer.
  auto outputs = session->run(inputs);
  ASSERT_TRUE(outputs) << outputs.status().message();
  EXPECT_EQ((*outputs)[0].shape(), (Shape{128, 256}));
  EXPECT_EQ(observer.calls, 6);
}

TEST(Session, ProfileNodesRefusesNoRunsAndBadInputsInOneLine) {
  std::mt19937 rng(29);
  auto engine = matmul_between_cheap_ops(rng);
  ASSERT_TRUE(engine) << engine.status().message();
  auto session = (*engine)->new_session();
  const std::vector<Tensor> inputs = {testing::random_tensor(rng, {4, 256})};
  auto none = session->profile_nodes(inputs, 0);
  ASSERT_FALSE(none);
  EXPECT_NE(none.status().message().find("runs must be 1 to 100000, got 0"), std::string::npos) << none.status().message();
  EXPECT_FALSE(session->profile_nodes(inputs, Session::kMaxProfileRuns + 1));
  const std::vector<Tensor> narrow = {testing::random_tensor(rng, {4, 255})};
  auto wrong = session->profile_nodes(narrow, 3);
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.status().message().find("'x'"), std::string::npos) << wrong.status().message();
  EXPECT_EQ(wrong.status().message().find('\n'), std::string::npos) << wrong.status().message();
}

}  // namespace
}  // namespace loka
