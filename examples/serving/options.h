// ============================================================================
// examples/serving/options.h — the command line of loka-serve.
//
//   loka-serve MODEL.onnx [--data DIR] [--device cpu|cuda] [--threads N]
//              [--runs N] [--batch N] [--int-range N] [--seed N] [--tol ATOL]
//
// Parsing only: values are checked for range here (a count of 0 threads is a
// usage error), whether they suit the model is found out when it is loaded.
// ============================================================================
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "loka/engine.h"
#include "loka/status.h"

namespace serving {

/// Exit status of a command line loka-serve cannot use (runtime failures exit 1).
inline constexpr int kUsageExit = 2;

struct ServeOptions {
  bool help = false;                ///< --help: print usage() and exit 0
  std::filesystem::path model;
  std::filesystem::path data;       ///< empty: random inputs of the model's input shapes
  loka::Device device = loka::Device::kCpu;
  int threads = 4;                  ///< serving threads, one Session each
  int runs = 100;                   ///< timed runs per thread
  int64_t batch = 256;              ///< rows per random batch (the symbolic leading dim)
  int64_t int_range = 100;          ///< random integer inputs (embedding ids) are drawn from [0, int_range)
  uint64_t seed = 1;                ///< for random inputs
  double tolerance = 0;             ///< 0: outputs must be bitwise equal to the single-thread run
};

/// The help text.
std::string usage();

/// Parses argv; errors are one line naming the option at fault.
loka::Result<ServeOptions> parse_arguments(int argc, char** argv);

}  // namespace serving
