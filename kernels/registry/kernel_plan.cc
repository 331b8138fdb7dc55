// ============================================================================
// kernels/registry/kernel_plan.cc — writing and parsing "loka.kernels".
// ============================================================================
#include "kernels/registry/kernel_plan.h"

#include <algorithm>
#include <charconv>
#include <sstream>

namespace loka::kernels {

std::string KernelPlan::to_text() const {
  std::string text = "loka.kernels 1\ndevice\t" + device + "\n";
  for (const auto& [node, choices] : nodes)
    for (const KernelChoice& choice : choices)
      text += node + "\t" + std::to_string(choice.m) + "\t" + choice.candidate + "\n";
  return text;
}

const KernelChoice* KernelPlan::choose(const std::string& node, int64_t m) const {
  const auto it = nodes.find(node);
  if (it == nodes.end() || it->second.empty()) return nullptr;
  const KernelChoice* best = nullptr;
  int64_t best_distance = 0;
  for (const KernelChoice& choice : it->second) {
    const int64_t distance = choice.m > m ? choice.m - m : m - choice.m;
    if (!best || distance < best_distance || (distance == best_distance && choice.m > best->m)) {
      best = &choice;
      best_distance = distance;
    }
  }
  return best;
}

Result<KernelPlan> parse_kernel_plan(const std::string& text) {
  KernelPlan plan;
  std::istringstream in(text);
  std::string line;
  size_t number = 0;
  const auto bad = [&](const std::string& why) {
    return Status::error(std::string(kKernelPlanKey) + " line " + std::to_string(number) + ": " + why);
  };
  while (std::getline(in, line)) {
    ++number;
    if (number == 1) {
      if (line != "loka.kernels 1") return bad("expected the header 'loka.kernels 1'");
      continue;
    }
    if (line.empty()) continue;
    const size_t first = line.find('\t');
    if (first == std::string::npos) return bad("expected tab-separated fields");
    if (line.compare(0, first, "device") == 0 && number == 2) {
      plan.device = line.substr(first + 1);
      continue;
    }
    const size_t second = line.find('\t', first + 1);
    if (second == std::string::npos) return bad("expected <node> <M> <kernel>");
    KernelChoice choice;
    const char* begin = line.data() + first + 1;
    const char* end = line.data() + second;
    const auto [stop, error] = std::from_chars(begin, end, choice.m);
    if (error != std::errc() || stop != end || choice.m <= 0) return bad("M must be a positive integer");
    choice.candidate = line.substr(second + 1);
    if (choice.candidate.empty()) return bad("empty kernel name");
    plan.nodes[line.substr(0, first)].push_back(std::move(choice));
  }
  if (number == 0) return bad("empty");
  for (auto& [node, choices] : plan.nodes)
    std::sort(choices.begin(), choices.end(), [](const KernelChoice& a, const KernelChoice& b) { return a.m < b.m; });
  return plan;
}

}  // namespace loka::kernels
