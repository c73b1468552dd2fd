#pragma once
// ringtree is C++20 (concepts, std::span, <bit>). Every public header
// includes this one first (through core/error.hpp or core/dtype.hpp), so a
// project compiled as C++17 gets this message before anything else.
// Meson's ringtree_dep, the pkg-config files and the CMake targets
// (cxx_std_20) already ask for C++20.
static_assert(__cplusplus >= 202002L,
              "ringtree needs C++20: compile with -std=c++20 or later (g++ 12 defaults to C++17, clang 14 to C++14)");
