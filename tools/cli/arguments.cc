// ============================================================================
// tools/cli/arguments.cc — declarative argument parsing and generated help.
// ============================================================================
#include "tools/cli/arguments.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>

namespace loka::cli {
namespace {

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string text;
  for (size_t i = 0; i < items.size(); ++i) text += (i ? separator : "") + items[i];
  return text;
}

/// Messages come from libraries and from argv: keep the "one line" promise regardless.
std::string one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  std::replace(text.begin(), text.end(), '\r', ' ');
  return text;
}

}  // namespace

bool ParsedArguments::has(const std::string& option) const { return values_.count(option) != 0; }

std::string ParsedArguments::value(const std::string& option) const {
  auto it = values_.find(option);
  return it == values_.end() || it->second.empty() ? std::string() : it->second.back();
}

std::vector<std::string> ParsedArguments::values(const std::string& option) const {
  auto it = values_.find(option);
  return it == values_.end() ? std::vector<std::string>() : it->second;
}

Result<int64_t> ParsedArguments::integer(const std::string& option) const {
  const std::string text = value(option);
  int64_t result = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), result);
  if (text.empty() || error != std::errc() || end != text.data() + text.size())
    return Status::error(option + ": '" + text + "' is not an integer");
  return result;
}

Result<double> ParsedArguments::number(const std::string& option) const {
  const std::string text = value(option);
  char* end = nullptr;
  const double result = text.empty() ? NAN : std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(result))
    return Status::error(option + ": '" + text + "' is not a finite number");
  return result;
}

