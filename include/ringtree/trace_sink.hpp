#pragma once
// Moved to <ringtree/trace/sink.hpp>; this path forwards to it for one release.
#include <ringtree/trace/sink.hpp>
