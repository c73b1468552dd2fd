#pragma once
// Opening a communicator (one per transport, settings agreed by all
// ranks, tracing), and the calls that make new state: allocate, split.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>
#include <vector>

#include <ringtree/communicator.hpp>
#include <ringtree/communicator/settings.hpp>

namespace ringtree {

// (Out of the class, so not inline: with RINGTREE_PREBUILT a file that
// makes a communicator compiles neither these nor what they reach, the
// trace sink's writers above all.)
template <transport Transport>
communicator<Transport>::communicator(Transport& t, communicator_options opt) : t_(&t), opt_(std::move(opt)) {
  open();
}
template <transport Transport>
communicator<Transport>::communicator(std::unique_ptr<Transport> t, communicator_options opt)
    : owned_(std::move(t)), t_(owned_.get()), opt_(std::move(opt)) {
  open();
}
template <transport Transport>
communicator<Transport>::~communicator() {
  engine_.engine.reset();
}

template <transport Transport>
void communicator<Transport>::open() {
  claim_ = detail::transport_claim(&detail::innermost(*t_), detail::transport_name<Transport>(), rank());
  cfg_ = config::from_env();
  hosts_ = detail::hosts_of(*t_);
  opt_.checked = opt_.checked || cfg_.check;
  if (opt_.tune) cfg_.tune = *opt_.tune;
  chooser_ = detail::chooser(opt_.algo, cfg_, opt_.model);
  pool_ = std::make_unique<detail::scratch_pool<memory_of<Transport>>>(t_->memory());
  if (auto* sink = detail::trace_sink::of(cfg_.trace)) {
    // new with braces: clang 14 has no parenthesised aggregate
    // initialisation, and a temporary handle would flush the file on its way out
    trace_.reset(new detail::trace_handle{sink->open(detail::next_communicator_id(), rank(), size(),
                                                     detail::transport_in_process<Transport>(),
                                                     detail::transport_name<Transport>()),
                                          sink});
  }
  if (size() > 1) agree_on_settings();
}

// Every rank opens the communicator with the settings that decide what
// runs (communicator/settings.hpp), or none does. One exchange, here;
// calls pay nothing for it.
template <transport Transport>
void communicator<Transport>::agree_on_settings() {
  detail::agree_on_settings(detail::innermost(*t_), rank(), detail::opened_settings{opt_, cfg_, trace_ != nullptr});
}

template <transport Transport>
template <element E>
symmetric_buffer<E> communicator<Transport>::allocate(std::size_t count) {
  quiesce();
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(count, sizeof(E), &bytes))
    throw error("allocate", rank(), detail::cat(count, " elements of ", to_string(dtype_of<E>), " are more bytes than memory can hold"));
  if (size() > 1) {  // the same count everywhere, or nothing is allocated
    std::vector<std::uint64_t> counts(size());
    counts[rank()] = count;
    auto l = untraced_view();
    ring::allgather(l, std::span<std::uint64_t>(counts));
    std::string differ;
    for (int r = 0; r < size(); ++r)
      if (counts[r] != counts[0]) differ += detail::cat(differ.empty() ? "" : ", ", "rank ", r, ": ", counts[r]);
    if (!differ.empty())
      throw error("allocate", rank(), detail::cat("every rank must allocate the same count; rank 0 asked for ", counts[0],
                                                  ", but ", differ));
  }
  std::shared_ptr<detail::symmetric_region> r;
  if constexpr (shared_memory_transport<Transport>) {
    open_shared_state();
    if (shared_.heap)
      if (auto m = t_->map_shared(bytes)) r = shared_.heap->add(std::move(*m));
  }
  if (!r) {  // plain memory: ranks that cannot share memory
    r = std::make_shared<detail::symmetric_region>();
    auto mem = std::shared_ptr<std::byte[]>(new std::byte[std::max<std::size_t>(bytes, 1)]());
    r->rank = rank();
    r->map.bases.assign(size(), nullptr);
    r->map.bases[rank()] = mem.get();
    r->map.bytes = bytes;
    r->map.keep = mem;
  }
  return detail::symmetric_access::make<E>(std::move(r), count);
}

template <transport Transport>
communicator<detail::split_transport_t<Transport>> communicator<Transport>::split(int color, int key) {
  quiesce();
  if (color < 0) throw error("split", rank(), detail::cat("color must be >= 0, got ", color));
  const int n = size();
  std::vector<std::int64_t> all(2 * n);
  const std::int64_t mine[2] = {color, key};
  allgather(mine, all);
  std::vector<int> members;
  for (int r = 0; r < n; ++r)
    if (all[2 * r] == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return all[2 * a + 1] < all[2 * b + 1]; });
  const int index = static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
  return communicator<detail::split_transport_t<Transport>>(t_->split(color, key, std::span<const int>(members), index), opt_);
}

}  // namespace ringtree
