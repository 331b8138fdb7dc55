// ============================================================================
// tools/loka_inspect.cc — `loka-inspect`: read the annotations inside a model.
//
//   loka-inspect MODEL.onnx [--json] [--html FILE] [--dot FILE] [--sort error|flops|order]
//
// Default: a table of every node (op, output shape, FLOPs per sample,
// precision, verdict, end-to-end error mean ± 95% CI, SQNR, activation amax,
// batches, kernel) and the most sensitive sites ranked with the likely reason
// (dynamic range, outliers, amplification by a following normalization).
// --json prints the contract document ({"model", "nodes": [...]}, nodes in
// graph order, each fused node followed by the Probe sites it absorbed, marked
// "fused_into"); --dot writes a Graphviz graph coloured by precision/verdict;
// --html writes a self-contained report (that graph drawn by Graphviz's `dot`,
// the site table, histograms of the worst sites; tools/inspect/html_report.h).
// ============================================================================
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "passes/ir/graph_algorithms.h"
#include "passes/ir/shape_inference.h"
#include "passes/ir/text_format.h"
#include "passes/onnx/onnx_import.h"
#include "passes/probe/annotations.h"
#include "tools/cli/arguments.h"
#include "tools/inspect/dot_graph.h"
#include "tools/inspect/html_report.h"
#include "tools/inspect/kernel_text.h"

