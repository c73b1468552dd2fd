#pragma once
// Moved to <ringtree/trace/traced.hpp>; this path forwards to it for one release.
#include <ringtree/trace/traced.hpp>
