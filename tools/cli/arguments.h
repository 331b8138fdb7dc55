// ============================================================================
// tools/cli/arguments.h — the command-line parser shared by loka-run,
// loka-opt and loka-inspect.
//
// A tool declares its positional arguments and options once; the same
// declarations drive parsing, validation (required options, allowed values,
// numbers) and the generated `--help` text, so the help can never drift from
// what the parser accepts. Errors are one line; by convention a tool prints
// "<tool>: <reason>" and exits 2 for usage errors (see usage_error()).
//
//   ArgumentParser parser("loka-run", "Runs an ONNX model on data sets.");
//   parser.positional("MODEL.onnx", "the model to run")
//         .option("--inputs", "DATA", "data directory or .npz").required()
//         .option("--device", "cpu|cuda", "where to run").choices({"cpu", "cuda"}).default_value("cpu");
//   auto args = parser.parse(argc, argv);
// ============================================================================
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "loka/status.h"

namespace loka::cli {

/// Exit code for usage errors (bad flags or values), as most Unix tools use.
inline constexpr int kUsageExitCode = 2;
/// Exit code for every other failure.
inline constexpr int kErrorExitCode = 1;

/// What a command line said, after validation against the declarations.
class ParsedArguments {
 public:
  /// True when -h/--help was given; nothing else was validated then.
  bool help_requested() const { return help_requested_; }
  /// Positional arguments in order.
  const std::vector<std::string>& positionals() const { return positionals_; }
  /// Whether the option was given (or has a default).
  bool has(const std::string& option) const;
  /// The option's last value (or its default); empty when absent.
  std::string value(const std::string& option) const;
  /// Every value of a repeated option, in command-line order.
  std::vector<std::string> values(const std::string& option) const;
  /// The option's value as an integer; an error names the option when it is not one.
  Result<int64_t> integer(const std::string& option) const;
  /// The option's value as a finite number; an error names the option when it is not one.
  Result<double> number(const std::string& option) const;

 private:
  friend class ArgumentParser;
  bool help_requested_ = false;
  std::vector<std::string> positionals_;
  std::map<std::string, std::vector<std::string>> values_;
};

class ArgumentParser {
 public:
  ArgumentParser(std::string program, std::string summary);

  /// Declares the next positional argument (required unless `optional` is set).
  ArgumentParser& positional(std::string name, std::string help, bool optional = false);
  /// Declares an option taking a value: `--name VALUE` or `--name=VALUE`.
  ArgumentParser& option(std::string name, std::string value_name, std::string help);
  /// Declares an option without a value (a switch).
  ArgumentParser& flag(std::string name, std::string help);
  /// Modifiers of the option declared last.
  ArgumentParser& alias(std::string short_name);  ///< e.g. "-o"
  ArgumentParser& required();
  ArgumentParser& repeated();                      ///< may be given more than once
  ArgumentParser& default_value(std::string value);
  ArgumentParser& choices(std::vector<std::string> allowed);

  /// Parses argv[1..argc). Errors are one line (no program prefix).
  Result<ParsedArguments> parse(int argc, const char* const* argv) const;
  /// The generated usage line and option table.
  std::string help() const;
  const std::string& program() const { return program_; }

 private:
  struct Option {
    std::string name;
    std::string short_name;
    std::string value_name;  ///< empty for a switch
    std::string help;
    std::optional<std::string> default_value;
    std::vector<std::string> choices;
    bool required = false;
    bool repeated = false;
  };
  struct Positional {
    std::string name;
    std::string help;
    bool optional = false;
  };
  const Option* find(const std::string& spelling) const;
  Option& last_option();

  std::string program_;
  std::string summary_;
  std::vector<Positional> positionals_;
  std::vector<Option> options_;
};

/// Prints "<program>: <message>" on stderr and returns kUsageExitCode.
int usage_error(const std::string& program, const std::string& message);
/// Prints "<program>: <message>" on stderr and returns kErrorExitCode.
int runtime_error(const std::string& program, const std::string& message);
/// Returns `body(argc, argv)`; an exception escaping it (the libraries report errors as
/// Status, so in practice an allocation failure) becomes runtime_error's one line.
int guarded_main(const std::string& program, int (*body)(int, char**), int argc, char** argv);

/// Parses argv with `parser`. When the command line asked for --help (help printed, exit 0)
/// or is wrong (one-line usage error printed, exit 2), returns the exit code to leave with;
/// otherwise fills `arguments` and returns nothing.
std::optional<int> parse_or_exit_code(const ArgumentParser& parser, int argc, char** argv, ParsedArguments& arguments);

}  // namespace loka::cli
