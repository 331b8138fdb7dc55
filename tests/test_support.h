// ============================================================================
// tests/test_support.h — shared helpers for the GoogleTest suites.
// ============================================================================
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "loka/engine.h"
#include "loka/status.h"
#include "loka/tensor.h"

namespace loka::testing {

/// The source tree (for bundled models and data).
std::filesystem::path source_dir();
/// Where loka-run, loka-opt and loka-inspect were built.
std::filesystem::path tools_dir();
/// Every zoo model folder holding a model.onnx, relative to models/zoo ("dhen",
/// "exports/dhen_torchscript_op13", ...), sorted. `with_variants` adds models/zoo/exports/*.
std::vector<std::string> zoo_model_dirs(bool with_variants = true);
/// A GoogleTest-safe parameter name for a zoo folder ("exports/dhen_op13" -> "exports_dhen_op13").
std::string zoo_test_name(const std::string& folder);
/// A fresh, empty directory under the system temp dir, unique per call.
std::filesystem::path make_temp_dir(const std::string& prefix);

struct CommandResult {
  int exit_code = -1;
  std::string output;  ///< stdout and stderr together
};
/// Runs a shell command, capturing its output.
CommandResult run_command(const std::string& command);

/// Fresh random FP32 tensor, uniform in [low, high), from a seeded engine.
Tensor random_tensor(std::mt19937& rng, const Shape& shape, float low = -1.0f, float high = 1.0f);
/// Largest |a - b| over two float32 tensors of the same shape.
float max_abs_difference(const Tensor& a, const Tensor& b);

/// The error contract of every user-facing failure: failed, one non-empty line, naming every
/// `needle` (GoogleTest expectations).
void expect_one_line_error(const Status& status, const std::vector<std::string>& needles);

/// "Cpu" / "Cuda": the test-name suffix of a suite instantiated per device.
std::string device_name(const ::testing::TestParamInfo<Device>& info);

}  // namespace loka::testing