namespace loka {
namespace {

constexpr const char* kProgram = "loka-inspect";

cli::ArgumentParser make_parser() {
  cli::ArgumentParser parser(kProgram, "show LoKA's per-node annotations (precision, FP8 verdicts, errors, kernels)");
  parser.positional("MODEL", "an ONNX model, usually written by loka-opt")
      .flag("--json", "print the annotation document as JSON (the contract form)")
      .option("--dot", "FILE", "write the graph in Graphviz dot, coloured by precision and verdict")
      .option("--html", "FILE", "write a self-contained HTML report: graph (needs Graphviz's dot), site table, histograms")
      .option("--sort", "KEY", "table order").choices({"order", "error", "flops"}).default_value("order")
      .option("--top", "N", "how many sensitive sites to rank (0: none)").default_value("5");
  return parser;
}

/// Every node in graph order, annotated entries merged in (non-sites get precision/verdict defaults).
nlohmann::json node_list(const ir::Graph& graph, const nlohmann::json& annotated) {
  nlohmann::json nodes = nlohmann::json::array();
  auto order = ir::topological_order(graph);
  const std::vector<ir::Node*> ordered = order ? *order : graph.nodes();
  for (const ir::Node* node : ordered) {
    nlohmann::json entry = annotated.contains(node->name()) ? annotated[node->name()] : nlohmann::json::object();
    entry["name"] = node->name();
    entry["op"] = node->domain().empty() ? node->op_type() : node->domain() + "::" + node->op_type();
    if (!entry.contains("precision")) entry["precision"] = "fp32";
    if (!entry.contains("verdict")) entry["verdict"] = nullptr;
    if (!entry.contains("flops")) entry["flops"] = 0;
    if (!entry.contains("kernel")) entry["kernel"] = nullptr;
    if (!node->outputs().empty()) entry["output_type"] = ir::print_type(node->output(0)->type());
    const nlohmann::json absorbed = entry.value("from", nlohmann::json::array());
    nodes.push_back(std::move(entry));
    // Probe sites a fusion absorbed (the tables of an EmbeddingBags) keep their own rows, right
    // after the node that now computes them, so no measured site disappears from the report.
    for (const nlohmann::json& name : absorbed) {
      if (!name.is_string() || name == node->name() || !annotated.contains(name.get<std::string>())) continue;
      nlohmann::json site = annotated[name.get<std::string>()];
      if (site.value("fused_into", "") != node->name()) continue;
      site["name"] = name;
      if (!site.contains("op")) site["op"] = "?";
      for (const char* key : {"verdict", "kernel"})
        if (!site.contains(key)) site[key] = nullptr;
      if (!site.contains("precision")) site["precision"] = "fp32";
      if (!site.contains("flops")) site["flops"] = 0;
      nodes.push_back(std::move(site));
    }
  }
  return nodes;
}

double error_mean(const nlohmann::json& node) {
  if (!node.contains("error") || !node["error"].is_object()) return -1;
  return node["error"].value("rel_l2_mean", -1.0);
}

/// Why a site is sensitive, from its statistics and its consumers.
std::string reason(const ir::Graph& graph, const nlohmann::json& node) {
  std::vector<std::string> reasons;
  if (const ir::Node* n = graph.find_node(node["name"].get<std::string>())) {
    for (const ir::Use& use : n->output(0)->uses())
      if (use.node->is("LayerNormalization") || use.node->is("Softmax")) {
        reasons.push_back("amplified by the following " + use.node->op_type());
        break;
      }
  }
  if (node.contains("stats") && node["stats"].contains("activation")) {
    const auto& activation = node["stats"]["activation"];
    // Over 1% of the values below E4M3's normal range at the site's scale. Annotations written
    // before the Probe recorded that share keep the old test, the span down to the smallest
    // value seen, which grows with the calibration data.
    if (activation.contains("subnormal_fraction_e4m3")) {
      const double share = activation.value("subnormal_fraction_e4m3", 0.0);
      if (share > 0.01) {
        char text[64];
        std::snprintf(text, sizeof text, "wide dynamic range (%.1f%% subnormal in E4M3)", 100 * share);
        reasons.push_back(text);
      }
    } else if (activation.value("dynamic_range_log2", 0.0) > 24) {
      reasons.push_back("wide dynamic range (2^" + std::to_string(static_cast<int>(activation.value("dynamic_range_log2", 0.0))) + ")");
    }
    if (activation.value("kurtosis", 0.0) > 20) reasons.push_back("outliers (kurtosis " + std::to_string(static_cast<int>(activation.value("kurtosis", 0.0))) + ")");
    if (activation.value("underflow_fraction_e4m3", 0.0) > 0.01) reasons.push_back("underflow");
  }
  if (node.contains("stats") && node["stats"].contains("weight")) {
    const auto& weight = node["stats"]["weight"];
    if (std::fabs(weight.value("mean", 0.0)) > 2 * weight.value("std", 1.0)) reasons.push_back("large common mode in weights");
  }
  if (reasons.empty()) return "local error " + std::to_string(node.contains("local_error") ? node["local_error"].value("rel_l2_mean", 0.0) : 0.0);
  std::string text;
  for (const auto& r : reasons) text += (text.empty() ? "" : "; ") + r;
  return text;
}

void print_table(const ir::Graph& graph, nlohmann::json nodes, const std::string& sort, int top) {
  if (sort == "error")
    std::stable_sort(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) { return error_mean(a) > error_mean(b); });
  else if (sort == "flops")
    std::stable_sort(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) { return a.value("flops", 0.0) > b.value("flops", 0.0); });
  std::printf("%-34s %-18s %-18s %10s %-9s %-10s %-28s %7s %9s %4s %s\n", "node", "op", "shape", "FLOPs", "precision",
              "verdict", "error (rel L2, 95% CI)", "SQNR", "amax", "bat", "kernel");
  for (const auto& node : nodes) {
    std::string error = "-", sqnr = "-", amax = "-", batches = "-";
    if (node.contains("error") && node["error"].is_object()) {
      const auto& e = node["error"];
      char buffer[96];
      const auto& ci = e["rel_l2_ci95"];
      std::snprintf(buffer, sizeof buffer, "%.2e [%.1e,%.1e]", e.value("rel_l2_mean", 0.0),
                    ci[0].is_number() ? ci[0].get<double>() : 0.0, ci[1].is_number() ? ci[1].get<double>() : INFINITY);
      error = buffer;
      std::snprintf(buffer, sizeof buffer, "%.1f", e.value("sqnr_db", 0.0));
      sqnr = buffer;
      batches = std::to_string(e.value("batches", 0));
    }
    if (node.contains("stats") && node["stats"].contains("activation")) {
      char buffer[32];
      std::snprintf(buffer, sizeof buffer, "%.3g", node["stats"]["activation"].value("amax", 0.0));
      amax = buffer;
    }
    const std::string verdict = node["verdict"].is_string() ? node["verdict"].get<std::string>() : "-";
    const std::string kernel = inspect::kernel_text(node);
    std::printf("%-34.34s %-18.18s %-18.18s %10.3g %-9s %-10s %-28s %7s %9s %4s %s\n", node["name"].get<std::string>().c_str(),
                node["op"].get<std::string>().c_str(), node.value("output_type", "").c_str(), node.value("flops", 0.0),
                node["precision"].get<std::string>().c_str(), verdict.c_str(), error.c_str(), sqnr.c_str(), amax.c_str(),
                batches.c_str(), kernel.c_str());
  }
  if (top == 0) return;  // --top 0: the table alone
  std::vector<nlohmann::json> sites;
  for (const auto& node : nodes)
    if (error_mean(node) >= 0) sites.push_back(node);
  std::sort(sites.begin(), sites.end(), [](const auto& a, const auto& b) { return error_mean(a) > error_mean(b); });
  if (sites.empty()) {
    std::printf("\nno Probe annotations: run loka-opt --pipeline probe --calib DATA first\n");
    return;
  }
  std::printf("\nmost sensitive sites (end-to-end error when only that site runs FP8):\n");
  for (int i = 0; i < top && i < static_cast<int>(sites.size()); ++i)
    std::printf("  %d. %-34s %.2e  %s\n", i + 1, sites[static_cast<size_t>(i)]["name"].get<std::string>().c_str(),
                error_mean(sites[static_cast<size_t>(i)]), reason(graph, sites[static_cast<size_t>(i)]).c_str());
}

