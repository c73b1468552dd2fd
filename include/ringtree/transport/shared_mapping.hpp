#pragma once
// Moved to <ringtree/memory/shared_mapping.hpp>; this path forwards to it for one release.
#include <ringtree/memory/shared_mapping.hpp>
