// ============================================================================
// passes/probe/probe_model.cc — planting ProbeFakeQuant switches and output taps.
// ============================================================================
#include "passes/probe/probe_model.h"

#include <algorithm>

#include "kernels/cpu/fp8_quantize.h"
#include "passes/onnx/onnx_export.h"

namespace loka::probe {
namespace {

constexpr const char* kModeName = "loka_probe_mode";

/// The switch node: Y = ProbeFakeQuant(X, Mode), typed as X.
ir::Value* add_switch(ir::Graph& graph, ir::Value* x, ir::Value* mode, size_t site, const OperandSwitch& operand,
                      const std::string& site_name) {
  ir::Node* node = graph.add_node("ProbeFakeQuant", {x, mode}, 1, graph.unique_node_name(site_name + "/probe_switch"),
                                  "ai.loka");
  std::vector<int64_t> forms, formats;
  std::vector<float> scales;
  for (const FakeQuantRecipe& recipe : operand.recipes) {
    forms.push_back(static_cast<int64_t>(recipe.form));
    formats.push_back(recipe.e5m2 ? 1 : 0);
    scales.push_back(recipe.scale);
  }
  Attributes& attributes = node->mutable_attributes();
  attributes.set("site", static_cast<int64_t>(site));
  attributes.set("forms", forms);
  attributes.set("formats", formats);
  attributes.set("scales", scales);
  node->output(0)->set_type(x->type());
  return node->output(0);
}

/// The output position of `value`, made a graph output when it is not one yet.
long tap(ir::Graph& graph, ir::Value* value) {
  const std::vector<ir::Value*>& outputs = graph.outputs();
  if (const auto it = std::find(outputs.begin(), outputs.end(), value); it != outputs.end())
    return static_cast<long>(it - outputs.begin());
  graph.add_output(value);
  return static_cast<long>(graph.outputs().size() - 1);
}

}  // namespace

SiteSwitches switches_for(const Site& site, const SiteScales& scales) {
  const FakeQuantRecipe none{};
  const auto tensor = [](float scale, bool e5m2 = false) { return FakeQuantRecipe{FakeQuantForm::kTensor, e5m2, scale}; };
  const FakeQuantRecipe rows{FakeQuantForm::kRows, false, 1.0f};
  const FakeQuantRecipe columns{FakeQuantForm::kColumns, false, 1.0f};
  SiteSwitches switches{site.node, {}};
  switch (site.kind) {
    case SiteKind::kWeightGemm: {
      const FakeQuantRecipe weight = site.weight_transposed ? rows : columns;  // per output channel
      switches.operands.push_back(
          {site.activation_input, {tensor(scales.a), site.activation_transposed ? tensor(scales.a) : rows, none}});
      switches.operands.push_back({site.weight_input, {weight, weight, none}});
      break;
    }
    case SiteKind::kActivationMatMul:
      switches.operands.push_back({site.activation_input, {tensor(scales.a), rows, tensor(scales.e5m2_a, true)}});
      switches.operands.push_back({site.weight_input, {tensor(scales.b), columns, tensor(scales.e5m2_b, true)}});
      break;
    case SiteKind::kEmbedding:  // the table's scale, applied to the gathered rows
      switches.operands.push_back({OperandSwitch::kOutput, {tensor(scales.a), rows, none}});
      break;
  }
  return switches;
}

Result<SiteScales> scales_from_annotation(const Site& site, const nlohmann::json& annotation) {
  const auto read = [&](const char* operand, float& e4m3, float& e5m2) -> Status {
    const nlohmann::json* stats = annotation.contains("stats") ? &annotation["stats"] : nullptr;
    if (stats == nullptr || !stats->contains(operand) || !(*stats)[operand].contains("scale_e4m3") ||
        !(*stats)[operand].contains("amax"))
      return Status::error("site '" + site.node + "': its annotation has no stats." + operand +
                           " (scale_e4m3, amax): run the probe first");
    e4m3 = (*stats)[operand]["scale_e4m3"].get<float>();
    e5m2 = cpu::fp8_scale_for_amax((*stats)[operand]["amax"].get<float>(), cpu::Fp8Format::kE5M2);
    return Status::ok();
  };
  SiteScales scales;
  LOKA_RETURN_IF_ERROR(read("activation", scales.a, scales.e5m2_a));
  if (site.kind != SiteKind::kEmbedding)
    LOKA_RETURN_IF_ERROR(read(site.kind == SiteKind::kActivationMatMul ? "activation_b" : "weight", scales.b, scales.e5m2_b));
  return scales;
}

Result<ProbeModel> build_probe_model(const ir::Graph& original, const std::vector<SiteSwitches>& sites) {
  std::unique_ptr<ir::Graph> graph = original.clone();
  ProbeModel model;
  model.model_outputs = graph->outputs().size();
  ir::Value* mode = graph->add_value(kModeName, ir::TensorType::of(DType::kInt32, {static_cast<int64_t>(sites.size())}));
  graph->add_input(mode);
  model.mode_input = graph->inputs().size() - 1;
  graph->opsets.try_emplace("ai.loka", 1);
  for (size_t s = 0; s < sites.size(); ++s) {
    ir::Node* node = graph->find_node(sites[s].node);
    if (node == nullptr) return Status::error("probe model: site '" + sites[s].node + "' is not in the graph");
    ir::Value* site_output = node->outputs().empty() ? nullptr : node->output(0);
    for (const OperandSwitch& operand : sites[s].operands) {
      if (operand.slot == OperandSwitch::kOutput) {
        if (site_output == nullptr) return Status::error("probe model: site '" + sites[s].node + "' has no output");
        // Readers of the output (and the graph outputs list) move to the switch's output.
        ir::Value* original_output = site_output;
        ir::Value* placeholder = graph->add_value(original_output->name() + "/probe_in", original_output->type());
        graph->replace_all_uses_with(original_output, placeholder);
        ir::Value* switched = add_switch(*graph, original_output, mode, s, operand, sites[s].node);
        graph->replace_all_uses_with(placeholder, switched);
        graph->erase_value(placeholder);
        site_output = switched;
        continue;
      }
      ir::Value* input = node->input(operand.slot);
      if (input == nullptr) return Status::error("probe model: site '" + sites[s].node + "' has no input " + std::to_string(operand.slot));
      graph->set_input(node, operand.slot, add_switch(*graph, input, mode, s, operand, sites[s].node));
    }
    const bool float_output = site_output != nullptr && site_output->type().dtype == DType::kFloat32;
    model.site_output.push_back(float_output && sites[s].tap ? tap(*graph, site_output) : -1);
  }
  LOKA_ASSIGN_OR_RETURN(model.bytes, onnx_io::export_model_bytes(*graph));
  return model;
}

}  // namespace loka::probe
