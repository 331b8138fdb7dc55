// ============================================================================
// tests/runtime/batch_shapes_test.cc — extrapolated shapes equal real runs.
//
// For every zoo model, the shapes (and host-computed contents) predicted at
// batch 5, 64 and 1000 from the traces at batch 1..3 equal those of a real
// CPU run at that batch; a model whose shapes grow with batch² is refused,
// naming the value; so is a second symbolic dim.
// ============================================================================
#include <gtest/gtest.h>

#include "loka/session.h"
#include "model_builder.h"
#include "runtime/batch_shapes.h"
#include "runtime/execution_plan.h"
#include "test_support.h"

namespace loka {
namespace {

/// Shapes of every value produced by a real run at `batch`.
class Recorder final : public Observer {
 public:
  explicit Recorder(const ExecutionPlan& plan) : plan_(plan), shapes_(plan.values().size()), values_(plan.values().size()) {}
  void after_node(const NodeInfo& node, std::span<Tensor> outputs) override {
    const PlanStep& step = plan_.steps()[node.index];
    for (size_t j = 0; j < outputs.size(); ++j)
      if (step.outputs[j] != kNoValue && outputs[j].defined()) {
        shapes_[static_cast<size_t>(step.outputs[j])] = outputs[j].shape();
        values_[static_cast<size_t>(step.outputs[j])] = outputs[j].clone();
      }
  }
  const ExecutionPlan& plan_;
  std::vector<Shape> shapes_;
  std::vector<Tensor> values_;
};

std::vector<Tensor> zero_inputs(const Engine& engine, int64_t batch) {
  std::vector<Tensor> inputs;
  for (const TensorInfo& info : engine.inputs()) {
    Shape shape = info.shape;
    for (int64_t& d : shape)
      if (d < 0) d = batch;
    inputs.push_back(Tensor::zeros(info.dtype, shape));
  }
  return inputs;
}

class ZooBatchShapes : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooBatchShapes, ExtrapolatedShapesMatchARealRun) {
  auto engine = Engine::load_file(testing::source_dir() / "models" / "zoo" / GetParam() / "model.onnx");
  ASSERT_TRUE(engine) << engine.status().message();
  auto model = BatchShapeModel::trace(**engine);
  ASSERT_TRUE(model) << model.status().message();
  const ExecutionPlan& plan = (*engine)->plan();
  for (int64_t batch : {5, 64, 1000}) {
    auto predicted = model->at(batch);
    ASSERT_TRUE(predicted) << predicted.status().message();
    Recorder recorder(plan);
    auto session = (*engine)->new_session();
    session->set_observer(&recorder);
    ASSERT_TRUE(session->run(zero_inputs(**engine, batch)));
    size_t host_values = 0;
    for (size_t v = 0; v < plan.values().size(); ++v) {
      if (!recorder.values_[v].defined()) continue;  // an input, a constant or an unused output
      EXPECT_EQ(predicted->shapes[v], recorder.shapes_[v]) << plan.values()[v].name << " at batch " << batch;
      if (predicted->host_values[v].defined()) {
        ++host_values;
        EXPECT_EQ(predicted->host_values[v].to_floats(), recorder.values_[v].to_floats())
            << plan.values()[v].name << " at batch " << batch;
      }
    }
    if (GetParam() == "attention_ranker") {
      EXPECT_GT(host_values, 0u) << "its Shape chain is host-computed";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooBatchShapes,
                         ::testing::Values("dlrm_dot", "dlrm_dcnv2", "wukong", "dhen", "attention_ranker"),
                         [](const auto& info) { return info.param; });

TEST(BatchShapes, ShapesQuadraticInTheBatchAreRefusedNamingTheValue) {
  testing::ModelBuilder b(17);
  b.input("x", DType::kFloat32, {-1, 2});
  b.node("Shape", {"x"}, {"s"});
  b.node("Mul", {"s", "s"}, {"squared"});  // [batch², 4]
  b.node("ConstantOfShape", {"squared"}, {"y"});
  b.output_unshaped("y", DType::kFloat32);
  auto engine = b.build_engine();
  ASSERT_TRUE(engine) << engine.status().message();
  auto model = BatchShapeModel::trace(**engine);
  ASSERT_FALSE(model);
  EXPECT_NE(model.status().message().find("not affine"), std::string::npos) << model.status().message();
}

TEST(BatchShapes, ASecondSymbolicDimIsRefused) {
  testing::ModelBuilder b(17);
  b.input("x", DType::kFloat32, {-1, -1});
  b.node("Relu", {"x"}, {"y"});
  b.output("y", DType::kFloat32, {-1, -1});
  auto engine = b.build_engine();
  ASSERT_TRUE(engine) << engine.status().message();
  auto model = BatchShapeModel::trace(**engine);
  ASSERT_FALSE(model);
  EXPECT_NE(model.status().message().find("input 'x': dim 1"), std::string::npos) << model.status().message();
}

TEST(BatchShapes, ShapeChainsAreHostResidentAndDataIsNot) {
  testing::ModelBuilder b(17);
  b.input("x", DType::kFloat32, {-1, 4});
  b.initializer("two", Tensor::from_int64s({1}, std::vector<int64_t>{2}));
  b.node("Shape", {"x"}, {"s"});
  b.node("Concat", {"s", "two"}, {"target"}, {{"axis", int64_t{0}}});
  b.node("Relu", {"x"}, {"r"});
  b.output_unshaped("target", DType::kInt64);
  b.output("r", DType::kFloat32, {-1, 4});
  auto engine = b.build_engine();
  ASSERT_TRUE(engine) << engine.status().message();
  const ExecutionPlan& plan = (*engine)->plan();
  const std::vector<bool> host = host_resident_values(plan);
  for (size_t v = 0; v < plan.values().size(); ++v) {
    const std::string& name = plan.values()[v].name;
    if (name == "s" || name == "target" || name == "two") {
      EXPECT_TRUE(host[v]) << name;
    }
    if (name == "x" || name == "r") {
      EXPECT_FALSE(host[v]) << name;
    }
  }
  auto model = BatchShapeModel::trace(**engine);
  ASSERT_TRUE(model) << model.status().message();
  auto at = model->at(4096);
  ASSERT_TRUE(at) << at.status().message();
  for (size_t v = 0; v < plan.values().size(); ++v) {
    if (plan.values()[v].name == "target") {
      EXPECT_EQ(at->host_values[v].to_int64s(), (std::vector<int64_t>{4096, 4, 2}));
    }
  }
}

}  // namespace
}  // namespace loka
