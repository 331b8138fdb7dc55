// ============================================================================
// tests/runtime/engine_test.cc — Engine/Session basics: plan checks, runs, liveness.
// ============================================================================
#include <gtest/gtest.h>

#include "loka/session.h"
#include "model_builder.h"
#include "test_support.h"

namespace loka {
namespace {

using testing::ModelBuilder;

TEST(Engine, RunsGemmReluChain) {
  std::mt19937 rng(7);
  const Tensor w = testing::random_tensor(rng, {3, 4});
  const Tensor b = testing::random_tensor(rng, {3});
  ModelBuilder builder(17);
  builder.input("x", DType::kFloat32, {-1, 4})
      .initializer("w", w)
      .initializer("b", b)
      .node("Gemm", {"x", "w", "b"}, {"h"}, {{"transB", int64_t{1}}})
      .node("Relu", {"h"}, {"y"})
      .output("y", DType::kFloat32, {-1, 3});
  auto engine = builder.build_engine();
  ASSERT_TRUE(engine) << engine.status().message();
  const Tensor x = testing::random_tensor(rng, {5, 4});
  auto outputs = testing::run_once(**engine, {x});
  ASSERT_TRUE(outputs) << outputs.status().message();
  const auto& y = (*outputs)[0];
  ASSERT_EQ(y.shape(), (Shape{5, 3}));
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 3; ++j) {
      float acc = b.data<float>()[j];
      for (int k = 0; k < 4; ++k) acc += x.data<float>()[i * 4 + k] * w.data<float>()[j * 4 + k];
      EXPECT_NEAR(y.data<float>()[i * 3 + j], std::max(acc, 0.0f), 1e-6f);
    }
}

TEST(Engine, RejectsUndefinedInputCycleAndDoubleWrite) {
  {
    ModelBuilder builder;
    builder.input("x", DType::kFloat32, {2}).node("Relu", {"nope"}, {"y"}, {}, "reader").output("y", DType::kFloat32, {2});
    auto engine = builder.build_engine();
    ASSERT_FALSE(engine);
    EXPECT_NE(engine.status().message().find("'nope'"), std::string::npos) << engine.status().message();
  }
  {
    ModelBuilder builder;
    builder.input("x", DType::kFloat32, {2})
        .node("Add", {"x", "b"}, {"a"}, {}, "n1")
        .node("Relu", {"a"}, {"b"}, {}, "n2")
        .output("b", DType::kFloat32, {2});
    auto engine = builder.build_engine();
    ASSERT_FALSE(engine);
    EXPECT_NE(engine.status().message().find("cycle"), std::string::npos) << engine.status().message();
  }
  {
    ModelBuilder builder;
    builder.input("x", DType::kFloat32, {2})
        .node("Relu", {"x"}, {"y"}, {}, "first")
        .node("Neg", {"x"}, {"y"}, {}, "second")
        .output("y", DType::kFloat32, {2});
    auto engine = builder.build_engine();
    ASSERT_FALSE(engine);
    EXPECT_NE(engine.status().message().find("written by"), std::string::npos) << engine.status().message();
  }
}

TEST(Engine, UnsupportedOpNamesNodeOpAndOpset) {
  ModelBuilder builder(17);
  builder.input("x", DType::kFloat32, {2}).node("FancyOp", {"x"}, {"y"}, {}, "weird").output("y", DType::kFloat32, {2});
  auto engine = builder.build_engine();
  ASSERT_FALSE(engine);
  const std::string& message = engine.status().message();
  EXPECT_NE(message.find("weird"), std::string::npos) << message;
  EXPECT_NE(message.find("FancyOp"), std::string::npos) << message;
  EXPECT_NE(message.find("17"), std::string::npos) << message;
}

TEST(Session, ChecksInputDtypeShapeAndBatchLimit) {
  ModelBuilder builder;
  builder.input("x", DType::kFloat32, {-1, 4}).node("Relu", {"x"}, {"y"}).output("y", DType::kFloat32, {-1, 4});
  EngineOptions options;
  options.max_batch = 8;
  auto engine = builder.build_engine(options);
  ASSERT_TRUE(engine) << engine.status().message();
  auto session = (*engine)->new_session();
  const std::vector<Tensor> wrong_dtype = {Tensor::zeros(DType::kInt64, {2, 4})};
  EXPECT_FALSE(session->run(wrong_dtype));
  const std::vector<Tensor> wrong_shape = {Tensor::zeros(DType::kFloat32, {2, 5})};
  EXPECT_FALSE(session->run(wrong_shape));
  const std::vector<Tensor> too_big = {Tensor::zeros(DType::kFloat32, {9, 4})};
  auto result = session->run(too_big);
  ASSERT_FALSE(result);
  EXPECT_NE(result.status().message().find("maximum"), std::string::npos);
  const std::vector<Tensor> ok = {Tensor::zeros(DType::kFloat32, {8, 4})};
  EXPECT_TRUE(session->run(ok));
}

TEST(Session, SteadyStateRunsReusePooledBuffers) {
  ModelBuilder builder;
  builder.input("x", DType::kFloat32, {-1, 64})
      .node("Relu", {"x"}, {"a"})
      .node("Neg", {"a"}, {"b"})
      .node("Relu", {"b"}, {"c"})
      .node("Neg", {"c"}, {"y"})
      .output("y", DType::kFloat32, {-1, 64});
  auto engine = builder.build_engine();
  ASSERT_TRUE(engine);
  auto session = (*engine)->new_session();
  const std::vector<Tensor> inputs = {Tensor::zeros(DType::kFloat32, {32, 64})};
  ASSERT_TRUE(session->run(inputs));
  const size_t after_first = session->pooled_bytes();
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(session->run(inputs));
  EXPECT_EQ(session->pooled_bytes(), after_first);
  // Liveness: four chained intermediates need at most two live buffers plus the output.
  EXPECT_LE(after_first, 3u * 32 * 64 * sizeof(float));
}

TEST(Session, TheArenaReportIsForCudaEnginesAndSaysSoOnTheCpu) {
  ModelBuilder builder;
  builder.input("x", DType::kFloat32, {-1, 4}).node("Relu", {"x"}, {"y"}).output("y", DType::kFloat32, {-1, 4});
  auto engine = builder.build_engine();
  ASSERT_TRUE(engine);
  auto report = (*engine)->new_session()->arena_report(8);
  ASSERT_FALSE(report);
  EXPECT_NE(report.status().message().find("Device::kCuda"), std::string::npos) << report.status().message();
}

}  // namespace
}  // namespace loka

