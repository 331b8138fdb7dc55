// ============================================================================
// tests/runtime/zoo_inputs_cases.h — the device-parameterized suite of hostile
// run-time inputs (zoo_inputs_cases_util.cc). A test binary instantiates it
// for its devices and defines testing::device_unavailable_reason.
// ============================================================================
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "loka/engine.h"
#include "loka/tensor.h"

namespace loka {

namespace testing {
/// Empty when `device` can run here; otherwise why not (the suite skips with it).
/// Defined by each test binary that instantiates ZooInputs.
std::string device_unavailable_reason(Device device);
}  // namespace testing

/// The zoo's dlrm_dot (dense [batch,13] float, sparse [batch,54] int64 ids; table 0 has 64
/// rows and owns column 0) with its first calibration batch cut to kRows rows, on the
/// parameter's device with max_batch 64.
class ZooInputs : public ::testing::TestWithParam<Device> {
 protected:
  static constexpr int64_t kRows = 8;
  void SetUp() override;
  /// The first `count` rows of `tensor` (repeated when it has fewer), in storage of its own.
  static Tensor rows(const Tensor& tensor, int64_t count);
  std::shared_ptr<const Engine> engine_;
  std::vector<Tensor> inputs_;
  std::vector<float> clean_;  ///< prob [kRows,1] of the unchanged inputs
};

}  // namespace loka
