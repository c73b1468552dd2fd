#pragma once
// story.hpp's cold part (core/compiled.hpp): the bodies of its functions,
// compiled where RINGTREE_DEFINES is 1.
#include <ringtree/trace/story.hpp>

namespace ringtree::detail {

RINGTREE_FUNC void fill_steps(trace_story& s, const trace_recorder& rec) {
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

RINGTREE_FUNC void json_masks(std::ostream& os, const std::vector<std::vector<std::uint64_t>>& m, bool hex) {
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

RINGTREE_FUNC void json_sizes(std::ostream& os, const std::vector<std::size_t>& v) {
  os << '[';
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << ']';
}

RINGTREE_FUNC void json_number(std::ostream& os, double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", v);
  os << b;
}

}  // namespace ringtree::detail

namespace ringtree {

RINGTREE_FUNC void write_json(std::ostream& os, const trace_story& s) {
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
