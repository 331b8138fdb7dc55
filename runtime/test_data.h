// ============================================================================
// runtime/test_data.h — forwards to the public loka/test_data.h.
//
// The data-directory reader became part of the installed API (serving programs
// read batches with it); in-tree code written against the old private path
// keeps compiling through this header. New code includes "loka/test_data.h".
// ============================================================================
#pragma once

#include "loka/test_data.h"
