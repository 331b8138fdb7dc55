// ============================================================================
// runtime/error_text.h — keeps error messages on one line.
//
// Errors quote node, tensor, member and file names taken from models and data
// files, which may hold any byte, newlines included. Rather than escape every
// quoting site, the runtime's public entry points pass their errors through
// one_line(), which writes control characters as escapes (\n, \x01, ...), so
// the one-line contract holds even for hostile input.
// ============================================================================
#pragma once

#include <string>
#include <string_view>

#include "loka/status.h"

namespace loka {

/// `text` with control characters (and DEL) written as C escapes.
inline std::string escape_control_characters(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte != 0x7f) {
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xF];
    }
  }
  return out;
}

/// The same status with its message escaped onto one line.
inline Status one_line(const Status& status) {
  return status.is_ok() ? status : Status::error(escape_control_characters(status.message()));
}

/// The same result with its error (if any) escaped onto one line.
template <typename T>
Result<T> one_line(Result<T> result) {
  if (result.is_ok()) return result;
  return one_line(result.status());
}

}  // namespace loka
