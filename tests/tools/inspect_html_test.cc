// ============================================================================
// tests/tools/inspect_html_test.cc — `loka-inspect --html` opened in a real
// headless browser (Debian's chromium): the graph renders every node, the
// site table has one row per site, the worst sites have histograms, and the
// page loads nothing from elsewhere.
// ============================================================================
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "test_support.h"

namespace loka {
namespace {

std::string tool(const char* name) { return (testing::tools_dir() / name).string(); }
std::string zoo(const char* model) { return (testing::source_dir() / "models" / "zoo" / model).string(); }

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// First program of `names` on the PATH, or empty.
std::string find_program(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    auto found = testing::run_command(std::string("command -v ") + name);
    if (found.exit_code == 0 && !found.output.empty()) return found.output.substr(0, found.output.find('\n'));
  }
  return {};
}

/// How the browser serializes text: &, <, > escaped.
std::string dom_text(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : std::string(1, c);
  return out;
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
  return n;
}

/// text[from the first `open` to the first `close` after it], or empty.
std::string section(const std::string& text, const std::string& open, const std::string& close) {
  const size_t start = text.find(open);
  if (start == std::string::npos) return {};
  const size_t end = text.find(close, start);
  return end == std::string::npos ? std::string() : text.substr(start, end - start);
}

TEST(LokaInspectHtml, RendersEveryNodeAndSiteInHeadlessChromium) {
  const std::string dot = find_program({"dot"});
  const std::string browser = find_program({"chromium", "chromium-headless-shell"});
  if (dot.empty()) GTEST_SKIP() << "Graphviz's dot is not installed (apt-get install graphviz; scripts/install-deps.sh)";
  if (browser.empty())
    GTEST_SKIP() << "no chromium to open the report in (apt-get install chromium-headless-shell; scripts/install-deps.sh)";

  const auto dir = testing::make_temp_dir("loka-inspect-html");
  const std::string model = (dir / "probed.onnx").string();
  auto opt = testing::run_command(tool("loka-opt") + " " + zoo("dlrm_dcnv2") + "/model.onnx -o " + model + " --calib " +
                                  zoo("dlrm_dcnv2") + "/calib");
  ASSERT_EQ(opt.exit_code, 0) << opt.output;
  auto json = testing::run_command(tool("loka-inspect") + " " + model + " --json");
  ASSERT_EQ(json.exit_code, 0) << json.output;
  const auto document = nlohmann::json::parse(json.output);
  const auto& nodes = document["nodes"];
  size_t sites = 0;
  for (const auto& node : nodes) sites += node["verdict"].is_string();
  ASSERT_GE(sites, 5u);

  const auto report = dir / "report.html";
  auto html = testing::run_command(tool("loka-inspect") + " " + model + " --html " + report.string());
  ASSERT_EQ(html.exit_code, 0) << html.output;
  const std::string page = read_text(report);
  // Self-contained: nothing fetched (the SVG namespace URIs are names, not loads).
  EXPECT_EQ(page.find("<link"), std::string::npos);
  EXPECT_EQ(page.find(" src="), std::string::npos);
  EXPECT_EQ(page.find("href=\"http"), std::string::npos);
  EXPECT_EQ(page.find("url("), std::string::npos);

  const auto dom_file = dir / "dom.html", log_file = dir / "chromium.log";
  auto run = testing::run_command(browser + " --headless --no-sandbox --disable-gpu --user-data-dir=" + (dir / "profile").string() +
                                  " --dump-dom file://" + report.string() + " > " + dom_file.string() + " 2> " + log_file.string());
  ASSERT_EQ(run.exit_code, 0) << read_text(log_file);
  const std::string dom = read_text(dom_file);
  ASSERT_FALSE(dom.empty()) << read_text(log_file);

  // The graph: one SVG node (Graphviz's <g class="node"><title>name</title>) per model node.
  const std::string graph = section(dom, "<div id=\"graph\"", "</svg>");
  ASSERT_FALSE(graph.empty()) << "no graph in the rendered DOM";
  EXPECT_EQ(count(graph, "class=\"node\""), nodes.size());
  for (const auto& node : nodes)
    EXPECT_NE(graph.find("<title>" + dom_text(node["name"].get<std::string>()) + "</title>"), std::string::npos)
        << node["name"] << " is not drawn";
  // The page's script saw the same count in the live DOM (SVG parsed as SVG, not as text).
  const std::string drawn = std::to_string(nodes.size()) + " of " + std::to_string(nodes.size()) + " nodes drawn";
  EXPECT_NE(dom.find(drawn), std::string::npos) << section(dom, "<p id=\"render-check\"", "</p>");

  // The site table: one row per site, each named.
  const std::string table = section(dom, "<table id=\"sites\"", "</table>");
  ASSERT_FALSE(table.empty());
  EXPECT_EQ(count(table, "<tr class=\"site "), sites);
  for (const auto& node : nodes) {
    if (!node["verdict"].is_string()) continue;
    EXPECT_NE(table.find("<td class=\"name\">" + dom_text(node["name"].get<std::string>()) + "</td>"), std::string::npos)
        << node["name"];
  }
  // Histograms of the 5 worst sites: activation and weight (or table) each, with bars.
  const std::string worst = section(dom, "<section id=\"worst\"", "</section>");
  EXPECT_EQ(count(worst, "<div class=\"card\">"), 5u);
  EXPECT_GE(count(worst, "<svg class=\"histogram\""), 5u);
  EXPECT_GE(count(worst, "<rect class=\"bar"), 5u);
}

TEST(LokaInspectHtml, MissingGraphvizIsAOneLineError) {
  const auto dir = testing::make_temp_dir("loka-inspect-nodot");
  // An empty PATH: no dot to be found. The model needs no annotations for this.
  auto run = testing::run_command("env PATH=" + dir.string() + " " + tool("loka-inspect") + " " + zoo("dlrm_dot") +
                                  "/model.onnx --html " + (dir / "report.html").string());
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("Graphviz's 'dot'"), std::string::npos) << run.output;
  EXPECT_EQ(count(run.output, "\n"), 1u) << run.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "report.html"));
}

}  // namespace
}  // namespace loka
