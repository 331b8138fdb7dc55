// ============================================================================
// tools/inspect/html_report.cc — the self-contained HTML report of loka-inspect.
// ============================================================================
#include "tools/inspect/html_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "tools/inspect/dot_graph.h"
#include "tools/inspect/kernel_text.h"

namespace loka::inspect {
namespace {

std::string escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string format(const char* pattern, double value) {
  if (!std::isfinite(value)) return value > 0 ? "∞" : value < 0 ? "−∞" : "NaN";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, pattern, value);
  return buffer;
}

/// A number field of `object`, or NaN when absent or null (JSON has no infinity).
double number(const nlohmann::json& object, const char* key) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_number()) return NAN;
  return object[key].get<double>();
}

std::string text_field(const nlohmann::json& object, const char* key, const std::string& fallback = "–") {
  return object.is_object() && object.contains(key) && object[key].is_string() ? object[key].get<std::string>() : fallback;
}

bool is_site(const nlohmann::json& node) { return node.contains("verdict") && node["verdict"].is_string(); }

double error_mean(const nlohmann::json& node) {
  const double mean = node.contains("error") ? number(node["error"], "rel_l2_mean") : NAN;
  return std::isnan(mean) ? -1.0 : mean;
}

/// "1.2e-03 [8.0e-04, 1.6e-03]"; an open end (fewer than two batches) prints as ∞.
std::string error_cell(const nlohmann::json& error) {
  if (!error.is_object()) return "–";
  std::string cell = format("%.2e", number(error, "rel_l2_mean"));
  if (error.contains("rel_l2_ci95") && error["rel_l2_ci95"].is_array() && error["rel_l2_ci95"].size() == 2) {
    const auto& ci = error["rel_l2_ci95"];
    const double lo = ci[0].is_number() ? ci[0].get<double>() : 0.0;
    const double hi = ci[1].is_number() ? ci[1].get<double>() : INFINITY;
    cell += " <span class=\"ci\">[" + format("%.1e", lo) + ", " + format("%.1e", hi) + "]</span>";
  }
  return cell;
}

const nlohmann::json& member(const nlohmann::json& object, const char* key) {
  static const nlohmann::json kNull;
  return object.is_object() && object.contains(key) ? object[key] : kNull;
}

// ------------------------------------------------------------- sections -----

std::string summary_section(const HtmlReportInput& input) {
  size_t sites = 0, safe = 0, unsafe = 0, undecided = 0;
  for (const auto& node : input.nodes) {
    if (!is_site(node)) continue;
    ++sites;
    const std::string verdict = node["verdict"];
    safe += verdict == "safe";
    unsafe += verdict == "unsafe";
    undecided += verdict == "undecided";
  }
  std::string html = "<section id=\"summary\"><h2>Summary</h2><dl>";
  const auto row = [&](const std::string& key, const std::string& value) {
    html += "<dt>" + escape(key) + "</dt><dd>" + value + "</dd>";
  };
  row("model", escape(input.model_path));
  row("nodes", std::to_string(input.nodes.size()));
  if (input.model.contains("pipeline") && input.model["pipeline"].is_string())
    row("pipeline", "<code>" + escape(input.model["pipeline"].get<std::string>()) + "</code>");
  row("candidate sites", std::to_string(sites) + " (" + std::to_string(safe) + " safe, " + std::to_string(unsafe) +
                             " unsafe, " + std::to_string(undecided) + " undecided)");
  const nlohmann::json& probe = member(input.model, "probe");
  if (probe.is_object()) {
    row("budget", escape(text_field(probe, "budget")) + ", per site " + format("%.3g", number(probe, "site_threshold")));
    row("batches", format("%.0f", number(probe, "batches_used")) + " of " + format("%.0f", number(probe, "batches_limit")) +
                       (probe.value("early_stopped", false) ? " (stopped early: every verdict decided)" : "") +
                       "; amax from " + format("%.0f", number(probe, "amax_batches")));
    row("calibration data", escape(text_field(probe, "calibration")));
    row("Probe time", format("%.2f s", number(probe, "seconds")));
  } else {
    row("Probe", "no Probe annotations: run <code>loka-opt --pipeline probe --calib DATA</code> first");
  }
  return html + "</dl></section>\n";
}

