// ============================================================================
// tests/passes/probe_test_util.h — running the Probe on a zoo model in tests
// (the CPU method comparison here, the GPU one in tests/cuda/probe_gpu_test.cc).
// ============================================================================
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace loka::testing {

/// The annotations after `canonicalize,infer-shapes,probe{OPTIONS}` on models/zoo/MODEL with
/// its calibration data; empty (with a test failure recorded) when any step fails.
nlohmann::json probe_zoo_annotations(const std::string& model, const std::string& options);

}  // namespace loka::testing
