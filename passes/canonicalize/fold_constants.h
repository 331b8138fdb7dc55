// ============================================================================
// passes/canonicalize/fold_constants.h — `fold-constants`: evaluate at compile
// time what only depends on constants.
//
// A node whose inputs are all constants (initializers that are not graph
// inputs; Constant nodes have no inputs at all) is run once with the
// runtime's own kernel (OpRegistry::builtin() at the graph's opset), and its
// outputs become initializers of the same names. Using the runtime kernels
// means a folded value is bit-identical to what the engine would compute.
//
// Requires: nothing (types are re-derived per node). Guarantees: no Constant
// node survives except one feeding a graph output directly; folded results
// are at most `max-elements` elements per output (bigger ones would bloat the
// model) and their shapes are known statically before anything is run, so
// folding cannot allocate unboundedly. Does not fold: ops without a kernel,
// nodes writing graph outputs, QuantizeLinear/DequantizeLinear and ai.loka
// ops (the FP8 structure Mods builds must stay explicit), random ops, or a
// node whose kernel fails (the runtime reports that error at load/run time).
// ============================================================================
#pragma once

#include <memory>

#include "passes/pass.h"

namespace loka {

/// Folded output elements allowed per value unless the `max-elements` option says otherwise (16 Mi).
inline constexpr int64_t kDefaultMaxFoldedElements = int64_t{16} << 20;

PassInfo fold_constants_pass_info();
std::unique_ptr<Pass> make_fold_constants_pass();

}  // namespace loka
