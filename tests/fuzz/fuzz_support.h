// ============================================================================
// tests/fuzz/fuzz_support.h — what every LoKA libFuzzer harness shares.
//
// The loaders under fuzz promise a Status error, never a crash, on any input;
// the sanitizers catch memory errors and UB, and these checks catch the
// quieter breaches of the error contract (an empty message, or one spread over
// several lines where the runtime promises one). A failed check aborts so
// libFuzzer records the input like any other crash.
// ============================================================================
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>

#include "loka/status.h"

namespace loka::fuzz {

/// libFuzzer's input as the byte span the loaders take.
inline std::span<const std::byte> as_bytes(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const std::byte*>(data), size};
}

/// Aborts with `why` (and the message) so libFuzzer saves the input.
[[noreturn]] inline void fail(const char* why, const std::string& message) {
  std::fprintf(stderr, "fuzz check failed: %s: '%s'\n", why, message.c_str());
  std::abort();
}

/// A refusal must say why; `one_line` also holds it to the runtime's one-line contract.
inline void check_refusal(const Status& status, bool one_line) {
  const std::string message = status.message();
  if (message.empty()) fail("error without a message", message);
  if (one_line && message.find('\n') != std::string::npos) fail("error message spans several lines", message);
}

}  // namespace loka::fuzz
