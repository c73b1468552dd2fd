#pragma once
// The interactive page of a collective (ringtree-trace --html FILE,
// RINGTREE_TRACE=FILE.html): one self-contained HTML file, inline CSS and
// JavaScript, no network, that opens from disk. It draws the ranks as the
// algorithm sees them (a circle for rings, the tree for trees, a hypercube
// for recursive doubling, boxes for hosts), each step's messages as arrows
// labelled with their elements, and every rank's buffer as cells colored by
// whose contributions each element holds; next, previous, play, a slider,
// `#step=K` in the URL, and the cost model's terms of each step beside.
//
// The drawing is one pure function of the story (RT.svg(story, step),
// RT.strip(story) for every step at once): the page calls it, and
// docs/figures.sh runs the same code under Node.js for the SVG figures of
// docs/algorithms.md (renderer_js() is that code).
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <ringtree/core/compiled.hpp>
#include <ringtree/trace/story.hpp>

namespace ringtree {

// The renderer: plain JavaScript, no DOM, deterministic (the docs test
// compares its SVG byte for byte).
std::string_view renderer_js();

namespace detail {

std::string_view page_head();

std::string_view page_script();

}  // namespace detail

// The page of one or more stories (a selector picks one).
void write_html(std::ostream& os, const std::vector<trace_story>& stories);

}  // namespace ringtree

#if RINGTREE_DEFINES
#include <ringtree/trace/page-inl.hpp>
#endif