ArgumentParser::ArgumentParser(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {}

ArgumentParser& ArgumentParser::positional(std::string name, std::string help, bool optional) {
  positionals_.push_back({std::move(name), std::move(help), optional});
  return *this;
}

ArgumentParser& ArgumentParser::option(std::string name, std::string value_name, std::string help) {
  assert(name.rfind("--", 0) == 0 && !value_name.empty());
  Option option;
  option.name = std::move(name);
  option.value_name = std::move(value_name);
  option.help = std::move(help);
  options_.push_back(std::move(option));
  return *this;
}

ArgumentParser& ArgumentParser::flag(std::string name, std::string help) {
  assert(name.rfind("--", 0) == 0);
  Option option;
  option.name = std::move(name);
  option.help = std::move(help);
  options_.push_back(std::move(option));
  return *this;
}

ArgumentParser::Option& ArgumentParser::last_option() {
  assert(!options_.empty() && "a modifier needs an option declared before it");
  return options_.back();
}

ArgumentParser& ArgumentParser::alias(std::string short_name) {
  last_option().short_name = std::move(short_name);
  return *this;
}
ArgumentParser& ArgumentParser::required() {
  last_option().required = true;
  return *this;
}
ArgumentParser& ArgumentParser::repeated() {
  last_option().repeated = true;
  return *this;
}
ArgumentParser& ArgumentParser::default_value(std::string value) {
  last_option().default_value = std::move(value);
  return *this;
}
ArgumentParser& ArgumentParser::choices(std::vector<std::string> allowed) {
  last_option().choices = std::move(allowed);
  return *this;
}

const ArgumentParser::Option* ArgumentParser::find(const std::string& spelling) const {
  for (const Option& option : options_)
    if (option.name == spelling || (!option.short_name.empty() && option.short_name == spelling)) return &option;
  return nullptr;
}

Result<ParsedArguments> ArgumentParser::parse(int argc, const char* const* argv) const {
  ParsedArguments parsed;
  bool options_ended = false;
  for (int i = 1; i < argc; ++i) {
    const std::string argument = argv[i];
    if (options_ended || argument.size() < 2 || argument[0] != '-') {
      parsed.positionals_.push_back(argument);
      continue;
    }
    if (argument == "--") {
      options_ended = true;
      continue;
    }
    if (argument == "-h" || argument == "--help") {
      parsed.help_requested_ = true;
      return parsed;
    }
    const size_t equals = argument.rfind("--", 0) == 0 ? argument.find('=') : std::string::npos;
    const std::string spelling = argument.substr(0, equals);
    const Option* option = find(spelling);
    if (option == nullptr) return Status::error("unknown option '" + spelling + "' (see --help)");
    std::vector<std::string>& slot = parsed.values_[option->name];
    if (!slot.empty() && !option->repeated) return Status::error(option->name + " given more than once");
    if (option->value_name.empty()) {
      if (equals != std::string::npos) return Status::error(option->name + " takes no value");
      slot.emplace_back();
      continue;
    }
    std::string value;
    if (equals != std::string::npos) {
      value = argument.substr(equals + 1);
    } else {
      if (i + 1 >= argc) return Status::error(option->name + " needs a value " + option->value_name);
      value = argv[++i];
    }
    if (!option->choices.empty() && std::find(option->choices.begin(), option->choices.end(), value) == option->choices.end())
      return Status::error(option->name + ": '" + value + "' is not one of " + join(option->choices, ", "));
    slot.push_back(std::move(value));
  }

  size_t required_positionals = 0;
  for (const Positional& positional : positionals_) required_positionals += positional.optional ? 0 : 1;
  if (parsed.positionals_.size() < required_positionals)
    return Status::error("missing " + positionals_[parsed.positionals_.size()].name + " (see --help)");
  if (parsed.positionals_.size() > positionals_.size())
    return Status::error("unexpected argument '" + parsed.positionals_[positionals_.size()] + "' (see --help)");
  for (const Option& option : options_) {
    if (parsed.values_.count(option.name)) continue;
    if (option.required) return Status::error("missing required option " + option.name + " (see --help)");
    if (option.default_value) parsed.values_[option.name].push_back(*option.default_value);
  }
  return parsed;
}

std::string ArgumentParser::help() const {
  std::string usage = "usage: " + program_;
  for (const Positional& positional : positionals_)
    usage += positional.optional ? " [" + positional.name + "]" : " " + positional.name;
  std::vector<std::pair<std::string, std::string>> rows;
  for (const Positional& positional : positionals_) rows.emplace_back(positional.name, positional.help);
  for (const Option& option : options_) {
    const std::string spelled = option.name + (option.value_name.empty() ? "" : " " + option.value_name);
    usage += option.required ? " " + spelled : " [" + spelled + "]" + (option.repeated ? "..." : "");
    std::string help = option.help;
    if (option.required) help += " (required)";
    if (option.repeated) help += " (repeatable)";
    if (option.default_value && !option.default_value->empty()) help += " (default: " + *option.default_value + ")";
    rows.emplace_back((option.short_name.empty() ? "" : option.short_name + ", ") + spelled, help);
  }
  rows.emplace_back("-h, --help", "show this help and exit");

  size_t width = 0;
  for (const auto& row : rows) width = std::max(width, row.first.size());
  std::string text = usage + "\n\n" + summary_ + "\n\n";
  for (const auto& [left, right] : rows) text += "  " + left + std::string(width - left.size() + 2, ' ') + right + "\n";
  return text;
}

int usage_error(const std::string& program, const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", program.c_str(), one_line(message).c_str());
  return kUsageExitCode;
}

int runtime_error(const std::string& program, const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", program.c_str(), one_line(message).c_str());
  return kErrorExitCode;
}

std::optional<int> parse_or_exit_code(const ArgumentParser& parser, int argc, char** argv, ParsedArguments& arguments) {
  auto parsed = parser.parse(argc, argv);
  if (!parsed) return usage_error(parser.program(), parsed.status().message());
  if (parsed->help_requested()) {
    std::fputs(parser.help().c_str(), stdout);
    return 0;
  }
  arguments = std::move(parsed).value();
  return std::nullopt;
}

int guarded_main(const std::string& program, int (*body)(int, char**), int argc, char** argv) {
  try {
    return body(argc, argv);
  } catch (const std::exception& error) {
    return runtime_error(program, std::string("unexpected failure: ") + error.what());
  }
}

}  // namespace loka::cli
