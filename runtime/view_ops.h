// ============================================================================
// runtime/view_ops.h — the ops a device backend runs as views of their input.
//
// Reshape, Flatten, Squeeze, Unsqueeze and Identity keep the dtype and the
// bytes in order: a device backend gives their output their input's bytes
// (runtime/cuda/ops/views.cc), and the Concat placement follows them from a
// producer to the Concat that reads it (runtime/concat_placement.h).
// ============================================================================
#pragma once

#include <algorithm>
#include <array>
#include <string_view>

namespace loka {

inline constexpr std::array<std::string_view, 5> kViewOpTypes = {"Reshape", "Flatten", "Squeeze", "Unsqueeze",
                                                                 "Identity"};

/// Whether (domain, op_type) is one of kViewOpTypes (the ONNX domain, "" or "ai.onnx").
inline bool is_view_op(std::string_view domain, std::string_view op_type) {
  return (domain.empty() || domain == "ai.onnx") &&
         std::find(kViewOpTypes.begin(), kViewOpTypes.end(), op_type) != kViewOpTypes.end();
}

}  // namespace loka