std::string graph_section(const HtmlReportInput& input) {
  std::string html = "<section id=\"graph-section\"><h2>Graph</h2><ul class=\"legend\">";
  for (const Swatch& swatch : palette())
    html += std::string("<li><span class=\"swatch\" style=\"background:") + swatch.color + "\"></span>" +
            escape(swatch.meaning) + "</li>";
  html += "</ul>\n<div id=\"graph\" class=\"graph\">";
  // Inline the <svg> element itself: the XML prolog and DOCTYPE are not valid inside HTML.
  const size_t start = input.graph_svg.find("<svg");
  html += start == std::string::npos ? std::string() : input.graph_svg.substr(start);
  html += "</div>\n<p id=\"render-check\" data-expected=\"" + std::to_string(input.nodes.size()) + "\">" +
          std::to_string(input.nodes.size()) + " nodes in the model</p></section>\n";
  return html;
}

std::string site_table(const HtmlReportInput& input) {
  std::string html =
      "<section id=\"sites-section\"><h2>Candidate sites</h2>\n<table id=\"sites\"><thead><tr>"
      "<th>#</th><th>node</th><th>op</th><th>kind</th><th>shape</th><th>FLOPs/sample</th><th>precision</th>"
      "<th>verdict</th><th>recipe</th><th>error (rel L2, 95% CI)</th><th>e4m3_tensor</th><th>e4m3_row</th>"
      "<th>local error</th><th>SQNR dB</th><th>amax</th><th>e4m3 underflow</th><th>batches</th><th>kernel</th>"
      "<th>why sensitive</th></tr></thead><tbody>\n";
  size_t index = 0;
  for (const auto& node : input.nodes) {
    if (!is_site(node)) continue;
    ++index;
    const std::string verdict = node["verdict"];
    const nlohmann::json& error = member(node, "error");
    const nlohmann::json& recipes = member(node, "recipes");
    const nlohmann::json& activation = member(member(node, "stats"), "activation");
    html += "<tr class=\"site verdict-" + escape(verdict) + "\" id=\"site-" + std::to_string(index) + "\">";
    html += "<td>" + std::to_string(index) + "</td>";
    html += "<td class=\"name\">" + escape(node["name"].get<std::string>()) + "</td>";
    html += "<td>" + escape(text_field(node, "op")) + "</td>";
    html += "<td>" + escape(text_field(node, "site")) + "</td>";
    html += "<td>" + escape(text_field(node, "shape")) + "</td>";
    html += "<td class=\"num\">" + format("%.3g", number(node, "flops")) + "</td>";
    html += "<td>" + escape(text_field(node, "precision")) + "</td>";
    html += "<td class=\"verdict\" style=\"background:" + node_color(node) + "\">" + escape(verdict) + "</td>";
    html += "<td>" + escape(text_field(node, "recipe")) + "</td>";
    html += "<td class=\"num\">" + error_cell(error) + "</td>";
    for (const char* recipe : {"e4m3_tensor", "e4m3_row"})
      html += "<td class=\"num\">" + error_cell(member(member(recipes, recipe), "error")) + "</td>";
    html += "<td class=\"num\">" + error_cell(member(node, "local_error")) + "</td>";
    html += "<td class=\"num\">" + format("%.1f", number(error, "sqnr_db")) + "</td>";
    html += "<td class=\"num\">" + format("%.3g", number(activation, "amax")) + "</td>";
    html += "<td class=\"num\">" + format("%.2g", number(activation, "underflow_fraction_e4m3")) + "</td>";
    html += "<td class=\"num\">" + format("%.0f", number(error, "batches")) + "</td>";
    html += "<td>" + escape(kernel_text(node)) + "</td>";
    html += "<td>" + escape(text_field(node, "reason", "")) + "</td></tr>\n";
  }
  if (index == 0) html += "<tr><td colspan=\"19\">no candidate sites annotated</td></tr>\n";
  return html + "</tbody></table></section>\n";
}

