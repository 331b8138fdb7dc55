// ============================================================================
// tools/inspect/html_report.h — `loka-inspect --html`: one self-contained page.
//
// The page holds, with no external resource (no CDN, no fonts, no scripts
// from elsewhere): a summary of the Probe run, the graph drawn by Graphviz as
// inline SVG and coloured by precision and verdict (legend included), the
// site table (one row per candidate site: verdict, recipe, error with its
// 95% interval per recipe, local error, SQNR, amax, FP8 underflow, reason),
// and the log2 histograms of the worst sites' operands as inline SVG bars,
// with the e4m3 range their calibrated scale covers marked on each.
// A few lines of inline script only fill in a "nodes drawn" count, so a
// browser-driven test can see that the SVG was parsed into the DOM; the page
// reads the same without script.
// ============================================================================
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace loka::inspect {

struct HtmlReportInput {
  std::string model_path;   ///< shown in the title
  nlohmann::json model;     ///< the annotation document's "model" object (+ "pipeline", "name")
  nlohmann::json nodes;     ///< loka-inspect's node list in graph order; sites may carry "reason"
  std::string graph_svg;    ///< Graphviz's SVG of the graph (see dot_graph.h)
  int worst_sites = 5;      ///< how many histograms to draw
};

/// The whole HTML document.
std::string html_report(const HtmlReportInput& input);

}  // namespace loka::inspect
