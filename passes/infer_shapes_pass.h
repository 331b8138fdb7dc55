// ============================================================================
// passes/infer_shapes_pass.h — `infer-shapes`: types for every value.
//
// Runs LoKA's own shape and dtype inference (passes/ir/shape_inference.h) over
// the whole graph. Requires: a verified graph. Guarantees: every output of an
// op with an inference rule has its dtype and the best shape derivable
// (symbolic batch dims by name); conflicts with declared types are errors.
// Changes only types, never the computation, so it reports "changed" only when
// some type changed.
// ============================================================================
#pragma once

#include <memory>

#include "passes/pass.h"

namespace loka {

PassInfo infer_shapes_pass_info();
std::unique_ptr<Pass> make_infer_shapes_pass();

}  // namespace loka
