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
inline void fill_steps(trace_story& s, const trace_recorder& rec) {
  const int n = rec.size();
  if (rec.one_rank()) {  // one rank of a world of processes: no steps known; each message a step, in the order they ended
    auto sl = rec.slices();
    std::stable_sort(sl.begin(), sl.end(), [](const trace_slice& a, const trace_slice& b) { return a.end_us < b.end_us; });
    s.steps.clear();
    for (const auto& x : sl) {
      if (x.peer < 0) {
        if (!s.steps.empty()) s.steps.back().reduced[x.rank] += x.bytes;
        continue;
      }
      story_step st;
      st.sent.assign(n, 0), st.received.assign(n, 0), st.reduced.assign(n, 0);
      const bool send = std::string(x.what) == "send";
      st.messages.push_back({send ? x.rank : x.peer, send ? x.peer : x.rank, x.bytes});
      (send ? st.sent[x.rank] : st.received[x.rank]) += x.bytes;
      s.steps.push_back(std::move(st));
    }
    return;
  }
  const int steps = rec.steps();
  s.steps.assign(steps, {});
  for (auto& st : s.steps) st.sent.assign(n, 0), st.received.assign(n, 0), st.reduced.assign(n, 0);
  for (const auto& e : rec.events()) {
    auto& st = s.steps.at(e.step);
    st.messages.push_back({e.from, e.to, e.bytes});
    st.sent[e.from] += e.bytes;
    st.received[e.to] += e.bytes;
  }
  // A reduction ends at the step its data moved the rank to: it finishes
  // the step before.
  for (const auto& x : rec.slices())
    if (x.peer < 0 && x.step >= 1 && x.step - 1 < steps) s.steps[x.step - 1].reduced[x.rank] += x.bytes;
}

// Masks as hex strings: JavaScript numbers hold 53 bits, masks up to 64.
inline void json_masks(std::ostream& os, const std::vector<std::vector<std::uint64_t>>& m, bool hex) {
  os << '[';
  for (std::size_t r = 0; r < m.size(); ++r) {
    os << (r ? "," : "") << '[';
    for (std::size_t i = 0; i < m[r].size(); ++i) {
      if (i) os << ',';
      if (hex) {
        char b[24];
        std::snprintf(b, sizeof b, "\"%llx\"", static_cast<unsigned long long>(m[r][i]));
        os << b;
      } else {
        os << m[r][i];
      }
    }
    os << ']';
  }
  os << ']';
}
inline void json_sizes(std::ostream& os, const std::vector<std::size_t>& v) {
  os << '[';
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << ']';
}
inline void json_number(std::ostream& os, double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", v);
  os << b;
}

}  // namespace detail

// The story as JSON: what the page embeds and what the tests read.
inline void write_json(std::ostream& os, const trace_story& s) {
  using namespace detail;
  os << "{\"title\": ";
  json_string(os, s.title);
  os << ", \"collective\": ";
  json_string(os, s.collective);
  os << ", \"algorithm\": ";
  json_string(os, s.algorithm);
  os << ", \"figure\": ";
  json_string(os, s.figure);
  os << ", \"ranks\": " << s.ranks << ", \"root\": " << s.root << ", \"count\": " << s.count
     << ", \"elem_bytes\": " << s.elem_bytes << ", \"note\": ";
  json_string(os, s.note);
  os << ",\n \"model\": {\"alpha_us\": ";
  json_number(os, s.model.alpha * 1e6);
  os << ", \"beta_ns_per_byte\": ";
  json_number(os, s.model.beta * 1e9);
  os << ", \"gamma_ns_per_byte\": ";
  json_number(os, s.model.gamma * 1e9);
  os << ", \"source\": ";
  json_string(os, s.model.source);
  os << "},\n \"host_of\": [";
  for (std::size_t r = 0; r < s.host_of.size(); ++r) os << (r ? "," : "") << s.host_of[r];
  os << "],\n \"start\": {\"masks\": ";
  json_masks(os, s.start_masks, true);
  os << ", \"values\": ";
  json_masks(os, s.start_values, false);
  os << "},\n \"steps\": [";
  for (std::size_t k = 0; k < s.steps.size(); ++k) {
    const auto& st = s.steps[k];
    os << (k ? ",\n  " : "\n  ") << "{\"messages\": [";
    for (std::size_t i = 0; i < st.messages.size(); ++i) {
      const auto& m = st.messages[i];
      os << (i ? "," : "") << "{\"from\": " << m.from << ", \"to\": " << m.to << ", \"bytes\": " << m.bytes;
      if (m.count > 0) os << ", \"first\": " << m.first << ", \"count\": " << m.count << ", \"in_buffer\": " << (m.in_buffer ? "true" : "false");
      os << "}";
    }
    os << "], \"masks\": ";
    json_masks(os, st.masks, true);
    os << ", \"values\": ";
    json_masks(os, st.values, false);
    os << ", \"sent\": ";
    json_sizes(os, st.sent);
    os << ", \"received\": ";
    json_sizes(os, st.received);
    os << ", \"reduced\": ";
    json_sizes(os, st.reduced);
    os << ", \"alpha_us\": ";
    json_number(os, st.alpha_s * 1e6);
    os << ", \"beta_us\": ";
    json_number(os, st.beta_s * 1e6);
    os << ", \"gamma_us\": ";
    json_number(os, st.gamma_s * 1e6);
    os << "}";
  }
  os << "\n]}\n";
}

}  // namespace ringtree
