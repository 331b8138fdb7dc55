// ============================================================================
// passes/canonicalize/fold_shape_chains.h — `fold-shape-chains`: turn the
// shape arithmetic exporters emit into constants wherever the shapes are
// known at compile time.
//
//   Shape(x:[batch,16,8]) ─▶ Gather(2) ─▶ Unsqueeze ─┐
//                                          [128] ────┴▶ Concat ─▶ Reshape(y, ·)
//
// Walks the graph running the shape-inference rules, which track the
// element values of small integer tensors (passes/ir/shape_inference.h).
// (1) Every computed int32/int64 value whose elements are all known numbers
// becomes an initializer (Shape of a static input, Gather of a static dim of
// a symbolic shape, the arithmetic over them); the generic folder and DCE
// then clean up. (2) A Reshape whose target still depends on a symbolic dim
// gets a constant target when that is exactly equivalent: an element known
// to equal the data's dim i at the same position becomes 0 ("copy"), known
// numbers stay, and a single remaining element becomes -1 only when every
// other element is a positive number (so -1 cannot meet a zero-sized dim).
//
// Requires: types inferred (infer-shapes) — ranks and dims drive the
// tracking. Guarantees: only values the inference proves constant are
// replaced; a Reshape keeps its exact semantics for every value of the
// symbols (allowzero=1 Reshapes are left alone). Does not: remove the dead
// chains (eliminate-dead-code), or touch Expand/Tile/ConstantOfShape targets
// that stay symbolic.
// ============================================================================
#pragma once

#include <memory>

#include "passes/pass.h"

namespace loka {

PassInfo fold_shape_chains_pass_info();
std::unique_ptr<Pass> make_fold_shape_chains_pass();

}  // namespace loka
