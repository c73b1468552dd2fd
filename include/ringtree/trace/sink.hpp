#pragma once
// RINGTREE_TRACE: the process-wide sink every communicator records into
// when the variable is set (communicator.hpp opens it).
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <ringtree/core/config.hpp>
#include <ringtree/trace/page.hpp>
#include <ringtree/trace/story.hpp>
#include <ringtree/trace/traced.hpp>

namespace ringtree {

namespace detail {

// RINGTREE_TRACE=FILE.json: every communicator of the process records its
// sends, receives and reductions, and the file is rewritten whenever one
// goes away, so it is complete once the last has. Communicators are told
// apart by the order in which each rank made them (the same on every rank
// of a world: collective code runs the same program), and in a Chrome
// trace each is a process, each rank a thread. When each rank is its own
// process (MPI, shared memory), rank r writes FILE.rank<r>.json.
// RINGTREE_TRACE=FILE.html writes the interactive page instead
// (trace/page.hpp): one story per communicator, its steps' messages and the
// bytes each rank moved (a program's buffers are not the trace's to show).
class trace_sink {
 public:
  // The sink of RINGTREE_TRACE (`trace`: its value, as the communicator
  // read it when it was made), or null; one per file, living until exit.
  static trace_sink* of(const std::string& trace) {
    if (trace.empty()) return nullptr;
    const std::string f = trace;
    static std::mutex m;
    static std::map<std::string, trace_sink*> sinks;
    std::lock_guard lk(m);
    auto& sink = sinks[f];
    if (sink == nullptr) sink = new trace_sink(f);
    return sink;
  }

  // The recorder rank `rank` of this process's `id`-th communicator records into.
  std::shared_ptr<trace_recorder> open(int id, int rank, int size, bool in_process, const char* transport) {
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

  void flush() {
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

 private:
  explicit trace_sink(std::string base)
      : base_(std::move(base)), html_(base_.size() > 5 && base_.compare(base_.size() - 5, 5, ".html") == 0) {}
  struct entry {
    std::shared_ptr<trace_recorder> rec;
    std::string label;
  };
  std::mutex m_;
  std::string base_, file_;
  bool html_;
  std::map<std::pair<int, int>, entry> entries_;
};

// A communicator's handle on the sink: the file is rewritten when the last
// copy goes away.
struct trace_handle {
  std::shared_ptr<trace_recorder> rec;
  trace_sink* sink;
  ~trace_handle() { sink->flush(); }
};

inline int next_communicator_id() noexcept {
  thread_local int next = 0;
  return next++;
}

}  // namespace detail

}  // namespace ringtree
