#pragma once
// Moved to <ringtree/trace/page.hpp>; this path forwards to it for one release.
#include <ringtree/trace/page.hpp>
