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
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <ringtree/communicator-inl.hpp>  // over traced_transport, also with RINGTREE_PREBUILT
#include <ringtree/ringtree.hpp>

#include "json_check.hpp"

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
// `calls(comm)` on `ranks` threads, each communicator traced into `mine`
// as well (and into RINGTREE_TRACE's file, which the communicator opens).
template <class F>
void traced_run(int ranks, trace_recorder& mine, F calls) {
  local_world(ranks).run([&](local_transport& t) {
    traced_transport<local_transport> tt(t, mine);
    communicator_options o;
    o.model = cost_model{};
    communicator comm(tt, o);
    calls(comm);
  });
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
  if (argc > 1 && std::string(argv[1]) == "--html") {  // RINGTREE_TRACE=FILE.html: the page, one story per communicator
    char hdir[] = "/tmp/ringtree-trace-XXXXXX";
    if (::mkdtemp(hdir) == nullptr) return fail("mkdtemp");
    const std::string page = std::string(hdir) + "/trace.html";
    ::setenv("RINGTREE_TRACE", page.c_str(), 1);
    trace_recorder mine(4);
    traced_run(4, mine, [](auto& comm) {
      std::vector<float> v(100, 1.0f);
      comm.allreduce(std::span<float>(v), op::sum, algorithm::ring);
      comm.broadcast(std::span<float>(v), 3, algorithm::binomial);
    });
    const std::string text = slurp(page);
    const std::string open = "<script id=\"stories\" type=\"application/json\">";
    const auto a = text.find(open), b = text.find("</script>", a);
    if (a == std::string::npos || b == std::string::npos) return fail(page + ": no stories in the page");
    const std::string json = text.substr(a + open.size(), b - a - open.size());
    rt_test::json_reader r(json);
    try {
      r.parse();
    } catch (const std::exception& e) {
      return fail(page + ": the stories are not JSON: " + e.what());
    }
    std::size_t messages = 0;
    for (auto at = json.find("\"from\": "); at != std::string::npos; at = json.find("\"from\": ", at + 1)) ++messages;
    std::printf("%s: %zu messages in its story; the program's own recorder saw %zu\n", page.c_str(), messages, mine.messages());
    if (messages != mine.messages()) return fail("RINGTREE_TRACE=FILE.html does not show every message once");
    std::remove(page.c_str());
    ::rmdir(hdir);
    return 0;
  }
  char dir[] = "/tmp/ringtree-trace-XXXXXX";
  if (::mkdtemp(dir) == nullptr) return fail("mkdtemp");
  const std::string file = std::string(dir) + "/trace.json";
  ::setenv("RINGTREE_TRACE", file.c_str(), 1);
  trace_recorder mine(3);
  traced_run(3, mine, [](auto& comm) {
    std::vector<float> v(1000, 1.0f);
    comm.allreduce(std::span<float>(v), op::sum, algorithm::ring);
    comm.broadcast(std::span<float>(v), 1, algorithm::tree);
    comm.allreduce(std::span<float>(v));  // automatic
  });
  // automatic by measurement: its timing runs are not the program's calls,
  // and the file must not show them. Once with the algorithm it picks (a
  // recorder of our own counts the call), once measuring: the file gets the
  // same messages twice, nothing more.
  ::setenv("RINGTREE_TUNE", "fresh", 1);
  std::vector<float> w(1 << 14, 1.0f);
  algorithm picked = algorithm::automatic;
  local_world(3).run([&](local_transport& t) {
    communicator comm(t);
    comm.allreduce(std::span<float>(w));  // measures its size's bin, then runs the pick
    if (t.rank() == 0) picked = comm.choose(collective::allreduce, w.size() * sizeof(float));
  });
  trace_recorder once(3);
  traced_run(3, once, [&](auto& comm) {
    std::vector<float> x(w.size(), 1.0f);
    comm.allreduce(std::span<float>(x), op::sum, picked);
  });
  const std::size_t expected = mine.messages() + 2 * once.messages();
  const std::string text = slurp(file);
  rt_test::json_reader r(text);
  try {
    r.parse();
  } catch (const std::exception& e) {
    return fail(file + ": " + e.what());
  }
  std::printf("%s: %d sends, %d receives, %d reductions; the program's own recorders saw %zu messages (%s picked by measurement)\n",
              file.c_str(), r.categories["send"], r.categories["recv"], r.categories["reduce"], expected,
              std::string(to_string(picked)).c_str());
  if (r.categories["send"] != int(expected) || r.categories["recv"] != int(expected))
    return fail("RINGTREE_TRACE's file does not have one send and one receive event per message of the program's calls "
                "(automatic's measurements must not be in it)");
  // every track's events in time order, at distinct times
  std::map<std::pair<long, long>, double> last;
  for (const auto& e : r.events) {
    const std::pair<long, long> track{e.pid, e.tid};
    if (last.count(track) && !(e.ts > last[track])) return fail("timestamps on a track are not strictly increasing");
    last[track] = e.ts;
  }
  if (r.categories["reduce"] == 0) return fail("no reductions in the trace");
  std::remove(file.c_str());
  ::rmdir(dir);
  return 0;
}
