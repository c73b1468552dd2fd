#pragma once
// Moved to <ringtree/tuning/calibration.hpp>; this path forwards to it for one release.
#include <ringtree/tuning/calibration.hpp>
