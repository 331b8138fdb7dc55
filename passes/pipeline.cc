// ============================================================================
// passes/pipeline.cc — parsing and printing pipeline strings.
// ============================================================================
#include "passes/pipeline.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace loka {
namespace {

std::string trim(const std::string& text) {
  size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  return text.substr(begin, end - begin);
}

Status check_option_value(const PassOption& option, const std::string& value) {
  char* end = nullptr;
  switch (option.type) {
    case OptionType::kInt:
      std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0') return Status::error("option '" + option.name + "' needs an integer, got '" + value + "'");
      break;
    case OptionType::kFloat:
      std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0') return Status::error("option '" + option.name + "' needs a number, got '" + value + "'");
      break;
    case OptionType::kBool:
      if (value != "true" && value != "false" && value != "1" && value != "0")
        return Status::error("option '" + option.name + "' needs true or false, got '" + value + "'");
      break;
    case OptionType::kString:
      if (!option.choices.empty() && std::find(option.choices.begin(), option.choices.end(), value) == option.choices.end()) {
        std::string accepted;
        for (const std::string& choice : option.choices) accepted += (accepted.empty() ? "" : ", ") + choice;
        return Status::error("option '" + option.name + "' needs one of " + accepted + ", got '" + value + "'");
      }
      break;
  }
  return Status::ok();
}

/// Splits on `separator` outside braces.
std::vector<std::string> split_top_level(const std::string& text, char separator) {
  std::vector<std::string> parts;
  int depth = 0;
  std::string current;
  for (char c : text) {
    if (c == '{') ++depth;
    if (c == '}') --depth;
    if (c == separator && depth == 0) {
      parts.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  parts.push_back(current);
  return parts;
}

}  // namespace

Result<Pipeline> parse_pipeline(const std::string& text, const PassRegistry& registry) {
  Pipeline pipeline;
  if (trim(text).empty()) return pipeline;
  for (const std::string& raw : split_top_level(text, ',')) {
    const std::string item = trim(raw);
    const size_t brace = item.find('{');
    const std::string name = trim(item.substr(0, brace));
    const PassInfo* info = registry.find(name);
    if (info == nullptr) {
      std::string known;
      for (const PassInfo* p : registry.all()) known += (known.empty() ? "" : ", ") + p->name;
      return Status::error("pipeline: unknown pass '" + name + "' (known: " + known + ")");
    }
    PipelineEntry entry{name, {}};
    for (const PassOption& option : info->options) entry.options[option.name] = option.default_value;
    if (brace != std::string::npos) {
      if (item.back() != '}') return Status::error("pipeline: options of '" + name + "' must end with '}'");
      const std::string body = item.substr(brace + 1, item.size() - brace - 2);
      for (const std::string& assignment : split_top_level(body, ',')) {
        if (trim(assignment).empty()) continue;
        const size_t equals = assignment.find('=');
        if (equals == std::string::npos) return Status::error("pipeline: '" + trim(assignment) + "' in '" + name + "' needs name=value");
        const std::string key = trim(assignment.substr(0, equals));
        const std::string value = trim(assignment.substr(equals + 1));
        const PassOption* option = nullptr;
        for (const PassOption& candidate : info->options)
          if (candidate.name == key) option = &candidate;
        if (option == nullptr) return Status::error("pipeline: pass '" + name + "' has no option '" + key + "'");
        LOKA_RETURN_IF_ERROR(check_option_value(*option, value).with_context("pipeline: pass '" + name + "': "));
        entry.options[key] = value;
      }
    }
    pipeline.push_back(std::move(entry));
  }
  return pipeline;
}

std::string print_pipeline(const Pipeline& pipeline, const PassRegistry& registry, bool with_defaults) {
  std::string text;
  for (const PipelineEntry& entry : pipeline) {
    if (!text.empty()) text += ",";
    text += entry.pass;
    const PassInfo* info = registry.find(entry.pass);
    std::string options;
    if (info != nullptr) {
      for (const PassOption& option : info->options) {
        const std::string& value = entry.options.at(option.name);
        if (!with_defaults && value == option.default_value) continue;
        options += (options.empty() ? "" : ",") + option.name + "=" + value;
      }
    }
    if (!options.empty()) text += "{" + options + "}";
  }
  return text;
}

}  // namespace loka
