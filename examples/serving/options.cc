// ============================================================================
// examples/serving/options.cc — parsing loka-serve's command line.
//
// Hand-written on purpose: the example depends on the installed runtime alone,
// and LoKA's own CLI helpers belong to its tools, not to its public API.
// ============================================================================
#include "options.h"

#include <charconv>
#include <limits>
#include <string_view>

namespace serving {
namespace {

/// More serving threads than this is a typo, not a deployment.
constexpr int kMaxThreads = 1024;

/// Parses a whole decimal integer in [lo, hi]; errors name the option.
template <typename Int>
loka::Result<Int> parse_int(std::string_view option, std::string_view text, Int lo, Int hi) {
  Int value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < lo || value > hi)
    return loka::Status::error(std::string(option) + " wants an integer in [" + std::to_string(lo) + ", " +
                               std::to_string(hi) + "], not '" + std::string(text) + "'");
  return value;
}

loka::Result<double> parse_tolerance(std::string_view text) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !(value >= 0))
    return loka::Status::error("--tol wants a non-negative number, not '" + std::string(text) + "'");
  return value;
}

}  // namespace

std::string usage() {
  return "usage: loka-serve MODEL.onnx [--data DIR] [--device cpu|cuda] [--threads N] [--runs N]\n"
         "                  [--batch N] [--int-range N] [--seed N] [--tol ATOL]\n"
         "\n"
         "Loads MODEL (an optimized model.loka.onnx or any ONNX model the runtime runs), runs every\n"
         "batch once on one Session for reference, then serves batches from N threads (one Session\n"
         "each), checks that every output equals the reference, and prints latency percentiles and\n"
         "throughput. Exit status: 0 all outputs equal, 1 a failure or a mismatch, 2 a usage error.\n"
         "\n"
         "  --data DIR       batches from a data directory (input_<i>.pb, test_data_set_<k>/, .npz);\n"
         "                   without it, random batches of the model's input shapes\n"
         "  --device D       cpu (default) or cuda\n"
         "  --threads N      serving threads (default 4)\n"
         "  --runs N         timed runs per thread (default 100), after one warm-up run per batch\n"
         "  --batch N        random batches: rows, i.e. the symbolic leading dim (default 256)\n"
         "  --int-range N    random batches: integer inputs (ids) are drawn from [0, N) (default 100)\n"
         "  --seed N         random batches: seed (default 1)\n"
         "  --tol ATOL       accept outputs within ATOL of the reference (default 0: bitwise equal)\n"
         "  --help           this text\n";
}

loka::Result<ServeOptions> parse_arguments(int argc, char** argv) {
  ServeOptions options;
  bool have_model = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      options.help = true;
      return options;
    }
    if (!arg.starts_with("--")) {
      if (have_model) return loka::Status::error("one model only: unexpected '" + std::string(arg) + "'");
      options.model = arg;
      have_model = true;
      continue;
    }
    if (i + 1 >= argc) return loka::Status::error(std::string(arg) + " needs a value");
    const std::string_view value = argv[++i];
    if (arg == "--data") {
      options.data = value;
    } else if (arg == "--device") {
      if (value == "cpu") options.device = loka::Device::kCpu;
      else if (value == "cuda") options.device = loka::Device::kCuda;
      else return loka::Status::error("--device is cpu or cuda, not '" + std::string(value) + "'");
    } else if (arg == "--threads") {
      LOKA_ASSIGN_OR_RETURN(options.threads, parse_int(arg, value, 1, kMaxThreads));
    } else if (arg == "--runs") {
      LOKA_ASSIGN_OR_RETURN(options.runs, parse_int(arg, value, 1, std::numeric_limits<int>::max()));
    } else if (arg == "--batch") {
      LOKA_ASSIGN_OR_RETURN(options.batch, parse_int<int64_t>(arg, value, 1, int64_t{1} << 24));
    } else if (arg == "--int-range") {
      LOKA_ASSIGN_OR_RETURN(options.int_range, parse_int<int64_t>(arg, value, 1, std::numeric_limits<int32_t>::max()));
    } else if (arg == "--seed") {
      LOKA_ASSIGN_OR_RETURN(options.seed, parse_int<uint64_t>(arg, value, 0, std::numeric_limits<uint64_t>::max()));
    } else if (arg == "--tol") {
      LOKA_ASSIGN_OR_RETURN(options.tolerance, parse_tolerance(value));
    } else {
      return loka::Status::error("unknown option '" + std::string(arg) + "'");
    }
  }
  if (!have_model) return loka::Status::error("no model given");
  return options;
}

}  // namespace serving
