// The ringtree-prebuilt library: see include/ringtree/prebuilt.hpp.
#define RINGTREE_BUILDING_PREBUILT
#include <ringtree/prebuilt.hpp>

RINGTREE_PREBUILT_TRANSPORT(template, ringtree::local_transport)
