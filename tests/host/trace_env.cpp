// RINGTREE_TRACE=FILE.json switches tracing on in any program. This one
// sets it before its first communicator, runs collectives on threads
// through its own recorder as well, and checks that the file is valid JSON
// with one send and one receive event per message its recorder saw.
//   trace_env                 the check above
//   trace_env --check F...    F are valid JSON traces with events, as many
//                             sends as receives in all (the per-rank files
//                             of an MPI program)
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <ringtree/ringtree.hpp>

#include "../json_check.hpp"

using namespace ringtree;

namespace {
std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}
int fail(const std::string& why) {
  std::fprintf(stderr, "FAIL: %s\n", why.c_str());
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--check") {
    int sends = 0, recvs = 0;
    for (int i = 2; i < argc; ++i) {
      const std::string text = slurp(argv[i]);
      rt_test::json_reader r(text);
      try {
        r.parse();
      } catch (const std::exception& e) {
        return fail(std::string(argv[i]) + ": " + e.what());
      }
      if (r.categories["send"] + r.categories["recv"] == 0) return fail(std::string(argv[i]) + ": no messages");
      sends += r.categories["send"];
      recvs += r.categories["recv"];
      std::printf("%s: %d sends, %d receives, %d reductions\n", argv[i], r.categories["send"], r.categories["recv"],
                  r.categories["reduce"]);
    }
    if (sends != recvs) return fail("the files have " + std::to_string(sends) + " sends but " + std::to_string(recvs) + " receives");
    return argc > 2 ? 0 : fail("--check needs files");
  }
  char dir[] = "/tmp/ringtree-trace-XXXXXX";
  if (::mkdtemp(dir) == nullptr) return fail("mkdtemp");
  const std::string file = std::string(dir) + "/trace.json";
  ::setenv("RINGTREE_TRACE", file.c_str(), 1);
  trace_recorder mine(3);
  local_world(3).run([&](local_transport& t) {
    traced_transport<local_transport> tt(t, mine);
    communicator_options o;
    o.model = cost_model{};
    communicator comm(tt, o);
    std::vector<float> v(1000, 1.0f);
    comm.allreduce(std::span<float>(v), op::sum, algorithm::ring);
    comm.broadcast(std::span<float>(v), 1, algorithm::tree);
    comm.allreduce(std::span<float>(v));  // automatic
  });
  const std::string text = slurp(file);
  rt_test::json_reader r(text);
  try {
    r.parse();
  } catch (const std::exception& e) {
    return fail(file + ": " + e.what());
  }
  std::printf("%s: %d sends, %d receives, %d reductions; the program's own recorder saw %zu messages\n", file.c_str(),
              r.categories["send"], r.categories["recv"], r.categories["reduce"], mine.messages());
  if (r.categories["send"] != int(mine.messages()) || r.categories["recv"] != int(mine.messages()))
    return fail("RINGTREE_TRACE's file does not have one send and one receive event per message");
  if (r.categories["reduce"] == 0) return fail("no reductions in the trace");
  std::remove(file.c_str());
  ::rmdir(dir);
  return 0;
}
