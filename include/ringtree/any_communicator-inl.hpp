#pragma once
// any_communicator's bodies: each call forwards to the communicator it holds.
#include <memory>
#include <utility>
#include <variant>

#include <ringtree/any_communicator.hpp>
#include <ringtree/communicator.hpp>
#include <ringtree/transport/local.hpp>
#include <ringtree/transport/shm.hpp>

namespace ringtree {

struct any_communicator::impl {
  using held = std::variant<communicator<local_transport>, communicator<shm_transport>>;
  held comm;
  template <class F>
  decltype(auto) visit(F&& f) {
    return std::visit(std::forward<F>(f), comm);
  }
};

RINGTREE_FUNC any_communicator::any_communicator(std::unique_ptr<impl> p) noexcept : p_(std::move(p)) {}
RINGTREE_FUNC any_communicator::any_communicator(any_communicator&&) noexcept = default;
RINGTREE_FUNC any_communicator& any_communicator::operator=(any_communicator&&) noexcept = default;
RINGTREE_FUNC any_communicator::~any_communicator() = default;

RINGTREE_FUNC any_communicator any_communicator::shm_from_env() {
  return any_communicator(std::make_unique<impl>(
      impl{impl::held(std::in_place_type<communicator<shm_transport>>, std::make_unique<shm_transport>(shm_transport::from_env()))}));
}

RINGTREE_FUNC void any_communicator::run_threads(int ranks, const std::function<void(any_communicator&)>& f) {
  local_world(ranks).run([&](local_transport& t) {
    any_communicator c(std::make_unique<impl>(impl{impl::held(std::in_place_type<communicator<local_transport>>, t)}));
    f(c);
  });
}

RINGTREE_FUNC int any_communicator::rank() const noexcept { return p_->visit([](auto& c) { return c.rank(); }); }
RINGTREE_FUNC int any_communicator::size() const noexcept { return p_->visit([](auto& c) { return c.size(); }); }
RINGTREE_FUNC void any_communicator::barrier() { p_->visit([](auto& c) { c.barrier(); }); }

template <element E>
void any_communicator::allreduce(std::span<const E> in, std::span<E> out, op o, algorithm a) {
  p_->visit([&](auto& c) { c.allreduce(in, out, o, a); });
}
template <element E>
void any_communicator::broadcast(std::span<E> data, int root, algorithm a) {
  p_->visit([&](auto& c) { c.broadcast(data, root, a); });
}
template <element E>
void any_communicator::reduce(std::span<const E> in, std::span<E> out, int root, op o, algorithm a) {
  p_->visit([&](auto& c) { c.reduce(in, out, root, o, a); });
}
template <element E>
void any_communicator::reduce_scatter(std::span<const E> in, std::span<E> out, op o, algorithm a) {
  p_->visit([&](auto& c) { c.reduce_scatter(in, out, o, a); });
}
template <element E>
void any_communicator::allgather(std::span<const E> in, std::span<E> out, algorithm a) {
  p_->visit([&](auto& c) { c.allgather(in, out, a); });
}
template <element E>
void any_communicator::scatter(std::span<const E> in, std::span<E> out, int root, algorithm a) {
  p_->visit([&](auto& c) { c.scatter(in, out, root, a); });
}
template <element E>
void any_communicator::gather(std::span<const E> in, std::span<E> out, int root, algorithm a) {
  p_->visit([&](auto& c) { c.gather(in, out, root, a); });
}
template <element E>
void any_communicator::alltoall(std::span<const E> in, std::span<E> out, algorithm a) {
  p_->visit([&](auto& c) { c.alltoall(in, out, a); });
}

}  // namespace ringtree
