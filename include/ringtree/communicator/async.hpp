#pragma once
// The asynchronous forms of a communicator's calls (a base of
// communicator<T>): each returns a ringtree::work at once; the call runs on
// the communicator's progress thread (communicator/work.hpp).
#include <exception>
#include <functional>
#include <vector>

#include <ringtree/algorithms/vocabulary.hpp>
#include <ringtree/communicator/p2p.hpp>
#include <ringtree/communicator/ranges.hpp>
#include <ringtree/communicator/work.hpp>

namespace ringtree {

// (A public base of communicator<T>, so a public name: the forms below are
// part of every communicator's interface.)
template <class Comm, class View>
class async_calls {
  using posted = detail::p2p_posted<View>;
  Comm& self() noexcept { return static_cast<Comm&>(*this); }

 public:
  // Asynchronous forms: each returns a ringtree::work at once; the call
  // runs on this communicator's progress thread, after every call made
  // before it (communicator/work.hpp). Buffers must live, untouched, until
  // work.wait() returns; a synchronous call waits for the queue first.
  template <buffer_range In, writable_range Out> requires same_elements<In, Out> && lasting_range<In> && lasting_range<Out>
  work allreduce_async(In&& in, Out&& out, op o = op::sum, algorithm a = algorithm::automatic) {
    return self().submit([c = &self(), i = const_view(in), x = view(out), o, a] { c->allreduce_impl(i, x, o, a); });
  }
  template <writable_range R> requires lasting_range<R>
  work allreduce_async(R&& inout, op o = op::sum, algorithm a = algorithm::automatic) {
    return self().submit([c = &self(), x = view(inout), o, a] { c->allreduce_impl(std::span<const typename decltype(x)::element_type>(x), x, o, a); });
  }
  template <writable_range R> requires lasting_range<R>
  work broadcast_async(R&& data, int root, algorithm a = algorithm::automatic) {
    return self().submit([c = &self(), x = view(data), root, a] { c->broadcast_impl(x, root, a); });
  }
  template <buffer_range In, writable_range Out> requires same_elements<In, Out> && lasting_range<In> && lasting_range<Out>
  work reduce_async(In&& in, Out&& out, int root, op o = op::sum, algorithm a = algorithm::automatic) {
    return self().submit([c = &self(), i = const_view(in), x = view(out), root, o, a] { c->reduce_impl(i, x, root, o, a); });
  }
  template <buffer_range In, writable_range Out> requires same_elements<In, Out> && lasting_range<In> && lasting_range<Out>
  work scatter_async(In&& in, Out&& out, int root, algorithm a = algorithm::automatic) {
    return self().submit([c = &self(), i = const_view(in), x = view(out), root, a] { c->scatter_impl(i, x, root, a); });
  }
  template <buffer_range In, writable_range Out> requires same_elements<In, Out> && lasting_range<In> && lasting_range<Out>
  work gather_async(In&& in, Out&& out, int root, algorithm a = algorithm::automatic) {
    return self().submit([c = &self(), i = const_view(in), x = view(out), root, a] { c->gather_impl(i, x, root, a); });
  }
  template <buffer_range In, writable_range Out> requires same_elements<In, Out> && lasting_range<In> && lasting_range<Out>
  work reduce_scatter_async(In&& in, Out&& out, op o = op::sum, algorithm a = algorithm::automatic) {
    return self().submit([c = &self(), i = const_view(in), x = view(out), o, a] { c->reduce_scatter_impl(i, x, o, a); });
  }
  template <buffer_range In, writable_range Out> requires same_elements<In, Out> && lasting_range<In> && lasting_range<Out>
  work allgather_async(In&& in, Out&& out, algorithm a = algorithm::automatic) {
    return self().submit([c = &self(), i = const_view(in), x = view(out), a] { c->allgather_impl(i, x, a); });
  }
  template <buffer_range In, writable_range Out> requires same_elements<In, Out> && lasting_range<In> && lasting_range<Out>
  work alltoall_async(In&& in, Out&& out, algorithm a = algorithm::automatic) {
    return self().submit([c = &self(), i = const_view(in), x = view(out), a] { c->alltoall_impl(i, {}, x, {}, a); });
  }
  // (the counts are copied: only the buffers must last)
  template <buffer_range In, writable_range Out> requires same_elements<In, Out> && lasting_range<In> && lasting_range<Out>
  work alltoall_async(In&& in, std::span<const std::size_t> sends, Out&& out, std::span<const std::size_t> recvs,
                      algorithm a = algorithm::automatic) {
    return self().submit([c = &self(), i = const_view(in), x = view(out), s = std::vector<std::size_t>(sends.begin(), sends.end()),
                   r = std::vector<std::size_t>(recvs.begin(), recvs.end()), a] {
      c->alltoall_impl(i, std::span<const std::size_t>(s), x, std::span<const std::size_t>(r), a);
    });
  }
  work barrier_async() {
    return self().submit([c = &self()] { c->barrier(); });
  }
  // Point to point is posted once the calls made before it have started,
  // then completes in the background while later calls run (work.hpp).
  // `on_done` as for submit.
  template <buffer_range R> requires lasting_range<R>
  work send_async(R&& data, int peer, int tag = 0, std::function<void(std::exception_ptr)> on_done = {}) {
    return self().engine().submit_p2p([c = &self(), d = const_view(data), peer, tag] { return posted::polled(detail::post_send(c->traced_view(), d, peer, tag)); },
                               std::move(on_done));
  }
  // (`source`, if given, gets the sender's rank before the work completes:
  // for peer == any_source)
  template <writable_range R> requires lasting_range<R>
  work recv_async(R&& data, int peer, int tag = 0, std::function<void(std::exception_ptr)> on_done = {}, int* source = nullptr) {
    self().check_source(peer);
    return self().engine().submit_p2p([c = &self(), d = view(data), peer, tag, source] { return c->receives_->post(c->traced_view(), d, peer, tag, source); },
                               std::move(on_done));
  }
};

}  // namespace ringtree
