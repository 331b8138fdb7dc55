// ============================================================================
// tools/inspect/dot_graph.cc — Graphviz source and rendering for loka-inspect.
// ============================================================================
#include "tools/inspect/dot_graph.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

extern char** environ;

namespace loka::inspect {
namespace {

constexpr Swatch kPalette[] = {{"runs in FP8", "#7fc97f"},   {"FP8 safe (Probe)", "#b3e2cd"},
                               {"FP8 unsafe (Probe)", "#fbb4ae"}, {"undecided (Probe)", "#fed9a6"},
                               {"bf16", "#cbd5e8"},          {"fp32, not a site", "#f2f2f2"}};

std::string dot_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

/// Absolute path of `program` on $PATH, empty when absent.
std::string find_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::filesystem::path candidate = std::filesystem::path(dir.empty() ? "." : dir) / program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return {};
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// A private temporary directory, removed when this goes out of scope.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "loka-inspect-XXXXXX").string();
    if (::mkdtemp(pattern.data())) path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace

std::span<const Swatch> palette() { return kPalette; }

std::string node_color(const nlohmann::json& node) {
  const std::string verdict = node["verdict"].is_string() ? node["verdict"].get<std::string>() : "";
  const std::string precision = node["precision"].is_string() ? node["precision"].get<std::string>() : "fp32";
  if (precision.rfind("fp8", 0) == 0) return kPalette[0].color;
  if (verdict == "safe") return kPalette[1].color;
  if (verdict == "unsafe") return kPalette[2].color;
  if (verdict == "undecided") return kPalette[3].color;
  return precision == "bf16" ? kPalette[4].color : kPalette[5].color;
}

std::string to_dot(const ir::Graph& graph, const nlohmann::json& nodes) {
  std::string dot = "digraph loka {\n  rankdir=TB;\n  node [shape=box, style=filled, fontname=\"Helvetica\"];\n";
  for (const auto& node : nodes) {
    const std::string name = node["name"].get<std::string>();
    // Escape the parts, not the joined label: "\\n" is dot's line break and must stay unescaped.
    std::string detail = node["op"].get<std::string>() + " · " + node["precision"].get<std::string>();
    if (node["verdict"].is_string()) detail += " · " + node["verdict"].get<std::string>();
    dot += "  \"" + dot_escape(name) + "\" [label=\"" + dot_escape(name) + "\\n" + dot_escape(detail) + "\", fillcolor=\"" +
           node_color(node) + "\"];\n";
  }
  for (const ir::Node* node : graph.nodes())
    for (const ir::Value* input : node->inputs())
      if (input && input->producer())
        dot += "  \"" + dot_escape(input->producer()->name()) + "\" -> \"" + dot_escape(node->name()) + "\";\n";
  return dot + "}\n";
}

Result<std::string> render_svg(const std::string& dot_source) {
  const std::string dot = find_on_path("dot");
  if (dot.empty())
    return Status::error("drawing the graph needs Graphviz's 'dot' program on the PATH (Debian: apt-get install graphviz)");
  ScratchDir scratch;
  if (scratch.path().empty()) return Status::error("cannot create a temporary directory for Graphviz");
  const auto source = scratch.path() / "graph.dot", svg = scratch.path() / "graph.svg", log = scratch.path() / "dot.log";
  {
    std::ofstream out(source, std::ios::binary);
    out << dot_source;
    if (!out) return Status::error("cannot write " + source.string());
  }
  // posix_spawn, not system(): no shell, so no quoting of paths.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  const std::string format = "-Tsvg", output = "-o" + svg.string(), input = source.string();
  char* argv[] = {const_cast<char*>("dot"), const_cast<char*>(format.c_str()), const_cast<char*>(output.c_str()),
                  const_cast<char*>(input.c_str()), nullptr};
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, dot.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return Status::error("cannot run " + dot + ": " + std::strerror(spawned));
  int wait_status = 0;
  if (::waitpid(pid, &wait_status, 0) != pid) return Status::error("lost the Graphviz process " + dot);
  if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
    std::string reason = read_file(log);
    reason = reason.substr(0, reason.find('\n'));
    return Status::error("Graphviz's dot failed" + (reason.empty() ? std::string() : ": " + reason));
  }
  std::string text = read_file(svg);
  if (text.find("<svg") == std::string::npos) return Status::error("Graphviz's dot wrote no SVG");
  return text;
}

}  // namespace loka::inspect
