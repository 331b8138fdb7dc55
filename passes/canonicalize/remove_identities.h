// ============================================================================
// passes/canonicalize/remove_identities.h — `remove-identities`: drop nodes
// that compute their input unchanged.
//
//   x ─▶ Identity ─▶ y ─▶ readers      ==>      x ─▶ readers
//   x ─▶ Dropout  ─▶ y ─▶ readers      ==>      x ─▶ readers
//
// Identity always; Dropout when it is the inference identity: no
// training_mode input, or a constant false one, or a constant zero ratio,
// and its mask output is unread. Readers of the output read the input.
//
// Requires: nothing. Guarantees: graph outputs keep their names — a node
// writing a graph output is kept (rerouting would rename the output).
// Does not: remove Dropout in training mode with a non-constant flag or a
// used mask (the runtime refuses or computes those), or other no-op
// patterns (Reshape to the same shape, Cast to the same type...).
// ============================================================================
#pragma once

#include <memory>

#include "passes/pass.h"

namespace loka {

PassInfo remove_identities_pass_info();
std::unique_ptr<Pass> make_remove_identities_pass();

}  // namespace loka
