// The one file of a program that compiles ringtree's cold code and the
// prebuilt communicators (core/compiled.hpp): what src/prebuilt.cpp is.
#define RINGTREE_IMPLEMENTATION
#include <ringtree/ringtree.hpp>
