#pragma once
// The buffers a collective takes: any contiguous range of elements, seen
// as a span.
#include <concepts>
#include <ranges>
#include <span>
#include <type_traits>

#include <ringtree/core/dtype.hpp>

namespace ringtree {

// Any contiguous range of elements (std::vector, std::array, std::span, a
// C array) a collective may take where a span is shown.
template <class R>
concept buffer_range = std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
                       element<std::remove_cv_t<std::ranges::range_value_t<R>>>;
template <buffer_range R>
auto view(R&& r) noexcept {
  return std::span<std::remove_reference_t<std::ranges::range_reference_t<R>>>(std::ranges::data(r), std::ranges::size(r));
}
template <buffer_range R>
auto const_view(R&& r) noexcept {
  return std::span<const std::remove_cv_t<std::ranges::range_value_t<R>>>(std::ranges::data(r), std::ranges::size(r));
}
template <class R>
concept writable_range = buffer_range<R> && !std::is_const_v<std::remove_reference_t<std::ranges::range_reference_t<R>>>;
// A range an asynchronous call may keep until it has run: a named object
// (an lvalue) or a view (std::span), never a temporary.
template <class R>
concept lasting_range = std::is_lvalue_reference_v<R> || std::ranges::borrowed_range<R>;
template <class A, class B>
concept same_elements = std::same_as<std::remove_cv_t<std::ranges::range_value_t<A>>, std::remove_cv_t<std::ranges::range_value_t<B>>>;

}  // namespace ringtree
