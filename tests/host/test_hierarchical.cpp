// Hierarchical collectives (algorithms/hierarchical.hpp) on threads grouped
// into emulated hosts (host_groups<local_transport>): every collective,
// algorithm, op and element type against the sequential reference on even
// and uneven layouts, and the cost counts against what the trace records,
// network and host traffic apart.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <ringtree/ringtree.hpp>
#include <ringtree/transport/hosts.hpp>

#include "tools/collective_check.hpp"
#include "host_check.hpp"

using namespace ringtree;

namespace {

// "0011": rank r on host key[r].
std::vector<std::uint64_t> hosts_of(const std::string& keys) {
  std::vector<std::uint64_t> k;
  for (char c : keys) k.push_back(static_cast<std::uint64_t>(c - '0'));
  return k;
}

}  // namespace

TEST_CASE("host_layout: hosts in order of their first rank, indices in rank order, slices the fewest ranks of a host") {
  const auto k = hosts_of("1020211");
  const host_layout l(k);
  CHECK(l.hosts() == 3);
  CHECK(l.host_of(0) == 0);  // key 1 is host 0: it has rank 0
  CHECK(l.host_of(1) == 1);
  CHECK(l.host_of(2) == 2);
  CHECK(l.index_of(5) == 1);
  CHECK(l.index_of(6) == 2);
  CHECK(l.members(0) == std::vector<int>{0, 5, 6});
  CHECK(l.slices() == 2);
  CHECK(l.most_per_host() == 3);
  CHECK(l.describe() == "3+2+2");
  CHECK(host_layout(hosts_of("0101")).describe() == "2x2");
}

TEST_CASE("hierarchical: every collective and op, and automatic, match the reference on even and uneven hosts") {
  // contiguous and round-robin 2x2, 3+1, 1+2+1, hosts of one rank, 2+3, 3+3+2
  for (const char* keys : {"0011", "0101", "0001", "0112", "012", "00111", "01201201"}) {
    const auto key = hosts_of(keys);
    const int n = static_cast<int>(key.size());
    if (n > rt_test::max_ranks(64)) continue;
    CAPTURE(keys);
    std::vector<std::string> failures(n);
    communicator_options o;
    o.model = cost_model{};  // automatic by the model: measuring every layout's bins would take most of a minute
    o.chunks.ring_chunk_bytes = 4096;  // many chunks in each ring phase
    local_world(n).run([&](local_transport& t) {
      host_groups<local_transport> h(t, key);
      communicator comm(h, o);
      REQUIRE(comm.placement_of(0).hosts == host_layout(key).hosts());
      // (the flat algorithms over host_groups are the flat transport's, checked elsewhere)
      const std::vector<std::size_t> counts = {0, 1, std::size_t(n - 1), std::size_t(n + 1), 1000, 20011};
      for (const auto& c : rt_test::all_cases(n, counts, 0, false, false, comm.placement_of(0).hosts)) {
        if (c.algo != algorithm::hierarchical && c.algo != algorithm::automatic) continue;
        const std::string f[] = {rt_test::check<float>(comm, c), rt_test::check<std::int32_t>(comm, c),
                                 rt_test::check<ringtree::half>(comm, c), rt_test::check<std::uint8_t>(comm, c),
                                 rt_test::check<std::int64_t>(comm, c)};
        for (const auto& x : f)
          if (failures[t.rank()].empty()) failures[t.rank()] = x;
      }
    });
    rt_test::expect_none(failures);
  }
}

TEST_CASE("hierarchical: automatic picks it on emulated hosts where the model prices the network high") {
  const auto key = hosts_of("0011");
  cost_model m;  // a slow network between the hosts, fast memory within
  m.alpha = 1e-6, m.beta = 1e-10, m.gamma = 1e-10, m.alpha_net = 50e-6, m.beta_net = 1e-8;
  communicator_options o;
  o.model = m;
  std::vector<algorithm> picked(4);
  local_world(4).run([&](local_transport& t) {
    host_groups<local_transport> h(t, key);
    communicator comm(h, o);
    picked[t.rank()] = comm.choose(collective::allreduce, std::size_t{64} << 20);
  });
  for (auto a : picked) CHECK(a == algorithm::hierarchical);
}

TEST_CASE("hierarchical: the model's counts equal the traced ones, within hosts and between them") {
  const collective all[] = {collective::allreduce, collective::broadcast, collective::reduce, collective::allgather,
                            collective::reduce_scatter};
  for (const char* keys : {"0011", "0101", "000111", "001122", "00112233"}) {
    const auto key = hosts_of(keys);
    const host_layout layout(key);
    const int n = layout.ranks(), H = layout.hosts(), L = layout.slices();
    const std::size_t m = std::size_t(n) * 8;  // divides into every slice and block
    for (collective c : all) {
      CAPTURE(keys);
      CAPTURE(to_string(c));
      trace_recorder rec(n);
      local_world(n).run([&](local_transport& t) {
        host_groups<local_transport> h(t, key);
        traced_transport<host_groups<local_transport>> tt(h, rec);
        communicator_options o;
        o.model = cost_model{};
        communicator comm(tt, o);
        const std::string wrong = rt_test::check<float>(comm, {c, algorithm::hierarchical, op::sum, m, n - 1, 0});
        if (!wrong.empty()) throw std::runtime_error(wrong);
      });
      // within a host: the busiest rank's bytes to and from its own host;
      // between hosts: the busiest host's bytes out or in
      std::vector<double> local_sent(n), local_got(n), out(H), in(H);
      for (const auto& e : rec.events()) {
        const int a = layout.host_of(e.from), b = layout.host_of(e.to);
        if (a == b) local_sent[e.from] += double(e.bytes), local_got[e.to] += double(e.bytes);
        else out[a] += double(e.bytes), in[b] += double(e.bytes);
      }
      double local = 0, net = 0;
      for (int r = 0; r < n; ++r) local = std::max({local, local_sent[r], local_got[r]});
      for (int h = 0; h < H; ++h) net = std::max({net, out[h], in[h]});
      const std::size_t bytes = (c == collective::reduce_scatter ? m * n : m) * sizeof(float);
      const cost_counts want = tuner(n, {}, {}, memory_kind::host, host_shape::of(layout)).counts(c, algorithm::hierarchical, bytes);
      CAPTURE(H);
      CAPTURE(L);
      CHECK(double(rec.steps()) == doctest::Approx(want.steps + want.net_steps));
      CHECK(local == doctest::Approx(want.bytes));
      CHECK(net == doctest::Approx(want.net_bytes));
    }
  }
}

TEST_CASE("hierarchical: a flat transport refuses it with a clear error, and a layout must name every rank") {
  local_world(2).run([](local_transport& t) {
    communicator comm(t);
    std::vector<float> v(8, 1.0f);
    CHECK_THROWS_WITH_AS(comm.allreduce(v, op::sum, algorithm::hierarchical),
                         doctest::Contains("algorithm hierarchical is not available for allreduce"), error);
    const std::vector<std::uint64_t> short_key = {0};
    CHECK_THROWS_WITH_AS(host_groups<local_transport>(t, short_key), doctest::Contains("needs one host key per rank"), error);
  });
}
