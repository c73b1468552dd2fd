#pragma once
// sink.hpp's cold part (core/compiled.hpp): the bodies of its functions,
// compiled where RINGTREE_DEFINES is 1.
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ringtree/trace/page.hpp>
#include <ringtree/trace/sink.hpp>
#include <ringtree/trace/story.hpp>

namespace ringtree::detail {

RINGTREE_FUNC trace_sink* trace_sink::of(const std::string& trace) {
  if (trace.empty()) return nullptr;
  const std::string f = trace;
  static std::mutex m;
  static std::map<std::string, trace_sink*> sinks;
  std::lock_guard lk(m);
  auto& sink = sinks[f];
  if (sink == nullptr) sink = new trace_sink(f);
  return sink;
}

RINGTREE_FUNC std::shared_ptr<trace_recorder> trace_sink::open(int id, int rank, int size, bool in_process, const char* transport) {
  std::lock_guard lk(m_);
  if (file_.empty()) {
    file_ = base_;
    if (!in_process) {
    const auto ext = html_ ? std::string(".html") : std::string(".json");
      const auto at = base_.rfind(ext);
      file_ = at == std::string::npos ? base_ + ".rank" + std::to_string(rank) : base_.substr(0, at) + ".rank" + std::to_string(rank) + ext;
    }
  }
  auto& e = entries_[{id, size}];
  if (!e.rec) {
    e.rec = std::make_shared<trace_recorder>(size);
    if (!in_process) e.rec->set_one_rank();
    e.label = std::string("communicator ") + std::to_string(id) + " (" + transport + ", " + std::to_string(size) + " ranks)";
  }
  return e.rec;
}

RINGTREE_FUNC void trace_sink::flush() {
  std::lock_guard lk(m_);
  std::ofstream out(file_);
  if (html_) {
    std::vector<trace_story> stories;
    for (auto& [key, e] : entries_) {
      trace_story s;
      s.title = e.label;
      s.collective = "every call";
      s.algorithm = e.label;
      s.ranks = e.rec->size();
      s.note = e.rec->one_rank() ? "this process's rank only: its messages in the order they ended" : "bytes each rank moved";
      fill_steps(s, *e.rec);
      s.price();
      stories.push_back(std::move(s));
    }
    write_html(out, stories);
    return;
  }
  out << "{\"traceEvents\": [\n";
  bool first = true;
  int pid = 0;
  for (auto& [key, e] : entries_) e.rec->write_chrome_events(out, pid++, first, e.label);
  out << "\n], \"displayTimeUnit\": \"ns\"}\n";
}

RINGTREE_FUNC int next_communicator_id() noexcept {
  thread_local int next = 0;
  return next++;
}

}  // namespace ringtree::detail
