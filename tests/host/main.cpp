#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <unistd.h>

int main(int argc, char** argv) {
  // Calibrated cost models go to a directory of this run, not the user's cache.
  // The tests write files there: make sure it exists.
  if (const char* d = std::getenv("RINGTREE_CACHE_DIR"); d == nullptr) {
    char dir[] = "/tmp/ringtree-test-cache-XXXXXX";
    if (::mkdtemp(dir) != nullptr) ::setenv("RINGTREE_CACHE_DIR", dir, 1);
  } else {
    std::error_code ec;
    std::filesystem::create_directories(d, ec);
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