/// Bars of log2|v| (one per octave, log-scaled counts) with the e4m3 window of `scale` shaded around them.
std::string histogram_svg(const nlohmann::json& stats, const std::string& caption) {
  const nlohmann::json& bins = member(stats, "log2_histogram");
  if (!bins.is_array() || bins.empty())
    return "<p class=\"muted\">" + escape(caption) + ": no histogram recorded (re-run the Probe)</p>";
  std::vector<std::pair<int, double>> octaves;
  for (const auto& bin : bins)
    if (bin.is_array() && bin.size() == 2 && bin[0].is_number_integer() && bin[1].is_number())
      octaves.emplace_back(bin[0].get<int>(), bin[1].get<double>());
  if (octaves.empty()) return "<p class=\"muted\">" + escape(caption) + ": empty histogram</p>";
  const double scale = number(stats, "scale_e4m3");
  const bool have_scale = std::isfinite(scale) && scale > 0;
  // Below 2^-10·scale e4m3 rounds to zero; 2^-6·scale starts the normals; 448·scale saturates.
  const double flush = have_scale ? std::log2(scale) - 10 : NAN;
  const double normal = have_scale ? std::log2(scale) - 6 : NAN;
  const double saturate = have_scale ? std::log2(448.0 * scale) : NAN;
  int lo = octaves.front().first, hi = octaves.back().first + 1;
  if (have_scale) {
    lo = std::min(lo, static_cast<int>(std::floor(flush)) - 1);
    hi = std::max(hi, static_cast<int>(std::ceil(saturate)) + 1);
  }
  hi = std::min(hi, lo + 96);  // a bounded width whatever the data
  double zeros = number(stats, "zeros");
  if (std::isnan(zeros)) zeros = std::round(number(stats, "zero_fraction") * number(stats, "values"));
  if (!std::isfinite(zeros)) zeros = 0;
  double max_count = zeros;
  for (const auto& [e, n] : octaves) max_count = std::max(max_count, n);

  constexpr double kWidth = 470, kHeight = 170, kLeft = 50, kRight = 8, kTop = 22, kBottom = 30;
  const double zero_slot = zeros > 0 ? 34 : 0;
  const double plot_left = kLeft + zero_slot, plot_width = kWidth - plot_left - kRight, plot_height = kHeight - kTop - kBottom;
  const double per_octave = plot_width / (hi - lo);
  const auto x_of = [&](double exponent) { return plot_left + (std::clamp(exponent, double(lo), double(hi)) - lo) * per_octave; };
  const auto height_of = [&](double n) { return n > 0 ? plot_height * std::log1p(n) / std::log1p(max_count) : 0.0; };
  const auto num = [](double v) { return format("%.1f", v); };

  std::string svg = "<svg class=\"histogram\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(kWidth) + "\" height=\"" +
                    num(kHeight) + "\" viewBox=\"0 0 " + num(kWidth) + " " + num(kHeight) + "\" role=\"img\">";
  svg += "<text x=\"" + num(kLeft) + "\" y=\"14\" class=\"caption\">" + escape(caption) + " — log2|v|, count on a log scale</text>";
  if (have_scale) {
    const auto band = [&](double from, double to, const char* css, const char* what) {
      if (to <= lo || from >= hi) return;
      svg += "<rect class=\"" + std::string(css) + "\" x=\"" + num(x_of(from)) + "\" y=\"" + num(kTop) + "\" width=\"" +
             num(x_of(to) - x_of(from)) + "\" height=\"" + num(plot_height) + "\"><title>" + what + "</title></rect>";
    };
    band(lo, flush, "flush", "rounds to zero in e4m3 at this scale");
    band(flush, normal, "subnormal", "e4m3 subnormals: fewer significant bits");
    band(saturate, hi, "saturate", "saturates at the e4m3 maximum (448 × scale)");
  }
  for (const auto& [e, n] : octaves) {
    if (e < lo || e >= hi) continue;
    const double h = height_of(n);
    svg += "<rect class=\"bar\" x=\"" + num(x_of(e) + 0.5) + "\" y=\"" + num(kTop + plot_height - h) + "\" width=\"" +
           num(std::max(1.0, per_octave - 1)) + "\" height=\"" + num(h) + "\"><title>2^" + std::to_string(e) +
           " ≤ |v| &lt; 2^" + std::to_string(e + 1) + ": " + format("%.0f", n) + " values</title></rect>";
  }
  if (zeros > 0) {
    const double h = height_of(zeros);
    svg += "<rect class=\"bar zero\" x=\"" + num(kLeft + 2) + "\" y=\"" + num(kTop + plot_height - h) +
           "\" width=\"16\" height=\"" + num(h) + "\"><title>zeros: " + format("%.0f", zeros) + " values</title></rect>";
    svg += "<text class=\"tick\" x=\"" + num(kLeft + 10) + "\" y=\"" + num(kHeight - kBottom + 14) + "\">0</text>";
  }
  svg += "<line class=\"axis\" x1=\"" + num(kLeft) + "\" y1=\"" + num(kTop + plot_height) + "\" x2=\"" + num(kWidth - kRight) +
         "\" y2=\"" + num(kTop + plot_height) + "\"/>";
  const int step = std::max(1, (hi - lo + 9) / 10);
  for (int e = lo; e <= hi; e += step)
    svg += "<text class=\"tick\" x=\"" + num(x_of(e)) + "\" y=\"" + num(kHeight - kBottom + 14) + "\">2<tspan dy=\"-4\" font-size=\"8\">" +
           std::to_string(e) + "</tspan></text>";
  svg += "<text class=\"tick\" x=\"" + num(kLeft - 4) + "\" y=\"" + num(kTop + 8) + "\" text-anchor=\"end\">" +
         format("%.0f", max_count) + "</text>";
  return svg + "</svg>";
}

