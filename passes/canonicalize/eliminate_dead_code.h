// ============================================================================
// passes/canonicalize/eliminate_dead_code.h — `eliminate-dead-code`: remove
// what no graph output depends on.
//
// Erases every node none of whose outputs is read or is a graph output
// (readers first, so whole dead chains go in one run), then every
// initializer nobody reads. Requires: an acyclic graph. Guarantees: graph
// inputs and outputs are untouched (an unread input stays part of the
// model's interface; an initializer that is also a graph input is an input).
// Does not: remove nodes that feed a graph output through unused-looking
// paths, or dedupe equal subexpressions.
// ============================================================================
#pragma once

#include <memory>

#include "passes/pass.h"

namespace loka {

PassInfo eliminate_dead_code_pass_info();
std::unique_ptr<Pass> make_eliminate_dead_code_pass();

}  // namespace loka
