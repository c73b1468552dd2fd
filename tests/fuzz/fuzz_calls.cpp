// libFuzzer: collective calls with arbitrary sizes, roots, ops, algorithms
// and element bits, on 1..4 ranks (threads), in checked mode. Each call
// must either raise ringtree::error on every rank, or return what a plain
// sequential loop computes (integers: wrapping sum and prod, min, max, the
// exact mean truncated toward zero) with every rank holding the same bits
// (floats, NaN payloads included). Sizes that do not fit (products that
// overflow, more bytes than memory) are claimed over a tiny buffer: a check
// that lets one through reads past it, which ASan reports.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_check.hpp"

#include <ringtree/ringtree.hpp>

using namespace ringtree;

namespace {

struct reader {
  const std::uint8_t* p;
  std::size_t n, at = 0;
  std::uint8_t byte() { return at < n ? p[at++] : 0; }
  std::uint64_t word() {
    std::uint64_t w = 0;
    for (int i = 0; i < 8; ++i) w = w << 8 | byte();
    return w;
  }
};

// A size: mostly small, sometimes anything.
std::uint64_t pick_size(reader& r) {
  const std::uint8_t how = r.byte();
  if (how % 4 != 0) return how % 9;
  return r.word();
}

template <class E>
E reference(op o, const std::vector<E>& v) {
  if constexpr (std::is_integral_v<E>) {
    using W = std::conditional_t<std::is_signed_v<E>, __int128, unsigned __int128>;
    W acc = v[0];
    __int128 sum = static_cast<__int128>(v[0]);
    for (std::size_t r = 1; r < v.size(); ++r) {
      const W x = v[r];
      sum += static_cast<__int128>(v[r]);
      switch (o) {
        case op::sum: case op::avg: acc = static_cast<W>(static_cast<E>(acc + x)); break;
        case op::prod: acc = static_cast<W>(static_cast<E>(static_cast<unsigned __int128>(acc) * static_cast<unsigned __int128>(x))); break;
        case op::min: acc = x < acc ? x : acc; break;
        case op::max: acc = x > acc ? x : acc; break;
      }
    }
    if (o == op::avg) return static_cast<E>(sum / static_cast<__int128>(v.size()));
    return static_cast<E>(acc);
  } else {
    return v[0];  // floats: checked for identity across ranks only
  }
}

template <class E>
void one_call(reader& r) {
  const int n = 1 + r.byte() % 4;
  const int kind = r.byte() % 5;  // allreduce, reduce, reduce_scatter, allgather, scatter
  const op o = static_cast<op>(r.byte() % 5);
  const collective what[] = {collective::allreduce, collective::reduce, collective::reduce_scatter, collective::allgather,
                             collective::scatter};
  const auto offered = detail::offered(what[kind]);
  const std::uint8_t ab = r.byte();
  const algorithm a = ab % (offered.size() + 1) == offered.size() ? algorithm::automatic : offered[ab % (offered.size() + 1)];
  const int root = static_cast<int>(r.byte() % n);
  const std::uint64_t count = pick_size(r), other = pick_size(r);
  std::vector<std::uint8_t> bits;
  for (std::size_t i = r.at; i < r.n; ++i) bits.push_back(r.p[i]);
  if (bits.empty()) bits.push_back(0);
  // rank q's element i: bytes of the input, cycled
  auto elem = [&](int q, std::uint64_t i) {
    E v;
    unsigned char b[sizeof(E)];
    for (std::size_t k = 0; k < sizeof(E); ++k) b[k] = bits[(q * 131 + i * sizeof(E) + k) % bits.size()];
    std::memcpy(&v, b, sizeof(E));
    return v;
  };
  // consistent: in/out sizes as the call requires, in bytes that fit; those
  // must be accepted (and are run when small), all others refused
  const unsigned __int128 need = static_cast<unsigned __int128>(count) * static_cast<unsigned __int128>(n);
  const unsigned __int128 limit = static_cast<unsigned __int128>(~std::uint64_t{0}) / sizeof(E);
  const bool consistent = (kind == 0 || kind == 1 ? other == count : other == need) && count <= limit && other <= limit;
  if (consistent && count > 64) return;  // right, but too large to run here
  const bool valid = consistent;
  std::vector<std::vector<E>> got(n);
  std::vector<int> raised(n, 0);
  communicator_options opt;
  opt.checked = true;
  opt.model = cost_model{};
  local_world world(n, std::chrono::seconds(20));
  world.run([&](local_transport& t) {
    communicator comm(t, opt);
    const int me = t.rank();
    // what the call gets: real buffers when valid, else the claimed sizes over 8 elements
    std::vector<E> small(8), in, out;
    std::span<E> in_s, out_s;
    const std::uint64_t in_n = kind == 0 || kind == 1 ? count : (kind == 2 ? other : (kind == 3 ? count : other));
    const std::uint64_t out_n = kind == 0 || kind == 1 ? other : (kind == 2 ? count : (kind == 3 ? other : count));
    if (valid) {
      in.resize(in_n);
      for (std::uint64_t i = 0; i < in_n; ++i) in[i] = elem(me, i);
      out.resize(out_n);
      in_s = in;
      out_s = out;
    } else {
      in_s = std::span<E>(small.data(), in_n);
      out_s = std::span<E>(small.data(), out_n);
    }
    try {
      switch (kind) {
        case 0: comm.allreduce(std::span<const E>(in_s), out_s, o, a); break;
        case 1: comm.reduce(std::span<const E>(in_s), out_s, root, o, a); break;
        case 2: comm.reduce_scatter(std::span<const E>(in_s), out_s, o, a); break;
        case 3: comm.allgather(std::span<const E>(in_s), out_s, a); break;
        case 4: comm.scatter(std::span<const E>(in_s), out_s, root, a); break;
      }
      got[me] = out;
    } catch (const error&) {
      raised[me] = 1;
    }
  });
  int raised_count = 0;
  for (int q = 0; q < n; ++q) raised_count += raised[q];
  if (!valid) {
    FUZZ_CHECK(raised_count == n);  // every rank, in checked mode
    return;
  }
  FUZZ_CHECK(raised_count == 0);
  for (int q = 0; q < n; ++q) {
    for (std::uint64_t i = 0; i < got[q].size(); ++i) {
      // the element's global index and the inputs that reduce into it
      const std::uint64_t g = kind == 2 ? q * count + i : i;
      std::vector<E> col;
      for (int s = 0; s < n; ++s) col.push_back(elem(s, g));
      E want{};
      switch (kind) {
        case 0: case 2: want = reference(o, col); break;
        case 1: if (q != root) continue; want = reference(o, col); break;
        case 3: want = elem(static_cast<int>(i / count), i % count); break;
        case 4: want = elem(root, q * count + i); break;
      }
      if (std::is_integral_v<E> || kind >= 3) FUZZ_CHECK(std::memcmp(&got[q][i], &want, sizeof(E)) == 0);
      if (kind == 0) FUZZ_CHECK(std::memcmp(&got[q][i], &got[0][i], sizeof(E)) == 0);  // same bits everywhere
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  reader r{data + 1, size - 1};
  switch (data[0] % 5) {
    case 0: one_call<std::int8_t>(r); break;
    case 1: one_call<std::uint64_t>(r); break;
    case 2: one_call<std::int32_t>(r); break;
    case 3: one_call<float>(r); break;
    case 4: one_call<double>(r); break;
  }
  return 0;
}
