#include <doctest/doctest.h>

#include <vector>

#include "tools/perf_args.hpp"

using namespace ringtree;
using namespace ringtree::perf;

namespace {
options parse_args(std::vector<const char*> args) {
  args.insert(args.begin(), "ringtree-perf");
  return parse(static_cast<int>(args.size()), args.data());
}
}  // namespace

TEST_CASE("ringtree-perf parses nccl-tests style flags") {
  auto o = parse_args({"-b", "8", "-e", "256M", "-f", "2", "-o", "allreduce,scatter", "-a", "ring,mpi", "-d", "half",
                       "-r", "max", "-w", "1", "-n", "3", "-c", "0", "--csv=x.csv", "--json", "x.json", "--plot", "p.png"});
  CHECK(o.min_bytes == 8);
  CHECK(o.max_bytes == (std::size_t{256} << 20));
  CHECK(o.factor == 2);
  REQUIRE(o.collectives.size() == 2);
  CHECK(o.collectives[1] == collective::scatter);
  CHECK(o.algos == std::vector<std::string>{"ring", "mpi"});
  CHECK(o.type == dtype::float16);
  CHECK(o.redop == op::max);
  CHECK(o.warmup == 1);
  CHECK(o.iters == 3);
  CHECK_FALSE(o.check);
  CHECK(o.csv == "x.csv");
  CHECK(o.json == "x.json");
  CHECK(o.plot == "p.png");
  CHECK(parse_size("-b", "1K") == 1024);
  CHECK(parse_size("-b", "2GB") == (std::size_t{2} << 30));
  CHECK(parse_args({}).max_bytes == (std::size_t{64} << 20));
  CHECK(parse_args({"--help"}).help);
  CHECK(parse_args({"--model"}).model);
  CHECK(parse_args({"-m", "-b", "1K"}).min_bytes == 1024);
  CHECK_FALSE(parse_args({}).model);
  CHECK(parse_args({}).rounds == 1);
  CHECK(parse_args({"--rounds", "7"}).rounds == 7);
  const auto c = parse_args({"--ring-chunk", "64K", "--tree-chunk=16K", "--stream-bytes", "256K"}).chunks;
  CHECK(c.ring_chunk_bytes == 65536);
  CHECK(c.tree_chunk_bytes == 16384);
  CHECK(c.stream_bytes == 262144);
  CHECK(parse_args({}).chunks.ring_chunk_bytes == chunk_sizes{}.ring_chunk_bytes);
  // every algorithm of the table is in the help text
  for (algorithm a : {algorithm::ring, algorithm::one_shot, algorithm::scatter_allgather, algorithm::dissemination})
    CHECK(usage().find(std::string(to_string(a))) != std::string::npos);
}

TEST_CASE("ringtree-perf rejects bad flags and values with a message that names them") {
  auto fails = [](std::vector<const char*> args, const char* message) {
    CAPTURE(message);
    CHECK_THROWS_WITH_AS(parse_args(args), doctest::Contains(message), error);
  };
  fails({"--bogus", "1"}, "unknown flag '--bogus'");
  fails({"-b"}, "-b needs a value");
  fails({"-b", "12Q"}, "-b: '12Q' is not a whole number");
  fails({"-e", "-5"}, "-e: '-5' is not a whole number");
  fails({"-b", "1M", "-e", "1K"}, "-b 1048576 is larger than -e 1024");
  fails({"-f", "1"}, "-f: expected a factor above 1, got '1'");
  fails({"-o", "allreduce,alltoallw"}, "-o: unknown collective 'alltoallw'");
  fails({"-a", "ring,magic"}, "-a: unknown algorithm 'magic'");
  fails({"-d", "float128"}, "-d: unknown element type 'float128'");
  fails({"-r", "xor"}, "-r: unknown reduction op 'xor'");
  fails({"-n", "0"}, "-n: 0 is below 1");
  fails({"-c", "2"}, "-c: 2 is above 1");
  fails({"--rounds", "0"}, "--rounds: 0 is below 1");
  fails({"--ring-chunk", "0"}, "--ring-chunk: 0 is below 1 byte");
  fails({"-t", "carrier-pigeon"}, "unknown transport 'carrier-pigeon'");
  fails({"stray"}, "unexpected argument 'stray'");
}

TEST_CASE("bus bandwidth factors are nccl-tests'") {
  CHECK(bus_factor(collective::allreduce, 4) == doctest::Approx(1.5));
  CHECK(bus_factor(collective::allgather, 4) == doctest::Approx(0.75));
  CHECK(bus_factor(collective::reduce_scatter, 2) == doctest::Approx(0.5));
  CHECK(bus_factor(collective::broadcast, 8) == 1.0);
  CHECK(bus_factor(collective::reduce, 8) == 1.0);
  CHECK(count_for(collective::allgather, 64, 4, 2) == 8);
  CHECK(count_for(collective::allreduce, 64, 4, 2) == 16);
}
