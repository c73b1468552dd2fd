#pragma once
// What the command line tools (ringtree-perf, ringtree-model,
// ringtree-trace) share: parsing of numbers, sizes and names, and one way
// to fail. A bad flag prints "TOOL: why" and "(TOOL --help lists the
// choices)" to stderr and exits 2; a failure while running exits 2 too,
// with ringtree's error. --help prints to stdout and exits 0.
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <ringtree/algorithms/table.hpp>
#include <ringtree/core/dtype.hpp>
#include <ringtree/core/error.hpp>

namespace ringtree::cli {

// The tool whose flags these are (ringtree-perf, ringtree-trace, ringtree-model): its errors name it.
inline std::string& tool() {
  static std::string name = "ringtree-perf";
  return name;
}
[[noreturn]] inline void bad(const std::string& what) { throw error(tool(), -1, what + " (see " + tool() + " --help)"); }

inline std::vector<std::string> split(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == ',') { out.push_back(cur); cur.clear(); }
    else cur += c;
  }
  out.push_back(cur);
  return out;
}

inline long parse_int(const std::string& flag, std::string_view s, long lo, long hi) {
  if (s.empty()) bad(flag + " needs a number");
  long v = 0;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) bad(flag + ": '" + std::string(s) + "' is not a whole number");
    v = v * 10 + (c - '0');
    if (v > hi) bad(flag + ": " + std::string(s) + " is above " + std::to_string(hi));
  }
  if (v < lo) bad(flag + ": " + std::string(s) + " is below " + std::to_string(lo));
  return v;
}

inline std::size_t parse_size(const std::string& flag, std::string s);
// A pipeline granularity: a size of at least one byte.
inline std::size_t parse_chunk(const std::string& flag, const std::string& s) {
  const std::size_t v = parse_size(flag, s);
  if (v == 0) bad(flag + ": " + s + " is below 1 byte");
  return v;
}

// "8", "64K", "256M", "1G", optionally followed by "B".
inline std::size_t parse_size(const std::string& flag, std::string s) {
  if (!s.empty() && (s.back() == 'B' || s.back() == 'b')) s.pop_back();
  std::size_t mult = 1;
  if (!s.empty()) {
    switch (std::toupper(static_cast<unsigned char>(s.back()))) {
      case 'K': mult = std::size_t{1} << 10; break;
      case 'M': mult = std::size_t{1} << 20; break;
      case 'G': mult = std::size_t{1} << 30; break;
      default: break;
    }
    if (mult != 1) s.pop_back();
  }
  const long v = parse_int(flag, s, 0, 1L << 40);
  return static_cast<std::size_t>(v) * mult;
}

// The collectives a tool takes, "allreduce, broadcast, ..." (`barrier`:
// whether the tool takes it; it has no size to sweep).
inline std::string collective_names(bool barrier, const char* separator = ", ") {
  std::string names;
  for (collective c : all_collectives)
    if (c != collective::barrier || barrier) names += (names.empty() ? "" : separator) + std::string(to_string(c));
  return names;
}
// For --help: one line per collective, "    allreduce: ring, tree, ...",
// each followed by more(c) (what the tool adds to the table's names).
template <class More>
std::string algorithms_by_collective(bool barrier, More more) {
  std::string lines;
  for (collective c : all_collectives)
    if (c != collective::barrier || barrier)
      lines += "    " + std::string(to_string(c)) + ": " + detail::offered_names(c) + more(c) + "\n";
  return lines;
}
inline std::string algorithms_by_collective(bool barrier) {
  return algorithms_by_collective(barrier, [](collective) { return std::string(); });
}

inline collective parse_collective(const std::string& s, const std::string& flag = "-o", bool barrier = false) {
  for (collective c : all_collectives)
    if ((c != collective::barrier || barrier) && s == to_string(c)) return c;
  bad(flag + ": unknown collective '" + s + "' (one of: " + collective_names(barrier) + ")");
}
// An error's message without "ringtree: TOOL: " and the source location:
// what a command line tool prints.
inline std::string plain(const error& e) {
  std::string w = e.what();
  if (const auto at = w.find(e.call() + ": "); w.rfind("ringtree: ", 0) == 0 && at != std::string::npos) w.erase(0, at + e.call().size() + 2);
  if (const auto at = w.rfind(" ["); at != std::string::npos && w.back() == ']') w.erase(at);
  return w;
}


// A command-line mistake: said the one way, then exit 2 (model, trace;
// ringtree-perf says it from rank 0 only, see its main).
[[noreturn]] inline void usage_error(const std::string& why) {
  std::fprintf(stderr, "%s: %s\n(%s --help lists the choices)\n", tool().c_str(), why.c_str(), tool().c_str());
  std::exit(2);
}

// A number >= 0 with a fraction (ringtree-model's constants).
inline double parse_number(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0' || !(x >= 0)) usage_error(flag + ": expected a number >= 0, got '" + v + "'");
  return x;
}

}  // namespace ringtree::cli
