#pragma once
// Moved to <ringtree/trace/story.hpp>; this path forwards to it for one release.
#include <ringtree/trace/story.hpp>
