#pragma once
// Moved to <ringtree/memory/symmetric.hpp>; this path forwards to it for one release.
#include <ringtree/memory/symmetric.hpp>