namespace loka {
namespace {

/// Replays node 0 (Neg) with a given tensor and counts the hooks it sees.
class Replayer final : public Observer {
 public:
  explicit Replayer(Tensor replacement) : replacement_(std::move(replacement)) {}
  bool replay_node(const NodeInfo& node, std::span<Tensor> outputs) override {
    if (node.index != 0) return false;
    outputs[0] = replacement_;
    return true;
  }
  void before_node(const NodeInfo& node, std::span<Tensor>) override { hooked.push_back(node.index); }
  void after_node(const NodeInfo& node, std::span<Tensor>) override { hooked.push_back(node.index); }
  std::vector<size_t> hooked;

 private:
  Tensor replacement_;
};

TEST(Session, AReplayedNodeIsNotRunAndLaterNodesReadItsReplayedOutputs) {
  ModelBuilder builder(17);
  builder.input("x", DType::kFloat32, {-1, 2})
      .node("Neg", {"x"}, {"n"})
      .node("Relu", {"n"}, {"y"})
      .output("y", DType::kFloat32, {-1, 2});
  auto engine = builder.build_engine();
  ASSERT_TRUE(engine) << engine.status().message();
  auto session = (*engine)->new_session();
  const std::vector<float> replayed{-3.0f, 5.0f}, x{1.0f, 2.0f};
  Replayer replayer(Tensor::from_floats({1, 2}, replayed));
  session->set_observer(&replayer);
  const std::vector<Tensor> inputs{Tensor::from_floats({1, 2}, x)};
  auto outputs = session->run(inputs);
  ASSERT_TRUE(outputs) << outputs.status().message();
  // Relu of the replayed [-3, 5], not of Neg(x) = [-1, -2].
  EXPECT_EQ((*outputs)[0].data<float>()[0], 0.0f);
  EXPECT_EQ((*outputs)[0].data<float>()[1], 5.0f);
  EXPECT_EQ(replayer.hooked, (std::vector<size_t>{1, 1}));  // Relu's before and after only
}

}  // namespace
}  // namespace loka
