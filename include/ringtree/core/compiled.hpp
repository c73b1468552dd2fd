#pragma once
// Where ringtree's compiled code comes from, in one of three modes (as fmt
// and doctest offer):
//
//   header-only (the default): every file that uses ringtree compiles what
//     it reaches; no build step, nothing to link.
//   RINGTREE_PREBUILT: the headers declare the cold, non-template code
//     (configuration, error formatting, the trace writers and page, the
//     cache and model files) and the communicators of the transports people
//     deploy (threads, shared memory; MPI and cluster through
//     <ringtree/mpi.hpp>) without defining them; they come from the
//     ringtree-prebuilt library (Meson, pkg-config, CMake), or from one
//     file of the program that defines RINGTREE_IMPLEMENTATION.
//   RINGTREE_IMPLEMENTATION (one file of the program, before any ringtree
//     include): compiles all of that here, once, for the other files.
//
// Each header with cold code keeps it in an `-inl.hpp` part, included
// where RINGTREE_DEFINES is 1; its functions are RINGTREE_FUNC: inline
// when every file compiles them, plain (one definition) when one does.
#include <ringtree/core/cxx20.hpp>

#if defined(RINGTREE_IMPLEMENTATION)
#define RINGTREE_DEFINES 1
#define RINGTREE_FUNC
#elif defined(RINGTREE_PREBUILT)
#define RINGTREE_DEFINES 0
#define RINGTREE_FUNC inline
#else
#define RINGTREE_DEFINES 1
#define RINGTREE_FUNC inline
#endif
