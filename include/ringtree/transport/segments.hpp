#pragma once
// Moved to <ringtree/memory/segments.hpp>; this path forwards to it for one release.
#include <ringtree/memory/segments.hpp>
