#pragma once
// Moved to <ringtree/memory/scratch_pool.hpp>; this path forwards to it for one release.
#include <ringtree/memory/scratch_pool.hpp>
