#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <unistd.h>

int main(int argc, char** argv) {
  // Calibrated cost models go to a directory of this run, not the user's cache.
  // The tests write files there: make sure it exists.
  std::string made;  // removed at the end
  if (const char* d = std::getenv("RINGTREE_CACHE_DIR"); d == nullptr) {
    char dir[] = "/tmp/ringtree-test-cache-XXXXXX";
    if (::mkdtemp(dir) != nullptr) ::setenv("RINGTREE_CACHE_DIR", dir, 1), made = dir;
  } else {
    std::error_code ec;
    std::filesystem::create_directories(d, ec);
  }
  // automatic chooses by the cost model unless a test says otherwise: the
  // suite runs hundreds of (rank count, size) pairs, and measuring each
  // would cost minutes. test_table.cpp tests the measuring.
  ::setenv("RINGTREE_TUNE", "0", 0);
  doctest::Context ctx(argc, argv);
  const int rc = ctx.run();
  if (!made.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(made, ec);
  }
  return rc;
}
