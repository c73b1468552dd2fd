#pragma once
// Small helpers the host suite's files share.
#include <doctest/doctest.h>

#include <chrono>
#include <exception>
#include <string>
#include <vector>

#include <ringtree/communicator-inl.hpp>  // communicators over the tests' own transports (test_host is prebuilt)
#include <ringtree/transport/local.hpp>

#include "test_time.hpp"

namespace rt_test {

inline bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Every rank's first failure ("" where none) becomes a failed check.
inline void expect_none(const std::vector<std::string>& failures) {
  for (const auto& f : failures)
    if (!f.empty()) FAIL_CHECK(f);
}

// Every rank's error text ("" where it raised nothing), from a world run
// whose ranks may raise.
template <class F>
std::vector<std::string> errors_of(int n, F&& body, std::chrono::duration<double> timeout = scaled(std::chrono::seconds(20))) {
  std::vector<std::string> what(n);
  ringtree::local_world world(n, timeout);
  try {
    world.run([&](ringtree::local_transport& t) {
      try {
        body(t);
      } catch (const std::exception& e) {
        what[t.rank()] = e.what();
        throw;
      }
    });
  } catch (const std::exception&) {
  }
  return what;
}

}  // namespace rt_test
