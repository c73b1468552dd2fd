// The stories ringtree-trace tells (teach/watch.hpp): every rank's buffer after
// every step, exactly, against hand-worked expectations; the messages; the
// cost terms; and the Chrome trace's clock.
#include <doctest/doctest.h>

#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <ringtree/ringtree.hpp>
#include <ringtree/teach/watch.hpp>
#include <ringtree/trace/page.hpp>

#include "json_check.hpp"
#include "host_check.hpp"

using namespace ringtree;

namespace {

// A rank's masks as one hex digit per element (ranks 0..3 are bits 1, 2, 4, 8).
std::string digits(const std::vector<std::uint64_t>& masks) {
  std::string s;
  for (auto m : masks) {
    char c[4];
    std::snprintf(c, sizeof c, "%llx", static_cast<unsigned long long>(m));
    s += c;
  }
  return s;
}
// Every rank's, start first: one row per step, ranks separated by spaces.
std::vector<std::string> rows(const trace_story& s) {
  std::vector<std::string> out;
  auto row = [&](const std::vector<std::vector<std::uint64_t>>& m) {
    std::string line;
    for (const auto& r : m) line += (line.empty() ? "" : " ") + digits(r);
    out.push_back(line);
  };
  row(s.start_masks);
  for (const auto& st : s.steps) row(st.masks);
  return out;
}

trace_story watch_ring(collective c, int n, std::size_t count) {
  watch_options o;
  o.what = c;
  o.algo = algorithm::ring;
  o.ranks = n;
  o.count = count;
  return watch(o);
}

}  // namespace

// Worked by hand from ring.hpp's rule: in reduce-scatter step s rank r
// sends block r-s-1 and folds block r-s-2 from its left; in all-gather step
// s it sends block r-s and receives block r-s-1. Blocks are elements here.
TEST_CASE("teach: ring all-reduce on 3 and 4 ranks, every buffer after every step") {
  CHECK(rows(watch_ring(collective::allreduce, 3, 3)) == std::vector<std::string>{
                                                       "111 222 444",  // start: every rank its own
                                                       "151 223 644",  // step 0: block r-2 holds r and r-1
                                                       "751 273 647",  // step 1: block r holds everyone's
                                                       "757 773 677",  // step 2: all-gather, block r-1 arrives
                                                       "777 777 777"});
  CHECK(rows(watch_ring(collective::allreduce, 4, 4)) == std::vector<std::string>{
                                                       "1111 2222 4444 8888",
                                                       "1191 2223 6444 8c88",
                                                       "1d91 22b3 6447 ec88",
                                                       "fd91 2fb3 64f7 ec8f",
                                                       "fd9f ffb3 6ff7 ecff",
                                                       "fdff ffbf fff7 efff",
                                                       "ffff ffff ffff ffff"});
}

TEST_CASE("teach: ring all-gather on 3 and 4 ranks spreads one block per step") {
  CHECK(rows(watch_ring(collective::allgather, 3, 1)) == std::vector<std::string>{"100 020 004", "104 120 024", "124 124 124"});
  CHECK(rows(watch_ring(collective::allgather, 4, 1)) ==
        std::vector<std::string>{"1000 0200 0040 0008", "1008 1200 0240 0048", "1048 1208 1240 0248", "1248 1248 1248 1248"});
}

TEST_CASE("teach: the values, the messages' elements and the cost terms") {
  const auto s = watch_ring(collective::allreduce, 4, 8);
  REQUIRE(s.steps.size() == 6);
  // step 0: rank 0 passes its block 3 (elements 6..7) to rank 1
  bool seen = false;
  for (const auto& m : s.steps[0].messages)
    if (m.from == 0) seen = m.to == 1 && m.in_buffer && m.first == 6 && m.count == 2;
  CHECK(seen);
  for (int r = 0; r < 4; ++r)
    for (std::size_t i = 0; i < 8; ++i) CHECK(s.steps.back().values[r][i] == 600 + 4 * i);  // 0 + 100 + 200 + 300 + 4 i
  // a step: one alpha, beta for 2 elements of 8 bytes, gamma for those reduced (reduce-scatter steps)
  CHECK(s.steps[0].alpha_s == doctest::Approx(s.model.alpha));
  CHECK(s.steps[0].beta_s == doctest::Approx(s.model.beta * 16));
  CHECK(s.steps[0].gamma_s == doctest::Approx(s.model.gamma * 16));
  CHECK(s.steps[4].gamma_s == 0);  // all-gather steps reduce nothing
  // hierarchical on emulated hosts: every host's ranks, and the result
  watch_options o;
  o.algo = algorithm::hierarchical;
  o.ranks = 4;
  o.hosts = 2;
  const auto h = watch(o);
  CHECK(h.figure == "hosts");
  CHECK(h.host_of == std::vector<int>{0, 0, 1, 1});
  CHECK(rows(h).back() == "ffffffff ffffffff ffffffff ffffffff");
}

TEST_CASE("teach: what cannot be watched is an error that lists what can") {
  watch_options o;
  o.algo = algorithm::two_shot;
  CHECK_THROWS_WITH_AS(watch(o), doctest::Contains("(available: ring"), error);
  o.algo = algorithm::hierarchical;
  CHECK_THROWS_WITH_AS(watch(o), doctest::Contains("is not one of allreduce's on 4 ranks"), error);
  o.algo = algorithm::ring;
  o.ranks = 65;
  CHECK_THROWS_WITH_AS(watch(o), doctest::Contains("1 to 64"), error);
}

TEST_CASE("teach: a Chrome trace of 4 ranks has strictly increasing, distinct timestamps on every track") {
  for (auto a : {algorithm::ring, algorithm::tree, algorithm::recursive_doubling}) {
    watch_options o;
    o.algo = a;
    o.count = 64;
    std::ostringstream chrome;
    (void)watch(o, &chrome);
    const std::string json = chrome.str();
    rt_test::json_reader r(json);
    REQUIRE_NOTHROW(r.parse());
    std::map<long, double> last;
    std::size_t events = 0;
    for (const auto& e : r.events) {
      if (last.count(e.tid)) CHECK(e.ts > last[e.tid]);
      last[e.tid] = e.ts;
      ++events;
    }
    CHECK(last.size() == 4);
    CHECK(events > 8);
    CHECK(r.categories["send"] == r.categories["recv"]);
  }
}

TEST_CASE("teach: the page and its story are self-contained") {
  const auto s = watch_ring(collective::allreduce, 4, 8);
  std::ostringstream page, js;
  write_html(page, std::vector<trace_story>{s});
  const std::string html = page.str();
  CHECK(html.rfind("<!doctype html>", 0) == 0);
  // nothing to fetch: no sources, links, imports or requests (the SVG namespace is a name, not a fetch)
  for (const char* outside : {"src=", "href=", "<link", "@import", "url(http", "fetch(", "XMLHttpRequest"}) {
    CAPTURE(outside);
    CHECK(html.find(outside) == std::string::npos);
  }
  write_json(js, s);
  const std::string text = js.str();  // (the reader keeps a reference)
  rt_test::json_reader r(text);
  CHECK_NOTHROW(r.parse());
}
