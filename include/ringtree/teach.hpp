#pragma once
// Moved to <ringtree/trace/teach.hpp>; this path forwards to it for one release.
#include <ringtree/trace/teach.hpp>
