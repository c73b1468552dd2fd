#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <ringtree/ringtree.hpp>
#include <ringtree/train/pipeline.hpp>

#include "pipeline_check.hpp"

using namespace ringtree;

TEST_CASE("pipeline forward and backward equal the sequential computation, GPipe and 1F1B, 2..4 stages") {
  for (int stages : {2, 3, 4})
    for (int m : {1, 3, 8})
      for (auto kind : {pipeline_schedule::gpipe, pipeline_schedule::one_f_one_b}) {
        std::vector<std::string> f(stages);
        local_world world(stages);
        world.run([&](local_transport& t) { f[t.rank()] = rt_test::pipe::check(t, kind, m); });
        for (auto& x : f) CHECK_MESSAGE(x.empty(), x);
      }
}

TEST_CASE("schedules: GPipe and 1F1B hold every forward and backward once, 1F1B bounds the live activations") {
  for (int p : {1, 2, 4})
    for (int m : {1, 2, 5, 9})
      for (int s = 0; s < p; ++s) {
        for (auto kind : {pipeline_schedule::gpipe, pipeline_schedule::one_f_one_b}) {
          auto ops = schedule_for(kind, s, p, m);
          REQUIRE(ops.size() == std::size_t(2 * m));
          int live = 0, most = 0, fwd = 0, bwd = 0;
          for (auto& o : ops) {
            if (o.what == pipeline_op::forward) {
              CHECK(o.micro_batch == fwd++);
              most = std::max(most, ++live);
            } else {
              CHECK(o.micro_batch == bwd++);
              --live;
              CHECK(bwd <= fwd);  // a backward only after its forward
            }
          }
          if (kind == pipeline_schedule::one_f_one_b) CHECK(most <= std::min(m, p - s));
          else CHECK(most == m);
        }
      }
  CHECK(bubble_fraction(4, 12) == doctest::Approx(3.0 / 15));
}

TEST_CASE("stage link: a message of another size or type raises, naming both sides") {
  std::vector<std::string> msgs(2);
  local_world world(2);
  world.run([&](local_transport& t) {
    stage_link<local_transport> link(t, t.rank() == 1 ? 0 : -1, t.rank() == 0 ? 1 : -1);
    try {
      if (t.rank() == 0) {
        std::vector<float> act(4, 1.0f);
        link.send_forward(std::span<const float>(act));
        std::vector<double> d(3, 1.0);
        link.send_forward(std::span<const double>(d));
        link.flush();
      } else {
        std::vector<float> act(5);
        try {
          link.recv_forward(std::span<float>(act));
        } catch (const error& e) {
          msgs[0] = e.what();
        }
        std::vector<float> f(3);
        link.recv_forward(std::span<float>(f));
      }
    } catch (const error& e) {
      msgs[1] = e.what();
    }
  });
  CHECK(msgs[0].find("recv_forward on rank 1: rank 0 sent 4 float activations but this stage expects 5 float activations") != std::string::npos);
  CHECK(msgs[1].find("rank 0 sent 3 double activations but this stage expects 3 float activations") != std::string::npos);
}
