#pragma once
// One exception type for everything ringtree raises. Each error names the
// call, the rank and the offending values, plus where in ringtree it was
// raised, so a message from rank 7 of 64 is enough to act on.
#include <ringtree/core/compiled.hpp>
#include <ringtree/core/cxx20.hpp>

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <version>
#if defined(__cpp_lib_source_location)
#include <source_location>
#endif

namespace ringtree {

namespace detail {
#if defined(__cpp_lib_source_location)
using source_location = std::source_location;
#else
// clang before 15 cannot give libstdc++ its std::source_location (the
// fuzzers build with Debian's clang 14): the same from the builtins.
struct source_location {
  static constexpr source_location current(const char* file = __builtin_FILE(), unsigned line = __builtin_LINE()) noexcept {
    return {file, line};
  }
  constexpr const char* file_name() const noexcept { return file_; }
  constexpr unsigned line() const noexcept { return line_; }
  const char* file_;
  unsigned line_;
};
#endif
}  // namespace detail

class error : public std::runtime_error {
 public:
  error(std::string call, int rank, const std::string& what,
        detail::source_location where = detail::source_location::current())
      : std::runtime_error(format(call, rank, what, where)),
        call_(std::move(call)),
        rank_(rank) {}

  const std::string& call() const noexcept { return call_; }
  int rank() const noexcept { return rank_; }

 private:
  static std::string format(const std::string& call, int rank, const std::string& what,
                            const detail::source_location& where);

  std::string call_;
  int rank_;
};

// A peer did not answer in time (stalled, dead, or never joined the call).
class timeout_error : public error {
 public:
  timeout_error(std::string call, int rank, int peer, const std::string& what,
                detail::source_location where = detail::source_location::current())
      : error(std::move(call), rank, what, where), peer_(peer) {}
  int peer() const noexcept { return peer_; }

 private:
  int peer_;
};

namespace detail {

// Builds the "values" part of a message: cat("count=", n, " root=", r).
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// The one wording of a wait that ran out, for every transport and call:
// "waited 20 s for rank 3, the whole timeout (RINGTREE_TIMEOUT)", then
// what the caller knows more (`then`: ": it stalled or is in another call").
// A chain of waits (wait_board.hpp) puts the words after the chain.
inline constexpr const char* whole_timeout_words = "the whole timeout (RINGTREE_TIMEOUT)";
std::string waited_whole_timeout(double seconds, const std::string& whom, const std::string& then = "");

}  // namespace detail
}  // namespace ringtree

#if RINGTREE_DEFINES
#include <ringtree/core/error-inl.hpp>
#endif
