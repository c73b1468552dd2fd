#pragma once
// Moved to <ringtree/tuning/cost_model.hpp>; this path forwards to it for one release.
#include <ringtree/tuning/cost_model.hpp>
