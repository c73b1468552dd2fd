#pragma once
// Small helpers the host suite's files share.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "../test_time.hpp"

namespace rt_test {

inline bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Every rank's first failure ("" where none) becomes a failed check.
inline void expect_none(const std::vector<std::string>& failures) {
  for (const auto& f : failures)
    if (!f.empty()) FAIL_CHECK(f);
}

}  // namespace rt_test
