#pragma once
// JSON strings, written one way for every JSON ringtree writes (the trace
// file, the teaching story and page, ringtree-perf --json): quotes and
// backslashes escaped, control characters as \u00XX, and '<' as \u003c, so
// that no label can close the <script> of a page that embeds it.
#include <cstdio>
#include <ostream>
#include <string>
#include <string_view>

#include <ringtree/core/cxx20.hpp>

namespace ringtree::detail {

// v as a JSON string, quotes included.
inline std::string json_quoted(std::string_view v) {
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else if (c == '<' || static_cast<unsigned char>(c) < 0x20) {
      char u[8];
      std::snprintf(u, sizeof u, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += u;
    } else out += c;
  }
  return out += '"';
}
inline void json_string(std::ostream& os, std::string_view v) { os << json_quoted(v); }

}  // namespace ringtree::detail
