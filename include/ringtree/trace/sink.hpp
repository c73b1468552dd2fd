#pragma once
// RINGTREE_TRACE: the process-wide sink every communicator records into
// when the variable is set (communicator.hpp opens it).
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <ringtree/core/compiled.hpp>
#include <ringtree/core/config.hpp>
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
  // The sink of RINGTREE_TRACE (`trace`: its value, as the communicator
  // read it when it was made), or null; one per file, living until exit.
  static trace_sink* of(const std::string& trace);

  // The recorder rank `rank` of this process's `id`-th communicator records into.
  std::shared_ptr<trace_recorder> open(int id, int rank, int size, bool in_process, const char* transport);

  // Rewrites the file with everything recorded so far.
  void flush();

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

int next_communicator_id() noexcept;

}  // namespace detail

}  // namespace ringtree

#if RINGTREE_DEFINES
#include <ringtree/trace/sink-inl.hpp>
#endif
