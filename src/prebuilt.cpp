// The ringtree-prebuilt library: ringtree's cold code and the communicators
// of include/ringtree/prebuilt.hpp, compiled once (core/compiled.hpp).
#define RINGTREE_IMPLEMENTATION
#include <ringtree/ringtree.hpp>