std::string worst_sites_section(const HtmlReportInput& input) {
  if (input.worst_sites <= 0) return "";  // --top 0: no histograms asked for
  std::vector<const nlohmann::json*> sites;
  for (const auto& node : input.nodes)
    if (is_site(node) && error_mean(node) >= 0) sites.push_back(&node);
  std::stable_sort(sites.begin(), sites.end(), [](const auto* a, const auto* b) { return error_mean(*a) > error_mean(*b); });
  if (sites.size() > static_cast<size_t>(std::max(0, input.worst_sites))) sites.resize(static_cast<size_t>(std::max(0, input.worst_sites)));
  std::string html = "<section id=\"worst\"><h2>Most sensitive sites: value histograms</h2>"
                     "<p class=\"muted\">Shaded: where e4m3 at the calibrated per-tensor scale flushes to zero (red, left), "
                     "has subnormals only (amber), or saturates (red, right).</p>\n";
  if (sites.empty()) return html + "<p>no measured sites</p></section>\n";
  for (const nlohmann::json* site : sites) {
    const nlohmann::json& node = *site;
    const nlohmann::json& stats = member(node, "stats");
    const bool embedding = text_field(node, "site", "") == "embedding";
    html += "<div class=\"card\"><h3>" + escape(node["name"].get<std::string>()) + " <small>" + escape(text_field(node, "op")) +
            " · " + escape(node["verdict"].get<std::string>()) + " · error " + error_cell(member(node, "error")) + "</small></h3>";
    if (node.contains("reason") && node["reason"].is_string()) html += "<p>" + escape(node["reason"].get<std::string>()) + "</p>";
    html += histogram_svg(member(stats, "activation"), embedding ? "embedding table" : "activation");
    // Weights are scaled per output channel: the window drawn is the widest channel's.
    if (stats.is_object() && stats.contains("weight")) html += histogram_svg(stats["weight"], "weight (window at its amax)");
    if (stats.is_object() && stats.contains("activation_b")) html += histogram_svg(stats["activation_b"], "second activation");
    html += "</div>\n";
  }
  return html + "</section>\n";
}

constexpr const char* kStyle = R"(
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
dl { display: grid; grid-template-columns: max-content auto; gap: 0.2em 1em; } dt { color: #666; } dd { margin: 0; }
.legend { list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: 1em; }
.swatch { display: inline-block; width: 1em; height: 1em; border: 1px solid #999; margin-right: 0.3em; vertical-align: middle; }
.graph { overflow: auto; max-height: 80vh; border: 1px solid #ddd; background: #fff; }
table { border-collapse: collapse; font-size: 12px; } th, td { border: 1px solid #ddd; padding: 2px 6px; text-align: left; }
th { background: #f5f5f5; position: sticky; top: 0; } td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.name { font-family: monospace; } .ci { color: #777; } .muted { color: #777; }
.card { display: inline-block; vertical-align: top; border: 1px solid #ddd; margin: 0.5em; padding: 0.5em; }
.card h3 { font-size: 1em; margin: 0 0 0.3em; font-family: monospace; } .card small { font-family: system-ui, sans-serif; color: #555; }
svg.histogram .bar { fill: #4a78b0; } svg.histogram .bar.zero { fill: #888; }
svg.histogram .flush, svg.histogram .saturate { fill: #fbb4ae; opacity: 0.5; } svg.histogram .subnormal { fill: #fed9a6; opacity: 0.5; }
svg.histogram .axis { stroke: #444; } svg.histogram .tick { font-size: 10px; fill: #444; text-anchor: middle; }
svg.histogram .caption { font-size: 11px; fill: #222; }
)";

// Counts what the browser actually parsed as SVG graph nodes; without script the static text stays.
constexpr const char* kScript = R"(
(function () {
  var check = document.getElementById('render-check');
  var drawn = document.querySelectorAll('#graph svg g.node').length;
  check.textContent = drawn + ' of ' + check.dataset.expected + ' nodes drawn';
  check.dataset.drawn = drawn;
})();
)";

}  // namespace

std::string html_report(const HtmlReportInput& input) {
  const std::string name = input.model.contains("name") && input.model["name"].is_string() && !input.model["name"].get<std::string>().empty()
                               ? input.model["name"].get<std::string>()
                               : input.model_path;
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>LoKA inspect: " + escape(name) +
                     "</title>\n<style>" + kStyle + "</style></head>\n<body>\n<h1>LoKA inspect: " + escape(name) + "</h1>\n";
  html += summary_section(input);
  html += graph_section(input);
  html += site_table(input);
  html += worst_sites_section(input);
  html += std::string("<script>") + kScript + "</script>\n</body></html>\n";
  return html;
}

}  // namespace loka::inspect
