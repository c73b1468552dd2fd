#pragma once
// A collective's story, step by step: the data behind ringtree-trace's
// views (text, diagram, JSON, the interactive HTML page) and behind
// RINGTREE_TRACE=FILE.html.
//
// A step is one link in the longest chain of messages (the traced
// transport's Lamport clock). For each step: its messages (who sends what
// to whom: elements of the sender's buffer, or a count of scratch
// elements), and, where the story was watched on threads (teach/watch.hpp),
// every rank's buffer after the step: its values, and for every element the
// set of ranks whose input it already holds (a bit mask: reduce-scatter
// accumulates bits, all-gather spreads them). Recorded from a real program
// instead, a step has its messages' sizes only. Each step also carries the
// cost model's terms for it: alpha for the step, beta for the most bytes a
// rank moved in it, gamma for the most it reduced.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include <ringtree/core/compiled.hpp>
#include <ringtree/core/json.hpp>
#include <ringtree/trace/traced.hpp>
#include <ringtree/tuning/cost_model.hpp>

namespace ringtree {

struct story_message {
  int from, to;
  std::size_t bytes;
  // elements [first, first + count) of the sender's buffer; in_buffer
  // false: `count` elements of the algorithm's scratch (a partial sum)
  std::size_t first = 0, count = 0;
  bool in_buffer = false;
};

struct story_step {
  std::vector<story_message> messages;
  // per rank, after this step (empty where unknown: a recorded program)
  std::vector<std::vector<std::uint64_t>> masks;
  std::vector<std::vector<std::uint64_t>> values;
  std::vector<std::size_t> sent, received, reduced;  // bytes per rank in this step
  double alpha_s = 0, beta_s = 0, gamma_s = 0;        // the cost model's terms for it
};

struct trace_story {
  std::string title;  // what the page's selector calls it ("" : collective, algorithm, ranks)
  std::string collective, algorithm;
  std::string figure = "circle";  // how the page lays the ranks out: circle, tree, hypercube, hosts
  int ranks = 0, root = 0;
  std::size_t count = 0;      // elements per rank (per block where the collective has blocks)
  std::size_t elem_bytes = 0;
  std::vector<int> host_of;  // per rank, where ranks span (emulated) hosts; empty: one host
  std::vector<std::vector<std::uint64_t>> start_masks, start_values;
  std::vector<story_step> steps;
  cost_model model;
  std::string note;  // what the page says about how this story was made

  // Fills each step's cost terms from its per-rank bytes.
  void price() {
    for (auto& s : steps) {
      std::size_t moved = 0, red = 0;
      for (int r = 0; r < ranks; ++r) {
        moved = std::max({moved, s.sent.empty() ? 0 : s.sent[r], s.received.empty() ? 0 : s.received[r]});
        red = std::max(red, s.reduced.empty() ? 0 : s.reduced[r]);
      }
      s.alpha_s = s.messages.empty() ? 0 : model.alpha;
      s.beta_s = model.beta * double(moved);
      s.gamma_s = model.gamma * double(red);
    }
  }
};

namespace detail {

// The steps of a recorder's messages and reductions, sizes only (what a
// real program's trace knows).
void fill_steps(trace_story& s, const trace_recorder& rec);

// Masks as hex strings: JavaScript numbers hold 53 bits, masks up to 64.
void json_masks(std::ostream& os, const std::vector<std::vector<std::uint64_t>>& m, bool hex);
void json_sizes(std::ostream& os, const std::vector<std::size_t>& v);
void json_number(std::ostream& os, double v);

}  // namespace detail

// The story as JSON: what the page embeds and what the tests read.
void write_json(std::ostream& os, const trace_story& s);

}  // namespace ringtree

#if RINGTREE_DEFINES
#include <ringtree/trace/story-inl.hpp>
#endif