/// --html: the report, with each measured site's likely reason of sensitivity.
int write_html(const ir::Graph& graph, const std::string& model_path, const nlohmann::json& model, nlohmann::json nodes,
               int top, const std::string& path) {
  auto svg = inspect::render_svg(inspect::to_dot(graph, nodes));
  if (!svg) return cli::runtime_error(kProgram, "--html: " + svg.status().message());
  for (auto& node : nodes)
    if (error_mean(node) >= 0) node["reason"] = reason(graph, node);
  std::ofstream out(path, std::ios::binary);
  out << inspect::html_report({model_path, model, nodes, *svg, top});
  if (!out) return cli::runtime_error(kProgram, "cannot write '" + path + "'");
  return 0;
}

int main_checked(int argc, char** argv) {
  const cli::ArgumentParser parser = make_parser();
  cli::ParsedArguments args;
  if (auto exit_code = cli::parse_or_exit_code(parser, argc, argv, args)) return *exit_code;
  auto top = args.integer("--top");
  if (!top) return cli::usage_error(kProgram, top.status().message());
  if (*top < 0) return cli::usage_error(kProgram, "--top must be >= 0, got " + std::to_string(*top));
  auto graph = onnx_io::import_model_file(args.positionals()[0]);
  if (!graph) return cli::runtime_error(kProgram, graph.status().message());
  if (Status status = ir::infer_shapes(**graph); !status)
    return cli::runtime_error(kProgram, args.positionals()[0] + ": " + status.message());
  auto document = read_annotations(**graph);
  if (!document) return cli::runtime_error(kProgram, args.positionals()[0] + ": " + document.status().message());
  const nlohmann::json nodes = node_list(**graph, (*document)["nodes"]);
  nlohmann::json model = (*document)["model"];
  if ((*graph)->metadata.count("loka.pipeline")) model["pipeline"] = (*graph)->metadata.at("loka.pipeline");
  model["name"] = (*graph)->name;
  if (args.has("--dot")) {
    std::ofstream out(args.value("--dot"));
    out << inspect::to_dot(**graph, nodes);
    if (!out) return cli::runtime_error(kProgram, "cannot write '" + args.value("--dot") + "'");
  }
  if (args.has("--html")) {
    if (int code = write_html(**graph, args.positionals()[0], model, nodes, static_cast<int>(*top), args.value("--html")))
      return code;
  }
  if (args.has("--json")) {
    std::printf("%s\n", nlohmann::json{{"model", model}, {"nodes", nodes}}.dump(2).c_str());
    return 0;
  }
  if (!args.has("--dot") && !args.has("--html")) print_table(**graph, nodes, args.value("--sort"), static_cast<int>(*top));
  return 0;
}

}  // namespace
}  // namespace loka

int main(int argc, char** argv) { return loka::cli::guarded_main(loka::kProgram, loka::main_checked, argc, argv); }
