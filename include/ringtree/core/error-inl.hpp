#pragma once
// error.hpp's cold part (core/compiled.hpp): the message's wording.
#include <sstream>
#include <string>

#include <ringtree/core/error.hpp>

namespace ringtree {

RINGTREE_FUNC std::string error::format(const std::string& call, int rank, const std::string& what,
                          const detail::source_location& where) {
  std::ostringstream os;
  os << "ringtree: " << call;
  if (rank >= 0) os << " on rank " << rank;
  os << ": " << what;
  std::string file = where.file_name();
  if (auto slash = file.find_last_of('/'); slash != std::string::npos) file.erase(0, slash + 1);
  os << " [" << file << ':' << where.line() << ']';
  return os.str();
}

namespace detail {
RINGTREE_FUNC std::string waited_whole_timeout(double seconds, const std::string& whom, const std::string& then) {
  return cat("waited ", seconds, " s for ", whom, ", ", whole_timeout_words, then);
}
}  // namespace detail

}  // namespace ringtree
